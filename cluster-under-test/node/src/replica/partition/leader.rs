//! The partition as leader: the high watermark (`maybeIncrementLeaderHW`), ISR expansion and
//! shrink proposals (AlterPartition, KIP-497's maximal ISR), appends with the idempotent
//! producer's checks, and where a parked acks=all produce stands.

use std::collections::BTreeMap;
use std::sync::{Arc, MutexGuard};

use bytes::Bytes;
use kafka_protocol::ResponseError;
use logjam_storage::{LeaderEpoch, Offset};

use crate::canary::Canary;
use crate::clock::now_ms;
use crate::metadata::{BrokerId, PartitionState};
use crate::replica::invariants;
use crate::replica::replication::{
    AcksOutcome, FollowerState, ReplicaPosition, acks_outcome, next_high_watermark,
    out_of_sync_replicas, should_expand_isr,
};
use logjam_storage::{ProducerBatch, Verdict};

use super::txn::{Verified, guard_holds, open_epoch, txn_refusal};
use super::{Acks, Appended, IsrChange, Partition, try_lock};

/// An AlterPartition in flight (Kafka's `PendingExpandIsr` / `PendingShrinkIsr`).
#[derive(Debug, Clone)]
pub(super) struct PendingIsrChange {
    /// The proposed ISR.
    pub(super) isr: Vec<BrokerId>,
    /// The partition epoch it was based on; a newer one in the image ends it.
    pub(super) partition_epoch: i32,
}

/// The leader-only part of a partition: follower states, the epoch start, the ISR change in
/// flight. Reset on every leadership change.
#[derive(Debug)]
pub(super) struct LeaderState {
    /// The leader epoch this state was set up for; -1 when not leader.
    pub(super) epoch: i32,
    /// The log end offset when this broker became leader in `epoch`.
    pub(super) epoch_start_offset: Offset,
    /// What the leader knows of each follower.
    pub(super) followers: BTreeMap<BrokerId, FollowerState>,
    /// The AlterPartition in flight, if any.
    pub(super) pending_isr: Option<PendingIsrChange>,
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

impl Partition {
    /// The ISR the high watermark and acks=all use: the committed ISR plus the members of an
    /// in-flight AlterPartition (KIP-497: an expansion counts at once, a shrink only once
    /// committed).
    pub(super) fn maximal_isr(state: &PartitionState, leader: &LeaderState) -> Vec<BrokerId> {
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

    /// Recomputes the leader's high watermark (`maybeIncrementLeaderHW`); returns whether it
    /// advanced. A no-op on followers.
    pub(crate) fn maybe_advance_high_watermark(&self) -> bool {
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
                invariants::check_high_watermark(
                    &self.topic_partition,
                    log.high_watermark(),
                    log_end,
                    log_end,
                    true,
                );
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
                invariants::check_high_watermark(
                    &self.topic_partition,
                    log.high_watermark(),
                    high_watermark,
                    log_end,
                    true,
                );
                log.set_high_watermark(high_watermark);
                true
            }
            None => false,
        }
    }

    pub(super) fn effective_min_isr(&self, state: &PartitionState) -> usize {
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
    /// (nothing appended), the producer state's (`INVALID_PRODUCER_EPOCH`,
    /// `OUT_OF_ORDER_SEQUENCE_NUMBER`, `INVALID_TXN_STATE`), the storage's validation errors
    /// (`CORRUPT_MESSAGE`, `INVALID_RECORD`, ...), or `KAFKA_STORAGE_ERROR`.
    pub async fn append(
        self: Arc<Self>,
        records: Bytes,
        acks: Acks,
    ) -> Result<Appended, ResponseError> {
        self.append_verified(records, acks, Verified::NotRequired)
            .await
    }

    /// [`Partition::append`] of records checked by [`Partition::opens_transaction`] (and the
    /// coordinator): a transactional batch is refused as [`txn_refusal`] says, e.g.
    /// `INVALID_TXN_STATE` when it would still open a transaction and a marker came for the
    /// producer since the guard was taken (KIP-890's verification guard), so a late append
    /// cannot open a transaction the coordinator already aborted.
    ///
    /// # Errors
    /// As [`Partition::append`], `INVALID_TXN_STATE` and `CONCURRENT_TRANSACTIONS`.
    pub async fn append_verified(
        self: Arc<Self>,
        records: Bytes,
        acks: Acks,
        guard: Verified,
    ) -> Result<Appended, ResponseError> {
        let producer_batch = idempotent_batch(&records)?;
        let append_bytes = Some(records.len());
        self.append_under_leadership(acks, append_bytes, move |partition, log, leader_epoch| {
            // The log owns the producer state (kafka-semantics.md §2) and records the batch
            // when it appends it.
            if let Some(batch) = &producer_batch {
                let guarded = matches!(guard, Verified::Guarded { .. });
                match log.producer_state().check_verified(batch, guarded) {
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
                            // Kafka's UnifiedLog answers a duplicate with the original batch's
                            // timestamp as its append time, whatever the topic's timestamp type.
                            log_append_time_ms: original.timestamp_ms,
                        });
                    }
                    Err(error) => {
                        tracing::debug!(partition = %partition.topic_partition, %error, "batch refused");
                        return Err(super::kafka_error(error.kafka_error_code()));
                    }
                }
                // KIP-890: a transactional batch must continue the producer's transaction
                // open here at its epoch, or have been verified (`txn_refusal`).
                if batch.is_transactional {
                    let open = open_epoch(log, batch.producer_id.0);
                    let epoch = batch.producer_epoch.0;
                    if let Some(error) =
                        txn_refusal(epoch, open, guard, guard_holds(log, guard))
                    {
                        tracing::debug!(partition = %partition.topic_partition, ?batch, ?open,
                            ?guard, ?error, "transactional batch refused");
                        return Err(error);
                    }
                }
            }
            let info = log
                .append_as_leader(&records, LeaderEpoch(leader_epoch), now_ms())
                .map_err(|error| {
                    tracing::debug!(partition = %partition.topic_partition, %error, "append refused");
                    super::kafka_error(error.kafka_error_code())
                })?;
            Ok(Appended {
                base_offset: info.first_offset.0,
                log_start_offset: log.log_start_offset().0,
                end_offset: info.last_offset.0 + 1,
                leader_epoch,
                log_append_time_ms: info.log_append_time_ms.unwrap_or(-1),
            })
        })
        .await
    }

    /// Runs `append` on the log as the leader, with leadership checked before and again under
    /// the state lock held across the append; then moves the high watermark and wakes waiters.
    /// acks=all first checks the ISR against the effective `min.insync.replicas`.
    ///
    /// An append of `append_bytes` runs right here on the async worker when both locks are
    /// free and it cannot fsync ([`logjam_storage::Log::append_may_sync`], asked under the
    /// locks); any other, and every append with `append_bytes` `None`, runs off the workers. A
    /// hand-off to a blocking thread and back per append was a large share of a node's CPU
    /// under acks=all.
    pub(super) async fn append_under_leadership<F>(
        self: Arc<Self>,
        acks: Acks,
        append_bytes: Option<usize>,
        append: F,
    ) -> Result<Appended, ResponseError>
    where
        F: FnOnce(&Partition, &mut logjam_storage::Log, i32) -> Result<Appended, ResponseError>
            + Send
            + 'static,
    {
        let state = self.state();
        if state.leader.0 != self.node_id {
            return Err(ResponseError::NotLeaderOrFollower);
        }
        let leader_epoch = state.leader_epoch;
        if acks == Acks::All && state.isr.len() < self.effective_min_isr(&state) {
            return Err(ResponseError::NotEnoughReplicas);
        }
        let inline = match append_bytes {
            Some(bytes) => self.append_inline(leader_epoch, bytes, append),
            None => Err(append),
        };
        let appended = match inline {
            Ok(appended) => appended?,
            Err(append) => {
                let partition = Arc::clone(&self);
                tokio::task::spawn_blocking(move || {
                    let state = partition
                        .state
                        .lock()
                        .unwrap_or_else(|poisoned| poisoned.into_inner());
                    let log = partition.lock();
                    partition.append_now(state, log, leader_epoch, append)
                })
                .await
                .map_err(|_| ResponseError::UnknownServerError)??
            }
        };
        self.notify();
        Ok(appended)
    }

    /// [`Partition::append_now`] on this thread when neither lock is held elsewhere (a holder
    /// may be inside an fsync) and the append cannot fsync; else `append` comes back.
    #[allow(clippy::type_complexity)]
    fn append_inline<F>(
        &self,
        leader_epoch: i32,
        append_bytes: usize,
        append: F,
    ) -> Result<Result<Appended, ResponseError>, F>
    where
        F: FnOnce(&Partition, &mut logjam_storage::Log, i32) -> Result<Appended, ResponseError>,
    {
        let Some(state) = try_lock(&self.state) else {
            return Err(append);
        };
        let Some(log) = try_lock(&self.log) else {
            return Err(append);
        };
        if log.append_may_sync(append_bytes, LeaderEpoch(leader_epoch)) {
            return Err(append);
        }
        Ok(self.append_now(state, log, leader_epoch, append))
    }

    /// The append itself, under both locks, for [`Partition::append_under_leadership`].
    fn append_now<F>(
        &self,
        current: MutexGuard<'_, PartitionState>,
        mut log: MutexGuard<'_, logjam_storage::Log>,
        leader_epoch: i32,
        append: F,
    ) -> Result<Appended, ResponseError>
    where
        F: FnOnce(&Partition, &mut logjam_storage::Log, i32) -> Result<Appended, ResponseError>,
    {
        // Leadership is checked again under the state lock, held across the append (Kafka's
        // leaderIsrUpdateLock; lock order state → log, as in `apply_state`): a leader change
        // between the check above and this append must not put a record of the old epoch after
        // the start of the new one, which would rewrite the epoch cache.
        if current.leader.0 != self.node_id || current.leader_epoch != leader_epoch {
            return Err(ResponseError::NotLeaderOrFollower);
        }
        let appended = append(self, &mut log, leader_epoch)?;
        drop(log);
        drop(current);
        self.maybe_advance_high_watermark();
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
    // A client's control batch is refused by the storage (`INVALID_RECORD`) before any
    // producer-state check, as Kafka's validation comes first.
    if headers.iter().any(|header| header.is_control()) {
        return Ok(None);
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
