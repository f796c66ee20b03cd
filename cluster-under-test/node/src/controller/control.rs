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
//!
//! Layout: this file holds the controller's state and configuration; `control/cluster.rs` the
//! broker side (registration, heartbeats, fencing, unfencing); `control/replication.rs` topics
//! and partitions (creation, placement, AlterPartition); `control/partitions.rs`
//! CreatePartitions; `control/producer_ids.rs` producer-id blocks.

mod cluster;
mod partitions;
mod producer_ids;
mod replication;
#[cfg(test)]
mod tests;

use std::collections::BTreeMap;

use crate::controller::election::ElectionPolicy;
use crate::metadata::{BrokerId, MetadataImage, MetadataRecord};

pub use producer_ids::PRODUCER_ID_BLOCK_SIZE;
pub use replication::{place_replicas, validate_alter_partition};

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
}
