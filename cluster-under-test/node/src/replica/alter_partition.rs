//! Sends the ISR changes a leader proposes (AlterPartition) to the active controller, and
//! ends the partition's pending change when the controller refuses or does not answer.

use std::sync::Arc;
use std::time::Duration;

use kafka_protocol::messages::alter_partition_request::{BrokerState, PartitionData, TopicData};
use kafka_protocol::messages::{AlterPartitionRequest, RequestKind, ResponseKind};

use crate::controller::Quorum;
use crate::replica::{IsrChange, Partition, ReplicaManager};

/// How long an AlterPartition may wait for the controller.
const ALTER_PARTITION_TIMEOUT: Duration = Duration::from_secs(10);

/// Sends one ISR change to the active controller; on refusal or silence the partition forgets
/// it so that it can be proposed again. On success the change takes effect when the new
/// partition epoch reaches this broker's image.
pub async fn send_alter_partition(
    replicas: Arc<ReplicaManager>,
    quorum: Arc<Quorum>,
    partition: Arc<Partition>,
    change: IsrChange,
) {
    let image = replicas.image();
    let Some(topic) = image.topics.get(&change.topic_partition.topic) else {
        partition.isr_change_failed(&change);
        return;
    };
    let request = AlterPartitionRequest::default()
        .with_broker_id(kafka_protocol::messages::BrokerId(replicas.node_id().0))
        .with_broker_epoch(quorum.status().broker_epoch.unwrap_or(-1))
        .with_topics(vec![
            TopicData::default()
                .with_topic_id(topic.id)
                .with_partitions(vec![
                    PartitionData::default()
                        .with_partition_index(change.topic_partition.partition)
                        .with_leader_epoch(change.leader_epoch)
                        .with_new_isr_with_epochs(
                            change
                                .isr
                                .iter()
                                .map(|id| {
                                    BrokerState::default()
                                        .with_broker_id(kafka_protocol::messages::BrokerId(id.0))
                                        .with_broker_epoch(
                                            image.brokers.get(id).map_or(-1, |b| b.broker_epoch.0),
                                        )
                                })
                                .collect(),
                        )
                        .with_leader_recovery_state(0)
                        .with_partition_epoch(change.partition_epoch),
                ]),
        ]);
    let response = quorum
        .forward(
            RequestKind::AlterPartition(request),
            ALTER_PARTITION_TIMEOUT,
        )
        .await;
    let error = match response {
        Some(ResponseKind::AlterPartition(response)) => {
            // A change the controller found empty leaves the partition epoch as it was: no new
            // image will end the pending state, so end it here.
            let unchanged = response
                .topics
                .iter()
                .flat_map(|t| &t.partitions)
                .any(|p| p.error_code == 0 && p.partition_epoch == change.partition_epoch);
            if unchanged {
                partition.isr_change_failed(&change);
            }
            if response.error_code != 0 {
                Some(response.error_code)
            } else {
                response
                    .topics
                    .iter()
                    .flat_map(|t| &t.partitions)
                    .map(|p| p.error_code)
                    .find(|code| *code != 0)
            }
        }
        _ => Some(-1),
    };
    match error {
        None => tracing::info!(partition = %change.topic_partition, isr = ?change.isr,
            "AlterPartition committed"),
        Some(code) => {
            tracing::warn!(partition = %change.topic_partition, isr = ?change.isr, code,
                "AlterPartition refused or unanswered");
            partition.isr_change_failed(&change);
        }
    }
}
