//! The record accumulator: one queue of batches per partition, and the *decisions* of when a
//! batch is ready to go, which batches a request to a broker takes, and which batches have
//! outlived `delivery.timeout.ms`. Synchronous and clock-free (callers pass `now`), so every
//! decision is unit-tested; `sender.rs` is the async shell that acts on them.
//!
//! A batch is ready (`RecordAccumulator.batchReady`) when it is full, or has lingered
//! `linger.ms` (a retried batch waits `retry.backoff.ms` instead), or memory is exhausted
//! (senders are waiting for buffer space), or a flush is in progress; and never while backing
//! off. Draining takes at most one batch per partition per request, up to
//! `max.request.size`, rotating the starting partition so none starves.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::time::{Duration, Instant};

use crate::ids::{BrokerId, TopicPartition};
use crate::producer::batch::{PendingRecord, ProducerBatch};

/// What [`Accumulator::try_append`] did.
#[derive(Debug)]
pub enum Appended {
    /// Added to the partition's open batch; `full` when that batch is now full.
    Existing {
        /// The batch can take no more records.
        full: bool,
    },
    /// No open batch has room: the caller must reserve memory and call
    /// [`Accumulator::append_new_batch`]. The record is handed back.
    NeedsNewBatch(PendingRecord),
}

/// The result of a readiness check.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Readiness {
    /// Brokers leading at least one partition with a ready batch.
    pub ready_nodes: BTreeSet<BrokerId>,
    /// How long until the next batch may become ready by lingering; `None` when nothing waits.
    pub next_check: Option<Duration>,
    /// Some queued partition has no known leader: refresh metadata.
    pub unknown_leaders: bool,
}

/// Settings of the accumulator.
#[derive(Debug, Clone, Copy)]
pub struct AccumulatorSettings {
    /// `batch.size`.
    pub batch_size: usize,
    /// `linger.ms`.
    pub linger: Duration,
    /// `retry.backoff.ms`.
    pub retry_backoff: Duration,
    /// `delivery.timeout.ms`.
    pub delivery_timeout: Duration,
}

/// Per-partition queues of batches.
#[derive(Debug)]
pub struct Accumulator {
    settings: AccumulatorSettings,
    queues: BTreeMap<TopicPartition, VecDeque<ProducerBatch>>,
    /// Rotates the first partition drained per request.
    drain_index: usize,
    /// Outstanding `flush()` calls: while positive, every batch is ready.
    flushes_in_progress: usize,
}

impl Accumulator {
    /// An empty accumulator.
    pub fn new(settings: AccumulatorSettings) -> Accumulator {
        Accumulator {
            settings,
            queues: BTreeMap::new(),
            drain_index: 0,
            flushes_in_progress: 0,
        }
    }

    /// The settings.
    pub fn settings(&self) -> &AccumulatorSettings {
        &self.settings
    }

    /// Appends to the partition's last batch if it is open and has room.
    pub fn try_append(&mut self, partition: &TopicPartition, record: PendingRecord) -> Appended {
        let Some(last) = self.queues.get_mut(partition).and_then(|q| q.back_mut()) else {
            return Appended::NeedsNewBatch(record);
        };
        match last.try_append(record) {
            Ok(()) => Appended::Existing {
                full: last.is_full(),
            },
            Err(record) => Appended::NeedsNewBatch(record),
        }
    }

    /// Starts a new batch at the back of the partition's queue.
    pub fn append_new_batch(&mut self, batch: ProducerBatch) {
        if let Some(last) = self
            .queues
            .get_mut(&batch.partition)
            .and_then(|q| q.back_mut())
        {
            // The previous batch will take no more records: it may go without lingering.
            last.closed = true;
        }
        self.queues
            .entry(batch.partition.clone())
            .or_default()
            .push_back(batch);
    }

    /// Marks a flush as started: every batch becomes ready.
    pub fn begin_flush(&mut self) {
        self.flushes_in_progress += 1;
    }

    /// Marks a flush as finished.
    pub fn end_flush(&mut self) {
        self.flushes_in_progress = self.flushes_in_progress.saturating_sub(1);
    }

    /// Whether any batch is queued.
    pub fn is_empty(&self) -> bool {
        self.queues.values().all(VecDeque::is_empty)
    }

    /// Number of queued batches.
    pub fn batch_count(&self) -> usize {
        self.queues.values().map(VecDeque::len).sum()
    }

    /// Which brokers have ready batches, and when to look again.
    ///
    /// `leader_of` maps a partition to its leader; `memory_exhausted` is true while a `send()`
    /// waits for buffer memory; `muted` partitions (ordering guarantees) are skipped.
    pub fn ready(
        &self,
        now: Instant,
        leader_of: impl Fn(&TopicPartition) -> Option<BrokerId>,
        memory_exhausted: bool,
        muted: impl Fn(&TopicPartition) -> bool,
    ) -> Readiness {
        let mut readiness = Readiness::default();
        for (partition, queue) in &self.queues {
            let Some(first) = queue.front() else { continue };
            let Some(leader) = leader_of(partition) else {
                readiness.unknown_leaders = true;
                continue;
            };
            if readiness.ready_nodes.contains(&leader) || muted(partition) {
                continue;
            }
            let backing_off = first.retry_at.is_some_and(|at| at > now);
            if backing_off {
                let wait = first.retry_at.expect("checked") - now;
                readiness.next_check = Some(readiness.next_check.map_or(wait, |w| w.min(wait)));
                continue;
            }
            let waited =
                now.saturating_duration_since(first.last_attempt_at.unwrap_or(first.created_at));
            let time_to_wait = if first.attempts > 0 {
                self.settings.retry_backoff
            } else {
                self.settings.linger
            };
            let full = queue.len() > 1 || first.is_full();
            let lingered = waited >= time_to_wait;
            if full || lingered || memory_exhausted || self.flushes_in_progress > 0 {
                readiness.ready_nodes.insert(leader);
            } else {
                let wait = time_to_wait - waited;
                readiness.next_check = Some(readiness.next_check.map_or(wait, |w| w.min(wait)));
            }
        }
        readiness
    }

    /// Takes batches for one request to `node`: at most one per partition it leads, within
    /// `max_request_size`, skipping partitions where `may_drain` says no (muted, backing off,
    /// or held back by the idempotent producer). Drained batches are closed to appends.
    pub fn drain(
        &mut self,
        node: BrokerId,
        now: Instant,
        max_request_size: usize,
        leader_of: impl Fn(&TopicPartition) -> Option<BrokerId>,
        mut may_drain: impl FnMut(&TopicPartition, &ProducerBatch) -> bool,
    ) -> Vec<ProducerBatch> {
        let partitions: Vec<TopicPartition> = self
            .queues
            .iter()
            .filter(|(tp, q)| !q.is_empty() && leader_of(tp) == Some(node))
            .map(|(tp, _)| tp.clone())
            .collect();
        let mut drained = Vec::new();
        let mut size = 0;
        if partitions.is_empty() {
            return drained;
        }
        let start = self.drain_index % partitions.len();
        for offset in 0..partitions.len() {
            let partition = &partitions[(start + offset) % partitions.len()];
            let queue = self.queues.get_mut(partition).expect("listed above");
            let Some(first) = queue.front() else { continue };
            if first.retry_at.is_some_and(|at| at > now) || !may_drain(partition, first) {
                continue;
            }
            // Always send at least one batch, even an oversized one.
            if !drained.is_empty() && size + first.size_bytes > max_request_size {
                break;
            }
            let mut batch = queue.pop_front().expect("front exists");
            batch.closed = true;
            size += batch.size_bytes;
            drained.push(batch);
        }
        self.drain_index = self.drain_index.wrapping_add(1);
        drained
    }

    /// Puts a batch back for a retry, at the front of its queue, backing off until
    /// `now + backoff`. Batches stamped with sequences are kept in sequence order, so an
    /// idempotent retry goes out before anything that followed it.
    pub fn reenqueue(&mut self, mut batch: ProducerBatch, now: Instant, backoff: Duration) {
        batch.retry_at = Some(now + backoff);
        let queue = self.queues.entry(batch.partition.clone()).or_default();
        let position = match batch.stamp {
            Some(stamp) => queue
                .iter()
                .position(|b| match b.stamp {
                    Some(other) => other.base_sequence.0 > stamp.base_sequence.0,
                    None => true,
                })
                .unwrap_or(queue.len()),
            None => 0,
        };
        queue.insert(position, batch);
    }

    /// Removes and returns queued batches older than `delivery.timeout.ms`.
    pub fn expire(&mut self, now: Instant) -> Vec<ProducerBatch> {
        let mut expired = Vec::new();
        for queue in self.queues.values_mut() {
            while queue.front().is_some_and(|b| {
                now.saturating_duration_since(b.created_at) >= self.settings.delivery_timeout
            }) {
                expired.push(queue.pop_front().expect("front exists"));
            }
        }
        expired
    }

    /// Removes and returns every queued batch (fatal producer error, close).
    pub fn drain_all(&mut self) -> Vec<ProducerBatch> {
        self.queues.values_mut().flat_map(|q| q.drain(..)).collect()
    }

    /// Removes and returns the batches never sent (a transaction that will not commit fails
    /// them, Kafka's `abortUndrainedBatches`); batches waiting for a retry were sent and stay.
    pub fn drain_unsent(&mut self) -> Vec<ProducerBatch> {
        let mut unsent = Vec::new();
        for queue in self.queues.values_mut() {
            let (never_sent, sent): (VecDeque<_>, VecDeque<_>) =
                queue.drain(..).partition(|b| b.attempts == 0);
            *queue = sent;
            unsent.extend(never_sent);
        }
        unsent
    }

    /// Drops the idempotent stamps of queued batches (after an epoch bump they are re-stamped
    /// with fresh sequences when drained).
    pub fn clear_stamps(&mut self) {
        for batch in self.queues.values_mut().flatten() {
            batch.stamp = None;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ids::{ProducerEpoch, ProducerId, Sequence};
    use crate::producer::batch::ProducerStamp;
    use bytes::Bytes;

    const LINGER: Duration = Duration::from_millis(5);

    fn settings() -> AccumulatorSettings {
        AccumulatorSettings {
            batch_size: 1000,
            linger: LINGER,
            retry_backoff: Duration::from_millis(100),
            delivery_timeout: Duration::from_secs(120),
        }
    }

    fn record(size: usize) -> PendingRecord {
        PendingRecord {
            key: None,
            value: Some(Bytes::from(vec![0; size])),
            headers: Vec::new(),
            timestamp_ms: 0,
            completion: tokio::sync::oneshot::channel().0,
        }
    }

    fn append(acc: &mut Accumulator, tp: &TopicPartition, size: usize, now: Instant) {
        if let Appended::NeedsNewBatch(record) = acc.try_append(tp, record(size)) {
            let capacity = acc.settings().batch_size.max(record.size_estimate() + 61);
            acc.append_new_batch(ProducerBatch::new(tp.clone(), record, capacity, None, now));
        }
    }

    fn leader(_: &TopicPartition) -> Option<BrokerId> {
        Some(BrokerId(1))
    }

    #[test]
    fn a_batch_is_not_ready_before_linger_and_ready_after() {
        let mut acc = Accumulator::new(settings());
        let t0 = Instant::now();
        let tp = TopicPartition::new("t", 0);
        append(&mut acc, &tp, 10, t0);
        let early = acc.ready(t0 + Duration::from_millis(2), leader, false, |_| false);
        assert!(early.ready_nodes.is_empty());
        assert_eq!(early.next_check, Some(Duration::from_millis(3)));
        let late = acc.ready(t0 + LINGER, leader, false, |_| false);
        assert_eq!(late.ready_nodes, BTreeSet::from([BrokerId(1)]));
    }

    #[test]
    fn a_full_batch_is_ready_without_lingering() {
        let mut acc = Accumulator::new(settings());
        let t0 = Instant::now();
        let tp = TopicPartition::new("t", 0);
        for _ in 0..10 {
            append(&mut acc, &tp, 100, t0);
        }
        assert!(acc.batch_count() >= 2);
        assert!(
            !acc.ready(t0, leader, false, |_| false)
                .ready_nodes
                .is_empty()
        );
    }

    #[test]
    fn memory_exhaustion_and_flush_make_everything_ready() {
        let mut acc = Accumulator::new(settings());
        let t0 = Instant::now();
        let tp = TopicPartition::new("t", 0);
        append(&mut acc, &tp, 10, t0);
        assert!(
            !acc.ready(t0, leader, true, |_| false)
                .ready_nodes
                .is_empty()
        );
        acc.begin_flush();
        assert!(
            !acc.ready(t0, leader, false, |_| false)
                .ready_nodes
                .is_empty()
        );
        acc.end_flush();
        assert!(
            acc.ready(t0, leader, false, |_| false)
                .ready_nodes
                .is_empty()
        );
    }

    #[test]
    fn unknown_leaders_ask_for_metadata() {
        let mut acc = Accumulator::new(settings());
        let t0 = Instant::now();
        append(&mut acc, &TopicPartition::new("t", 0), 10, t0);
        let readiness = acc.ready(t0 + LINGER, |_| None, false, |_| false);
        assert!(readiness.unknown_leaders && readiness.ready_nodes.is_empty());
    }

    #[test]
    fn drain_takes_one_batch_per_partition_within_the_request_size() {
        let mut acc = Accumulator::new(settings());
        let t0 = Instant::now();
        for p in 0..3 {
            let tp = TopicPartition::new("t", p);
            for _ in 0..20 {
                append(&mut acc, &tp, 100, t0);
            }
        }
        let drained = acc.drain(BrokerId(1), t0, 1_000_000, leader, |_, _| true);
        assert_eq!(drained.len(), 3);
        let partitions: BTreeSet<_> = drained.iter().map(|b| b.partition.clone()).collect();
        assert_eq!(partitions.len(), 3);
        let small = acc.drain(BrokerId(1), t0, 10, leader, |_, _| true);
        assert_eq!(small.len(), 1, "one oversized batch still goes alone");
        assert!(
            acc.drain(BrokerId(2), t0, 1_000_000, leader, |_, _| true)
                .is_empty()
        );
    }

    #[test]
    fn a_retried_batch_backs_off_then_goes_first() {
        let mut acc = Accumulator::new(settings());
        let t0 = Instant::now();
        let tp = TopicPartition::new("t", 0);
        append(&mut acc, &tp, 10, t0);
        let mut first = acc.drain(BrokerId(1), t0 + LINGER, 1_000_000, leader, |_, _| true);
        append(&mut acc, &tp, 10, t0 + LINGER);
        let mut batch = first.pop().unwrap();
        batch.attempts = 1;
        acc.reenqueue(batch, t0 + LINGER, Duration::from_millis(100));
        let during = t0 + Duration::from_millis(50);
        assert!(
            acc.ready(during, leader, false, |_| false)
                .ready_nodes
                .is_empty()
        );
        assert!(
            acc.drain(BrokerId(1), during, 1_000_000, leader, |_, _| true)
                .is_empty()
        );
        let after = t0 + Duration::from_millis(200);
        let drained = acc.drain(BrokerId(1), after, 1_000_000, leader, |_, _| true);
        assert_eq!(
            drained[0].attempts, 1,
            "the retry goes before the newer batch"
        );
    }

    #[test]
    fn stamped_retries_are_reinserted_in_sequence_order() {
        let mut acc = Accumulator::new(settings());
        let t0 = Instant::now();
        let tp = TopicPartition::new("t", 0);
        let stamped = |seq: i32| {
            let mut b = ProducerBatch::new(tp.clone(), record(10), 1000, None, t0);
            b.stamp = Some(ProducerStamp {
                producer_id: ProducerId(1),
                producer_epoch: ProducerEpoch(0),
                base_sequence: Sequence(seq),
            });
            b
        };
        acc.reenqueue(stamped(10), t0, Duration::ZERO);
        acc.reenqueue(stamped(0), t0, Duration::ZERO);
        acc.reenqueue(stamped(5), t0, Duration::ZERO);
        let mut order = Vec::new();
        while let Some(b) = acc
            .drain(BrokerId(1), t0, 1_000_000, leader, |_, _| true)
            .pop()
        {
            order.push(b.stamp.unwrap().base_sequence.0);
        }
        assert_eq!(order, vec![0, 5, 10]);
    }

    #[test]
    fn drain_unsent_keeps_batches_that_were_sent() {
        let mut acc = Accumulator::new(settings());
        let t0 = Instant::now();
        let tp = TopicPartition::new("t", 0);
        append(&mut acc, &tp, 10, t0);
        let mut sent = acc.drain(BrokerId(1), t0 + LINGER, 1_000_000, leader, |_, _| true);
        let mut retried = sent.pop().unwrap();
        retried.attempts = 1;
        append(&mut acc, &tp, 10, t0);
        acc.reenqueue(retried, t0, Duration::ZERO);
        let unsent = acc.drain_unsent();
        assert_eq!(unsent.len(), 1);
        assert_eq!(unsent[0].attempts, 0);
        assert_eq!(acc.batch_count(), 1, "the retried batch stays");
    }

    #[test]
    fn expired_batches_are_removed() {
        let mut acc = Accumulator::new(settings());
        let t0 = Instant::now();
        append(&mut acc, &TopicPartition::new("t", 0), 10, t0);
        assert!(acc.expire(t0 + Duration::from_secs(119)).is_empty());
        assert_eq!(acc.expire(t0 + Duration::from_secs(120)).len(), 1);
        assert!(acc.is_empty());
    }
}
