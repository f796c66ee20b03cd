//! [`Partition`]: one hosted partition, its log and its replication state as the metadata
//! image last set it (leader, epochs, replicas, ISR); the reads a follower and a consumer make,
//! and the follower's side of replication (append what the fetcher brings, truncate on a
//! diverging epoch). The leader's side (high watermark, ISR changes, appends, acks) is in
//! `partition/leader.rs`; the decisions themselves are pure functions in `replication.rs`.

mod leader;
mod lookup;
mod txn;
pub use lookup::TimestampOffset;
pub use txn::{Ask, TxnCheck, Verified};

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use bytes::Bytes;
use kafka_protocol::ResponseError;
use logjam_storage::{EpochEndOffset, LeaderEpoch, Offset, SharedLog, TopicPartition, lock_log};
use tokio::sync::watch;

use crate::canary::{Canaries, Canary};
use crate::clock::now_ms;
use crate::metadata::{BrokerId, MetadataImage, PartitionState};
use crate::replica::invariants;
use crate::replica::replication::{FollowerState, diverging_epoch, follower_truncation_offset};

use leader::LeaderState;

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
    /// The broker's time stamped into the batch on a `LogAppendTime` topic; -1 otherwise.
    pub log_append_time_ms: i64,
}

/// What a follower fetch read from the leader's log.
#[derive(Debug, Clone)]
pub struct FollowerRead {
    /// Whole record batches up to the log end, possibly empty.
    pub records: Bytes,
    /// The leader's high watermark.
    pub high_watermark: i64,
    /// The leader's last stable offset.
    pub last_stable_offset: i64,
    /// The leader's log start offset.
    pub log_start_offset: i64,
    /// Where the follower's log diverges, if it does (then `records` is empty).
    pub diverging: Option<EpochEndOffset>,
}

/// One partition of a leader's fetch answer, as a follower applies it
/// ([`Partition::apply_fetched`]).
#[derive(Debug, Clone)]
pub struct Fetched {
    /// The leader epoch the fetch was sent in.
    pub leader_epoch: i32,
    /// The follower's log end when it sent the fetch.
    pub fetch_offset: i64,
    /// Where the follower's log diverges, if the leader said so.
    pub diverging: Option<EpochEndOffset>,
    /// Record batches, possibly ending with a partial one.
    pub records: Bytes,
    /// The leader's high watermark.
    pub high_watermark: i64,
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

/// What a consumer fetch read from one partition.
#[derive(Debug, Clone)]
pub struct ConsumerRead {
    /// Whole record batches, possibly empty.
    pub records: Bytes,
    /// The high watermark at the time of the read.
    pub high_watermark: i64,
    /// The last stable offset at the time of the read.
    pub last_stable_offset: i64,
    /// The log start offset at the time of the read.
    pub log_start_offset: i64,
    /// For read_committed: the aborted transactions overlapping the records read.
    pub aborted: Option<Vec<logjam_storage::AbortedTxn>>,
}

/// A consumer's `isolation_level`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Isolation {
    /// 0: up to the high watermark, transactions' records included whatever their outcome.
    ReadUncommitted,
    /// 1: up to the last stable offset, with the aborted transactions to skip.
    ReadCommitted,
}

impl Isolation {
    /// The wire value: 1 is read_committed, anything else read_uncommitted (Kafka's
    /// `IsolationLevel.forId` refuses values other than 0 and 1; this node reads them as 0).
    pub fn from_wire(level: i8) -> Isolation {
        if level == 1 {
            Isolation::ReadCommitted
        } else {
            Isolation::ReadUncommitted
        }
    }
}

/// The three positions every partition has.
#[derive(Debug, Clone, Copy)]
pub struct PartitionOffsets {
    /// First offset still in the log.
    pub log_start_offset: i64,
    /// Offsets below it are committed and visible to consumers.
    pub high_watermark: i64,
    /// Offsets below it hold no open transaction: read_committed consumers read up to it.
    pub last_stable_offset: i64,
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
    /// A partition over `log`, not yet leader nor follower: [`Partition::apply_state`] gives
    /// it its state.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn new(
        topic_partition: TopicPartition,
        log: SharedLog,
        node_id: i32,
        state: &PartitionState,
        min_insync_replicas: i32,
        appends: watch::Sender<u64>,
        replica_lag_time_max_ms: i64,
        image: watch::Receiver<Arc<MetadataImage>>,
        canaries: Canaries,
    ) -> Partition {
        Partition {
            topic_partition,
            log,
            node_id,
            state: Mutex::new(PartitionState {
                leader: BrokerId::NONE,
                leader_epoch: -1,
                ..state.clone()
            }),
            min_insync_replicas,
            appends,
            replica_lag_time_max_ms,
            image,
            leader_state: Mutex::new(LeaderState::default()),
            canaries,
            divergence_ignored: AtomicBool::new(false),
        }
    }

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
            last_stable_offset: log.last_stable_offset().0,
            log_end_offset: log.log_end_offset().0,
        }
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
    pub(crate) fn apply_state(&self, new: &PartitionState) -> bool {
        let now = now_ms();
        let mut current = self
            .state
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        if *current == *new {
            return false;
        }
        invariants::check_partition_state(&self.topic_partition, &current, new);
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
        let last_stable_offset = log.last_stable_offset().0;
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
                last_stable_offset,
                log_start_offset,
                diverging: Some(diverging),
            });
        }
        let log_end = log.log_end_offset();
        let read = log
            .read(Offset(fetch_offset), max_bytes, log_end, min_one_batch)
            .map_err(|error| kafka_error(error.kafka_error_code()))?;
        Ok(FollowerRead {
            records: read.records,
            high_watermark,
            last_stable_offset,
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

    /// [`Partition::apply_fetched`] here and now, when it cannot wait on the disk: no
    /// truncation (a diverging epoch), neither lock held elsewhere (a holder may be inside an
    /// fsync), and an append that cannot fsync
    /// ([`logjam_storage::Log::follower_append_may_sync`]). `None`: the caller applies it on a
    /// blocking thread. The fetcher applies most answers this way, sparing a thread hand-off
    /// per fetch.
    pub fn try_apply_fetched_now(&self, fetched: &Fetched) -> Option<Result<(), String>> {
        if fetched.diverging.is_some() {
            return None;
        }
        if !self.follows_in(&*try_lock(&self.state)?, fetched.leader_epoch) {
            return Some(Ok(()));
        }
        let mut log = try_lock(&self.log)?;
        let whole = logjam_storage::batch::complete_batches_len(&fetched.records);
        if whole > 0 && log.follower_append_may_sync(&fetched.records[..whole]) {
            return None;
        }
        Some(self.apply_fetched_locked(&mut log, fetched))
    }

    /// Applies one partition of a fetch response as a follower of its leader epoch: truncates
    /// on a diverging epoch, else appends the whole batches and takes the leader's high
    /// watermark (clamped to the own log end). Ignored when this replica no longer follows in
    /// that epoch or its log end moved since the request.
    ///
    /// # Errors
    /// A storage error message.
    pub fn apply_fetched(&self, fetched: &Fetched) -> Result<(), String> {
        if !self.follows_in(&self.state(), fetched.leader_epoch) {
            return Ok(());
        }
        self.apply_fetched_locked(&mut self.lock(), fetched)
    }

    /// True when this replica is a follower in `leader_epoch`.
    fn follows_in(&self, state: &PartitionState, leader_epoch: i32) -> bool {
        state.leader.0 != self.node_id && state.leader_epoch == leader_epoch
    }

    /// [`Partition::apply_fetched`] once the replica is known to follow in the answer's epoch.
    fn apply_fetched_locked(
        &self,
        log: &mut logjam_storage::Log,
        fetched: &Fetched,
    ) -> Result<(), String> {
        if log.log_end_offset().0 != fetched.fetch_offset {
            return Ok(());
        }
        if let Some(diverging) = fetched.diverging {
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
        let records = &fetched.records;
        let whole = logjam_storage::batch::complete_batches_len(records);
        if whole > 0 {
            log.append_as_follower(&records[..whole], now_ms())
                .map_err(|error| error.to_string())?;
        }
        let high_watermark = Offset(fetched.high_watermark).min(log.log_end_offset());
        if high_watermark >= Offset(0) {
            invariants::check_high_watermark(
                &self.topic_partition,
                log.high_watermark(),
                high_watermark,
                log.log_end_offset(),
                false,
            );
            log.set_high_watermark(high_watermark);
        }
        Ok(())
    }

    /// Reads for a consumer: up to the high watermark, or for read_committed up to the last
    /// stable offset with the aborted transactions overlapping what was read (Kafka's
    /// `FetchIsolation.TXN_COMMITTED`).
    ///
    /// # Errors
    /// `OFFSET_OUT_OF_RANGE` or `KAFKA_STORAGE_ERROR`.
    pub fn read_for_consumer(
        &self,
        fetch_offset: i64,
        max_bytes: usize,
        min_one_batch: bool,
        isolation: Isolation,
    ) -> Result<ConsumerRead, ResponseError> {
        let log = self.lock();
        let high_watermark = log.high_watermark();
        let last_stable_offset = log.last_stable_offset();
        // CANARY(read-above-high-watermark): consumers read up to the log end, uncommitted
        // records included.
        let read_limit = if self.canaries.is_on(Canary::ReadAboveHighWatermark) {
            log.log_end_offset()
        } else if isolation == Isolation::ReadCommitted
            // CANARY(read-committed-ignores-lso): read_committed fetches stop at the high
            // watermark, records of open transactions included.
            && !self.canaries.is_on(Canary::ReadCommittedIgnoresLso)
        {
            last_stable_offset
        } else {
            high_watermark
        };
        let read = log
            .read(Offset(fetch_offset), max_bytes, read_limit, min_one_batch)
            .map_err(|error| kafka_error(error.kafka_error_code()))?;
        let aborted = (isolation == Isolation::ReadCommitted)
            .then(|| log.aborted_transactions(Offset(fetch_offset), read.next_offset));
        Ok(ConsumerRead {
            records: read.records,
            high_watermark: high_watermark.0,
            last_stable_offset: last_stable_offset.0,
            log_start_offset: log.log_start_offset().0,
            aborted,
        })
    }
}

impl Partition {
    /// Reads for a coordinator loading its state as leader: whole batches from `fetch_offset`
    /// up to the log end (records above the high watermark included; the coordinator runtime
    /// applies them only once committed).
    ///
    /// # Errors
    /// `OFFSET_OUT_OF_RANGE` or `KAFKA_STORAGE_ERROR`.
    pub fn read_to_log_end(
        &self,
        fetch_offset: i64,
        max_bytes: usize,
    ) -> Result<ConsumerRead, ResponseError> {
        let log = self.lock();
        let log_end = log.log_end_offset();
        let read = log
            .read(Offset(fetch_offset), max_bytes, log_end, true)
            .map_err(|error| kafka_error(error.kafka_error_code()))?;
        Ok(ConsumerRead {
            records: read.records,
            high_watermark: log.high_watermark().0,
            last_stable_offset: log.last_stable_offset().0,
            log_start_offset: log.log_start_offset().0,
            aborted: None,
        })
    }
}

/// The Kafka error for a storage or producer-state error code (`UNKNOWN_SERVER_ERROR` for a
/// code this crate does not know).
/// The guard of `mutex` when no one holds it (a poisoned lock is taken as is, as
/// [`lock_log`] does); `None` when it is held.
fn try_lock<T>(mutex: &Mutex<T>) -> Option<MutexGuard<'_, T>> {
    match mutex.try_lock() {
        Ok(guard) => Some(guard),
        Err(std::sync::TryLockError::Poisoned(poisoned)) => Some(poisoned.into_inner()),
        Err(std::sync::TryLockError::WouldBlock) => None,
    }
}

pub(crate) fn kafka_error(code: i16) -> ResponseError {
    ResponseError::try_from_code(code).unwrap_or(ResponseError::UnknownServerError)
}
