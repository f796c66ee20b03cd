//! [`CoordinatorRuntime`]: the state coordinators keep on the partitions of an internal topic
//! (Kafka's `CoordinatorRuntime` with its `CoordinatorLoader`), over the replica layer.
//!
//! - Becoming leader of a partition of the topic (as the metadata image applied by the
//!   [`ReplicaManager`] leaves it) starts a load: the partition's log is read from its start to
//!   its end and replayed into a fresh [`CoordinatorShard`]; meanwhile requests for it get
//!   `COORDINATOR_LOAD_IN_PROGRESS`. A new leader epoch reloads. Losing leadership (or the
//!   partition) unloads it: its state is dropped, waiting writes and later requests get
//!   `NOT_COORDINATOR`.
//! - Each loaded partition keeps two states: `committed` (every record below the high
//!   watermark; what [`CoordinatorRuntime::read`] sees) and `latest` (plus the records
//!   appended but not yet committed; what a write's operation sees, so concurrent writes build
//!   on each other). A write runs its operation on `latest`, replays the records on a copy,
//!   appends them as leader with acks=all semantics (refused with `NOT_ENOUGH_REPLICAS`, nothing
//!   appended, when the ISR is below `min.insync.replicas`) and only then makes the copy
//!   `latest`; a refused append leaves `latest` as it was (the rollback). The write is answered
//!   once the high watermark passes its records, which are then replayed on `committed`. So
//!   both states are always a replay of a prefix of the log: the log is the only truth.
//! - Writes to one partition are serialised from the operation to the append, so the log
//!   order is the order in which operations saw `latest`.
//!
//! The decisions are synchronous ([`CoordinatorRuntime::reconcile`], [`Load::run`],
//! [`CoordinatorRuntime::complete_load`]); [`CoordinatorRuntime::run`] is the thin tokio
//! shell that calls them on every image or high-watermark change.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use kafka_protocol::ResponseError;
use tokio::sync::oneshot;

use logjam_storage::{ControlType, EndTxnMarker};

use crate::clock::now_ms;
use crate::coordinator::shard::{
    BatchKind, CoordinatorRecord, CoordinatorShard, encode_batch, replay_batch,
};
use crate::replica::{Acks, Appended, Partition, ReplicaManager, Verified};

mod load;

pub use load::{Load, Loaded};

/// Makes the empty shard of a partition index.
type ShardFactory<S> = Box<dyn Fn(i32) -> S + Send + Sync>;

/// The coordinator state of every partition of one internal topic that this node leads.
pub struct CoordinatorRuntime<S: CoordinatorShard> {
    replicas: Arc<ReplicaManager>,
    topic: String,
    new_shard: ShardFactory<S>,
    slots: Mutex<HashMap<i32, Slot<S>>>,
}

impl<S: CoordinatorShard> std::fmt::Debug for CoordinatorRuntime<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CoordinatorRuntime")
            .field("topic", &self.topic)
            .finish_non_exhaustive()
    }
}

/// Where one led partition stands.
enum Slot<S> {
    /// Its log is being replayed for leader epoch `epoch`.
    Loading { epoch: i32 },
    /// Loaded and served.
    Active(Box<Active<S>>),
    /// The load for `epoch` failed (a record did not replay): not served until the next epoch.
    Failed { epoch: i32 },
}

impl<S> Slot<S> {
    fn epoch(&self) -> i32 {
        match self {
            Slot::Loading { epoch } | Slot::Failed { epoch } => *epoch,
            Slot::Active(active) => active.epoch,
        }
    }
}

/// A loaded partition.
struct Active<S> {
    epoch: i32,
    partition: Arc<Partition>,
    /// Every record below the high watermark, replayed.
    committed: S,
    /// `committed` plus every record of `pending`.
    latest: S,
    /// Records in the log above the high watermark, oldest first.
    pending: VecDeque<Pending>,
    /// Serialises writes from the operation to the append; a new one per load.
    write_lock: Arc<tokio::sync::Mutex<()>>,
    /// Wall clock (ms) when this load began: whatever the log held was written before it,
    /// by an earlier coordinator of the partition.
    loaded_at_ms: i64,
}

/// Records appended but not yet committed, and the write waiting for them.
struct Pending {
    end_offset: i64,
    kind: BatchKind,
    records: Vec<CoordinatorRecord>,
    done: Option<oneshot::Sender<()>>,
}

/// How a write's records reach the log.
#[derive(Debug, Clone, Copy)]
pub enum WriteAs {
    /// One non-transactional batch.
    Plain,
    /// One batch in producer `producer_id`'s transaction (Kafka's transactional write),
    /// with what the group coordinator verified of it (KIP-890).
    Transactional {
        /// The producer id.
        producer_id: i64,
        /// Its epoch.
        producer_epoch: i16,
        /// What was verified (the guard taken before the transaction coordinator was asked).
        verified: Verified,
    },
    /// A transaction marker; the operation's records must be empty.
    Marker(MarkerWrite),
}

impl WriteAs {
    fn kind(&self) -> BatchKind {
        match *self {
            WriteAs::Plain => BatchKind::Plain,
            WriteAs::Transactional {
                producer_id,
                producer_epoch,
                ..
            } => BatchKind::Transactional {
                producer_id,
                producer_epoch,
            },
            WriteAs::Marker(marker) => BatchKind::Marker {
                producer_id: marker.producer_id,
                commit: marker.commit,
            },
        }
    }
}

/// One transaction marker for a coordinator partition (WriteTxnMarkers' fields).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MarkerWrite {
    /// The producer id.
    pub producer_id: i64,
    /// The marker's producer epoch.
    pub producer_epoch: i16,
    /// The transaction coordinator's epoch.
    pub coordinator_epoch: i32,
    /// COMMIT (true) or ABORT.
    pub commit: bool,
}

/// What a write does after its operation ran.
enum Prepared<S, R> {
    /// No records and nothing pending: answered at once.
    Done(R),
    /// No records: answered once what is pending commits.
    Wait(oneshot::Receiver<()>, R),
    /// Records to append; `tentative` is the latest state with them replayed.
    Append {
        partition: Arc<Partition>,
        tentative: S,
        records: Vec<CoordinatorRecord>,
        response: R,
    },
}

impl<S: CoordinatorShard> CoordinatorRuntime<S> {
    /// A runtime for the partitions of `topic` hosted by `replicas`, each starting from
    /// `new_shard(index)`. Nothing is loaded until [`CoordinatorRuntime::reconcile`] (or the
    /// shell, [`CoordinatorRuntime::run`]) sees this node lead a partition.
    pub fn new(
        replicas: Arc<ReplicaManager>,
        topic: impl Into<String>,
        new_shard: impl Fn(i32) -> S + Send + Sync + 'static,
    ) -> CoordinatorRuntime<S> {
        CoordinatorRuntime {
            replicas,
            topic: topic.into(),
            new_shard: Box::new(new_shard),
            slots: Mutex::new(HashMap::new()),
        }
    }

    /// The internal topic this runtime serves.
    pub fn topic(&self) -> &str {
        &self.topic
    }

    fn slots(&self) -> MutexGuard<'_, HashMap<i32, Slot<S>>> {
        self.slots
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Brings the slots in line with the partitions' leadership: unloads what this node no
    /// longer leads (failing its waiting writes), returns a [`Load`] for each partition newly
    /// led or led in a new epoch, and completes the writes the high watermark now covers.
    pub fn reconcile(&self) -> Vec<Load<S>> {
        let image = self.replicas.image();
        let mut indexes: Vec<i32> = image
            .topics
            .get(&self.topic)
            .map(|topic| topic.partitions.keys().copied().collect())
            .unwrap_or_default();
        let mut slots = self.slots();
        for index in slots.keys() {
            if !indexes.contains(index) {
                indexes.push(*index);
            }
        }
        let mut loads = Vec::new();
        for index in indexes {
            let led = self
                .replicas
                .partition(&self.topic, index)
                .filter(|partition| partition.is_leader())
                .filter(|_| {
                    image
                        .topics
                        .get(&self.topic)
                        .is_some_and(|topic| topic.partitions.contains_key(&index))
                });
            match led {
                None => {
                    if slots.remove(&index).is_some() {
                        tracing::info!(topic = %self.topic, index, "coordinator unloaded");
                    }
                }
                Some(partition) => {
                    let epoch = partition.leader_epoch();
                    match slots.get_mut(&index) {
                        Some(slot) if slot.epoch() == epoch => {
                            if let Slot::Active(active) = slot {
                                advance_commits(active);
                            }
                        }
                        _ => {
                            tracing::info!(topic = %self.topic, index, epoch, "coordinator loading");
                            slots.insert(index, Slot::Loading { epoch });
                            loads.push(Load {
                                index,
                                epoch,
                                partition,
                                shard: (self.new_shard)(index),
                            });
                        }
                    }
                }
            }
        }
        loads
    }

    /// Installs a finished load, if the partition is still loading in that epoch.
    pub fn complete_load(&self, loaded: Loaded<S>) {
        let mut slots = self.slots();
        if !matches!(slots.get(&loaded.index), Some(Slot::Loading { epoch }) if *epoch == loaded.epoch)
        {
            return;
        }
        let slot = match loaded.outcome {
            Ok(mut active) => {
                tracing::info!(topic = %self.topic, index = loaded.index, epoch = loaded.epoch,
                    pending = active.pending.len(), "coordinator loaded");
                advance_commits(&mut active);
                Slot::Active(active)
            }
            Err(error) => {
                tracing::error!(topic = %self.topic, index = loaded.index, %error,
                    "coordinator load failed");
                Slot::Failed {
                    epoch: loaded.epoch,
                }
            }
        };
        slots.insert(loaded.index, slot);
    }

    /// The leader epoch partition `index` is loaded in (state kept outside the shard, such
    /// as a group's members, is valid only as long as this stays the same).
    ///
    /// # Errors
    /// As [`CoordinatorRuntime::read`].
    pub fn loaded_epoch(&self, index: i32) -> Result<i32, ResponseError> {
        Ok(active(&self.slots(), index)?.epoch)
    }

    /// When the load of partition `index` in its current epoch began (wall clock, ms): state
    /// written before it came from an earlier coordinator (another node, or this one before
    /// a restart or a lost leadership).
    ///
    /// # Errors
    /// As [`CoordinatorRuntime::read`].
    pub fn loaded_at_ms(&self, index: i32) -> Result<i64, ResponseError> {
        Ok(active(&self.slots(), index)?.loaded_at_ms)
    }

    /// Runs `read` on the committed state of partition `index`.
    ///
    /// # Errors
    /// `COORDINATOR_LOAD_IN_PROGRESS` while it loads (and until the high watermark covers
    /// what the load found above it), `NOT_COORDINATOR` when this node does not lead it (or
    /// its load failed).
    pub fn read<R>(&self, index: i32, read: impl FnOnce(&S) -> R) -> Result<R, ResponseError> {
        let slots = self.slots();
        let active = active(&slots, index)?;
        // Records the load found above the high watermark were acknowledged by the previous
        // leader (or not): until this leader's high watermark covers them, the committed
        // state could miss what a client was told is written (a committed offset read as
        // none), so reads wait as for a load.
        if active.pending.front().is_some_and(|p| p.done.is_none()) {
            return Err(ResponseError::CoordinatorLoadInProgress);
        }
        Ok(read(&active.committed))
    }

    /// Runs `operation` on the latest state of partition `index`; the records it returns are
    /// appended as leader and its response is returned once the high watermark passes them.
    /// An operation returning no records is answered once everything appended before it is
    /// committed (so it never answers from state that could still be lost).
    ///
    /// # Errors
    /// `COORDINATOR_LOAD_IN_PROGRESS` / `NOT_COORDINATOR` as [`CoordinatorRuntime::read`]
    /// (also when leadership moves while the write waits), the operation's own error, a record
    /// the shard cannot replay (`UNKNOWN_SERVER_ERROR`, nothing appended), the append's error
    /// (`NOT_ENOUGH_REPLICAS`, `KAFKA_STORAGE_ERROR`, ...; nothing appended), or
    /// `REQUEST_TIMED_OUT` when the records are not committed within `timeout` (they stay in
    /// the log and may still commit: the outcome is unknown).
    pub async fn write<R>(
        &self,
        index: i32,
        timeout: Duration,
        operation: impl FnOnce(&S) -> Result<(Vec<CoordinatorRecord>, R), ResponseError>,
    ) -> Result<R, ResponseError> {
        self.write_as(index, timeout, WriteAs::Plain, operation)
            .await
    }

    /// Appends the transaction marker `marker` describes (WriteTxnMarkers for a partition
    /// of this topic, Kafka's `scheduleTransactionCompletion`) and replays it, answering once
    /// it is committed.
    ///
    /// # Errors
    /// As [`CoordinatorRuntime::write`], and the marker append's own
    /// (`INVALID_PRODUCER_EPOCH`, `TRANSACTION_COORDINATOR_FENCED`).
    pub async fn write_marker(
        &self,
        index: i32,
        timeout: Duration,
        marker: MarkerWrite,
    ) -> Result<(), ResponseError> {
        self.write_as(index, timeout, WriteAs::Marker(marker), |_| {
            Ok((Vec::new(), ()))
        })
        .await
    }

    /// [`CoordinatorRuntime::write`], with the records appended as `how` says.
    ///
    /// # Errors
    /// As [`CoordinatorRuntime::write`] and [`CoordinatorRuntime::write_marker`].
    pub async fn write_as<R>(
        &self,
        index: i32,
        timeout: Duration,
        how: WriteAs,
        operation: impl FnOnce(&S) -> Result<(Vec<CoordinatorRecord>, R), ResponseError>,
    ) -> Result<R, ResponseError> {
        self.write_in(index, None, timeout, how, operation).await
    }

    /// [`CoordinatorRuntime::write`] only in the load of leader epoch `epoch`: the operation
    /// never runs on a later load's state (a caller's in-memory companions of that load, such
    /// as clocks, would not apply to it).
    ///
    /// # Errors
    /// As [`CoordinatorRuntime::write`]; `NOT_COORDINATOR` when the partition is loaded in
    /// another epoch.
    pub async fn write_at<R>(
        &self,
        index: i32,
        epoch: i32,
        timeout: Duration,
        operation: impl FnOnce(&S) -> Result<(Vec<CoordinatorRecord>, R), ResponseError>,
    ) -> Result<R, ResponseError> {
        self.write_in(index, Some(epoch), timeout, WriteAs::Plain, operation)
            .await
    }

    async fn write_in<R>(
        &self,
        index: i32,
        epoch: Option<i32>,
        timeout: Duration,
        how: WriteAs,
        operation: impl FnOnce(&S) -> Result<(Vec<CoordinatorRecord>, R), ResponseError>,
    ) -> Result<R, ResponseError> {
        let write_lock = {
            let slots = self.slots();
            let active = active(&slots, index)?;
            if epoch.is_some_and(|epoch| epoch != active.epoch) {
                return Err(ResponseError::NotCoordinator);
            }
            // A reload makes a new lock: `prepare` refuses the operation if this one is stale.
            Arc::clone(&active.write_lock)
        };
        let _serialised = write_lock.lock().await;
        let (partition, tentative, records, response) =
            match self.prepare(index, &write_lock, how, operation)? {
                Prepared::Done(response) => return Ok(response),
                Prepared::Wait(wait, response) => {
                    return await_commit(wait, timeout).await.map(|()| response);
                }
                Prepared::Append {
                    partition,
                    tentative,
                    records,
                    response,
                } => (partition, tentative, records, response),
            };
        let appended = match how {
            WriteAs::Plain => {
                Arc::clone(&partition)
                    .append(encode_batch(&records, now_ms(), None), Acks::All)
                    .await
            }
            WriteAs::Transactional {
                producer_id,
                producer_epoch,
                verified,
            } => {
                Arc::clone(&partition)
                    .append_as_coordinator(
                        encode_batch(&records, now_ms(), Some((producer_id, producer_epoch))),
                        producer_id,
                        producer_epoch,
                        verified,
                    )
                    .await
            }
            WriteAs::Marker(marker) => {
                let end = EndTxnMarker {
                    control_type: if marker.commit {
                        ControlType::Commit
                    } else {
                        ControlType::Abort
                    },
                    coordinator_epoch: marker.coordinator_epoch,
                };
                Arc::clone(&partition)
                    .append_marker(marker.producer_id, marker.producer_epoch, end)
                    .await
            }
        }
        .map_err(|error| match error {
            ResponseError::NotLeaderOrFollower => ResponseError::NotCoordinator,
            other => other,
        })?;
        let wait = self.accept(index, &write_lock, appended, tentative, how.kind(), records)?;
        drop(_serialised);
        await_commit(wait, timeout).await.map(|()| response)
    }

    /// A write's step before the append: runs the operation on the latest state and replays
    /// its records on a copy.
    fn prepare<R>(
        &self,
        index: i32,
        write_lock: &Arc<tokio::sync::Mutex<()>>,
        how: WriteAs,
        operation: impl FnOnce(&S) -> Result<(Vec<CoordinatorRecord>, R), ResponseError>,
    ) -> Result<Prepared<S, R>, ResponseError> {
        let mut slots = self.slots();
        let active = active_mut(&mut slots, index)?;
        if !Arc::ptr_eq(&active.write_lock, write_lock) {
            // Reloaded while this write queued.
            return Err(ResponseError::NotCoordinator);
        }
        let (records, response) = operation(&active.latest)?;
        if records.is_empty() && !matches!(how, WriteAs::Marker(_)) {
            let Some(end_offset) = active.pending.back().map(|last| last.end_offset) else {
                return Ok(Prepared::Done(response));
            };
            let (done, wait) = oneshot::channel();
            active.pending.push_back(Pending {
                end_offset,
                kind: BatchKind::Plain,
                records: Vec::new(),
                done: Some(done),
            });
            return Ok(Prepared::Wait(wait, response));
        }
        let mut tentative = active.latest.clone();
        if let Err(error) = replay_batch(&mut tentative, how.kind(), &records) {
            tracing::error!(topic = %self.topic, index, %error,
                "a coordinator produced a record it cannot replay");
            return Err(ResponseError::UnknownServerError);
        }
        Ok(Prepared::Append {
            partition: Arc::clone(&active.partition),
            tentative,
            records,
            response,
        })
    }

    /// A write's step after a successful append: the copy becomes the latest state and the
    /// records wait for the high watermark.
    fn accept(
        &self,
        index: i32,
        write_lock: &Arc<tokio::sync::Mutex<()>>,
        appended: Appended,
        tentative: S,
        kind: BatchKind,
        records: Vec<CoordinatorRecord>,
    ) -> Result<oneshot::Receiver<()>, ResponseError> {
        let mut slots = self.slots();
        let active = active_mut(&mut slots, index)?;
        if !Arc::ptr_eq(&active.write_lock, write_lock) || active.epoch != appended.leader_epoch {
            return Err(ResponseError::NotCoordinator);
        }
        let (done, wait) = oneshot::channel();
        active.latest = tentative;
        active.pending.push_back(Pending {
            end_offset: appended.end_offset,
            kind,
            records,
            done: Some(done),
        });
        advance_commits(active);
        Ok(wait)
    }

    /// The shell: reconciles on every image change and every append or high-watermark
    /// change of the node, running loads off the async workers. Returns when the node's
    /// change signals close.
    pub async fn run(self: Arc<Self>) {
        let mut images = self.replicas.subscribe_image();
        let mut changes = self.replicas.subscribe_appends();
        loop {
            images.borrow_and_update();
            changes.borrow_and_update();
            for load in self.reconcile() {
                let runtime = Arc::clone(&self);
                let (index, epoch) = (load.index, load.epoch);
                tokio::spawn(async move {
                    let loaded = match tokio::task::spawn_blocking(move || load.run()).await {
                        Ok(loaded) => loaded,
                        Err(error) => Loaded {
                            index,
                            epoch,
                            outcome: Err(format!("the load task failed: {error}")),
                        },
                    };
                    runtime.complete_load(loaded);
                    // Records may have committed while it loaded.
                    runtime.reconcile_commits();
                });
            }
            tokio::select! {
                changed = images.changed() => if changed.is_err() { return },
                changed = changes.changed() => if changed.is_err() { return },
            }
        }
    }

    /// Completes the writes the high watermark now covers, on every loaded partition.
    fn reconcile_commits(&self) {
        for slot in self.slots().values_mut() {
            if let Slot::Active(active) = slot {
                advance_commits(active);
            }
        }
    }
}

fn active<S>(slots: &HashMap<i32, Slot<S>>, index: i32) -> Result<&Active<S>, ResponseError> {
    match slots.get(&index) {
        Some(Slot::Active(active)) => Ok(active),
        Some(Slot::Loading { .. }) => Err(ResponseError::CoordinatorLoadInProgress),
        Some(Slot::Failed { .. }) | None => Err(ResponseError::NotCoordinator),
    }
}

fn active_mut<S>(
    slots: &mut HashMap<i32, Slot<S>>,
    index: i32,
) -> Result<&mut Active<S>, ResponseError> {
    match slots.get_mut(&index) {
        Some(Slot::Active(active)) => Ok(active),
        Some(Slot::Loading { .. }) => Err(ResponseError::CoordinatorLoadInProgress),
        Some(Slot::Failed { .. }) | None => Err(ResponseError::NotCoordinator),
    }
}

/// Replays on `committed` every pending batch the high watermark now covers and wakes its
/// writer.
fn advance_commits<S: CoordinatorShard>(active: &mut Active<S>) {
    let high_watermark = active.partition.offsets().high_watermark;
    while active
        .pending
        .front()
        .is_some_and(|pending| pending.end_offset <= high_watermark)
    {
        let Some(pending) = active.pending.pop_front() else {
            break;
        };
        if let Err(error) = replay_batch(&mut active.committed, pending.kind, &pending.records) {
            // `latest` replayed the same records in the same order: a shard whose replay
            // is not deterministic is a bug, and the committed state is no longer sound.
            panic!("coordinator replay diverged from the latest state: {error}");
        }
        if let Some(done) = pending.done {
            let _ = done.send(());
        }
    }
}

/// Waits for a write's records to commit: `NOT_COORDINATOR` when the partition is unloaded
/// first (the waiter is dropped), `REQUEST_TIMED_OUT` after `timeout`.
async fn await_commit(wait: oneshot::Receiver<()>, timeout: Duration) -> Result<(), ResponseError> {
    match tokio::time::timeout(timeout, wait).await {
        Ok(Ok(())) => Ok(()),
        Ok(Err(_)) => Err(ResponseError::NotCoordinator),
        Err(_) => Err(ResponseError::RequestTimedOut),
    }
}
