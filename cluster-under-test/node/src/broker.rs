//! The broker's shared state: configuration, cluster id, the metadata quorum handle
//! ([`Quorum`], whose committed [`crate::metadata::MetadataImage`] is the source of truth for
//! topics, replicas, leaders, leader epochs and ISRs), and one [`Partition`] per hosted
//! topic-partition (those whose replicas include this broker), wrapping its storage log.
//!
//! Handlers (under `handlers/`) only talk to this type. Topic creation goes to the active
//! controller (local or remote) and is answered once committed and visible in this broker's
//! image. A broker answers `NOT_LEADER_OR_FOLLOWER` for partitions it does not lead.
//!
//! Replication (kafka-semantics.md §1.2–§1.6): as leader a partition tracks its followers'
//! fetches, advances the high watermark to the minimum log end over the maximal ISR (not while
//! the committed ISR is below the effective `min.insync.replicas`), proposes ISR shrinks and
//! expansions (sent by `replica_fetcher.rs` as AlterPartition) and decides parked acks=all
//! produces; as follower it appends what the replica fetcher brings and truncates on a
//! diverging epoch. The decisions themselves are pure functions in `replication.rs`.

use std::collections::{BTreeMap, HashMap};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, RwLock};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use kafka_protocol::ResponseError;
use logjam_storage::{
    EpochEndOffset, LeaderEpoch, LogConfig, LogManager, Offset, SharedLog, TopicPartition, lock_log,
};
use tokio::sync::watch;
use uuid::Uuid;

use kafka_protocol::messages::create_topics_request::{CreatableTopic, CreatableTopicConfig};
use kafka_protocol::messages::{
    AllocateProducerIdsRequest, CreateTopicsRequest, CreateTopicsResponse, RequestKind,
    ResponseKind, TopicName,
};
use kafka_protocol::protocol::StrBytes;

use crate::canary::{Canaries, Canary};
use crate::config::Config;
use crate::controller::{
    BrokerLifecycleSettings, ControllerConfig, Quorum, QuorumSettings, QuorumStartError,
};
use crate::metadata::{BrokerId, MetadataImage, PartitionState};
use crate::producer_ids::ProducerIdBlock;
use crate::replication::{
    AcksOutcome, FollowerState, ReplicaPosition, acks_outcome, diverging_epoch,
    follower_truncation_offset, next_high_watermark, out_of_sync_replicas, should_expand_isr,
};
use crate::topics::{TopicError, TopicInfo};
use logjam_storage::{ProducerBatch, ProducerId, Verdict};

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
    /// The offset after the last record appended: acks=all waits for the high watermark here.
    pub end_offset: i64,
    /// The leader epoch the append was made in.
    pub leader_epoch: i32,
}

/// What a follower fetch read from the leader's log.
#[derive(Debug, Clone)]
pub struct FollowerRead {
    /// Whole record batches up to the log end, possibly empty.
    pub records: Bytes,
    /// The leader's high watermark.
    pub high_watermark: i64,
    /// The leader's log start offset.
    pub log_start_offset: i64,
    /// Where the follower's log diverges, if it does (then `records` is empty).
    pub diverging: Option<EpochEndOffset>,
}

/// An ISR change the leader wants the controller to commit (AlterPartition).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IsrChange {
    /// Which partition.
    pub topic_partition: TopicPartition,
    /// The leader epoch the change is based on.
    pub leader_epoch: i32,
    /// The partition epoch the change is based on.
    pub partition_epoch: i32,
    /// The proposed ISR.
    pub isr: Vec<BrokerId>,
}

/// An AlterPartition in flight (Kafka's `PendingExpandIsr` / `PendingShrinkIsr`).
#[derive(Debug, Clone)]
struct PendingIsrChange {
    /// The proposed ISR.
    isr: Vec<BrokerId>,
    /// The partition epoch it was based on; a newer one in the image ends it.
    partition_epoch: i32,
}

/// The leader-only part of a partition: follower states, the epoch start, the ISR change in
/// flight. Reset on every leadership change.
#[derive(Debug)]
struct LeaderState {
    /// The leader epoch this state was set up for; -1 when not leader.
    epoch: i32,
    /// The log end offset when this broker became leader in `epoch`.
    epoch_start_offset: Offset,
    /// What the leader knows of each follower.
    followers: BTreeMap<BrokerId, FollowerState>,
    /// The AlterPartition in flight, if any.
    pending_isr: Option<PendingIsrChange>,
}

impl Default for LeaderState {
    fn default() -> LeaderState {
        LeaderState {
            epoch: -1,
            epoch_start_offset: Offset(0),
            followers: BTreeMap::new(),
            pending_isr: None,
        }
    }
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
    /// `replica.lag.time.max.ms`.
    replica_lag_time_max_ms: i64,
    /// The committed metadata image, for the ISR eligibility of followers (unfenced).
    image: watch::Receiver<Arc<MetadataImage>>,
    /// Leader-side replication state.
    leader_state: Mutex<LeaderState>,
    /// The deliberate bugs switched on (`logjam.canaries`; none by default).
    canaries: Canaries,
    /// Set when a follower ignored a diverging epoch under the `skip-follower-truncation`
    /// canary; never set otherwise.
    divergence_ignored: AtomicBool,
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

    /// The ISR the high watermark and acks=all use: the committed ISR plus the members of an
    /// in-flight AlterPartition (KIP-497: an expansion counts at once, a shrink only once
    /// committed).
    fn maximal_isr(state: &PartitionState, leader: &LeaderState) -> Vec<BrokerId> {
        let mut isr = state.isr.clone();
        if let Some(pending) = &leader.pending_isr {
            for id in &pending.isr {
                if !isr.contains(id) {
                    isr.push(*id);
                }
            }
        }
        isr
    }

    fn leader_state(&self) -> MutexGuard<'_, LeaderState> {
        self.leader_state
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Applies a new partition state from the metadata image. Becoming leader in a new epoch
    /// records the epoch's start offset in the leader-epoch cache and resets the follower
    /// states (`makeLeader`); a new partition epoch ends an in-flight ISR change. Returns
    /// whether anything changed.
    fn apply_state(&self, new: &PartitionState) -> bool {
        let now = now_ms();
        let mut current = self
            .state
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        if *current == *new {
            return false;
        }
        *current = new.clone();
        let mut leader = self.leader_state();
        if new.leader.0 == self.node_id {
            if leader.epoch != new.leader_epoch {
                let mut log = self.lock();
                if let Err(error) = log.assign_epoch_start_offset(LeaderEpoch(new.leader_epoch)) {
                    tracing::error!(partition = %self.topic_partition, %error, "cannot record the epoch start");
                }
                *leader = LeaderState {
                    epoch: new.leader_epoch,
                    epoch_start_offset: log.log_end_offset(),
                    followers: new
                        .replicas
                        .iter()
                        .filter(|id| id.0 != self.node_id)
                        .map(|id| (*id, FollowerState::new(new.isr.contains(id), now)))
                        .collect(),
                    pending_isr: None,
                };
                tracing::info!(partition = %self.topic_partition, epoch = new.leader_epoch,
                    start = leader.epoch_start_offset.0, isr = ?new.isr, "became leader");
            } else if leader
                .pending_isr
                .as_ref()
                .is_some_and(|pending| pending.partition_epoch != new.partition_epoch)
            {
                leader.pending_isr = None;
            }
        } else {
            *leader = LeaderState::default();
        }
        true
    }

    /// Recomputes the leader's high watermark (`maybeIncrementLeaderHW`); returns whether it
    /// advanced. A no-op on followers.
    fn maybe_advance_high_watermark(&self) -> bool {
        let state = self.state();
        if state.leader.0 != self.node_id {
            return false;
        }
        let leader = self.leader_state();
        if leader.epoch != state.leader_epoch {
            return false;
        }
        let now = now_ms();
        let maximal = Partition::maximal_isr(&state, &leader);
        // `isReplicaIsrEligible`: a fenced follower (crashed, or shutting down) no longer
        // holds the high watermark back, however recently it was caught up.
        let image = Arc::clone(&self.image.borrow());
        let mut log = self.lock();
        let log_end = log.log_end_offset();
        // CANARY(hw-before-replication): the high watermark jumps to the leader's own log end,
        // without waiting for the ISR's followers (nor for min.insync.replicas).
        if self.canaries.is_on(Canary::HwBeforeReplication) {
            let advances = log_end > log.high_watermark();
            if advances {
                log.set_high_watermark(log_end);
            }
            return advances;
        }
        let positions: Vec<ReplicaPosition> = state
            .replicas
            .iter()
            .filter(|id| id.0 != self.node_id)
            .map(|id| {
                let follower = leader
                    .followers
                    .get(id)
                    .copied()
                    .unwrap_or_else(|| FollowerState::new(false, now));
                let in_maximal_isr = maximal.contains(id);
                ReplicaPosition {
                    log_end_offset: follower.log_end_offset,
                    in_maximal_isr,
                    caught_up_and_eligible: !in_maximal_isr
                        && image.is_unfenced(*id)
                        && follower.log_end_offset >= Offset(0)
                        && follower.is_caught_up(log_end, now, self.replica_lag_time_max_ms),
                }
            })
            .collect();
        match next_high_watermark(
            log.high_watermark(),
            log_end,
            &positions,
            state.isr.len(),
            self.effective_min_isr(&state),
        ) {
            Some(high_watermark) => {
                log.set_high_watermark(high_watermark);
                true
            }
            None => false,
        }
    }

    fn effective_min_isr(&self, state: &PartitionState) -> usize {
        (self.min_insync_replicas.max(1) as usize).min(state.replicas.len())
    }

    /// Ticks the broker-wide change signal: wakes long-polling fetches and parked produces.
    pub fn notify(&self) {
        self.appends.send_modify(|count| *count += 1);
    }

    /// The leader's bookkeeping for a follower fetch at `fetch_offset` that did not diverge:
    /// the follower's log end and caught-up time, then a possible ISR expansion (returned, to be
    /// sent to the controller) and a high-watermark advance.
    pub fn record_follower_fetch(
        &self,
        follower: BrokerId,
        fetch_offset: i64,
        eligible: bool,
    ) -> Option<IsrChange> {
        let state = self.state();
        if state.leader.0 != self.node_id || !state.replicas.contains(&follower) {
            return None;
        }
        let change = {
            let mut leader = self.leader_state();
            if leader.epoch != state.leader_epoch {
                return None;
            }
            let (log_end, high_watermark) = {
                let log = self.lock();
                (log.log_end_offset(), log.high_watermark())
            };
            let now = now_ms();
            leader
                .followers
                .entry(follower)
                .or_insert_with(|| FollowerState::new(false, now))
                .record_fetch(Offset(fetch_offset), log_end, now);
            if should_expand_isr(
                state.isr.contains(&follower),
                leader.pending_isr.is_some(),
                eligible,
                Offset(fetch_offset),
                high_watermark,
                leader.epoch_start_offset,
            ) {
                let mut isr = state.isr.clone();
                isr.push(follower);
                Some(self.begin_isr_change(&state, &mut leader, isr))
            } else {
                None
            }
        };
        if self.maybe_advance_high_watermark() {
            self.notify();
        }
        change
    }

    fn begin_isr_change(
        &self,
        state: &PartitionState,
        leader: &mut LeaderState,
        isr: Vec<BrokerId>,
    ) -> IsrChange {
        tracing::info!(partition = %self.topic_partition, from = ?state.isr, to = ?isr, "ISR change");
        leader.pending_isr = Some(PendingIsrChange {
            isr: isr.clone(),
            partition_epoch: state.partition_epoch,
        });
        IsrChange {
            topic_partition: self.topic_partition.clone(),
            leader_epoch: state.leader_epoch,
            partition_epoch: state.partition_epoch,
            isr,
        }
    }

    /// The `isr-expiration` check: the ISR without followers that lag more than
    /// `replica.lag.time.max.ms`, to be sent to the controller, if any lag and no change is in
    /// flight.
    pub fn maybe_shrink_isr(&self) -> Option<IsrChange> {
        let state = self.state();
        if state.leader.0 != self.node_id {
            return None;
        }
        let mut leader = self.leader_state();
        if leader.epoch != state.leader_epoch || leader.pending_isr.is_some() {
            return None;
        }
        let log_end = self.lock().log_end_offset();
        let out = out_of_sync_replicas(
            state.leader,
            &state.isr,
            &leader.followers,
            log_end,
            now_ms(),
            self.replica_lag_time_max_ms,
        );
        if out.is_empty() {
            return None;
        }
        let isr = state
            .isr
            .iter()
            .copied()
            .filter(|id| !out.contains(id))
            .collect();
        Some(self.begin_isr_change(&state, &mut leader, isr))
    }

    /// The controller refused or did not answer an ISR change: forget it so it can be retried.
    pub fn isr_change_failed(&self, change: &IsrChange) {
        let mut leader = self.leader_state();
        if leader
            .pending_isr
            .as_ref()
            .is_some_and(|pending| pending.partition_epoch == change.partition_epoch)
        {
            leader.pending_isr = None;
        }
    }

    /// Appends `records` as the leader (acks=all first checks the ISR against the effective
    /// `min.insync.replicas`). The answer for acks=0/1 is final; acks=all callers then poll
    /// [`Partition::acks_status`] until it is decided.
    ///
    /// # Errors
    /// The Kafka error for the partition: `NOT_LEADER_OR_FOLLOWER`, `NOT_ENOUGH_REPLICAS`
    /// (nothing appended), the storage's validation errors (`CORRUPT_MESSAGE`,
    /// `INVALID_RECORD`, ...), or `KAFKA_STORAGE_ERROR`.
    pub async fn append(
        self: Arc<Self>,
        records: Bytes,
        acks: Acks,
    ) -> Result<Appended, ResponseError> {
        let state = self.state();
        if state.leader.0 != self.node_id {
            return Err(ResponseError::NotLeaderOrFollower);
        }
        let leader_epoch = state.leader_epoch;
        if acks == Acks::All && state.isr.len() < self.effective_min_isr(&state) {
            return Err(ResponseError::NotEnoughReplicas);
        }
        let partition = Arc::clone(&self);
        // fsync can happen inside an append (flush.messages, segment roll): keep it off the
        // async workers.
        let producer_batch = idempotent_batch(&records)?;
        let appended = tokio::task::spawn_blocking(move || {
            let mut log = partition.lock();
            // The log owns the producer state (kafka-semantics.md §2) and records the batch
            // when it appends it.
            if let Some(batch) = &producer_batch {
                match log.producer_state().check(batch) {
                    Ok(Verdict::Append) => {}
                    // CANARY(skip-idempotent-dedupe): a retry of a batch already in the log is
                    // appended again instead of answered with its original offsets.
                    Ok(Verdict::Duplicate(_))
                        if partition.canaries.is_on(Canary::SkipIdempotentDedupe) => {}
                    Ok(Verdict::Duplicate(original)) => {
                        // A retry of a batch already in the log: answer its original offsets,
                        // append nothing (acks=all still waits for the original to commit).
                        tracing::debug!(partition = %partition.topic_partition, ?batch,
                            first_offset = original.first_offset.0, "duplicate batch");
                        return Ok(Appended {
                            base_offset: original.first_offset.0,
                            log_start_offset: log.log_start_offset().0,
                            end_offset: original.last_offset.0 + 1,
                            leader_epoch,
                        });
                    }
                    Err(error) => {
                        tracing::debug!(partition = %partition.topic_partition, %error, "batch refused");
                        return Err(ResponseError::try_from_code(error.kafka_error_code())
                            .unwrap_or(ResponseError::UnknownServerError));
                    }
                }
            }
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
            Ok::<_, ResponseError>(Appended {
                base_offset: info.first_offset.0,
                log_start_offset,
                end_offset: info.last_offset.0 + 1,
                leader_epoch,
            })
        })
        .await
        .map_err(|_| ResponseError::UnknownServerError)??;
        self.notify();
        Ok(appended)
    }

    /// Where a parked acks=all append stands (`DelayedProduce.tryComplete`).
    pub fn acks_status(&self, appended: &Appended) -> AcksOutcome {
        let state = self.state();
        let maximal_isr_size = Partition::maximal_isr(&state, &self.leader_state()).len();
        let high_watermark = self.lock().high_watermark();
        acks_outcome(
            state.leader.0 == self.node_id && state.leader_epoch == appended.leader_epoch,
            high_watermark,
            Offset(appended.end_offset),
            maximal_isr_size,
            self.effective_min_isr(&state),
        )
    }

    /// Reads for a follower (KIP-595): records up to the log end, or the diverging epoch when
    /// the follower's log diverges from this one at `last_fetched_epoch`.
    ///
    /// # Errors
    /// `OFFSET_OUT_OF_RANGE` or `KAFKA_STORAGE_ERROR`.
    pub fn read_for_follower(
        &self,
        fetch_offset: i64,
        last_fetched_epoch: i32,
        max_bytes: usize,
        min_one_batch: bool,
    ) -> Result<FollowerRead, ResponseError> {
        let log = self.lock();
        let high_watermark = log.high_watermark().0;
        let log_start_offset = log.log_start_offset().0;
        let answer = log.end_offset_for_epoch(LeaderEpoch(last_fetched_epoch));
        if let Some(diverging) = diverging_epoch(
            LeaderEpoch(last_fetched_epoch),
            Offset(fetch_offset),
            answer,
        ) {
            return Ok(FollowerRead {
                records: Bytes::new(),
                high_watermark,
                log_start_offset,
                diverging: Some(diverging),
            });
        }
        let log_end = log.log_end_offset();
        let read = log
            .read(Offset(fetch_offset), max_bytes, log_end, min_one_batch)
            .map_err(|error| {
                ResponseError::try_from_code(error.kafka_error_code())
                    .unwrap_or(ResponseError::UnknownServerError)
            })?;
        Ok(FollowerRead {
            records: read.records,
            high_watermark,
            log_start_offset,
            diverging: None,
        })
    }

    /// This replica's log end offset, the epoch of its last record and its log start, for a
    /// follower fetch.
    pub fn follower_fetch_position(&self) -> (i64, i32, i64) {
        let log = self.lock();
        // CANARY(skip-follower-truncation): having ignored a diverging epoch, the follower
        // fetches without LastFetchedEpoch, so the leader no longer checks its log and it
        // appends after its divergent suffix.
        let last_fetched_epoch = if self.divergence_ignored.load(Ordering::Relaxed) {
            -1
        } else {
            log.latest_epoch().map_or(-1, |epoch| epoch.0)
        };
        (
            log.log_end_offset().0,
            last_fetched_epoch,
            log.log_start_offset().0,
        )
    }

    /// Applies one partition of a fetch response as a follower of `leader_epoch`: truncates on
    /// a diverging epoch, else appends the whole batches and takes the leader's high watermark
    /// (clamped to the own log end). Ignored when this replica no longer follows in that epoch
    /// or its log end moved since the request.
    ///
    /// # Errors
    /// A storage error message.
    pub fn apply_fetched(
        &self,
        leader_epoch: i32,
        fetch_offset: i64,
        diverging: Option<EpochEndOffset>,
        records: &[u8],
        leader_high_watermark: i64,
    ) -> Result<(), String> {
        let state = self.state();
        if state.leader.0 == self.node_id || state.leader_epoch != leader_epoch {
            return Ok(());
        }
        let mut log = self.lock();
        if log.log_end_offset().0 != fetch_offset {
            return Ok(());
        }
        if let Some(diverging) = diverging {
            let own = log.end_offset_for_epoch(diverging.leader_epoch);
            let (offset, complete) =
                follower_truncation_offset(diverging, own, log.log_end_offset());
            // CANARY(skip-follower-truncation): the follower keeps its divergent suffix; see
            // `follower_fetch_position` for how it then carries on.
            if self.canaries.is_on(Canary::SkipFollowerTruncation) {
                tracing::warn!(partition = %self.topic_partition, ?diverging, ?own,
                    offset = offset.0, "CANARY skip-follower-truncation: not truncating");
                self.divergence_ignored.store(true, Ordering::Relaxed);
                return Ok(());
            }
            tracing::info!(partition = %self.topic_partition, ?diverging, ?own,
                offset = offset.0, complete, "truncating on a diverging epoch");
            if offset < log.log_start_offset() {
                log.truncate_fully_and_start_at(offset.max(Offset(0)))
                    .map_err(|error| error.to_string())?;
            } else {
                log.truncate_to(offset).map_err(|error| error.to_string())?;
            }
            // The log reloaded its producer state from a snapshot at or below the cut.
            return Ok(());
        }
        let whole = logjam_storage::batch::complete_batches_len(records);
        if whole > 0 {
            log.append_as_follower(&records[..whole], now_ms())
                .map_err(|error| error.to_string())?;
        }
        let high_watermark = Offset(leader_high_watermark).min(log.log_end_offset());
        if high_watermark >= Offset(0) {
            log.set_high_watermark(high_watermark);
        }
        Ok(())
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
        // CANARY(read-above-high-watermark): consumers read up to the log end, uncommitted
        // records included.
        let read_limit = if self.canaries.is_on(Canary::ReadAboveHighWatermark) {
            log.log_end_offset()
        } else {
            high_watermark
        };
        let read = log
            .read(Offset(fetch_offset), max_bytes, read_limit, min_one_batch)
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
    /// ISR changes for the replication task to send (see `replica_fetcher.rs`).
    isr_changes: tokio::sync::mpsc::UnboundedSender<(Arc<Partition>, IsrChange)>,
    /// The receiving end, until the replication task takes it.
    isr_change_receiver: Mutex<Option<IsrChangeReceiver>>,
    /// The block InitProducerId hands ids out of; refilled from the controller. An async
    /// mutex: it is held while AllocateProducerIds is in flight, so one block is fetched at a
    /// time.
    producer_ids: tokio::sync::Mutex<ProducerIdBlock>,
}

/// The queue of ISR changes from partitions to the replication task.
pub type IsrChangeReceiver = tokio::sync::mpsc::UnboundedReceiver<(Arc<Partition>, IsrChange)>;

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

/// How long a broker waits for the controller's AllocateProducerIds answer.
const PRODUCER_ID_BLOCK_TIMEOUT: Duration = Duration::from_secs(5);

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
        let (isr_changes, isr_change_receiver) = tokio::sync::mpsc::unbounded_channel();
        Ok(Broker {
            isr_changes,
            isr_change_receiver: Mutex::new(Some(isr_change_receiver)),
            producer_ids: tokio::sync::Mutex::new(ProducerIdBlock::default()),
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

    /// `replica.lag.time.max.ms` (Kafka's default 30000).
    pub fn replica_lag_time_max_ms(&self) -> i64 {
        self.config
            .raw
            .get("replica.lag.time.max.ms")
            .and_then(|value| value.parse().ok())
            .unwrap_or(30_000)
    }

    /// Queues an ISR change for the replication task to send to the controller.
    pub fn submit_isr_change(&self, partition: Arc<Partition>, change: IsrChange) {
        if let Err(error) = self.isr_changes.send((Arc::clone(&partition), change)) {
            partition.isr_change_failed(&error.0.1);
        }
    }

    /// The receiving end of [`Broker::submit_isr_change`], taken once by the replication task.
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

    /// A fresh producer id for a non-transactional InitProducerId, from this broker's block,
    /// asking the active controller for the next block (AllocateProducerIds) when it is used
    /// up.
    ///
    /// # Errors
    /// `COORDINATOR_LOAD_IN_PROGRESS` (retriable, as Kafka's `RPCProducerIdManager` answers)
    /// when no block could be had from the controller.
    pub async fn next_producer_id(&self) -> Result<ProducerId, ResponseError> {
        let mut block = self.producer_ids.lock().await;
        if let Some(id) = block.claim() {
            return Ok(id);
        }
        let request = AllocateProducerIdsRequest::default()
            .with_broker_id(kafka_protocol::messages::BrokerId(self.config.node_id))
            .with_broker_epoch(self.quorum.status().broker_epoch.unwrap_or(-1));
        let answer = self
            .quorum
            .forward(
                RequestKind::AllocateProducerIds(request),
                PRODUCER_ID_BLOCK_TIMEOUT,
            )
            .await;
        match answer {
            Some(ResponseKind::AllocateProducerIds(response)) if response.error_code == 0 => {
                *block =
                    ProducerIdBlock::new(response.producer_id_start.0, response.producer_id_len);
                tracing::info!(
                    start = response.producer_id_start.0,
                    len = response.producer_id_len,
                    "new producer id block"
                );
                block
                    .claim()
                    .ok_or(ResponseError::CoordinatorLoadInProgress)
            }
            other => {
                tracing::warn!(answer = ?other, "no producer id block from the controller");
                Err(ResponseError::CoordinatorLoadInProgress)
            }
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
        if partition.apply_state(state) {
            // Becoming leader recomputes the high watermark from the ISR, as Kafka's
            // `makeLeader` does: the checkpointed value may be up to a minute stale.
            partition.maybe_advance_high_watermark();
            partition.notify();
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
            state: Mutex::new(PartitionState {
                leader: BrokerId::NONE,
                leader_epoch: -1,
                ..state.clone()
            }),
            min_insync_replicas,
            appends: self.appends.clone(),
            replica_lag_time_max_ms: self.replica_lag_time_max_ms(),
            image: self.quorum.subscribe_image(),
            leader_state: Mutex::new(LeaderState::default()),
            canaries: self.config.canaries,
            divergence_ignored: AtomicBool::new(false),
        });
        partition.apply_state(state);
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
        self.logs
            .shutdown_with_broker_epoch(broker_epoch)
            .map_err(|error| error.to_string())
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

/// The producer fields of a leader append's records, when they carry a producer id.
///
/// # Errors
/// `INVALID_RECORD` for several batches in one partition of a request when one of them is
/// idempotent: clients send one batch per partition, and the per-batch dedupe answer (one base
/// offset) has no meaning for several; this node does not support it.
fn idempotent_batch(records: &[u8]) -> Result<Option<ProducerBatch>, ResponseError> {
    let mut headers = Vec::new();
    for item in logjam_storage::batch::batches(records) {
        match item {
            Ok((_, header)) => headers.push(header),
            // Malformed: the storage's validation gives the precise error.
            Err(_) => return Ok(None),
        }
    }
    let producer_batches: Vec<_> = headers
        .iter()
        .filter_map(ProducerBatch::from_header)
        .collect();
    match (headers.len(), producer_batches.first()) {
        (_, None) => Ok(None),
        (1, Some(batch)) => Ok(Some(*batch)),
        (count, Some(_)) => {
            tracing::debug!(count, "several batches with a producer id in one partition");
            Err(ResponseError::InvalidRecord)
        }
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
