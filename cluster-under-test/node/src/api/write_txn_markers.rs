//! WriteTxnMarkers (v1, flexible): the transaction coordinator asks this broker, as leader of
//! each listed partition, to append a COMMIT or ABORT marker for a producer (KIP-98; Kafka's
//! `handleWriteTxnMarkersRequest`).
//!
//! Per partition, as Kafka answers: `UNKNOWN_TOPIC_OR_PARTITION` when this broker does not
//! host it; otherwise one control batch appended as leader with the marker's producer id,
//! producer epoch and coordinator epoch, as an acks=all append (`NOT_LEADER_OR_FOLLOWER`,
//! `NOT_ENOUGH_REPLICAS`, `INVALID_PRODUCER_EPOCH` for an epoch older than the partition's,
//! `TRANSACTION_COORDINATOR_FENCED` for a coordinator epoch older than the producer's last
//! marker), answered once the high watermark covers it (`NOT_ENOUGH_REPLICAS_AFTER_APPEND`,
//! `NOT_LEADER_OR_FOLLOWER` when leadership moved, `REQUEST_TIMED_OUT` after Kafka's default
//! `request.timeout.ms`, 30 s). A refused marker writes nothing.
//!
//! A marker for a partition of `__consumer_offsets` goes through the group coordinator
//! (Kafka's `GroupCoordinator.completeTransaction`), which appends it through its runtime
//! and replays it, so the producer's pending offsets become committed or are dropped;
//! while the partition loads (or this node does not serve it) it is
//! `NOT_LEADER_OR_FOLLOWER`, which the transaction coordinator retries.

use std::sync::Arc;
use std::time::Duration;

use kafka_protocol::ResponseError;
use kafka_protocol::messages::write_txn_markers_response::{
    WritableTxnMarkerPartitionResult, WritableTxnMarkerResult, WritableTxnMarkerTopicResult,
};
use kafka_protocol::messages::{WriteTxnMarkersRequest, WriteTxnMarkersResponse};
use logjam_storage::{ControlType, EndTxnMarker};

use crate::coordinator::group::{self, GroupCoordinator};
use crate::coordinator::runtime::MarkerWrite;
use crate::replica::delayed_produce;
use crate::replica::{Appended, Partition, ReplicaManager};

/// How long a marker may wait for the ISR: Kafka uses the broker's `request.timeout.ms`,
/// 30 s by default.
const MARKER_TIMEOUT: Duration = Duration::from_secs(30);

/// One partition's marker on its way to an answer (`None`: already settled).
type Settling = Result<Option<(Arc<Partition>, Appended)>, ResponseError>;

/// Appends every marker and answers once each is replicated or failed.
pub async fn handle(
    replicas: &ReplicaManager,
    groups: &GroupCoordinator,
    request: WriteTxnMarkersRequest,
) -> WriteTxnMarkersResponse {
    let deadline = tokio::time::Instant::now() + MARKER_TIMEOUT;
    let wakeups = replicas.subscribe_appends();
    let mut markers = Vec::with_capacity(request.markers.len());
    for marker in request.markers {
        let end = EndTxnMarker {
            control_type: if marker.transaction_result {
                ControlType::Commit
            } else {
                ControlType::Abort
            },
            coordinator_epoch: marker.coordinator_epoch,
        };
        let mut topics = Vec::with_capacity(marker.topics.len());
        for topic in marker.topics {
            let mut partitions: Vec<(i32, Settling)> = Vec::new();
            for index in topic.partition_indexes {
                let outcome = match replicas.partition(&topic.name, index) {
                    None => Err(ResponseError::UnknownTopicOrPartition),
                    Some(_) if topic.name.as_str() == group::TOPIC => {
                        let write = MarkerWrite {
                            producer_id: marker.producer_id.0,
                            producer_epoch: marker.producer_epoch,
                            coordinator_epoch: marker.coordinator_epoch,
                            commit: marker.transaction_result,
                        };
                        let left = deadline.saturating_duration_since(tokio::time::Instant::now());
                        groups
                            .complete_transaction(index, write, left)
                            .await
                            .map(|()| None)
                    }
                    Some(partition) => Arc::clone(&partition)
                        .append_marker(marker.producer_id.0, marker.producer_epoch, end)
                        .await
                        .map(|appended| Some((partition, appended))),
                };
                partitions.push((index, outcome));
            }
            topics.push((topic.name, partitions));
        }
        markers.push((marker.producer_id, topics));
    }
    // Wait for every appended marker to be covered by its partition's high watermark.
    let appended: Vec<(&Partition, &Appended)> = markers
        .iter()
        .flat_map(|(_, topics)| topics.iter().flat_map(|(_, partitions)| partitions))
        .filter_map(|(_, outcome)| outcome.as_ref().ok().and_then(Option::as_ref))
        .map(|(partition, appended)| (partition.as_ref(), appended))
        .collect();
    let mut answers = delayed_produce::until_replicated(wakeups, &appended, deadline)
        .await
        .into_iter();
    for (_, outcome) in markers
        .iter_mut()
        .flat_map(|(_, topics)| topics.iter_mut().flat_map(|(_, partitions)| partitions))
        .filter(|(_, outcome)| matches!(outcome, Ok(Some(_))))
    {
        if let Some(Err(error)) = answers.next() {
            *outcome = Err(error);
        }
    }
    let results = markers
        .into_iter()
        .map(|(producer_id, topics)| {
            let topics = topics
                .into_iter()
                .map(|(name, partitions)| {
                    let partitions = partitions
                        .into_iter()
                        .map(|(index, outcome)| {
                            WritableTxnMarkerPartitionResult::default()
                                .with_partition_index(index)
                                .with_error_code(outcome.err().map_or(0, |error| error.code()))
                        })
                        .collect();
                    WritableTxnMarkerTopicResult::default()
                        .with_name(name)
                        .with_partitions(partitions)
                })
                .collect();
            WritableTxnMarkerResult::default()
                .with_producer_id(producer_id)
                .with_topics(topics)
        })
        .collect();
    WriteTxnMarkersResponse::default().with_markers(results)
}
