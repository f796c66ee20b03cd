//! The replication side of the active controller (Kafka's `ReplicationControlManager`):
//! topic creation and replica placement, and AlterPartition validation and its partition
//! changes.

use std::collections::{BTreeMap, BTreeSet, HashSet};

use kafka_protocol::ResponseError;
use kafka_protocol::messages::alter_partition_response::{
    PartitionData as AlterPartitionPartitionResponse, TopicData as AlterPartitionTopicResponse,
};
use kafka_protocol::messages::create_topics_response::CreatableTopicResult;
use kafka_protocol::messages::{
    AlterPartitionRequest, AlterPartitionResponse, CreateTopicsRequest, CreateTopicsResponse,
};
use kafka_protocol::protocol::StrBytes;
use uuid::Uuid;

use crate::metadata::{
    BrokerId, LeaderRecoveryState, MetadataRecord, PartitionChangeRecord, PartitionRecord,
    PartitionState,
};
use crate::topics::{CreateTopicError, MAX_PARTITIONS_PER_TOPIC};
use crate::topics::{validate_topic_config, validate_topic_name};

use super::{Decision, QuorumController};
use crate::controller::election::{ElectionPolicy, build_change};

impl QuorumController {
    /// CreateTopics: validation, replica placement (round-robin over unfenced brokers),
    /// records. With `validate_only`, no records.
    pub fn create_topics(
        &mut self,
        request: &CreateTopicsRequest,
    ) -> Decision<CreateTopicsResponse> {
        let mut seen = HashSet::new();
        let duplicated: HashSet<String> = request
            .topics
            .iter()
            .map(|topic| topic.name.to_string())
            .filter(|name| !seen.insert(name.clone()))
            .collect();
        let mut records = Vec::new();
        let mut results = Vec::new();
        for topic in &request.topics {
            let name = topic.name.to_string();
            let result = CreatableTopicResult::default()
                .with_name(topic.name.clone())
                .with_num_partitions(-1)
                .with_replication_factor(-1);
            let outcome = if duplicated.contains(&name) {
                Err(CreateTopicError::InvalidRequest(
                    "the topic appears more than once in the request",
                ))
            } else {
                self.plan_topic(topic)
            };
            match outcome {
                Ok((topic_records, id, partitions, factor)) => {
                    if !request.validate_only {
                        self.replay(&topic_records);
                        records.extend(topic_records);
                    }
                    results.push(
                        result
                            .with_topic_id(id)
                            .with_num_partitions(partitions)
                            .with_replication_factor(factor),
                    );
                }
                Err(error) => results.push(
                    result
                        .with_error_code(error.response_error().code())
                        .with_error_message(Some(StrBytes::from_string(error.to_string()))),
                ),
            }
        }
        Decision {
            records,
            response: CreateTopicsResponse::default().with_topics(results),
        }
    }

    #[allow(clippy::type_complexity)]
    fn plan_topic(
        &self,
        topic: &kafka_protocol::messages::create_topics_request::CreatableTopic,
    ) -> Result<(Vec<MetadataRecord>, Uuid, i32, i16), CreateTopicError> {
        let name = topic.name.to_string();
        validate_topic_name(&name).map_err(CreateTopicError::InvalidName)?;
        if self.image.topics.contains_key(&name) {
            return Err(CreateTopicError::AlreadyExists);
        }
        let mut configs = BTreeMap::new();
        for config in &topic.configs {
            let value = config.value.as_deref().unwrap_or("").to_owned();
            validate_topic_config(&config.name, &value).map_err(CreateTopicError::InvalidConfig)?;
            configs.insert(config.name.to_string(), value);
        }
        let unfenced: Vec<BrokerId> = self
            .image
            .brokers
            .values()
            .filter(|broker| !broker.fenced)
            .map(|broker| broker.broker_id)
            .collect();
        let assignments: Vec<Vec<BrokerId>> = if topic.assignments.is_empty() {
            let partitions = if topic.num_partitions == -1 {
                self.config.num_partitions
            } else {
                topic.num_partitions
            };
            if !(1..=MAX_PARTITIONS_PER_TOPIC).contains(&partitions) {
                return Err(CreateTopicError::InvalidPartitions {
                    requested: partitions,
                });
            }
            let factor = if topic.replication_factor == -1 {
                self.config.default_replication_factor
            } else {
                topic.replication_factor
            };
            if factor < 1 || factor as usize > unfenced.len() {
                return Err(CreateTopicError::InvalidReplicationFactor {
                    requested: factor,
                    brokers: unfenced.len() as i16,
                });
            }
            let existing: usize = self.image.topics.values().map(|t| t.partitions.len()).sum();
            place_replicas(&unfenced, partitions, factor as usize, existing)
        } else {
            if topic.num_partitions != -1 || topic.replication_factor != -1 {
                return Err(CreateTopicError::InvalidRequest(
                    "give either assignments or partitions and replication factor, not both",
                ));
            }
            let mut assignments = Vec::new();
            for (expected, assignment) in topic.assignments.iter().enumerate() {
                let replicas: Vec<BrokerId> = assignment
                    .broker_ids
                    .iter()
                    .map(|id| BrokerId(id.0))
                    .collect();
                let distinct: BTreeSet<BrokerId> = replicas.iter().copied().collect();
                if assignment.partition_index != expected as i32
                    || replicas.is_empty()
                    || distinct.len() != replicas.len()
                    || replicas
                        .iter()
                        .any(|id| !self.image.brokers.contains_key(id))
                {
                    return Err(CreateTopicError::InvalidReplicaAssignment);
                }
                assignments.push(replicas);
            }
            if assignments.len() > MAX_PARTITIONS_PER_TOPIC as usize {
                return Err(CreateTopicError::InvalidPartitions {
                    requested: assignments.len() as i32,
                });
            }
            assignments
        };
        let id = Uuid::new_v4();
        let factor = assignments[0].len() as i16;
        let mut records = vec![MetadataRecord::Topic {
            name,
            topic_id: id,
            configs,
        }];
        for (index, replicas) in assignments.iter().enumerate() {
            let isr: Vec<BrokerId> = replicas
                .iter()
                .copied()
                .filter(|b| self.image.is_unfenced(*b))
                .collect();
            let isr = if isr.is_empty() {
                replicas.clone()
            } else {
                isr
            };
            let leader = replicas
                .iter()
                .copied()
                .find(|b| self.image.is_unfenced(*b))
                .unwrap_or(BrokerId::NONE);
            records.push(MetadataRecord::Partition(PartitionRecord {
                topic_id: id,
                partition: index as i32,
                replicas: replicas.clone(),
                isr,
                elr: Vec::new(),
                last_known_elr: Vec::new(),
                leader,
                leader_epoch: 0,
                partition_epoch: 0,
                leader_recovery_state: LeaderRecoveryState::Recovered,
            }));
        }
        Ok((records, id, assignments.len() as i32, factor))
    }

    /// AlterPartition with Kafka's validation: a stale broker epoch fails the whole request;
    /// per partition, an unknown partition, a requester that is not the leader, a leader epoch
    /// or partition epoch that does not match, an ISR naming a non-replica or a fenced broker,
    /// or a RECOVERING partition with an ISR above one are rejected. The new state is answered
    /// after the change is committed.
    pub fn alter_partition(
        &mut self,
        request: &AlterPartitionRequest,
    ) -> Decision<AlterPartitionResponse> {
        let broker_id = BrokerId(request.broker_id.0);
        let registered = self.image.brokers.get(&broker_id);
        if registered
            .is_none_or(|r| r.broker_epoch.0 != request.broker_epoch && request.broker_epoch != -1)
        {
            return Decision {
                records: Vec::new(),
                response: AlterPartitionResponse::default()
                    .with_error_code(ResponseError::StaleBrokerEpoch.code()),
            };
        }
        let mut records = Vec::new();
        let mut topics = Vec::new();
        for topic in &request.topics {
            let mut partitions = Vec::new();
            for asked in &topic.partitions {
                let answer = AlterPartitionPartitionResponse::default()
                    .with_partition_index(asked.partition_index);
                let new_isr: Vec<BrokerId> = if asked.new_isr_with_epochs.is_empty() {
                    asked.new_isr.iter().map(|id| BrokerId(id.0)).collect()
                } else {
                    asked
                        .new_isr_with_epochs
                        .iter()
                        .map(|s| BrokerId(s.broker_id.0))
                        .collect()
                };
                let recovery = LeaderRecoveryState::from_code(asked.leader_recovery_state);
                let outcome = match self.image.partition(topic.topic_id, asked.partition_index) {
                    None => Err(ResponseError::UnknownTopicOrPartition),
                    Some(state) => validate_alter_partition(
                        state,
                        broker_id,
                        asked.leader_epoch,
                        asked.partition_epoch,
                        &new_isr,
                        recovery,
                        &|b| self.image.is_unfenced(b),
                    ),
                };
                match outcome {
                    Err(error) => partitions.push(answer.with_error_code(error.code())),
                    Ok(change) => {
                        let state = self
                            .image
                            .partition(topic.topic_id, asked.partition_index)
                            .expect("validated")
                            .clone();
                        let policy = self.policy(
                            &self
                                .image
                                .topics
                                .values()
                                .find(|t| t.id == topic.topic_id)
                                .map(|t| t.configs.clone())
                                .unwrap_or_default(),
                        );
                        let change = change.map(|change| with_elr(&state, change, policy));
                        let mut after = state.clone();
                        if let Some(change) = change {
                            let record = MetadataRecord::PartitionChange(PartitionChangeRecord {
                                topic_id: topic.topic_id,
                                partition: asked.partition_index,
                                ..change
                            });
                            self.replay(std::slice::from_ref(&record));
                            records.push(record);
                            after = self
                                .image
                                .partition(topic.topic_id, asked.partition_index)
                                .expect("exists")
                                .clone();
                        }
                        partitions.push(
                            answer
                                .with_leader_id(kafka_protocol::messages::BrokerId(after.leader.0))
                                .with_leader_epoch(after.leader_epoch)
                                .with_isr(
                                    after
                                        .isr
                                        .iter()
                                        .map(|b| kafka_protocol::messages::BrokerId(b.0))
                                        .collect(),
                                )
                                .with_leader_recovery_state(after.leader_recovery_state.code())
                                .with_partition_epoch(after.partition_epoch),
                        );
                    }
                }
            }
            topics.push(
                AlterPartitionTopicResponse::default()
                    .with_topic_id(topic.topic_id)
                    .with_partitions(partitions),
            );
        }
        Decision {
            records,
            response: AlterPartitionResponse::default().with_topics(topics),
        }
    }
}

/// Kafka's AlterPartition checks for one partition (`ReplicationControlManager
/// .validateAlterPartitionData`); `Ok(None)` when the request changes nothing.
///
/// # Errors
/// `NOT_LEADER_OR_FOLLOWER`, `FENCED_LEADER_EPOCH`, `INVALID_UPDATE_VERSION`,
/// `INELIGIBLE_REPLICA` or `INVALID_REQUEST`.
pub fn validate_alter_partition(
    state: &PartitionState,
    requester: BrokerId,
    leader_epoch: i32,
    partition_epoch: i32,
    new_isr: &[BrokerId],
    recovery: Option<LeaderRecoveryState>,
    unfenced: &dyn Fn(BrokerId) -> bool,
) -> Result<Option<PartitionChangeRecord>, ResponseError> {
    if state.leader != requester {
        return Err(ResponseError::NotLeaderOrFollower);
    }
    if leader_epoch != state.leader_epoch {
        return Err(ResponseError::FencedLeaderEpoch);
    }
    if partition_epoch != state.partition_epoch {
        return Err(ResponseError::InvalidUpdateVersion);
    }
    let Some(recovery) = recovery else {
        return Err(ResponseError::InvalidRequest);
    };
    if recovery == LeaderRecoveryState::Recovering
        && state.leader_recovery_state == LeaderRecoveryState::Recovered
    {
        return Err(ResponseError::InvalidRequest);
    }
    if recovery == LeaderRecoveryState::Recovering && new_isr.len() > 1 {
        return Err(ResponseError::InvalidRequest);
    }
    if new_isr.is_empty() || !new_isr.contains(&requester) {
        return Err(ResponseError::InvalidRequest);
    }
    if new_isr
        .iter()
        .any(|b| !state.replicas.contains(b) || (!unfenced(*b) && !state.isr.contains(b)))
    {
        return Err(ResponseError::IneligibleReplica);
    }
    let change = PartitionChangeRecord {
        isr: (new_isr != state.isr.as_slice()).then(|| new_isr.to_vec()),
        leader_recovery_state: (recovery != state.leader_recovery_state).then_some(recovery),
        ..PartitionChangeRecord::default()
    };
    Ok((change.isr.is_some() || change.leader_recovery_state.is_some()).then_some(change))
}

/// Adds KIP-966's ELR maintenance to a validated AlterPartition change: an ISR that falls below
/// `min.insync.replicas` moves the members it drops into the ELR, one that regains it clears
/// the ELR (`PartitionChangeBuilder.maybePopulateTargetElr`, which Kafka runs on every
/// partition change). The leader stays: the requester is the leader and in its new ISR.
fn with_elr(
    state: &PartitionState,
    change: PartitionChangeRecord,
    policy: ElectionPolicy,
) -> PartitionChangeRecord {
    let Some(isr) = &change.isr else {
        return change;
    };
    let keep_leader = |b: BrokerId| b == state.leader;
    let Some(elr_change) = build_change(state, isr, &keep_leader, policy) else {
        return change;
    };
    debug_assert!(
        elr_change.leader.is_none(),
        "an ISR change keeps the leader"
    );
    PartitionChangeRecord {
        elr: elr_change.elr,
        last_known_elr: elr_change.last_known_elr,
        ..change
    }
}

/// Round-robin replica placement like Kafka's non-rack-aware assignment: partition `p`'s first
/// replica is broker `(start + p) mod n`, the others follow it in broker order. `start` spreads
/// leaders across topics.
pub fn place_replicas(
    brokers: &[BrokerId],
    partitions: i32,
    factor: usize,
    start: usize,
) -> Vec<Vec<BrokerId>> {
    let n = brokers.len();
    (0..partitions as usize)
        .map(|p| (0..factor).map(|r| brokers[(start + p + r) % n]).collect())
        .collect()
}
