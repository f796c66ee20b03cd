//! [`QuorumController`]: the decisions of the active controller, pure and synchronous. It turns
//! controller RPCs (BrokerRegistration, BrokerHeartbeat, CreateTopics, AlterPartition) and the
//! passage of time (broker session expiry) into metadata records plus the response to send
//! **once those records are committed**. The tokio driver (`controller/quorum.rs`) proposes the
//! records, replays them here at once (so the next decision sees them, as Kafka's controller
//! does with its uncommitted in-memory state), and answers when the high watermark passes them.
//!
//! Kafka sources of the rules: `ClusterControlManager` and `BrokerHeartbeatManager`
//! (registration, fencing, unfencing), `ReplicationControlManager` (topic creation, replica
//! placement, AlterPartition validation), `PartitionChangeBuilder` (`election.rs`).

use std::collections::{BTreeMap, BTreeSet, HashSet};

use kafka_protocol::ResponseError;
use kafka_protocol::messages::alter_partition_response::{
    PartitionData as AlterPartitionPartitionResponse, TopicData as AlterPartitionTopicResponse,
};
use kafka_protocol::messages::create_topics_response::CreatableTopicResult;
use kafka_protocol::messages::{
    AllocateProducerIdsRequest, AllocateProducerIdsResponse, AlterPartitionRequest,
    AlterPartitionResponse, BrokerHeartbeatRequest, BrokerHeartbeatResponse,
    BrokerRegistrationRequest, BrokerRegistrationResponse, CreateTopicsRequest,
    CreateTopicsResponse,
};
use kafka_protocol::protocol::StrBytes;
use uuid::Uuid;

use crate::broker::{CreateTopicError, MAX_PARTITIONS_PER_TOPIC};
use crate::controller::election::{
    ElectionPolicy, build_change, build_change_after_unclean_shutdown, isr_without_fenced,
};
use crate::metadata::{
    BrokerEpoch, BrokerId, LeaderRecoveryState, MetadataImage, MetadataRecord,
    PartitionChangeRecord, PartitionRecord, PartitionState,
};
use crate::topics::{validate_topic_config, validate_topic_name};

/// Settings of the controller role, from `server.properties`.
#[derive(Clone, Debug)]
pub struct ControllerConfig {
    /// The cluster id (`meta.properties`); registrations from another cluster are refused.
    pub cluster_id: String,
    /// `broker.session.timeout.ms`.
    pub session_timeout_ms: u64,
    /// `num.partitions`.
    pub num_partitions: i32,
    /// `default.replication.factor`.
    pub default_replication_factor: i16,
    /// `min.insync.replicas` (cluster level).
    pub min_insync_replicas: i32,
    /// `unclean.leader.election.enable` (cluster level).
    pub unclean_leader_election_enable: bool,
    /// `eligible.leader.replicas.enable` (KIP-966; off by default as in Kafka 4.0).
    pub elr_enabled: bool,
}

/// Records to commit, and what to answer once they are.
#[derive(Debug)]
pub struct Decision<R> {
    /// Records to propose as one entry (may be empty: answer at once).
    pub records: Vec<MetadataRecord>,
    /// The response.
    pub response: R,
}

/// The active controller's state: the image including uncommitted records it proposed, and
/// the broker sessions (volatile, as in Kafka: a new active controller gives every broker a
/// fresh session).
#[derive(Debug)]
pub struct QuorumController {
    image: MetadataImage,
    config: ControllerConfig,
    /// Last heartbeat (or activation) time per registered broker, on the driver's clock.
    last_contact_ms: BTreeMap<BrokerId, u64>,
}

impl QuorumController {
    /// Takes over from a committed image at `now_ms`.
    pub fn new(image: MetadataImage, config: ControllerConfig, now_ms: u64) -> QuorumController {
        let last_contact_ms = image.brokers.keys().map(|id| (*id, now_ms)).collect();
        QuorumController {
            image,
            config,
            last_contact_ms,
        }
    }

    /// The image with every record proposed so far.
    pub fn image(&self) -> &MetadataImage {
        &self.image
    }

    /// Replays records this controller proposed.
    pub fn replay(&mut self, records: &[MetadataRecord]) {
        for record in records {
            self.image.apply(record);
        }
    }

    fn policy(&self, topic_configs: &BTreeMap<String, String>) -> ElectionPolicy {
        ElectionPolicy {
            elr_enabled: self.config.elr_enabled,
            unclean_enabled: topic_configs
                .get("unclean.leader.election.enable")
                .map_or(self.config.unclean_leader_election_enable, |v| v == "true"),
            min_insync_replicas: topic_configs
                .get("min.insync.replicas")
                .and_then(|v| v.parse().ok())
                .unwrap_or(self.config.min_insync_replicas)
                .max(1) as usize,
        }
    }

    fn session_alive(&self, broker: BrokerId, now_ms: u64) -> bool {
        self.last_contact_ms
            .get(&broker)
            .is_some_and(|last| now_ms.saturating_sub(*last) < self.config.session_timeout_ms)
    }

    /// BrokerRegistration. `next_offset` is the metadata log's next write offset, which becomes
    /// the broker epoch.
    ///
    /// A new incarnation of a known broker replaces the old one, which leaves ISRs and
    /// leaderships as on fencing. KIP-966 (`ClusterControlManager.registerBroker`,
    /// `ReplicationControlManager.handleBrokerShutdown`): the shutdown was clean only if
    /// `PreviousBrokerEpoch` equals the epoch the broker was registered with (the broker wrote
    /// it to `.kafka_cleanshutdown`). After an unclean one, with ELR enabled, the broker also
    /// leaves every ELR and leaves the ISR even as its last member, since it may have lost
    /// records it acknowledged; with ELR off it is handled as a fencing, where the last ISR
    /// member stays (the ISR is never empty without ELR), exactly as Kafka 4 does.
    pub fn register_broker(
        &mut self,
        request: &BrokerRegistrationRequest,
        next_offset: u64,
        now_ms: u64,
    ) -> Decision<BrokerRegistrationResponse> {
        let broker_id = BrokerId(request.broker_id.0);
        let fail = |error: ResponseError| Decision {
            records: Vec::new(),
            response: BrokerRegistrationResponse::default()
                .with_error_code(error.code())
                .with_broker_epoch(-1),
        };
        if request.cluster_id.as_str() != self.config.cluster_id {
            return fail(ResponseError::InconsistentClusterId);
        }
        if let Some(existing) = self.image.brokers.get(&broker_id) {
            if existing.incarnation_id == request.incarnation_id {
                // A retry of the same registration.
                return Decision {
                    records: Vec::new(),
                    response: BrokerRegistrationResponse::default()
                        .with_broker_epoch(existing.broker_epoch.0),
                };
            }
            if !existing.fenced && self.session_alive(broker_id, now_ms) {
                return fail(ResponseError::DuplicateBrokerRegistration);
            }
        }
        let Some(listener) = request.listeners.first() else {
            return fail(ResponseError::InvalidRegistration);
        };
        let broker_epoch = BrokerEpoch(next_offset as i64);
        let mut records = vec![MetadataRecord::RegisterBroker {
            broker_id,
            broker_epoch,
            incarnation_id: request.incarnation_id,
            host: listener.host.to_string(),
            port: listener.port,
            rack: request.rack.as_ref().map(ToString::to_string),
        }];
        if let Some(registered_epoch) = self.image.brokers.get(&broker_id).map(|b| b.broker_epoch) {
            let previous_broker_epoch = request.previous_broker_epoch;
            let clean = previous_broker_epoch == registered_epoch.0;
            let mut scratch = self.image.clone();
            scratch.apply(&records[0]);
            let changes = if clean || !self.config.elr_enabled {
                self.fence_changes(&scratch, broker_id)
            } else {
                self.unclean_shutdown_changes(&scratch, broker_id)
            };
            if clean {
                tracing::info!(
                    %broker_id,
                    previous_broker_epoch,
                    new_broker_epoch = broker_epoch.0,
                    partitions = changes.len(),
                    "broker re-registered after a clean shutdown"
                );
            } else {
                tracing::info!(
                    %broker_id,
                    previous_broker_epoch,
                    registered_broker_epoch = registered_epoch.0,
                    new_broker_epoch = broker_epoch.0,
                    partitions = changes.len(),
                    elr_enabled = self.config.elr_enabled,
                    "broker re-registered after an unclean shutdown; removed from ISRs{}",
                    if self.config.elr_enabled { " and ELRs" } else { " (last members stay)" }
                );
            }
            records.extend(changes);
        }
        self.last_contact_ms.insert(broker_id, now_ms);
        self.replay(&records);
        Decision {
            records,
            response: BrokerRegistrationResponse::default().with_broker_epoch(broker_epoch.0),
        }
    }

    /// BrokerHeartbeat: refreshes the session; unfences a fenced broker that has replayed the
    /// metadata up to its own registration (and elects it where partitions are leaderless);
    /// fences one that asks to be fenced.
    pub fn heartbeat(
        &mut self,
        request: &BrokerHeartbeatRequest,
        now_ms: u64,
    ) -> Decision<BrokerHeartbeatResponse> {
        let broker_id = BrokerId(request.broker_id.0);
        let Some(registration) = self.image.brokers.get(&broker_id).cloned() else {
            return Decision {
                records: Vec::new(),
                response: BrokerHeartbeatResponse::default()
                    .with_error_code(ResponseError::BrokerIdNotRegistered.code())
                    .with_is_fenced(true),
            };
        };
        if registration.broker_epoch.0 != request.broker_epoch {
            return Decision {
                records: Vec::new(),
                response: BrokerHeartbeatResponse::default()
                    .with_error_code(ResponseError::StaleBrokerEpoch.code())
                    .with_is_fenced(true),
            };
        }
        self.last_contact_ms.insert(broker_id, now_ms);
        let caught_up = request.current_metadata_offset >= registration.broker_epoch.0;
        let mut records = Vec::new();
        // Controlled shutdown is handled like a requested fence: leaderships move and the
        // broker leaves ISRs (except as the last member standing); it is never unfenced
        // while it asks to shut down, and is told to shut down once fenced.
        let want_fence = request.want_fence || request.want_shut_down;
        if registration.fenced && caught_up && !want_fence {
            let unfence = MetadataRecord::UnfenceBroker {
                broker_id,
                broker_epoch: registration.broker_epoch,
            };
            let mut scratch = self.image.clone();
            scratch.apply(&unfence);
            records.push(unfence);
            records.extend(self.unfence_changes(&scratch, broker_id));
        } else if !registration.fenced && want_fence {
            records.push(MetadataRecord::FenceBroker {
                broker_id,
                broker_epoch: registration.broker_epoch,
            });
            let mut scratch = self.image.clone();
            scratch.apply(&records[0]);
            records.extend(self.fence_changes(&scratch, broker_id));
        }
        self.replay(&records);
        let fenced = !self.image.is_unfenced(broker_id);
        Decision {
            records,
            response: BrokerHeartbeatResponse::default()
                .with_is_caught_up(caught_up)
                .with_is_fenced(fenced)
                .with_should_shut_down(request.want_shut_down && fenced),
        }
    }

    /// Fences every unfenced broker whose session expired at `now_ms`, moving its leaderships
    /// and removing it from ISRs.
    pub fn expire_sessions(&mut self, now_ms: u64) -> Vec<MetadataRecord> {
        let expired: Vec<(BrokerId, BrokerEpoch)> = self
            .image
            .brokers
            .values()
            .filter(|broker| !broker.fenced && !self.session_alive(broker.broker_id, now_ms))
            .map(|broker| (broker.broker_id, broker.broker_epoch))
            .collect();
        let mut records = Vec::new();
        for (broker_id, broker_epoch) in expired {
            tracing::info!(%broker_id, "broker session expired; fencing");
            let fence = MetadataRecord::FenceBroker {
                broker_id,
                broker_epoch,
            };
            let mut scratch = self.image.clone();
            scratch.apply(&fence);
            let changes = self.fence_changes(&scratch, broker_id);
            let mut batch = vec![fence];
            batch.extend(changes);
            self.replay(&batch);
            records.extend(batch);
        }
        records
    }

    /// Partition changes after `broker` is fenced (in `image`, already marked fenced).
    fn fence_changes(&self, image: &MetadataImage, broker: BrokerId) -> Vec<MetadataRecord> {
        let acceptable = |b: BrokerId| image.is_unfenced(b);
        let mut records = Vec::new();
        for topic in image.topics.values() {
            let policy = self.policy(&topic.configs);
            for (index, state) in &topic.partitions {
                if !state.isr.contains(&broker) && state.leader != broker {
                    continue;
                }
                let target = isr_without_fenced(state, broker, policy.elr_enabled);
                if let Some(change) = build_change(state, &target, &acceptable, policy) {
                    records.push(MetadataRecord::PartitionChange(PartitionChangeRecord {
                        topic_id: topic.id,
                        partition: *index,
                        ..change
                    }));
                }
            }
        }
        records
    }

    /// Partition changes after `broker` re-registered following an unclean shutdown, with ELR
    /// enabled (`handleBrokerUncleanShutdown`; `image` already holds the new, fenced
    /// registration): it leaves every ISR, even as the last member, and every ELR; where it
    /// led, a leader is elected among the others (clean candidates, ELR when the ISR is empty,
    /// unclean only if enabled).
    fn unclean_shutdown_changes(
        &self,
        image: &MetadataImage,
        broker: BrokerId,
    ) -> Vec<MetadataRecord> {
        let acceptable = |b: BrokerId| image.is_unfenced(b);
        let mut records = Vec::new();
        for topic in image.topics.values() {
            let policy = self.policy(&topic.configs);
            for (index, state) in &topic.partitions {
                if !state.isr.contains(&broker)
                    && !state.elr.contains(&broker)
                    && state.leader != broker
                {
                    continue;
                }
                let target: Vec<BrokerId> =
                    state.isr.iter().copied().filter(|b| *b != broker).collect();
                if let Some(change) = build_change_after_unclean_shutdown(
                    state,
                    &target,
                    &acceptable,
                    policy,
                    &[broker],
                ) {
                    records.push(MetadataRecord::PartitionChange(PartitionChangeRecord {
                        topic_id: topic.id,
                        partition: *index,
                        ..change
                    }));
                }
            }
        }
        records
    }

    /// Elections for leaderless partitions `broker` could lead, after it is unfenced.
    fn unfence_changes(&self, image: &MetadataImage, broker: BrokerId) -> Vec<MetadataRecord> {
        let acceptable = |b: BrokerId| image.is_unfenced(b);
        let mut records = Vec::new();
        for topic in image.topics.values() {
            let policy = self.policy(&topic.configs);
            for (index, state) in &topic.partitions {
                if state.leader.is_some() || !state.replicas.contains(&broker) {
                    continue;
                }
                if let Some(change) = build_change(state, &state.isr, &acceptable, policy) {
                    records.push(MetadataRecord::PartitionChange(PartitionChangeRecord {
                        topic_id: topic.id,
                        partition: *index,
                        ..change
                    }));
                }
            }
        }
        records
    }

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

impl QuorumController {
    /// AllocateProducerIds: hands the requesting broker the next block of
    /// [`PRODUCER_ID_BLOCK_SIZE`] producer ids (`ProducerIdControlManager`).
    pub fn allocate_producer_ids(
        &mut self,
        request: &AllocateProducerIdsRequest,
    ) -> Decision<AllocateProducerIdsResponse> {
        let broker_id = BrokerId(request.broker_id.0);
        let registration = self.image.brokers.get(&broker_id);
        if registration.is_none_or(|r| r.broker_epoch.0 != request.broker_epoch) {
            return Decision {
                records: Vec::new(),
                response: AllocateProducerIdsResponse::default()
                    .with_error_code(ResponseError::StaleBrokerEpoch.code())
                    .with_producer_id_start(kafka_protocol::messages::ProducerId(-1)),
            };
        }
        let start = self.image.next_producer_id;
        let records = vec![MetadataRecord::ProducerIds {
            broker_id,
            broker_epoch: BrokerEpoch(request.broker_epoch),
            next_producer_id: start + i64::from(PRODUCER_ID_BLOCK_SIZE),
        }];
        self.replay(&records);
        Decision {
            records,
            response: AllocateProducerIdsResponse::default()
                .with_producer_id_start(kafka_protocol::messages::ProducerId(start))
                .with_producer_id_len(PRODUCER_ID_BLOCK_SIZE),
        }
    }
}

/// Producer ids per AllocateProducerIds block (Kafka's `ProducerIdsBlock.PRODUCER_ID_BLOCK_SIZE`).
pub const PRODUCER_ID_BLOCK_SIZE: i32 = 1000;

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

#[cfg(test)]
mod tests {
    use super::*;

    fn ids(list: &[i32]) -> Vec<BrokerId> {
        list.iter().copied().map(BrokerId).collect()
    }

    #[test]
    fn placement_is_round_robin() {
        let placed = place_replicas(&ids(&[1, 2, 3]), 4, 2, 0);
        assert_eq!(
            placed,
            vec![ids(&[1, 2]), ids(&[2, 3]), ids(&[3, 1]), ids(&[1, 2])]
        );
    }

    #[test]
    #[allow(clippy::type_complexity)]
    fn alter_partition_validation_table() {
        let state = PartitionState {
            replicas: ids(&[1, 2, 3]),
            isr: ids(&[1, 2]),
            elr: vec![],
            last_known_elr: vec![],
            leader: BrokerId(1),
            leader_epoch: 4,
            partition_epoch: 9,
            leader_recovery_state: LeaderRecoveryState::Recovered,
        };
        let live = |b: BrokerId| b != BrokerId(3);
        let ok = Some(LeaderRecoveryState::Recovered);
        let table: &[(
            &str,
            i32,
            i32,
            i32,
            &[i32],
            Option<LeaderRecoveryState>,
            Result<bool, ResponseError>,
        )] = &[
            ("shrink accepted", 1, 4, 9, &[1], ok, Ok(true)),
            ("no-op accepted", 1, 4, 9, &[1, 2], ok, Ok(false)),
            (
                "not the leader",
                2,
                4,
                9,
                &[2],
                ok,
                Err(ResponseError::NotLeaderOrFollower),
            ),
            (
                "stale leader epoch",
                1,
                3,
                9,
                &[1],
                ok,
                Err(ResponseError::FencedLeaderEpoch),
            ),
            (
                "stale partition epoch",
                1,
                4,
                8,
                &[1],
                ok,
                Err(ResponseError::InvalidUpdateVersion),
            ),
            (
                "fenced broker cannot join",
                1,
                4,
                9,
                &[1, 2, 3],
                ok,
                Err(ResponseError::IneligibleReplica),
            ),
            (
                "non-replica cannot join",
                1,
                4,
                9,
                &[1, 7],
                ok,
                Err(ResponseError::IneligibleReplica),
            ),
            (
                "back to recovering refused",
                1,
                4,
                9,
                &[1],
                Some(LeaderRecoveryState::Recovering),
                Err(ResponseError::InvalidRequest),
            ),
        ];
        for (name, requester, leader_epoch, partition_epoch, isr, recovery, expected) in table {
            let outcome = validate_alter_partition(
                &state,
                BrokerId(*requester),
                *leader_epoch,
                *partition_epoch,
                &ids(isr),
                *recovery,
                &live,
            )
            .map(|change| change.is_some());
            assert_eq!(&outcome, expected, "{name}");
        }
    }

    fn controller() -> QuorumController {
        controller_with(false, 1)
    }

    fn controller_with(elr_enabled: bool, min_insync_replicas: i32) -> QuorumController {
        QuorumController::new(
            MetadataImage::new(),
            ControllerConfig {
                cluster_id: "c".into(),
                session_timeout_ms: 9000,
                num_partitions: 1,
                default_replication_factor: 1,
                min_insync_replicas,
                unclean_leader_election_enable: false,
                elr_enabled,
            },
            0,
        )
    }

    fn register(controller: &mut QuorumController, id: i32, offset: u64, now: u64) -> i64 {
        register_after(controller, id, -1, offset, now)
    }

    /// Registers a new incarnation of broker `id` claiming `previous` as its
    /// `PreviousBrokerEpoch`.
    fn register_after(
        controller: &mut QuorumController,
        id: i32,
        previous: i64,
        offset: u64,
        now: u64,
    ) -> i64 {
        use kafka_protocol::messages::broker_registration_request::Listener;
        let request = BrokerRegistrationRequest::default()
            .with_broker_id(kafka_protocol::messages::BrokerId(id))
            .with_cluster_id(StrBytes::from_static_str("c"))
            .with_previous_broker_epoch(previous)
            .with_incarnation_id(Uuid::new_v4())
            .with_listeners(vec![
                Listener::default()
                    .with_host(StrBytes::from_static_str("h"))
                    .with_port(9),
            ]);
        let decision = controller.register_broker(&request, offset, now);
        assert_eq!(decision.response.error_code, 0);
        decision.response.broker_epoch
    }

    fn heartbeat(
        controller: &mut QuorumController,
        id: i32,
        epoch: i64,
        offset: i64,
        now: u64,
    ) -> BrokerHeartbeatResponse {
        let request = BrokerHeartbeatRequest::default()
            .with_broker_id(kafka_protocol::messages::BrokerId(id))
            .with_broker_epoch(epoch)
            .with_current_metadata_offset(offset);
        controller.heartbeat(&request, now).response
    }

    #[test]
    fn broker_unfenced_when_caught_up_and_fenced_when_session_expires() {
        let mut c = controller();
        let e1 = register(&mut c, 1, 10, 0);
        let e2 = register(&mut c, 2, 11, 0);
        assert!(
            heartbeat(&mut c, 1, e1, 5, 100).is_fenced,
            "not caught up yet"
        );
        assert!(!heartbeat(&mut c, 1, e1, 10, 200).is_fenced);
        assert!(!heartbeat(&mut c, 2, e2, 11, 200).is_fenced);
        assert_eq!(
            heartbeat(&mut c, 1, e1 - 1, 10, 300).error_code,
            ResponseError::StaleBrokerEpoch.code()
        );
        // Topic with RF 2 led by one of them.
        let decision = c.create_topics(&CreateTopicsRequest::default().with_topics(vec![
            kafka_protocol::messages::create_topics_request::CreatableTopic::default()
                .with_name(kafka_protocol::messages::TopicName(StrBytes::from_static_str("t")))
                .with_num_partitions(2)
                .with_replication_factor(2),
        ]));
        assert_eq!(decision.response.topics[0].error_code, 0);
        let too_big = c.create_topics(&CreateTopicsRequest::default().with_topics(vec![
            kafka_protocol::messages::create_topics_request::CreatableTopic::default()
                .with_name(kafka_protocol::messages::TopicName(StrBytes::from_static_str("u")))
                .with_num_partitions(1)
                .with_replication_factor(3),
        ]));
        assert_eq!(
            too_big.response.topics[0].error_code,
            ResponseError::InvalidReplicationFactor.code()
        );
        // Broker 2 keeps heartbeating; broker 1 goes silent.
        assert!(c.expire_sessions(8000).is_empty());
        heartbeat(&mut c, 2, e2, 11, 8000);
        let records = c.expire_sessions(9300);
        assert!(matches!(
            records[0],
            MetadataRecord::FenceBroker {
                broker_id: BrokerId(1),
                ..
            }
        ));
        let topic = &c.image().topics["t"];
        for state in topic.partitions.values() {
            assert_eq!(state.leader, BrokerId(2));
            assert_eq!(state.isr, ids(&[2]));
        }
        // A second incarnation of broker 2 while its session lives is a duplicate.
        use kafka_protocol::messages::broker_registration_request::Listener;
        let request = BrokerRegistrationRequest::default()
            .with_broker_id(kafka_protocol::messages::BrokerId(2))
            .with_cluster_id(StrBytes::from_static_str("c"))
            .with_incarnation_id(Uuid::new_v4())
            .with_listeners(vec![Listener::default()]);
        assert_eq!(
            c.register_broker(&request, 50, 9400).response.error_code,
            ResponseError::DuplicateBrokerRegistration.code()
        );
        let elsewhere = request
            .clone()
            .with_broker_id(kafka_protocol::messages::BrokerId(9))
            .with_cluster_id(StrBytes::from_static_str("other"));
        assert_eq!(
            c.register_broker(&elsewhere, 51, 9400).response.error_code,
            ResponseError::InconsistentClusterId.code()
        );
    }

    #[test]
    fn controlled_shutdown_moves_leadership_and_keeps_the_broker_fenced() {
        let mut c = controller();
        let e1 = register(&mut c, 1, 10, 0);
        let e2 = register(&mut c, 2, 11, 0);
        heartbeat(&mut c, 1, e1, 10, 100);
        heartbeat(&mut c, 2, e2, 11, 100);
        let decision = c.create_topics(&CreateTopicsRequest::default().with_topics(vec![
            kafka_protocol::messages::create_topics_request::CreatableTopic::default()
                .with_name(kafka_protocol::messages::TopicName(StrBytes::from_static_str("t")))
                .with_num_partitions(2)
                .with_replication_factor(2),
        ]));
        assert_eq!(decision.response.topics[0].error_code, 0);
        let shutdown = BrokerHeartbeatRequest::default()
            .with_broker_id(kafka_protocol::messages::BrokerId(1))
            .with_broker_epoch(e1)
            .with_current_metadata_offset(20)
            .with_want_shut_down(true);
        let response = c.heartbeat(&shutdown, 200).response;
        assert!(response.is_fenced && response.should_shut_down);
        for state in c.image().topics["t"].partitions.values() {
            assert_eq!(state.leader, BrokerId(2));
            assert_eq!(state.isr, ids(&[2]));
        }
        assert!(
            c.heartbeat(&shutdown, 300).response.is_fenced,
            "never unfenced while shutting down"
        );
    }

    /// The one partition of topic `t`.
    fn only_partition(c: &QuorumController) -> PartitionState {
        c.image().topics["t"].partitions[&0].clone()
    }

    /// KIP-966's "last replica standing" on one RF 3 partition with min ISR 2: broker 3 is
    /// fenced, broker 2 shuts down cleanly (controlled), then the leader, broker 1, is fenced
    /// as the last ISR member and re-registers, claiming `previous` (its registered epoch for
    /// a clean shutdown, -1 after a crash), and heartbeats until unfenced. Returns the state
    /// then, and broker 2's registered epoch.
    fn last_replica_standing(elr: bool, clean: bool) -> (QuorumController, i64) {
        let mut c = controller_with(elr, 2);
        let e1 = register(&mut c, 1, 10, 0);
        let e2 = register(&mut c, 2, 11, 0);
        let e3 = register(&mut c, 3, 12, 0);
        for (id, epoch) in [(1, e1), (2, e2), (3, e3)] {
            assert!(!heartbeat(&mut c, id, epoch, 20, 100).is_fenced);
        }
        let decision = c.create_topics(&CreateTopicsRequest::default().with_topics(vec![
            kafka_protocol::messages::create_topics_request::CreatableTopic::default()
                .with_name(kafka_protocol::messages::TopicName(StrBytes::from_static_str("t")))
                .with_num_partitions(1)
                .with_replication_factor(3),
        ]));
        assert_eq!(decision.response.topics[0].error_code, 0);
        assert_eq!(only_partition(&c).leader, BrokerId(1));
        heartbeat(&mut c, 1, e1, 30, 5000);
        heartbeat(&mut c, 2, e2, 30, 5000);
        c.expire_sessions(9500);
        assert_eq!(only_partition(&c).isr, ids(&[1, 2]));
        let shutdown = BrokerHeartbeatRequest::default()
            .with_broker_id(kafka_protocol::messages::BrokerId(2))
            .with_broker_epoch(e2)
            .with_current_metadata_offset(30)
            .with_want_shut_down(true);
        assert!(c.heartbeat(&shutdown, 9600).response.should_shut_down);
        heartbeat(&mut c, 1, e1, 30, 9700);
        let state = only_partition(&c);
        assert_eq!(state.isr, ids(&[1]));
        assert_eq!(state.elr, if elr { ids(&[2]) } else { vec![] });
        c.expire_sessions(19_000);
        let state = only_partition(&c);
        assert_eq!(state.leader, BrokerId::NONE);
        if elr {
            assert_eq!((state.isr, state.elr), (vec![], ids(&[2, 1])));
        } else {
            assert_eq!(state.isr, ids(&[1]), "without ELR the last member stays");
        }
        let previous = if clean { e1 } else { -1 };
        let new_e1 = register_after(&mut c, 1, previous, 100, 19_100);
        assert!(!heartbeat(&mut c, 1, new_e1, 100, 19_200).is_fenced);
        (c, e2)
    }

    #[test]
    fn unclean_shutdown_with_elr_keeps_the_last_isr_member_from_leading() {
        let (mut c, e2) = last_replica_standing(true, false);
        let state = only_partition(&c);
        assert_eq!(
            state.leader,
            BrokerId::NONE,
            "the crashed broker is not elected"
        );
        assert_eq!(
            (state.isr, state.elr),
            (vec![], ids(&[2])),
            "it left the ELR"
        );
        // Broker 2 comes back from its clean shutdown: still an ELR member, it is elected.
        let new_e2 = register_after(&mut c, 2, e2, 200, 19_300);
        assert_eq!(
            only_partition(&c).elr,
            ids(&[2]),
            "a clean return keeps the ELR"
        );
        assert!(!heartbeat(&mut c, 2, new_e2, 200, 19_400).is_fenced);
        let state = only_partition(&c);
        assert_eq!((state.leader, state.isr), (BrokerId(2), ids(&[2])));
    }

    #[test]
    fn clean_shutdown_with_elr_leaves_the_broker_electable() {
        let (c, _) = last_replica_standing(true, true);
        let state = only_partition(&c);
        assert_eq!((state.leader, state.isr), (BrokerId(1), ids(&[1])));
    }

    #[test]
    fn without_elr_an_unclean_shutdown_is_handled_as_a_fencing() {
        // Kafka 4's `handleBrokerShutdown`: without ELR the ISR is never empty, so the last
        // member stays, crashed or not, and is elected again once unfenced.
        for clean in [false, true] {
            let (c, _) = last_replica_standing(false, clean);
            let state = only_partition(&c);
            assert_eq!(
                (state.leader, state.isr),
                (BrokerId(1), ids(&[1])),
                "clean: {clean}"
            );
        }
    }

    #[test]
    fn unclean_reregistration_removes_the_broker_from_every_isr_and_moves_its_leaderships() {
        let mut c = controller_with(true, 1);
        let e1 = register(&mut c, 1, 10, 0);
        let e2 = register(&mut c, 2, 11, 0);
        for (id, epoch) in [(1, e1), (2, e2)] {
            heartbeat(&mut c, id, epoch, 20, 100);
        }
        c.create_topics(&CreateTopicsRequest::default().with_topics(vec![
            kafka_protocol::messages::create_topics_request::CreatableTopic::default()
                .with_name(kafka_protocol::messages::TopicName(StrBytes::from_static_str("t")))
                .with_num_partitions(2)
                .with_replication_factor(2),
        ]));
        let before: Vec<PartitionState> =
            c.image().topics["t"].partitions.values().cloned().collect();
        assert!(before.iter().all(|s| s.isr.len() == 2));
        assert!(before.iter().any(|s| s.leader == BrokerId(1)));
        // Broker 1 crashes and its session expires, so its next incarnation may register.
        heartbeat(&mut c, 2, e2, 20, 5000);
        let new_e1 = register_after(&mut c, 1, -1, 50, 9200);
        for (before, after) in before.iter().zip(c.image().topics["t"].partitions.values()) {
            assert_eq!(after.isr, ids(&[2]));
            assert_eq!(after.leader, BrokerId(2));
            let bumped = i32::from(before.leader == BrokerId(1));
            assert_eq!(after.leader_epoch, before.leader_epoch + bumped);
        }
        // Caught up, it is unfenced but leads nothing until the leader adds it back.
        assert!(!heartbeat(&mut c, 1, new_e1, 50, 9300).is_fenced);
        assert!(
            c.image().topics["t"]
                .partitions
                .values()
                .all(|s| s.leader == BrokerId(2) && s.isr == ids(&[2]))
        );
    }

    #[test]
    fn producer_id_blocks_are_consecutive_and_need_a_current_epoch() {
        let mut c = controller();
        let epoch = register(&mut c, 1, 10, 0);
        let ask = |epoch: i64| {
            AllocateProducerIdsRequest::default()
                .with_broker_id(kafka_protocol::messages::BrokerId(1))
                .with_broker_epoch(epoch)
        };
        let first = c.allocate_producer_ids(&ask(epoch)).response;
        let second = c.allocate_producer_ids(&ask(epoch)).response;
        assert_eq!(
            (first.producer_id_start.0, first.producer_id_len),
            (0, 1000)
        );
        assert_eq!(second.producer_id_start.0, 1000);
        assert_eq!(
            c.allocate_producer_ids(&ask(epoch + 1)).response.error_code,
            ResponseError::StaleBrokerEpoch.code()
        );
    }
}
