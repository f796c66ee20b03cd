//! The controller listener's part of the version sweep: KRaft RPCs (Vote, BeginQuorumEpoch,
//! EndQuorumEpoch, Fetch, FetchSnapshot) from a replica that is not a voter (id 99) or at a stale
//! epoch, so the single-voter quorum under test is not disturbed, and the controller APIs
//! (BrokerRegistration and BrokerHeartbeat of a new, fenced broker per version, AlterPartition,
//! AllocateProducerIds, CreateTopics, CreatePartitions, DescribeQuorum).

use kafka_protocol::messages::{
    AllocateProducerIdsRequest, AlterPartitionRequest, ApiKey, BeginQuorumEpochRequest,
    BrokerHeartbeatRequest, BrokerId, BrokerRegistrationRequest, DescribeQuorumRequest,
    EndQuorumEpochRequest, FetchSnapshotRequest, RequestKind, ResponseKind, VoteRequest,
    alter_partition_request, begin_quorum_epoch_request, broker_registration_request,
    describe_quorum_request, end_quorum_epoch_request, fetch_request, fetch_snapshot_request,
    vote_request,
};
use uuid::Uuid;

use super::{Context, METADATA_TOPIC, name, text};

/// Not a voter of the quorum under test.
const OBSERVER: i32 = 99;

/// Kafka's fixed topic id of `__cluster_metadata` (`Uuid.METADATA_TOPIC_ID`).
const METADATA_TOPIC_ID: Uuid = Uuid::from_u128(1);

fn registered_id(version: i16) -> i32 {
    100 + i32::from(version)
}

/// A request of `key` at `version` for the controller listener.
pub fn request_for(key: ApiKey, version: i16, context: &Context) -> RequestKind {
    let cluster = Some(text(&context.cluster_id));
    match key {
        ApiKey::ApiVersions => super::request_for(key, version, context),
        ApiKey::DescribeQuorum => super::request_for(key, version, context),
        ApiKey::CreateTopics => RequestKind::CreateTopics(super::create_request(&format!(
            "{}-controller",
            super::new_topic(version)
        ))),
        ApiKey::Vote => {
            let partition = vote_request::PartitionData::default()
                .with_replica_epoch(context.quorum_epoch)
                .with_replica_id(BrokerId(OBSERVER))
                .with_last_offset_epoch(0)
                .with_last_offset(0);
            let request = VoteRequest::default()
                .with_cluster_id(cluster)
                .with_topics(vec![
                    vote_request::TopicData::default()
                        .with_topic_name(name(METADATA_TOPIC))
                        .with_partitions(vec![partition]),
                ]);
            RequestKind::Vote(if version >= 1 {
                request.with_voter_id(BrokerId(context.node_id))
            } else {
                request
            })
        }
        ApiKey::BeginQuorumEpoch => RequestKind::BeginQuorumEpoch(
            BeginQuorumEpochRequest::default()
                .with_cluster_id(cluster)
                .with_topics(vec![
                    begin_quorum_epoch_request::TopicData::default()
                        .with_topic_name(name(METADATA_TOPIC))
                        .with_partitions(vec![
                            begin_quorum_epoch_request::PartitionData::default()
                                .with_leader_id(BrokerId(OBSERVER))
                                .with_leader_epoch(0),
                        ]),
                ]),
        ),
        ApiKey::EndQuorumEpoch => RequestKind::EndQuorumEpoch(
            EndQuorumEpochRequest::default()
                .with_cluster_id(cluster)
                .with_topics(vec![
                    end_quorum_epoch_request::TopicData::default()
                        .with_topic_name(name(METADATA_TOPIC))
                        .with_partitions(vec![
                            end_quorum_epoch_request::PartitionData::default()
                                .with_leader_id(BrokerId(OBSERVER))
                                .with_leader_epoch(0),
                        ]),
                ]),
        ),
        ApiKey::Fetch => {
            let partition = fetch_request::FetchPartition::default()
                .with_partition(0)
                .with_fetch_offset(0)
                .with_partition_max_bytes(1 << 20)
                .with_current_leader_epoch(context.quorum_epoch);
            let partition = if version >= 12 {
                partition.with_last_fetched_epoch(0)
            } else {
                partition
            };
            let topic = fetch_request::FetchTopic::default().with_partitions(vec![partition]);
            let topic = if version >= 13 {
                topic.with_topic_id(METADATA_TOPIC_ID)
            } else {
                topic.with_topic(name(METADATA_TOPIC))
            };
            let request = kafka_protocol::messages::FetchRequest::default()
                .with_max_wait_ms(0)
                .with_topics(vec![topic]);
            let request = if version >= 12 {
                request.with_cluster_id(cluster)
            } else {
                request
            };
            RequestKind::Fetch(if version >= 15 {
                request.with_replica_id(BrokerId(-1)).with_replica_state(
                    fetch_request::ReplicaState::default().with_replica_id(BrokerId(OBSERVER)),
                )
            } else {
                request.with_replica_id(BrokerId(OBSERVER))
            })
        }
        ApiKey::FetchSnapshot => RequestKind::FetchSnapshot(
            FetchSnapshotRequest::default()
                .with_cluster_id(cluster)
                .with_replica_id(BrokerId(OBSERVER))
                .with_max_bytes(1 << 20)
                .with_topics(vec![
                    fetch_snapshot_request::TopicSnapshot::default()
                        .with_name(name(METADATA_TOPIC))
                        .with_partitions(vec![
                            fetch_snapshot_request::PartitionSnapshot::default()
                                .with_current_leader_epoch(context.quorum_epoch)
                                .with_snapshot_id(
                                    fetch_snapshot_request::SnapshotId::default()
                                        .with_end_offset(1)
                                        .with_epoch(0),
                                ),
                        ]),
                ]),
        ),
        ApiKey::BrokerRegistration => {
            let request = BrokerRegistrationRequest::default()
                .with_broker_id(BrokerId(registered_id(version)))
                .with_cluster_id(text(&context.cluster_id))
                .with_incarnation_id(Uuid::new_v4())
                .with_listeners(vec![
                    broker_registration_request::Listener::default()
                        .with_name(text("PLAINTEXT"))
                        .with_host(text("127.0.0.1"))
                        .with_port(9)
                        .with_security_protocol(0),
                ]);
            RequestKind::BrokerRegistration(if version >= 3 {
                request.with_previous_broker_epoch(-1)
            } else {
                request
            })
        }
        ApiKey::BrokerHeartbeat => {
            let (id, epoch) = context.registered.unwrap_or((registered_id(0), -1));
            RequestKind::BrokerHeartbeat(
                BrokerHeartbeatRequest::default()
                    .with_broker_id(BrokerId(id))
                    .with_broker_epoch(epoch)
                    .with_current_metadata_offset(0)
                    .with_want_fence(true),
            )
        }
        ApiKey::AllocateProducerIds => {
            let (id, epoch) = context.registered.unwrap_or((registered_id(0), -1));
            RequestKind::AllocateProducerIds(
                AllocateProducerIdsRequest::default()
                    .with_broker_id(BrokerId(id))
                    .with_broker_epoch(epoch),
            )
        }
        ApiKey::AlterPartition => {
            let partition = alter_partition_request::PartitionData::default()
                .with_partition_index(0)
                .with_leader_epoch(context.leader_epoch)
                .with_partition_epoch(context.partition_epoch);
            let partition = if version >= 3 {
                partition.with_new_isr_with_epochs(vec![
                    alter_partition_request::BrokerState::default()
                        .with_broker_id(BrokerId(context.node_id))
                        .with_broker_epoch(-1),
                ])
            } else {
                partition.with_new_isr(vec![BrokerId(context.node_id)])
            };
            RequestKind::AlterPartition(
                AlterPartitionRequest::default()
                    .with_broker_id(BrokerId(context.node_id))
                    .with_broker_epoch(-1)
                    .with_topics(vec![
                        alter_partition_request::TopicData::default()
                            .with_topic_id(context.topic_id)
                            .with_partitions(vec![partition]),
                    ]),
            )
        }
        ApiKey::CreatePartitions => {
            RequestKind::CreatePartitions(super::create_partitions_request())
        }
        other => panic!("the sweep has no controller request for {other:?}: add one"),
    }
}

fn metadata_partition_error<T>(
    topics: &[T],
    partitions: impl Fn(&T) -> Option<i16>,
) -> Result<i16, String> {
    topics
        .first()
        .and_then(partitions)
        .ok_or_else(|| "no partition of __cluster_metadata in the response".to_owned())
}

/// Checks a controller-listener response; records the broker a registration created.
pub fn check(
    key: ApiKey,
    version: i16,
    response: &ResponseKind,
    context: &mut Context,
) -> Result<(), String> {
    match response {
        ResponseKind::ApiVersions(_) | ResponseKind::DescribeQuorum(_) => {
            super::check(key, version, response, context)
        }
        ResponseKind::CreateTopics(response) => {
            let topic = response.topics.first().ok_or("no topic in the response")?;
            let expected = format!("{}-controller", super::new_topic(version));
            if topic.name.0.as_str() != expected || topic.error_code != 0 {
                return Err(format!(
                    "topic {:?} error {}",
                    topic.name.0, topic.error_code
                ));
            }
            Ok(())
        }
        ResponseKind::CreatePartitions(response) => super::check_create_partitions(response),
        ResponseKind::Vote(response) => {
            let partition = response
                .topics
                .first()
                .and_then(|t| t.partitions.first())
                .ok_or("no partition of __cluster_metadata in the response")?;
            if response.error_code != 0 || partition.vote_granted {
                return Err(format!("a non-voter's vote: {response:?}"));
            }
            Ok(())
        }
        ResponseKind::BeginQuorumEpoch(response) => {
            metadata_partition_error(&response.topics, |t| {
                t.partitions.first().map(|p| p.error_code)
            })
            .map(|_| ())
        }
        ResponseKind::EndQuorumEpoch(response) => metadata_partition_error(&response.topics, |t| {
            t.partitions.first().map(|p| p.error_code)
        })
        .map(|_| ()),
        ResponseKind::FetchSnapshot(response) => metadata_partition_error(&response.topics, |t| {
            t.partitions.first().map(|p| p.error_code)
        })
        .map(|_| ()),
        ResponseKind::Fetch(response) => {
            let topic = response
                .responses
                .first()
                .ok_or("no topic in the response")?;
            if version >= 13 && topic.topic_id != METADATA_TOPIC_ID {
                return Err(format!(
                    "topic id {} instead of {METADATA_TOPIC_ID}",
                    topic.topic_id
                ));
            }
            if version < 13 && topic.topic.0.as_str() != METADATA_TOPIC {
                return Err(format!(
                    "topic {:?} instead of {METADATA_TOPIC}",
                    topic.topic.0
                ));
            }
            let partition = topic.partitions.first().ok_or("no partition")?;
            if response.error_code != 0
                || partition.error_code != 0
                || partition.high_watermark <= 0
            {
                return Err(format!(
                    "error {}/{} high watermark {}",
                    response.error_code, partition.error_code, partition.high_watermark
                ));
            }
            if partition.records.as_ref().is_none_or(|r| r.is_empty()) {
                return Err("no metadata records from offset 0".to_owned());
            }
            Ok(())
        }
        ResponseKind::BrokerRegistration(response) => {
            if response.error_code != 0 || response.broker_epoch < 0 {
                return Err(format!(
                    "error {} broker epoch {}",
                    response.error_code, response.broker_epoch
                ));
            }
            context.registered = Some((registered_id(version), response.broker_epoch));
            Ok(())
        }
        ResponseKind::BrokerHeartbeat(response) => {
            if response.error_code != 0 || !response.is_fenced {
                return Err(format!("a fenced broker's heartbeat: {response:?}"));
            }
            Ok(())
        }
        ResponseKind::AllocateProducerIds(response) => {
            if response.error_code != 0
                || response.producer_id_start.0 < 0
                || response.producer_id_len <= 0
            {
                return Err(format!("no block of producer ids: {response:?}"));
            }
            Ok(())
        }
        ResponseKind::AlterPartition(response) => {
            if response.error_code != 0 {
                // Refused as a whole (a broker epoch it does not accept): a valid answer.
                return Ok(());
            }
            let topic = response.topics.first().ok_or("no topic in the response")?;
            if topic.topic_id != context.topic_id || topic.partitions.is_empty() {
                return Err(format!("wrong topic in the answer: {topic:?}"));
            }
            Ok(())
        }
        other => Err(format!("unexpected response {other:?}")),
    }
}

/// The quorum's epoch, from DescribeQuorum on the controller listener.
pub fn quorum_epoch(connection: &mut super::Connection) -> i32 {
    let request = RequestKind::DescribeQuorum(DescribeQuorumRequest::default().with_topics(vec![
        describe_quorum_request::TopicData::default()
            .with_topic_name(name(METADATA_TOPIC))
            .with_partitions(vec![describe_quorum_request::PartitionData::default()]),
    ]));
    match connection.call(ApiKey::DescribeQuorum, 0, &request) {
        Ok(ResponseKind::DescribeQuorum(response)) => response.topics[0].partitions[0].leader_epoch,
        other => panic!("DescribeQuorum v0 on the controller listener: {other:?}"),
    }
}
