//! [`Broker`]: the node's lifecycle and the handles its parts share. Opening it reads
//! `meta.properties`, opens the logs (recovering after an unclean shutdown), starts the metadata
//! quorum ([`Quorum`], whose committed [`crate::metadata::MetadataImage`] is the source of truth
//! for topics, replicas, leaders, epochs and ISRs) and, for the broker role, waits until the
//! controller has registered and unfenced this broker. Shutting it down is controlled shutdown,
//! then the final flush and the clean-shutdown marker.
//!
//! Its parts, each a narrow handle given to the APIs that need it: the [`ReplicaManager`]
//! (hosted partitions and their logs), the [`TopicCreator`] (topic creation through the active
//! controller), the [`ProducerIdManager`] (InitProducerId's blocks of ids) and the
//! [`TxnCoordinator`] (the transaction coordinator, on `__transaction_state`) and the
//! [`GroupCoordinator`] (the group coordinator, on `__consumer_offsets`).

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use logjam_storage::LogManager;
use uuid::Uuid;

use crate::config::Config;
use crate::controller::{
    BrokerLifecycleSettings, ControllerConfig, Quorum, QuorumSettings, QuorumStartError,
};
use crate::coordinator::ProducerIdManager;
use crate::coordinator::group::{GroupCoordinator, GroupSettings};
use crate::coordinator::txn::{TxnCoordinator, TxnSettings};
use crate::metadata::MetadataImage;
use crate::replica::ReplicaManager;
use crate::replica::manager::broker_log_config;
use crate::topics::{CreateTopicError, TopicInfo};

pub use crate::topics::TopicCreator;

/// The node: configuration, identity, the metadata quorum and the handles built on it.
#[derive(Debug)]
pub struct Broker {
    config: Config,
    cluster_id: String,
    quorum: Arc<Quorum>,
    replicas: Arc<ReplicaManager>,
    topics: TopicCreator,
    producer_ids: Arc<ProducerIdManager>,
    txn: Arc<TxnCoordinator>,
    groups: Arc<GroupCoordinator>,
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
        // KIP-966: the epoch a clean shutdown left in the marker (which `open` has deleted, so
        // a crash from here on is detected), or -1 after a crash.
        let previous_broker_epoch = logs.clean_shutdown_broker_epoch().unwrap_or(-1);
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
                previous_broker_epoch,
            }),
            max_idle_interval_ms: config.int("metadata.max.idle.interval.ms") as u64,
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
        let quorum = Arc::new(quorum);
        let replicas = Arc::new(ReplicaManager::new(
            config.clone(),
            logs,
            quorum.subscribe_image(),
        ));
        // Become leader or follower of every hosted partition before serving, as a Kafka
        // broker publishes the metadata image before it opens its listeners; later images are
        // applied by the replication task as they arrive.
        if config.is_broker() {
            replicas.apply_image();
        }
        let topics = TopicCreator::new(Arc::clone(&quorum), Arc::clone(&replicas));
        let producer_ids = Arc::new(ProducerIdManager::new(config.node_id, Arc::clone(&quorum)));
        let txn = Arc::new(TxnCoordinator::new(
            Arc::clone(&replicas),
            topics.clone(),
            Arc::clone(&producer_ids),
            TxnSettings::from_config(&config),
        ));
        let groups = Arc::new(GroupCoordinator::new(
            Arc::clone(&replicas),
            topics.clone(),
            GroupSettings::from_config(&config),
        ));
        Ok(Broker {
            groups,
            topics,
            producer_ids,
            txn,
            cluster_id,
            quorum,
            replicas,
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

    /// The metadata quorum, shared with the tasks that outlive a borrow of the broker.
    pub fn shared_quorum(&self) -> Arc<Quorum> {
        Arc::clone(&self.quorum)
    }

    /// The committed metadata image this broker has replayed.
    pub fn image(&self) -> Arc<MetadataImage> {
        self.quorum.image()
    }

    /// The hosted partitions.
    pub fn replicas(&self) -> &Arc<ReplicaManager> {
        &self.replicas
    }

    /// Topic creation through the active controller.
    pub fn topic_creator(&self) -> &TopicCreator {
        &self.topics
    }

    /// InitProducerId's producer ids.
    pub fn producer_ids(&self) -> &ProducerIdManager {
        &self.producer_ids
    }

    /// The transaction coordinator.
    pub fn txn(&self) -> &Arc<TxnCoordinator> {
        &self.txn
    }

    /// The group coordinator.
    pub fn groups(&self) -> &Arc<GroupCoordinator> {
        &self.groups
    }

    /// Every topic.
    pub fn topics(&self) -> Vec<TopicInfo> {
        self.image()
            .topics
            .values()
            .map(TopicInfo::from_image)
            .collect()
    }

    /// The topic named `name`.
    pub fn topic_by_name(&self, name: &str) -> Option<TopicInfo> {
        self.replicas.topic_by_name(name)
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
        self.topics
            .create_topic(name, partitions, replication_factor, configs)
    }

    /// Clean shutdown: controlled shutdown with the controller (leaderships move away), stop
    /// the metadata quorum, flush everything, checkpoint, and leave the clean-shutdown marker
    /// holding this incarnation's broker epoch, so the next start skips recovery and its
    /// registration proves the shutdown was clean (KIP-966).
    ///
    /// # Errors
    /// A storage error message.
    pub fn shutdown(&self) -> Result<(), String> {
        if self.config.is_broker() && !self.quorum.controlled_shutdown(Duration::from_secs(5)) {
            tracing::warn!("controlled shutdown not confirmed by the controller; stopping anyway");
        }
        let broker_epoch = self.quorum.status().broker_epoch.unwrap_or(-1);
        self.quorum.stop();
        self.replicas.shutdown(broker_epoch)
    }
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
