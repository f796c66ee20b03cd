//! The broker's shared state: configuration, cluster id, topics, and one [`Partition`] per
//! hosted topic-partition, wrapping its storage log.
//!
//! Handlers (under `handlers/`) only talk to this type. It is the seam where replication will
//! come in: today a node is the only replica of every partition, so the ISR is the node itself
//! and the high watermark is the log end offset as soon as an append returns; the ISR, high
//! watermark and `min.insync.replicas` checks are nevertheless made in the same places and
//! order as Kafka's `Partition.appendRecordsToLeader`, so the multi-node version changes the
//! state behind them, not the call sites.

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

use crate::config::Config;
use crate::topics::{
    TopicError, TopicInfo, TopicRegistry, validate_topic_config, validate_topic_name,
};

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
    /// Creating a log or saving the registry failed.
    #[error("storage error: {0}")]
    Storage(String),
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
    /// This node's id; the only replica, hence leader and whole ISR.
    node_id: i32,
    /// Bumped by the controller on every leadership change; 0 until one exists.
    leader_epoch: i32,
    /// The topic's `min.insync.replicas` (topic config, else the broker's).
    min_insync_replicas: i32,
    /// Ticks on every append, to wake long-polling fetches.
    appends: watch::Sender<u64>,
}

impl Partition {
    /// The leader's broker id.
    pub fn leader(&self) -> i32 {
        self.node_id
    }

    /// The current leader epoch.
    pub fn leader_epoch(&self) -> i32 {
        self.leader_epoch
    }

    /// The assigned replicas.
    pub fn replicas(&self) -> Vec<i32> {
        vec![self.node_id]
    }

    /// The in-sync replicas.
    pub fn isr(&self) -> Vec<i32> {
        vec![self.node_id]
    }

    /// Checks a client's `current_leader_epoch` (-1 means "do not check"), as KIP-320 does:
    /// an older epoch is fenced, a newer one means this broker has not caught up yet.
    ///
    /// # Errors
    /// `FENCED_LEADER_EPOCH` or `UNKNOWN_LEADER_EPOCH`.
    pub fn check_leader_epoch(&self, requested: i32) -> Result<(), ResponseError> {
        match requested {
            -1 => Ok(()),
            epoch if epoch < self.leader_epoch => Err(ResponseError::FencedLeaderEpoch),
            epoch if epoch > self.leader_epoch => Err(ResponseError::UnknownLeaderEpoch),
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

    /// Moves the high watermark to the smallest log end offset in the ISR. This node is the
    /// whole ISR, so that is its own log end offset.
    fn maybe_advance_high_watermark(&self) {
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
        let isr_size = self.isr().len() as i32;
        let effective_min_isr = self.min_insync_replicas.min(self.replicas().len() as i32);
        if acks == Acks::All && isr_size < effective_min_isr {
            return Err(ResponseError::NotEnoughReplicas);
        }
        let partition = Arc::clone(&self);
        // fsync can happen inside an append (flush.messages, segment roll): keep it off the
        // async workers.
        let appended = tokio::task::spawn_blocking(move || {
            let mut log = partition.lock();
            let info = log
                .append_as_leader(&records, LeaderEpoch(partition.leader_epoch), now_ms())
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
        // With replication, acks=all parks here until the high watermark passes the batch or
        // `timeout` expires (REQUEST_TIMED_OUT). A single replica commits on append.
        let _ = timeout;
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
    topics: Mutex<TopicRegistry>,
    partitions: RwLock<HashMap<(String, i32), Arc<Partition>>>,
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
}

impl Broker {
    /// Opens the data directory (recovering logs after an unclean shutdown) and the topic
    /// registry.
    ///
    /// # Errors
    /// [`StartError`] when the data directory cannot be used.
    pub fn open(config: Config) -> Result<Broker, StartError> {
        let data_dir = config.data_dir().to_owned();
        std::fs::create_dir_all(&data_dir).map_err(|error| {
            StartError::Storage(format!("cannot create {}: {error}", data_dir.display()))
        })?;
        let cluster_id = load_or_create_meta_properties(&data_dir, config.node_id)?;
        let logs = LogManager::open(&data_dir, broker_log_config(&config, &BTreeMap::new()))
            .map_err(|error| StartError::Storage(error.to_string()))?;
        let topics = TopicRegistry::open(&data_dir)
            .map_err(|error| StartError::Storage(error.to_string()))?;
        let (appends, _) = watch::channel(0);
        let broker = Broker {
            cluster_id,
            logs,
            topics: Mutex::new(topics),
            partitions: RwLock::new(HashMap::new()),
            appends,
            config,
        };
        let known: Vec<TopicInfo> = broker.topics();
        for topic in &known {
            broker
                .open_partitions(topic)
                .map_err(|error| StartError::Storage(error.to_string()))?;
        }
        Ok(broker)
    }

    /// The node's configuration.
    pub fn config(&self) -> &Config {
        &self.config
    }

    /// The cluster id from `meta.properties`.
    pub fn cluster_id(&self) -> &str {
        &self.cluster_id
    }

    /// A receiver that changes on every append, for long-polling fetches.
    pub fn subscribe_appends(&self) -> watch::Receiver<u64> {
        self.appends.subscribe()
    }

    fn registry(&self) -> MutexGuard<'_, TopicRegistry> {
        self.topics
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Every topic.
    pub fn topics(&self) -> Vec<TopicInfo> {
        self.registry().iter().cloned().collect()
    }

    /// The topic named `name`.
    pub fn topic_by_name(&self, name: &str) -> Option<TopicInfo> {
        self.registry().by_name(name).cloned()
    }

    /// The topic with id `id`.
    pub fn topic_by_id(&self, id: Uuid) -> Option<TopicInfo> {
        self.registry().by_id(id).cloned()
    }

    /// The partition `index` of `topic`, if this node hosts it.
    pub fn partition(&self, topic: &str, index: i32) -> Option<Arc<Partition>> {
        let partitions = self
            .partitions
            .read()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        partitions.get(&(topic.to_owned(), index)).cloned()
    }

    /// Checks a topic creation without performing it (CreateTopics `validate_only`).
    ///
    /// # Errors
    /// [`CreateTopicError`] naming the first problem.
    pub fn validate_topic(
        &self,
        name: &str,
        partitions: Option<i32>,
        replication_factor: Option<i16>,
        configs: &[(String, String)],
    ) -> Result<TopicInfo, CreateTopicError> {
        validate_topic_name(name).map_err(CreateTopicError::InvalidName)?;
        if self.registry().by_name(name).is_some() {
            return Err(CreateTopicError::AlreadyExists);
        }
        let partitions = partitions.unwrap_or(self.config.num_partitions);
        if partitions < 1 {
            return Err(CreateTopicError::InvalidPartitions {
                requested: partitions,
            });
        }
        let replication_factor =
            replication_factor.unwrap_or(self.config.default_replication_factor);
        let brokers = 1;
        if !(1..=brokers).contains(&replication_factor) {
            return Err(CreateTopicError::InvalidReplicationFactor {
                requested: replication_factor,
                brokers,
            });
        }
        let mut topic_configs = BTreeMap::new();
        for (key, value) in configs {
            validate_topic_config(key, value).map_err(CreateTopicError::InvalidConfig)?;
            topic_configs.insert(key.clone(), value.clone());
        }
        Ok(TopicInfo {
            name: name.to_owned(),
            id: Uuid::new_v4(),
            partitions,
            replication_factor,
            configs: topic_configs,
        })
    }

    /// Creates a topic: its logs first, then the registry entry, which is the commit point
    /// (logs left by a crash in between are picked up again by the next creation).
    ///
    /// # Errors
    /// [`CreateTopicError`].
    pub fn create_topic(
        &self,
        name: &str,
        partitions: Option<i32>,
        replication_factor: Option<i16>,
        configs: &[(String, String)],
    ) -> Result<TopicInfo, CreateTopicError> {
        // One creation at a time: the registry lock serialises the check and the insert.
        let mut registry = self.registry();
        if registry.by_name(name).is_some() {
            return Err(CreateTopicError::AlreadyExists);
        }
        drop(registry);
        let topic = self.validate_topic(name, partitions, replication_factor, configs)?;
        registry = self.registry();
        if registry.by_name(name).is_some() {
            return Err(CreateTopicError::AlreadyExists);
        }
        self.open_partitions(&topic)?;
        registry
            .insert(topic.clone())
            .map_err(|error| CreateTopicError::Storage(error.to_string()))?;
        tracing::info!(topic = %topic.name, partitions = topic.partitions, "created topic");
        Ok(topic)
    }

    /// Opens (creating when missing) the log of every partition of `topic`.
    fn open_partitions(&self, topic: &TopicInfo) -> Result<(), CreateTopicError> {
        let log_config = broker_log_config(&self.config, &topic.configs);
        let min_insync_replicas = topic
            .configs
            .get("min.insync.replicas")
            .and_then(|value| value.parse().ok())
            .unwrap_or(self.config.min_insync_replicas);
        let mut opened = Vec::new();
        {
            let logs = &self.logs;
            for index in 0..topic.partitions {
                let topic_partition = TopicPartition::new(topic.name.clone(), index);
                let log = match logs.log(&topic_partition) {
                    Some(log) => log,
                    None => logs
                        .create_log(topic_partition.clone(), log_config.clone())
                        .map_err(|error| CreateTopicError::Storage(error.to_string()))?,
                };
                let partition = Partition {
                    topic_partition,
                    log,
                    node_id: self.config.node_id,
                    leader_epoch: 0,
                    min_insync_replicas,
                    appends: self.appends.clone(),
                };
                // Becoming leader recomputes the high watermark from the ISR, as Kafka's
                // `makeLeader` does: the checkpointed value may be up to a minute stale.
                partition.maybe_advance_high_watermark();
                opened.push(Arc::new(partition));
            }
        }
        let mut partitions = self
            .partitions
            .write()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        for partition in opened {
            let key = (
                partition.topic_partition.topic.clone(),
                partition.topic_partition.partition,
            );
            partitions.insert(key, partition);
        }
        Ok(())
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

    /// Clean shutdown: flush everything, checkpoint, and leave the clean-shutdown marker so
    /// the next start skips recovery.
    ///
    /// # Errors
    /// A storage error message.
    pub fn shutdown(&self) -> Result<(), String> {
        self.logs.shutdown().map_err(|error| error.to_string())
    }
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
