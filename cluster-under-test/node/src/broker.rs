//! The broker's shared state: configuration, cluster id, the metadata quorum handle
//! ([`Quorum`], whose committed [`crate::metadata::MetadataImage`] is the source of truth for
//! topics, replicas, leaders, leader epochs and ISRs), and one [`Partition`] per hosted
//! topic-partition (those whose replicas include this broker), wrapping its storage log.
//!
//! Handlers (under `handlers/`) only talk to this type. Topic creation goes to the active
//! controller (local or remote) and is answered once committed and visible in this broker's
//! image. A broker answers `NOT_LEADER_OR_FOLLOWER` for partitions it does not lead.
//!
//! REPLICATION SEAM: partition data replication (follower fetching, ISR shrink/expand through
//! AlterPartition, a high watermark across replicas, acks=all waiting) is the next issue. Until
//! then the leader advances its high watermark to its own log end offset **only when the ISR is
//! exactly itself**; with a larger ISR the high watermark does not move and acks=all produces
//! time out (`REQUEST_TIMED_OUT`) rather than fake durability.

use std::collections::{BTreeMap, HashMap};
use std::path::Path;
use std::sync::{Arc, Mutex, MutexGuard, RwLock};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use kafka_protocol::ResponseError;
use logjam_storage::{
    LeaderEpoch, LogConfig, LogManager, Offset, SharedLog, TopicPartition, lock_log,
};
use tokio::sync::watch;
use uuid::Uuid;

use kafka_protocol::messages::create_topics_request::{CreatableTopic, CreatableTopicConfig};
use kafka_protocol::messages::{
    CreateTopicsRequest, CreateTopicsResponse, RequestKind, ResponseKind, TopicName,
};
use kafka_protocol::protocol::StrBytes;

use crate::config::Config;
use crate::controller::{
    BrokerLifecycleSettings, ControllerConfig, Quorum, QuorumSettings, QuorumStartError,
};
use crate::metadata::{BrokerId, MetadataImage, PartitionState};
use crate::topics::{TopicError, TopicInfo};

/// The most partitions one topic creation may ask for. Kafka's controller refuses to generate
/// more than 10,000 records for one request (`MAX_RECORDS_PER_USER_OP`); without a bound, one
/// CreateTopics asking for two billion partitions would make a node try to open them all.
pub const MAX_PARTITIONS_PER_TOPIC: i32 = 10_000;

/// Why a topic could not be created; each maps to a Kafka error code.
#[derive(Debug, thiserror::Error)]
pub enum CreateTopicError {
    /// A topic with that name exists.
    #[error("the topic already exists")]
    AlreadyExists,
    /// The name breaks Kafka's naming rules.
    #[error(transparent)]
    InvalidName(TopicError),
    /// A topic config key or value is not acceptable.
    #[error(transparent)]
    InvalidConfig(TopicError),
    /// The partition count is below 1 or above [`MAX_PARTITIONS_PER_TOPIC`].
    #[error("the number of partitions must be between 1 and 10000, got {requested}")]
    InvalidPartitions {
        /// What was asked for.
        requested: i32,
    },
    /// The replication factor is below 1 or above the number of brokers.
    #[error("replication factor {requested} is not between 1 and the {brokers} available brokers")]
    InvalidReplicationFactor {
        /// What was asked for.
        requested: i16,
        /// Brokers available.
        brokers: i16,
    },
    /// A manual assignment names a broker that does not exist.
    #[error("the replica assignment names an unknown broker")]
    InvalidReplicaAssignment,
    /// The request contradicts itself.
    #[error("{0}")]
    InvalidRequest(&'static str),
    /// Creating a log failed.
    #[error("storage error: {0}")]
    Storage(String),
    /// The controller answered with another error, or did not answer.
    #[error("the controller refused the topic: {0:?}")]
    Controller(ResponseError),
}

impl CreateTopicError {
    /// The Kafka error code for this failure.
    pub fn response_error(&self) -> ResponseError {
        match self {
            CreateTopicError::AlreadyExists => ResponseError::TopicAlreadyExists,
            CreateTopicError::InvalidName(_) => ResponseError::InvalidTopicException,
            CreateTopicError::InvalidConfig(_) => ResponseError::InvalidConfig,
            CreateTopicError::InvalidPartitions { .. } => ResponseError::InvalidPartitions,
            CreateTopicError::InvalidReplicationFactor { .. } => {
                ResponseError::InvalidReplicationFactor
            }
            CreateTopicError::InvalidReplicaAssignment => ResponseError::InvalidReplicaAssignment,
            CreateTopicError::InvalidRequest(_) => ResponseError::InvalidRequest,
            CreateTopicError::Storage(_) => ResponseError::KafkaStorageError,
            CreateTopicError::Controller(error) => *error,
        }
    }
}

/// The `acks` of a produce request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Acks {
    /// `acks=0`: no response.
    None,
    /// `acks=1`: after the leader's append.
    Leader,
    /// `acks=-1` / `all`: after the high watermark covers the batch.
    All,
}

impl Acks {
    /// Parses the wire value; `None` for anything but -1, 0 and 1 (`INVALID_REQUIRED_ACKS`).
    pub fn from_wire(acks: i16) -> Option<Acks> {
        match acks {
            0 => Some(Acks::None),
            1 => Some(Acks::Leader),
            -1 => Some(Acks::All),
            _ => None,
        }
    }
}

/// Where a successful append landed.
#[derive(Debug, Clone, Copy)]
pub struct Appended {
    /// Offset of the first record appended.
    pub base_offset: i64,
    /// The log start offset after the append.
    pub log_start_offset: i64,
}

/// What a consumer fetch read from one partition.
#[derive(Debug, Clone)]
pub struct ConsumerRead {
    /// Whole record batches, possibly empty.
    pub records: Bytes,
    /// The high watermark at the time of the read.
    pub high_watermark: i64,
    /// The log start offset at the time of the read.
    pub log_start_offset: i64,
}

/// The three positions every partition has.
#[derive(Debug, Clone, Copy)]
pub struct PartitionOffsets {
    /// First offset still in the log.
    pub log_start_offset: i64,
    /// Offsets below it are committed and visible to consumers.
    pub high_watermark: i64,
    /// The next offset to be assigned.
    pub log_end_offset: i64,
}

/// One hosted partition: its log and its replication state.
#[derive(Debug)]
pub struct Partition {
    /// Which partition.
    pub topic_partition: TopicPartition,
    /// The log, behind a std mutex: appends and reads are short and never await while held.
    log: SharedLog,
    /// This node's id.
    node_id: i32,
    /// Leader, epochs, replicas and ISR as last seen in the metadata image.
    state: Mutex<PartitionState>,
    /// The topic's `min.insync.replicas` (topic config, else the broker's).
    min_insync_replicas: i32,
    /// Ticks on every append, to wake long-polling fetches.
    appends: watch::Sender<u64>,
}

impl Partition {
    fn state(&self) -> PartitionState {
        self.state
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .clone()
    }

    /// The leader's broker id (-1 when leaderless).
    pub fn leader(&self) -> i32 {
        self.state().leader.0
    }

    /// The current leader epoch.
    pub fn leader_epoch(&self) -> i32 {
        self.state().leader_epoch
    }

    /// The assigned replicas.
    pub fn replicas(&self) -> Vec<i32> {
        self.state().replicas.iter().map(|b| b.0).collect()
    }

    /// The in-sync replicas.
    pub fn isr(&self) -> Vec<i32> {
        self.state().isr.iter().map(|b| b.0).collect()
    }

    /// Whether this broker leads the partition.
    pub fn is_leader(&self) -> bool {
        self.leader() == self.node_id
    }

    /// Checks that this broker leads the partition, then a client's `current_leader_epoch`
    /// (-1 means "do not check"), as KIP-320 does: an older epoch is fenced, a newer one means
    /// this broker has not caught up yet.
    ///
    /// # Errors
    /// `NOT_LEADER_OR_FOLLOWER`, `FENCED_LEADER_EPOCH` or `UNKNOWN_LEADER_EPOCH`.
    pub fn check_leader_epoch(&self, requested: i32) -> Result<(), ResponseError> {
        let state = self.state();
        if state.leader.0 != self.node_id {
            return Err(ResponseError::NotLeaderOrFollower);
        }
        match requested {
            -1 => Ok(()),
            epoch if epoch < state.leader_epoch => Err(ResponseError::FencedLeaderEpoch),
            epoch if epoch > state.leader_epoch => Err(ResponseError::UnknownLeaderEpoch),
            _ => Ok(()),
        }
    }

    fn lock(&self) -> MutexGuard<'_, logjam_storage::Log> {
        lock_log(&self.log)
    }

    /// The partition's log start, high watermark and log end.
    pub fn offsets(&self) -> PartitionOffsets {
        let log = self.lock();
        PartitionOffsets {
            log_start_offset: log.log_start_offset().0,
            high_watermark: log.high_watermark().0,
            log_end_offset: log.log_end_offset().0,
        }
    }

    /// Moves the high watermark to the smallest log end offset in the ISR. REPLICATION SEAM:
    /// only the leader-only ISR is handled; with followers in the ISR their log end offsets
    /// are unknown until replication exists, so the high watermark stays where it is.
    fn maybe_advance_high_watermark(&self) {
        let state = self.state();
        if state.leader.0 != self.node_id || state.isr != [BrokerId(self.node_id)] {
            return;
        }
        let mut log = self.lock();
        let log_end = log.log_end_offset();
        log.set_high_watermark(log_end);
    }

    /// Appends `records` as the leader and answers when `acks` is satisfied.
    ///
    /// # Errors
    /// The Kafka error for the partition: `NOT_ENOUGH_REPLICAS` (nothing appended), the
    /// storage's validation errors (`CORRUPT_MESSAGE`, `INVALID_RECORD`, ...), or
    /// `KAFKA_STORAGE_ERROR`.
    pub async fn produce(
        self: Arc<Self>,
        records: Bytes,
        acks: Acks,
        timeout: Duration,
    ) -> Result<Appended, ResponseError> {
        let state = self.state();
        if state.leader.0 != self.node_id {
            return Err(ResponseError::NotLeaderOrFollower);
        }
        let leader_epoch = state.leader_epoch;
        let isr_size = state.isr.len() as i32;
        let effective_min_isr = self.min_insync_replicas.min(state.replicas.len() as i32);
        if acks == Acks::All && isr_size < effective_min_isr {
            return Err(ResponseError::NotEnoughReplicas);
        }
        let partition = Arc::clone(&self);
        // fsync can happen inside an append (flush.messages, segment roll): keep it off the
        // async workers.
        let appended = tokio::task::spawn_blocking(move || {
            let mut log = partition.lock();
            let info = log
                .append_as_leader(&records, LeaderEpoch(leader_epoch), now_ms())
                .map_err(|error| {
                    tracing::debug!(partition = %partition.topic_partition, %error, "append refused");
                    ResponseError::try_from_code(error.kafka_error_code())
                        .unwrap_or(ResponseError::UnknownServerError)
                })?;
            let log_start_offset = log.log_start_offset().0;
            drop(log);
            partition.maybe_advance_high_watermark();
            Ok::<_, ResponseError>(Appended { base_offset: info.first_offset.0, log_start_offset })
        })
        .await
        .map_err(|_| ResponseError::UnknownServerError)??;
        self.appends.send_modify(|count| *count += 1);
        if acks == Acks::All {
            // REPLICATION SEAM: acks=all parks until the high watermark passes the batch or
            // `timeout` expires. Without replication only a leader-only ISR ever gets there.
            let target = appended.base_offset;
            let deadline = tokio::time::Instant::now() + timeout;
            let mut appends = self.appends.subscribe();
            while self.offsets().high_watermark <= target {
                if tokio::time::timeout_at(deadline, appends.changed())
                    .await
                    .is_err()
                {
                    return Err(ResponseError::RequestTimedOut);
                }
            }
        }
        Ok(appended)
    }

    /// Reads for a consumer, up to the high watermark.
    ///
    /// # Errors
    /// `OFFSET_OUT_OF_RANGE` or `KAFKA_STORAGE_ERROR`.
    pub fn read_for_consumer(
        &self,
        fetch_offset: i64,
        max_bytes: usize,
        min_one_batch: bool,
    ) -> Result<ConsumerRead, ResponseError> {
        let log = self.lock();
        let high_watermark = log.high_watermark();
        let read = log
            .read(
                Offset(fetch_offset),
                max_bytes,
                high_watermark,
                min_one_batch,
            )
            .map_err(|error| {
                ResponseError::try_from_code(error.kafka_error_code())
                    .unwrap_or(ResponseError::UnknownServerError)
            })?;
        Ok(ConsumerRead {
            records: read.records,
            high_watermark: high_watermark.0,
            log_start_offset: log.log_start_offset().0,
        })
    }
}

/// The state shared by every connection of a node.
#[derive(Debug)]
pub struct Broker {
    config: Config,
    cluster_id: String,
    logs: LogManager,
    quorum: Quorum,
    partitions: RwLock<HashMap<(String, i32), Arc<Partition>>>,
    /// Serialises log creation so two requests cannot create the same log twice.
    opening: Mutex<()>,
    appends: watch::Sender<u64>,
}

/// Why a node could not start.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    /// The data directory or its files could not be used.
    #[error("{0}")]
    Storage(String),
    /// `meta.properties` belongs to another node.
    #[error("{path}: stored node.id {stored} does not match the configured node.id {configured}")]
    NodeIdMismatch {
        /// The file.
        path: String,
        /// The id in the file.
        stored: i32,
        /// The id in the configuration.
        configured: i32,
    },
    /// The metadata quorum could not start.
    #[error(transparent)]
    Quorum(#[from] QuorumStartError),
    /// The broker was not registered and unfenced within
    /// `initial.broker.registration.timeout.ms` (60 s).
    #[error("not registered and unfenced by the controller within {timeout_ms} ms")]
    RegistrationTimeout {
        /// The timeout.
        timeout_ms: u64,
    },
}

/// Kafka's `initial.broker.registration.timeout.ms` default.
const INITIAL_REGISTRATION_TIMEOUT_MS: u64 = 60_000;

/// How long a broker waits for its controller to answer a topic creation.
const CONTROLLER_TIMEOUT: Duration = Duration::from_secs(30);

impl Broker {
    /// Opens the data directory (recovering logs after an unclean shutdown), starts the
    /// metadata quorum (replaying the metadata log), and, for the broker role, waits until
    /// the controller has registered and unfenced this broker, as a Kafka broker only opens
    /// its client listeners once caught up.
    ///
    /// # Errors
    /// [`StartError`] when the data directory cannot be used, the quorum cannot start, or
    /// registration does not complete in time.
    pub fn open(config: Config) -> Result<Broker, StartError> {
        let data_dir = config.data_dir().to_owned();
        std::fs::create_dir_all(&data_dir).map_err(|error| {
            StartError::Storage(format!("cannot create {}: {error}", data_dir.display()))
        })?;
        let cluster_id = load_or_create_meta_properties(&data_dir, config.node_id)?;
        let logs = LogManager::open(&data_dir, broker_log_config(&config, &BTreeMap::new()))
            .map_err(|error| StartError::Storage(error.to_string()))?;
        let settings = QuorumSettings {
            node_id: logjam_raft::NodeId(config.node_id as u32),
            raft: config.quorum_config(),
            voter_addresses: config
                .voters
                .iter()
                .map(|(id, address)| (logjam_raft::NodeId(*id as u32), *address))
                .collect(),
            controller_listen: config
                .is_controller()
                .then_some(config.controller_listen_address)
                .flatten(),
            metadata_dir: config
                .metadata_log_dir
                .join(crate::controller::metadata_log::METADATA_DIR),
            cluster_id: cluster_id.clone(),
            controller: ControllerConfig {
                cluster_id: cluster_id.clone(),
                session_timeout_ms: config.broker_session_timeout_ms,
                num_partitions: config.num_partitions,
                default_replication_factor: config.default_replication_factor,
                min_insync_replicas: config.min_insync_replicas,
                unclean_leader_election_enable: config.unclean_leader_election_enable,
                elr_enabled: config.eligible_leader_replicas_enable,
            },
            broker: config.is_broker().then(|| BrokerLifecycleSettings {
                host: config.advertised_host.clone(),
                port: config.advertised_port,
                heartbeat_interval_ms: config.broker_heartbeat_interval_ms,
            }),
            max_idle_interval_ms: config
                .raw
                .get("metadata.max.idle.interval.ms")
                .and_then(|v| v.parse().ok())
                .unwrap_or(500),
        };
        let (unfenced_tx, unfenced_rx) = std::sync::mpsc::channel();
        let quorum = Quorum::start(
            settings,
            Box::new(move || {
                let _ = unfenced_tx.send(());
            }),
        )?;
        if config.is_broker()
            && unfenced_rx
                .recv_timeout(Duration::from_millis(INITIAL_REGISTRATION_TIMEOUT_MS))
                .is_err()
        {
            return Err(StartError::RegistrationTimeout {
                timeout_ms: INITIAL_REGISTRATION_TIMEOUT_MS,
            });
        }
        let (appends, _) = watch::channel(0);
        Ok(Broker {
            cluster_id,
            logs,
            quorum,
            partitions: RwLock::new(HashMap::new()),
            opening: Mutex::new(()),
            appends,
            config,
        })
    }

    /// The node's configuration.
    pub fn config(&self) -> &Config {
        &self.config
    }

    /// The cluster id from `meta.properties`.
    pub fn cluster_id(&self) -> &str {
        &self.cluster_id
    }

    /// The metadata quorum.
    pub fn quorum(&self) -> &Quorum {
        &self.quorum
    }

    /// The committed metadata image this broker has replayed.
    pub fn image(&self) -> Arc<MetadataImage> {
        self.quorum.image()
    }

    /// A receiver that changes on every append, for long-polling fetches.
    pub fn subscribe_appends(&self) -> watch::Receiver<u64> {
        self.appends.subscribe()
    }

    fn topic_info(topic: &crate::metadata::TopicImage) -> TopicInfo {
        TopicInfo {
            name: topic.name.clone(),
            id: topic.id,
            partitions: topic.partitions.len() as i32,
            replication_factor: topic
                .partitions
                .values()
                .next()
                .map_or(0, |p| p.replicas.len() as i16),
            configs: topic.configs.clone(),
        }
    }

    /// Every topic.
    pub fn topics(&self) -> Vec<TopicInfo> {
        self.image()
            .topics
            .values()
            .map(Broker::topic_info)
            .collect()
    }

    /// The topic named `name`.
    pub fn topic_by_name(&self, name: &str) -> Option<TopicInfo> {
        self.image().topics.get(name).map(Broker::topic_info)
    }

    /// The topic with id `id`.
    pub fn topic_by_id(&self, id: Uuid) -> Option<TopicInfo> {
        self.image().topic_by_id(id).map(Broker::topic_info)
    }

    /// The error for a partition this broker cannot serve: `UNKNOWN_TOPIC_OR_PARTITION` when
    /// it does not exist, else `NOT_LEADER_OR_FOLLOWER` (it is hosted elsewhere).
    pub fn missing_partition_error(&self, topic: &str, index: i32) -> ResponseError {
        let image = self.image();
        match image
            .topics
            .get(topic)
            .and_then(|t| t.partitions.get(&index))
        {
            Some(_) => ResponseError::NotLeaderOrFollower,
            None => ResponseError::UnknownTopicOrPartition,
        }
    }

    /// The partition `index` of `topic`, if this node is one of its replicas (opening its log
    /// the first time), with leader, epochs and ISR refreshed from the image.
    pub fn partition(&self, topic: &str, index: i32) -> Option<Arc<Partition>> {
        let image = self.image();
        let topic_image = image.topics.get(topic)?;
        let state = topic_image.partitions.get(&index)?;
        if !state.replicas.contains(&BrokerId(self.config.node_id)) {
            return None;
        }
        let key = (topic.to_owned(), index);
        let existing = self
            .partitions
            .read()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .get(&key)
            .cloned();
        let partition = match existing {
            Some(partition) => partition,
            None => match self.open_partition(topic_image, index, state) {
                Ok(partition) => partition,
                Err(error) => {
                    tracing::error!(%topic, index, %error, "cannot open the partition log");
                    return None;
                }
            },
        };
        let changed = {
            let mut current = partition
                .state
                .lock()
                .unwrap_or_else(|poisoned| poisoned.into_inner());
            let changed = *current != *state;
            *current = state.clone();
            changed
        };
        if changed {
            // Becoming leader recomputes the high watermark from the ISR, as Kafka's
            // `makeLeader` does: the checkpointed value may be up to a minute stale.
            partition.maybe_advance_high_watermark();
        }
        Some(partition)
    }

    fn open_partition(
        &self,
        topic: &crate::metadata::TopicImage,
        index: i32,
        state: &PartitionState,
    ) -> Result<Arc<Partition>, CreateTopicError> {
        let _guard = self
            .opening
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        let key = (topic.name.clone(), index);
        if let Some(partition) = self
            .partitions
            .read()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .get(&key)
        {
            return Ok(Arc::clone(partition));
        }
        let log_config = broker_log_config(&self.config, &topic.configs);
        let min_insync_replicas = topic
            .configs
            .get("min.insync.replicas")
            .and_then(|value| value.parse().ok())
            .unwrap_or(self.config.min_insync_replicas);
        let topic_partition = TopicPartition::new(topic.name.clone(), index);
        let log = match self.logs.log(&topic_partition) {
            Some(log) => log,
            None => self
                .logs
                .create_log(topic_partition.clone(), log_config)
                .map_err(|error| CreateTopicError::Storage(error.to_string()))?,
        };
        let partition = Arc::new(Partition {
            topic_partition,
            log,
            node_id: self.config.node_id,
            state: Mutex::new(state.clone()),
            min_insync_replicas,
            appends: self.appends.clone(),
        });
        partition.maybe_advance_high_watermark();
        self.partitions
            .write()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .insert(key, Arc::clone(&partition));
        Ok(partition)
    }

    /// Sends a CreateTopics request to the active controller and waits until the topics it
    /// created are in this broker's image (so a client can use them at once). Topics the
    /// controller did not answer fail with `REQUEST_TIMED_OUT`.
    pub async fn create_topics(&self, request: CreateTopicsRequest) -> CreateTopicsResponse {
        let timeout = Duration::from_millis(u64::try_from(request.timeout_ms).unwrap_or(0))
            .clamp(Duration::from_secs(1), CONTROLLER_TIMEOUT);
        let names: Vec<TopicName> = request.topics.iter().map(|t| t.name.clone()).collect();
        let validate_only = request.validate_only;
        let response = match self
            .quorum
            .forward(RequestKind::CreateTopics(request), timeout)
            .await
        {
            Some(ResponseKind::CreateTopics(response)) => response,
            _ => return timed_out(&names),
        };
        if !validate_only {
            let created: Vec<String> = response
                .topics
                .iter()
                .filter(|t| t.error_code == 0)
                .map(|t| t.name.to_string())
                .collect();
            let mut images = self.quorum.subscribe_image();
            let deadline = tokio::time::Instant::now() + timeout;
            loop {
                let visible = {
                    let image = images.borrow_and_update();
                    created.iter().all(|name| image.topics.contains_key(name))
                };
                if visible
                    || tokio::time::timeout_at(deadline, images.changed())
                        .await
                        .map_or(true, |changed| changed.is_err())
                {
                    break;
                }
            }
        }
        response
    }

    /// Creates one topic and waits for it, for synchronous callers (tests). Must not be called
    /// on a tokio worker thread.
    ///
    /// # Errors
    /// [`CreateTopicError`] from the controller's answer.
    pub fn create_topic(
        &self,
        name: &str,
        partitions: Option<i32>,
        replication_factor: Option<i16>,
        configs: &[(String, String)],
    ) -> Result<TopicInfo, CreateTopicError> {
        let request = CreateTopicsRequest::default()
            .with_timeout_ms(30_000)
            .with_topics(vec![
                CreatableTopic::default()
                    .with_name(TopicName(StrBytes::from_string(name.to_owned())))
                    .with_num_partitions(partitions.unwrap_or(-1))
                    .with_replication_factor(replication_factor.unwrap_or(-1))
                    .with_configs(
                        configs
                            .iter()
                            .map(|(key, value)| {
                                CreatableTopicConfig::default()
                                    .with_name(StrBytes::from_string(key.clone()))
                                    .with_value(Some(StrBytes::from_string(value.clone())))
                            })
                            .collect(),
                    ),
            ]);
        let response = self
            .quorum
            .forward_blocking(RequestKind::CreateTopics(request), CONTROLLER_TIMEOUT);
        let Some(ResponseKind::CreateTopics(response)) = response else {
            return Err(CreateTopicError::Controller(ResponseError::RequestTimedOut));
        };
        let code = response.topics.first().map_or(-1, |t| t.error_code);
        if code != 0 {
            let error =
                ResponseError::try_from_code(code).unwrap_or(ResponseError::UnknownServerError);
            return Err(match error {
                ResponseError::TopicAlreadyExists => CreateTopicError::AlreadyExists,
                other => CreateTopicError::Controller(other),
            });
        }
        let deadline = std::time::Instant::now() + CONTROLLER_TIMEOUT;
        loop {
            if let Some(topic) = self.topic_by_name(name) {
                return Ok(topic);
            }
            if std::time::Instant::now() > deadline {
                return Err(CreateTopicError::Controller(ResponseError::RequestTimedOut));
            }
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    /// The `log.flush.interval.ms` scheduler tick.
    ///
    /// # Errors
    /// A storage error message.
    pub fn flush_due_logs(&self) -> Result<(), String> {
        self.logs
            .flush_due(now_ms())
            .map(drop)
            .map_err(|error| error.to_string())
    }

    /// Writes the recovery-point, log-start and high-watermark checkpoints.
    ///
    /// # Errors
    /// A storage error message.
    pub fn checkpoint(&self) -> Result<(), String> {
        self.logs.checkpoint().map_err(|error| error.to_string())
    }

    /// Clean shutdown: controlled shutdown with the controller (leaderships move away), stop
    /// the metadata quorum, flush everything, checkpoint, and leave the
    /// clean-shutdown marker so the next start skips recovery.
    ///
    /// # Errors
    /// A storage error message.
    pub fn shutdown(&self) -> Result<(), String> {
        if self.config.is_broker() && !self.quorum.controlled_shutdown(Duration::from_secs(5)) {
            tracing::warn!("controlled shutdown not confirmed by the controller; stopping anyway");
        }
        self.quorum.stop();
        self.logs.shutdown().map_err(|error| error.to_string())
    }
}

fn timed_out(names: &[TopicName]) -> CreateTopicsResponse {
    CreateTopicsResponse::default().with_topics(
        names
            .iter()
            .map(|name| {
                kafka_protocol::messages::create_topics_response::CreatableTopicResult::default()
                    .with_name(name.clone())
                    .with_num_partitions(-1)
                    .with_replication_factor(-1)
                    .with_error_code(ResponseError::RequestTimedOut.code())
            })
            .collect(),
    )
}

/// The log settings of a topic: broker settings overridden by topic configs.
fn broker_log_config(config: &Config, topic_configs: &BTreeMap<String, String>) -> LogConfig {
    let topic = |key: &str| {
        topic_configs
            .get(key)
            .and_then(|value| value.parse::<i64>().ok())
    };
    LogConfig {
        segment_bytes: topic("segment.bytes").unwrap_or(config.log_segment_bytes as i64) as usize,
        index_interval_bytes: topic("index.interval.bytes")
            .unwrap_or(config.log_index_interval_bytes as i64)
            as usize,
        flush_interval_messages: topic("flush.messages")
            .unwrap_or(config.log_flush_interval_messages as i64),
        flush_interval_ms: topic("flush.ms").or(config.log_flush_interval_ms.map(|ms| ms as i64)),
        max_message_bytes: topic("max.message.bytes").unwrap_or(config.message_max_bytes as i64)
            as usize,
        ..LogConfig::default()
    }
}

/// Milliseconds since the Unix epoch, the clock Kafka stamps into logs.
pub fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |elapsed| elapsed.as_millis() as i64)
}

/// Reads `meta.properties` (Kafka's identity file of a log dir) or writes a new one with a
/// fresh cluster id. Returns the cluster id.
fn load_or_create_meta_properties(data_dir: &Path, node_id: i32) -> Result<String, StartError> {
    let path = data_dir.join("meta.properties");
    match std::fs::read_to_string(&path) {
        Ok(text) => {
            let value = |key: &str| {
                text.lines()
                    .filter_map(|line| line.split_once('='))
                    .find(|(name, _)| name.trim() == key)
                    .map(|(_, value)| value.trim().to_owned())
            };
            let stored: i32 = value("node.id")
                .and_then(|id| id.parse().ok())
                .ok_or_else(|| {
                    StartError::Storage(format!("{}: no valid node.id", path.display()))
                })?;
            if stored != node_id {
                return Err(StartError::NodeIdMismatch {
                    path: path.display().to_string(),
                    stored,
                    configured: node_id,
                });
            }
            value("cluster.id")
                .ok_or_else(|| StartError::Storage(format!("{}: no cluster.id", path.display())))
        }
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => {
            let cluster_id = Uuid::new_v4().simple().to_string()[..22].to_owned();
            let text = format!("version=1\ncluster.id={cluster_id}\nnode.id={node_id}\n");
            std::fs::write(&path, text).map_err(|error| {
                StartError::Storage(format!("cannot write {}: {error}", path.display()))
            })?;
            Ok(cluster_id)
        }
        Err(error) => Err(StartError::Storage(format!(
            "cannot read {}: {error}",
            path.display()
        ))),
    }
}
