//! The group coordinator (Kafka's `GroupCoordinatorService` over `GroupCoordinatorShard`):
//! classic groups, KIP-848 consumer groups and committed offsets on the partitions of
//! `__consumer_offsets`, served through the [`CoordinatorRuntime`]. [`GroupCoordinator`]
//! (this file) is the router: it creates the topic on first use, routes a group id to its
//! partition ([`partition_for`]) and holds the parts below.
//!
//! | serves | pure core (no I/O, no clock) | tokio shell |
//! |---|---|---|
//! | classic members: JoinGroup, SyncGroup, Heartbeat, LeaveGroup; the session and rebalance clocks | [`classic`] (`classic/ops.rs`, `classic/types.rs`) | [`classic_members`] |
//! | consumer members (KIP-848): ConsumerGroupHeartbeat, their session and rebalance clocks | [`consumer_group`] | [`consumer_members`], its clocks in `consumer_members/clocks.rs` |
//! | offsets: OffsetCommit, OffsetFetch, TxnOffsetCommit and the markers that settle them | [`offsets`], [`txn_offsets`], the group [`view`] they fence against | [`offset_commits`] |
//! | admin: DeleteGroups, OffsetDelete | | [`admin`] |
//!
//! Shared: why a group rebalanced ([`cause`], one vocabulary for both protocols, logged as
//! `cause=<name>`), the records ([`record`], Kafka's format), one partition's replayed state
//! ([`shard`]) and the settings ([`settings`]).

pub mod admin;
pub mod cause;
pub mod classic;
pub mod classic_members;
pub mod consumer_group;
pub mod consumer_members;
pub mod offset_commits;
pub mod offsets;
pub mod record;
pub mod settings;
pub mod shard;
pub mod txn_offsets;
pub mod view;

use std::sync::Arc;
use std::time::Duration;

use kafka_protocol::ResponseError;

use crate::coordinator::CoordinatorRuntime;
use crate::coordinator::group::classic::Limits;
use crate::coordinator::group::classic_members::LiveGroups;
use crate::coordinator::group::shard::GroupShard;
use crate::coordinator::internal_topic::{self, CoordinatorAddress, InternalTopic, partition_for};
use crate::replica::ReplicaManager;
use crate::topics::TopicCreator;

pub use offset_commits::CommitPartition;
pub use settings::GroupSettings;

/// The internal topic of committed offsets and group metadata.
pub const TOPIC: &str = internal_topic::CONSUMER_OFFSETS;

/// How long a write waits to be replicated (Kafka's `offsets.commit.timeout.ms`, 5 s).
pub(crate) const WRITE_TIMEOUT: Duration = Duration::from_secs(5);

/// The group coordinator of one broker.
pub struct GroupCoordinator {
    runtime: Arc<CoordinatorRuntime<GroupShard>>,
    replicas: Arc<ReplicaManager>,
    topics: TopicCreator,
    settings: GroupSettings,
    limits: Limits,
    live: LiveGroups,
    clocks: consumer_members::clocks::Clocks,
}

impl std::fmt::Debug for GroupCoordinator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GroupCoordinator")
            .field("settings", &self.settings)
            .finish_non_exhaustive()
    }
}

impl GroupCoordinator {
    /// A coordinator over `replicas`; nothing runs until [`GroupCoordinator::run`].
    pub fn new(
        replicas: Arc<ReplicaManager>,
        topics: TopicCreator,
        settings: GroupSettings,
    ) -> GroupCoordinator {
        let runtime = Arc::new(CoordinatorRuntime::new(
            Arc::clone(&replicas),
            TOPIC,
            |_| GroupShard::default(),
        ));
        GroupCoordinator {
            runtime,
            replicas,
            topics,
            limits: settings.limits,
            settings,
            live: LiveGroups::default(),
            clocks: consumer_members::clocks::Clocks::default(),
        }
    }

    /// The runtime and the groups' clocks; returns when the node stops.
    pub async fn run(self: Arc<Self>) {
        let clocks = tokio::spawn(Arc::clone(&self).run_clocks());
        let consumer_clocks = tokio::spawn(Arc::clone(&self).run_consumer_clocks());
        Arc::clone(&self.runtime).run().await;
        clocks.abort();
        consumer_clocks.abort();
    }

    /// The settings.
    pub fn settings(&self) -> &GroupSettings {
        &self.settings
    }

    /// The `__consumer_offsets` partition of `group`.
    pub fn partition_of(&self, group: &str) -> i32 {
        partition_for(group, self.settings.partitions)
    }

    /// Creates `__consumer_offsets` when it does not exist yet, as Kafka's brokers do on the
    /// first FindCoordinator for a group. Kafka's topic is compacted; the node has no
    /// compaction yet (`cleanup.policy` accepts only `delete`), so it keeps every record,
    /// which a load replays in order all the same.
    ///
    /// # Errors
    /// `COORDINATOR_NOT_AVAILABLE` while the topic does not exist.
    pub async fn ensure_topic(&self) -> Result<(), ResponseError> {
        let configs = [
            ("segment.bytes", "104857600".to_owned()),
            ("compression.type", "uncompressed".to_owned()),
        ];
        let topic = InternalTopic {
            name: TOPIC,
            partitions: self.settings.partitions,
            replication_factor: self.settings.replication_factor,
            configs: &configs,
        };
        internal_topic::ensure(&self.replicas, &self.topics, &topic).await
    }

    /// The coordinator of `group`: the leader of its partition.
    ///
    /// # Errors
    /// `COORDINATOR_NOT_AVAILABLE` while the topic is created or the partition has no leader.
    pub async fn find(&self, group: &str) -> Result<CoordinatorAddress, ResponseError> {
        self.ensure_topic().await?;
        internal_topic::coordinator_of(&self.replicas, TOPIC, self.partition_of(group))
    }
}
