//! The group coordinator, classic protocol (Kafka's `GroupCoordinatorService` over
//! `GroupCoordinatorShard`): committed offsets and group metadata on the partitions of
//! `__consumer_offsets`, served through the [`CoordinatorRuntime`].
//!
//! - [`record`]: Kafka's `OffsetCommit*`/`GroupMetadata*` record format; [`shard`]: the
//!   replayed state of one partition; [`offsets`]: OffsetCommit's fencing and OffsetFetch's
//!   answer, pure and table-tested; [`txn_offsets`]: TxnOffsetCommit's pending offsets
//!   (committed or dropped by the transaction's marker) and KIP-447 fencing, pure.
//! - [`GroupCoordinator`] (this file): the thin shell. It creates `__consumer_offsets` on
//!   first use (`offsets.topic.num.partitions`, `offsets.topic.replication.factor`, once that
//!   many brokers are live), routes a group id to its partition (`abs(javaHashCode(id)) %
//!   partitions`, as Kafka's `partitionFor`), and writes through the runtime, which answers
//!   only once the records are replicated.

pub mod admin;
pub mod classic;
pub mod clocks;
pub mod consumer;
pub mod members;
pub mod offsets;
pub mod record;
pub mod shard;
pub mod txn_offsets;

use std::sync::Arc;
use std::time::Duration;

use kafka_protocol::ResponseError;

use crate::broker::TopicCreator;
use crate::canary::Canary;
use crate::config::Config;
use crate::coordinator::CoordinatorRuntime;
use crate::coordinator::consumer_group;
use crate::coordinator::group::classic::Limits;
use crate::coordinator::group::members::LiveGroups;
use crate::coordinator::group::offsets::FetchedOffset;
use crate::coordinator::group::record::OffsetValue;
use crate::coordinator::group::shard::{GroupShard, offset_record};
use crate::coordinator::group::txn_offsets::{CommitMember, GroupState, GroupView};
use crate::coordinator::internal_topic::{self, CoordinatorAddress, InternalTopic};
use crate::coordinator::runtime::{MarkerWrite, WriteAs};
use crate::coordinator::txn::{append_error, partition_for};
use crate::replica::{ReplicaManager, Verified, now_ms};

/// The internal topic of committed offsets and group metadata.
pub const TOPIC: &str = "__consumer_offsets";

/// How long a write waits to be replicated (Kafka's `offsets.commit.timeout.ms`, 5 s).
pub(crate) const WRITE_TIMEOUT: Duration = Duration::from_secs(5);

/// The settings of the new consumer protocol (`group.consumer.*`) in `raw`, as the node's
/// configuration holds them (checked with [`consumer_group::Config::validate`] at startup).
pub fn consumer_config(raw: &std::collections::BTreeMap<String, String>) -> consumer_group::Config {
    let defaults = consumer_group::Config::default();
    let int = |key: &str, default: i32| {
        raw.get(key)
            .and_then(|value| value.trim().parse::<i32>().ok())
            .unwrap_or(default)
    };
    consumer_group::Config {
        session_timeout_ms: int(
            "group.consumer.session.timeout.ms",
            defaults.session_timeout_ms,
        ),
        min_session_timeout_ms: int(
            "group.consumer.min.session.timeout.ms",
            defaults.min_session_timeout_ms,
        ),
        max_session_timeout_ms: int(
            "group.consumer.max.session.timeout.ms",
            defaults.max_session_timeout_ms,
        ),
        heartbeat_interval_ms: int(
            "group.consumer.heartbeat.interval.ms",
            defaults.heartbeat_interval_ms,
        ),
        min_heartbeat_interval_ms: int(
            "group.consumer.min.heartbeat.interval.ms",
            defaults.min_heartbeat_interval_ms,
        ),
        max_heartbeat_interval_ms: int(
            "group.consumer.max.heartbeat.interval.ms",
            defaults.max_heartbeat_interval_ms,
        ),
        assignors: raw
            .get("group.consumer.assignors")
            .map(|list| {
                list.split(',')
                    .map(|name| name.trim().to_owned())
                    .filter(|name| !name.is_empty())
                    .collect()
            })
            .unwrap_or(defaults.assignors),
        max_size: raw
            .get("group.consumer.max.size")
            .and_then(|value| value.trim().parse::<usize>().ok())
            .unwrap_or(defaults.max_size),
    }
}

/// The node settings of the group coordinator.
#[derive(Debug, Clone)]
pub struct GroupSettings {
    /// `offsets.topic.num.partitions`.
    pub partitions: i32,
    /// `offsets.topic.replication.factor` (default 3; FindCoordinator is
    /// `COORDINATOR_NOT_AVAILABLE` until that many brokers are live).
    pub replication_factor: i16,
    /// The `skip-offset-fence` canary.
    pub skip_offset_fence: bool,
    /// The `double-assign` canary.
    pub double_assign: bool,
    /// `group.min.session.timeout.ms`, `group.max.session.timeout.ms`,
    /// `group.initial.rebalance.delay.ms`.
    pub limits: Limits,
    /// The new consumer protocol's settings (`group.consumer.*`).
    pub consumer: consumer_group::Config,
}

impl GroupSettings {
    /// The settings of `config`.
    pub fn from_config(config: &Config) -> GroupSettings {
        let int = |key: &str, default: i64| {
            config
                .raw
                .get(key)
                .and_then(|value| value.trim().parse::<i64>().ok())
                .unwrap_or(default)
        };
        GroupSettings {
            partitions: int("offsets.topic.num.partitions", 50).clamp(1, 10_000) as i32,
            replication_factor: int("offsets.topic.replication.factor", 3)
                .clamp(1, i64::from(i16::MAX)) as i16,
            skip_offset_fence: config.canaries.is_on(Canary::SkipOffsetFence),
            double_assign: config.canaries.is_on(Canary::DoubleAssign),
            limits: Limits {
                min_session_timeout_ms: int("group.min.session.timeout.ms", 6_000) as i32,
                max_session_timeout_ms: int("group.max.session.timeout.ms", 1_800_000) as i32,
                initial_rebalance_delay_ms: int("group.initial.rebalance.delay.ms", 3_000).max(0)
                    as i32,
            },
            consumer: consumer_config(&config.raw),
        }
    }
}

/// One partition of an OffsetCommit, as the coordinator needs it.
#[derive(Debug, Clone)]
pub struct CommitPartition {
    /// The topic.
    pub topic: String,
    /// The partition.
    pub partition: i32,
    /// The offset.
    pub offset: i64,
    /// Its leader epoch.
    pub leader_epoch: i32,
    /// The client's metadata.
    pub metadata: Option<String>,
}

/// The group coordinator of one broker.
pub struct GroupCoordinator {
    runtime: Arc<CoordinatorRuntime<GroupShard>>,
    replicas: Arc<ReplicaManager>,
    topics: TopicCreator,
    settings: GroupSettings,
    limits: Limits,
    live: LiveGroups,
    clocks: clocks::Clocks,
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
            clocks: clocks::Clocks::default(),
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

    /// What the fencing of a commit sees of `group` when no live group serves it: a group
    /// with written metadata or offsets and no live members is Empty at its generation.
    fn view(shard: &GroupShard, group: &str) -> Option<GroupView> {
        let entry = shard.get(group)?;
        Some(GroupView {
            state: GroupState::Empty,
            generation_id: entry.metadata.as_ref().map_or(0, |meta| meta.generation),
            members: Vec::new(),
            static_members: Default::default(),
        })
    }

    /// The live group a commit to `group` is fenced against, if any: the served group, or a
    /// group written with members but not served yet in this epoch (a new coordinator),
    /// served now so the commit is fenced against its members.
    ///
    /// # Errors
    /// The runtime's (`COORDINATOR_LOAD_IN_PROGRESS` while this leader's high watermark is
    /// below what its load read: taking it for "no metadata" would fence a live member as
    /// UNKNOWN_MEMBER_ID, where Kafka's client just retries the load error).
    fn fence_view(&self, group: &str, index: i32) -> Result<Option<GroupView>, ResponseError> {
        if let Some(view) = self.live_view(group) {
            return Ok(Some(view));
        }
        let written = self.runtime.read(index, |shard| {
            shard.get(group).is_some_and(|e| e.metadata.is_some())
        })?;
        if written {
            Ok(Some(self.with_group(group, |live, _| live.group.view())?))
        } else {
            Ok(None)
        }
    }

    /// OffsetCommit: checks `member` against the group and writes the offsets of
    /// `partitions` (those without a per-partition error), answering once replicated.
    ///
    /// # Errors
    /// The group-level error of every partition: [`offsets::validate_commit`]'s, the
    /// runtime's (`NOT_COORDINATOR`, `COORDINATOR_LOAD_IN_PROGRESS`) and the write's as
    /// [`append_error`] maps them.
    pub async fn commit_offsets(
        &self,
        group: &str,
        member: &CommitMember<'_>,
        version: i16,
        partitions: &[CommitPartition],
    ) -> Result<(), ResponseError> {
        let index = self.partition_of(group);
        let now = now_ms();
        let skip_fence = self.settings.skip_offset_fence;
        let live = self.fence_view(group, index)?;
        self.runtime
            .write(index, WRITE_TIMEOUT, |shard| {
                if let Some(consumer) = shard.consumer().get(group) {
                    // A KIP-848 group: the member commits at its current epoch.
                    if !skip_fence {
                        consumer.validate_offset_commit(
                            member.member_id,
                            member.generation_id,
                            false,
                            version,
                        )?;
                    }
                } else {
                    let view = live.clone().or_else(|| Self::view(shard, group));
                    offsets::validate_commit(view.as_ref(), member, version, skip_fence)?;
                }
                let records = partitions
                    .iter()
                    .map(|p| {
                        offset_record(
                            group,
                            &p.topic,
                            p.partition,
                            &OffsetValue {
                                offset: p.offset,
                                leader_epoch: p.leader_epoch,
                                metadata: p.metadata.clone().unwrap_or_default(),
                                commit_timestamp: now,
                            },
                        )
                    })
                    .collect();
                Ok((records, ()))
            })
            .await
            .map_err(append_error)
    }

    /// OffsetFetch of one group: the committed offsets of `topics` (all when `None`). With
    /// `require_stable` it answers only once every write appended before it is committed.
    ///
    /// # Errors
    /// `NOT_COORDINATOR`, `COORDINATOR_LOAD_IN_PROGRESS`.
    pub async fn fetch_offsets(
        &self,
        group: &str,
        topics: Option<&[(String, Vec<i32>)]>,
        require_stable: bool,
    ) -> Result<Vec<(String, Vec<FetchedOffset>)>, ResponseError> {
        let index = self.partition_of(group);
        if require_stable {
            return self
                .runtime
                .write(index, WRITE_TIMEOUT, |shard| {
                    let mut fetched = offsets::fetch(shard.get(group), topics);
                    offsets::mark_unstable(&mut fetched, group, shard.pending_txn());
                    Ok((vec![], fetched))
                })
                .await
                .map_err(append_error);
        }
        self.runtime
            .read(index, |shard| offsets::fetch(shard.get(group), topics))
    }

    /// TxnOffsetCommit: checks `member` against the group (KIP-447, [`check_member`]) and
    /// writes the offsets of `partitions` to the group's partition as one batch of the
    /// producer's transaction, answering once replicated. They stay pending until the
    /// transaction's marker reaches the partition ([`GroupCoordinator::complete_transaction`]).
    /// `verify` is the transaction coordinator's check that the partition is in the
    /// transaction (KIP-890), made once a verification guard is taken, only when the
    /// producer has no transaction open on the partition yet.
    ///
    /// # Errors
    /// The group-level error of every partition: `NOT_COORDINATOR`,
    /// `COORDINATOR_LOAD_IN_PROGRESS`, `COORDINATOR_NOT_AVAILABLE`, KIP-447's,
    /// `INVALID_PRODUCER_EPOCH`, `INVALID_TXN_STATE` and the verification's.
    ///
    /// [`check_member`]: txn_offsets::check_member
    pub async fn commit_txn_offsets<V>(
        &self,
        group: &str,
        producer: (i64, i16),
        member: &CommitMember<'_>,
        partitions: &[CommitPartition],
        verify: Option<V>,
    ) -> Result<(), ResponseError>
    where
        V: std::future::Future<Output = Result<(), ResponseError>>,
    {
        let index = self.partition_of(group);
        let now = now_ms();
        let live = self.fence_view(group, index)?;
        let verified = match verify {
            None => Verified::NotRequired,
            Some(verify) => {
                let partition = self
                    .replicas
                    .partition(TOPIC, index)
                    .ok_or(ResponseError::NotCoordinator)?;
                match partition.start_verification(producer.0, producer.1) {
                    None => Verified::WasOpen,
                    Some(ask) => {
                        verify.await?;
                        ask.verified()
                    }
                }
            }
        };
        let how = WriteAs::Transactional {
            producer_id: producer.0,
            producer_epoch: producer.1,
            verified,
        };
        self.runtime
            .write_as(index, WRITE_TIMEOUT, how, |shard| {
                if let Some(consumer) = shard.consumer().get(group) {
                    consumer.validate_txn_offset_commit(member.member_id, member.generation_id)?;
                } else {
                    let view = live.clone().or_else(|| Self::view(shard, group));
                    txn_offsets::check_member(view.as_ref(), member)?;
                }
                let records = partitions
                    .iter()
                    .map(|p| {
                        offset_record(
                            group,
                            &p.topic,
                            p.partition,
                            &OffsetValue {
                                offset: p.offset,
                                leader_epoch: p.leader_epoch,
                                metadata: p.metadata.clone().unwrap_or_default(),
                                commit_timestamp: now,
                            },
                        )
                    })
                    .collect();
                Ok((records, ()))
            })
            .await
            .map_err(|error| match error {
                // The offsets would join the producer's older transaction still open there
                // (its marker has not landed), or open one nobody verified: retried by every
                // client, as Kafka's group coordinator answers its verification's
                // CONCURRENT_TRANSACTIONS.
                ResponseError::ConcurrentTransactions => ResponseError::CoordinatorNotAvailable,
                other => append_error(other),
            })
    }

    /// WriteTxnMarkers for partition `index` of `__consumer_offsets`: the marker is written
    /// through the runtime, which replays it (the producer's pending offsets become committed
    /// or are dropped), answered once replicated.
    ///
    /// # Errors
    /// As a marker append: `NOT_LEADER_OR_FOLLOWER` while this node does not serve the
    /// partition (not its leader, or still loading: the transaction coordinator retries),
    /// `INVALID_PRODUCER_EPOCH`, `TRANSACTION_COORDINATOR_FENCED`, `NOT_ENOUGH_REPLICAS`,
    /// `REQUEST_TIMED_OUT`.
    pub async fn complete_transaction(
        &self,
        index: i32,
        marker: MarkerWrite,
        timeout: Duration,
    ) -> Result<(), ResponseError> {
        self.runtime
            .write_marker(index, timeout, marker)
            .await
            .map_err(|error| match error {
                ResponseError::NotCoordinator
                | ResponseError::CoordinatorLoadInProgress
                | ResponseError::CoordinatorNotAvailable => ResponseError::NotLeaderOrFollower,
                other => other,
            })
    }
}
