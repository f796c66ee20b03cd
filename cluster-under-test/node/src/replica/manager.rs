//! [`ReplicaManager`]: the partitions this broker hosts (those whose replicas include it), their
//! logs, and the application of the metadata image to them (Kafka's `ReplicaManager`).
//!
//! The image is applied explicitly, by [`ReplicaManager::apply_image`], when it changes (the
//! replication task calls it on every new image, topic creation once its topics are visible):
//! that opens the logs of new partitions and hands each its leader, epochs and ISR. A lookup
//! ([`ReplicaManager::partition`]) only reads the map; it never opens a log nor applies state.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, RwLock};

use kafka_protocol::ResponseError;
use logjam_storage::{LogConfig, LogManager, TimestampType, TopicPartition};
use tokio::sync::watch;
use uuid::Uuid;

use crate::clock::now_ms;
use crate::config::Config;
use crate::metadata::{BrokerId, MetadataImage, PartitionState, TopicImage};
use crate::replica::partition::{IsrChange, Partition};
use crate::replica::txn_verify::TxnVerifier;
use crate::topics::{CreateTopicError, TopicInfo};

/// The queue of ISR changes from partitions to the replication task.
pub type IsrChangeReceiver = tokio::sync::mpsc::UnboundedReceiver<(Arc<Partition>, IsrChange)>;

/// The hosted partitions and their logs.
#[derive(Debug)]
pub struct ReplicaManager {
    config: Config,
    logs: LogManager,
    image: watch::Receiver<Arc<MetadataImage>>,
    partitions: RwLock<HashMap<(String, i32), Arc<Partition>>>,
    /// Serialises image application (and so log creation): an older image can never be
    /// applied after a newer one, and no log is created twice.
    applying: Mutex<()>,
    appends: watch::Sender<u64>,
    /// ISR changes for the replication task to send (see `replica/alter_partition.rs`).
    isr_changes: tokio::sync::mpsc::UnboundedSender<(Arc<Partition>, IsrChange)>,
    /// The receiving end, until the replication task takes it.
    isr_change_receiver: Mutex<Option<IsrChangeReceiver>>,
    /// Transactional produces' check with their coordinator (KIP-890 part 1).
    txn_verifier: TxnVerifier,
}

impl ReplicaManager {
    /// A manager over `logs`, reading the committed image from `image`.
    pub fn new(
        config: Config,
        logs: LogManager,
        image: watch::Receiver<Arc<MetadataImage>>,
    ) -> ReplicaManager {
        let (appends, _) = watch::channel(0);
        let (isr_changes, isr_change_receiver) = tokio::sync::mpsc::unbounded_channel();
        ReplicaManager {
            txn_verifier: TxnVerifier::new(
                config.transaction_version,
                config.transaction_partition_verification_enable,
                config.socket_request_max_bytes,
            ),
            config,
            logs,
            image,
            partitions: RwLock::new(HashMap::new()),
            applying: Mutex::new(()),
            appends,
            isr_changes,
            isr_change_receiver: Mutex::new(Some(isr_change_receiver)),
        }
    }

    /// The check of transactional produces with their coordinator.
    pub fn txn_verifier(&self) -> &TxnVerifier {
        &self.txn_verifier
    }

    /// The node's configuration.
    pub fn config(&self) -> &Config {
        &self.config
    }

    /// This node's id.
    pub fn node_id(&self) -> BrokerId {
        BrokerId(self.config.node_id)
    }

    /// The committed metadata image this broker has replayed.
    pub fn image(&self) -> Arc<MetadataImage> {
        Arc::clone(&self.image.borrow())
    }

    /// A receiver that changes whenever the committed image does.
    pub fn subscribe_image(&self) -> watch::Receiver<Arc<MetadataImage>> {
        self.image.clone()
    }

    /// `replica.lag.time.max.ms` (Kafka's default 30000).
    pub fn replica_lag_time_max_ms(&self) -> i64 {
        self.config.int("replica.lag.time.max.ms")
    }

    /// Queues an ISR change for the replication task to send to the controller.
    pub fn submit_isr_change(&self, partition: Arc<Partition>, change: IsrChange) {
        if let Err(error) = self.isr_changes.send((Arc::clone(&partition), change)) {
            partition.isr_change_failed(&error.0.1);
        }
    }

    /// The receiving end of [`ReplicaManager::submit_isr_change`], taken once by the
    /// replication task.
    pub fn take_isr_changes(&self) -> Option<IsrChangeReceiver> {
        self.isr_change_receiver
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .take()
    }

    /// Every hosted partition opened so far.
    pub fn hosted_partitions(&self) -> Vec<Arc<Partition>> {
        self.partitions
            .read()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .values()
            .cloned()
            .collect()
    }

    /// A receiver that changes on every append and state change, for long-polling fetches
    /// and parked produces.
    pub fn subscribe_appends(&self) -> watch::Receiver<u64> {
        self.appends.subscribe()
    }

    /// The topic named `name`.
    pub fn topic_by_name(&self, name: &str) -> Option<TopicInfo> {
        self.image().topics.get(name).map(TopicInfo::from_image)
    }

    /// The topic with id `id`.
    pub fn topic_by_id(&self, id: Uuid) -> Option<TopicInfo> {
        self.image().topic_by_id(id).map(TopicInfo::from_image)
    }

    /// The error for a partition this broker cannot serve: `UNKNOWN_TOPIC_OR_PARTITION` when
    /// it does not exist, else `NOT_LEADER_OR_FOLLOWER` (it is hosted elsewhere, or this
    /// broker has not applied the image that gives it the partition yet).
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

    /// The hosted partition `index` of `topic`, as the last applied image left it.
    pub fn partition(&self, topic: &str, index: i32) -> Option<Arc<Partition>> {
        self.partitions
            .read()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .get(&(topic.to_owned(), index))
            .cloned()
    }

    /// The partition `topic`/`index` when this broker leads it in `current_leader_epoch` (-1:
    /// any), as ListOffsets and OffsetForLeaderEpoch ask: otherwise the error to answer
    /// (unknown topic or partition, `NOT_LEADER_OR_FOLLOWER`, or a fenced or unknown epoch).
    ///
    /// # Errors
    /// That error.
    pub fn leader_partition(
        &self,
        topic: &str,
        index: i32,
        current_leader_epoch: i32,
    ) -> Result<Arc<Partition>, ResponseError> {
        let partition = self
            .partition(topic, index)
            .ok_or_else(|| self.missing_partition_error(topic, index))?;
        partition.check_leader_epoch(current_leader_epoch)?;
        Ok(partition)
    }

    /// Applies the latest committed image: opens the log of every partition that names this
    /// broker as a replica and is not open yet, and gives every hosted partition its leader,
    /// epochs, replicas and ISR (becoming leader assigns the epoch start and recomputes the
    /// high watermark, as Kafka's `makeLeader` does). Returns the hosted partitions of the
    /// image, with their states.
    pub fn apply_image(&self) -> Vec<(Arc<Partition>, PartitionState)> {
        let _applying = self
            .applying
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        let image = self.image();
        let me = self.node_id();
        let mut hosted = Vec::new();
        let mut opened = false;
        for topic in image.topics.values() {
            for (index, state) in &topic.partitions {
                if !state.replicas.contains(&me) {
                    continue;
                }
                let partition = match self.partition(&topic.name, *index) {
                    Some(partition) => partition,
                    None => match self.open_partition(topic, *index, state) {
                        Ok(partition) => {
                            opened = true;
                            partition
                        }
                        Err(error) => {
                            tracing::error!(topic = %topic.name, index, %error,
                                "cannot open the partition log");
                            continue;
                        }
                    },
                };
                if partition.apply_state(state) {
                    // Becoming leader recomputes the high watermark from the ISR: the
                    // checkpointed value may be up to a minute stale.
                    partition.maybe_advance_high_watermark();
                    partition.notify();
                }
                hosted.push((partition, state.clone()));
            }
        }
        if opened {
            // A new partition is a state change too: whoever watches leadership (the
            // coordinator runtime) learns of it now, not at the next append.
            self.appends.send_modify(|count| *count += 1);
        }
        hosted
    }

    fn open_partition(
        &self,
        topic: &TopicImage,
        index: i32,
        state: &PartitionState,
    ) -> Result<Arc<Partition>, CreateTopicError> {
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
        let partition = Arc::new(Partition::new(
            topic_partition,
            log,
            self.config.node_id,
            state,
            min_insync_replicas,
            self.appends.clone(),
            self.replica_lag_time_max_ms(),
            self.image.clone(),
            self.config.canaries,
        ));
        partition.apply_state(state);
        partition.maybe_advance_high_watermark();
        self.partitions
            .write()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .insert((topic.name.clone(), index), Arc::clone(&partition));
        Ok(partition)
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

    /// Flushes and checkpoints everything and leaves the clean-shutdown marker holding
    /// `broker_epoch` (KIP-966).
    ///
    /// # Errors
    /// A storage error message.
    pub fn shutdown(&self, broker_epoch: i64) -> Result<(), String> {
        self.logs
            .shutdown_with_broker_epoch(broker_epoch)
            .map_err(|error| error.to_string())
    }
}

/// The log settings of a topic: broker settings overridden by topic configs.
pub fn broker_log_config(config: &Config, topic_configs: &BTreeMap<String, String>) -> LogConfig {
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
        // The topic's override, else the broker's `log.message.timestamp.type`.
        message_timestamp_type: match topic_configs
            .get("message.timestamp.type")
            .map(String::as_str)
            .or_else(|| Some(config.string("log.message.timestamp.type")))
        {
            Some("LogAppendTime") => TimestampType::LogAppendTime,
            _ => TimestampType::CreateTime,
        },
        ..LogConfig::default()
    }
}
