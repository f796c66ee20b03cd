//! The idempotent producer's client-side state (`TransactionManager` without transactions):
//! the producer id and epoch from `InitProducerId`, the next sequence per partition, and the
//! base sequences sent but not yet resolved. Pure; `sender.rs` asks it before draining and
//! tells it every outcome.
//!
//! Rules (kafka-semantics.md §2):
//! - sequences are per partition, start at 0 for each (producer id, epoch), and wrap at
//!   `i32::MAX`; a batch keeps its sequence across retries so the broker can deduplicate;
//! - a retried batch goes out only when it is the lowest unresolved sequence of its partition
//!   and nothing else of that partition is in flight (one request in flight during retries);
//! - `OUT_OF_ORDER_SEQUENCE_NUMBER` for a batch while a lower sequence is still unresolved is
//!   the echo of that earlier failure: retry. Otherwise it is fatal for the batch: it fails,
//!   the epoch is bumped locally (a new producer id at `i16::MAX`) and sequences restart at 0;
//! - `UNKNOWN_PRODUCER_ID` is handled the same way (the broker lost our state).

use std::collections::{BTreeSet, HashMap};

use crate::ids::{ProducerEpoch, ProducerId, Sequence, TopicPartition};
use crate::producer::batch::{ProducerBatch, ProducerStamp};

/// What to do with a batch rejected as out of order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OutOfOrderAction {
    /// An earlier batch of the partition is unresolved: retry this one after it.
    Retry,
    /// Fail the batch; the epoch has been bumped and sequences reset.
    FailAndBump,
}

/// Producer id, epoch and sequences.
#[derive(Debug, Default)]
pub struct IdempotenceState {
    producer: Option<(ProducerId, ProducerEpoch)>,
    next_sequence: HashMap<TopicPartition, Sequence>,
    unresolved: HashMap<TopicPartition, BTreeSet<i32>>,
}

impl IdempotenceState {
    /// No producer id yet.
    pub fn new() -> IdempotenceState {
        IdempotenceState::default()
    }

    /// The producer id and epoch, once `InitProducerId` answered.
    pub fn producer(&self) -> Option<(ProducerId, ProducerEpoch)> {
        self.producer
    }

    /// Installs a producer id and epoch; sequences restart at 0.
    pub fn set_producer(&mut self, producer_id: ProducerId, producer_epoch: ProducerEpoch) {
        self.producer = Some((producer_id, producer_epoch));
        self.next_sequence.clear();
        self.unresolved.clear();
    }

    /// Bumps the epoch locally after a fatal sequence error. At `i16::MAX` the producer id is
    /// dropped so the sender asks `InitProducerId` for a new one.
    pub fn bump_epoch(&mut self) {
        self.producer = match self.producer {
            Some((id, epoch)) if epoch.0 < i16::MAX => Some((id, ProducerEpoch(epoch.0 + 1))),
            _ => None,
        };
        self.next_sequence.clear();
        self.unresolved.clear();
    }

    /// Whether `batch` may be drained now, given how many batches of its partition are in
    /// flight. Re-stamps batches whose stamp belongs to an older epoch.
    pub fn may_drain(&mut self, batch: &ProducerBatch, in_flight: usize) -> bool {
        let Some((id, epoch)) = self.producer else {
            return false;
        };
        match batch.stamp {
            None => true,
            Some(stamp) if stamp.producer_id != id || stamp.producer_epoch != epoch => true,
            Some(stamp) => {
                in_flight == 0
                    && self
                        .unresolved
                        .get(&batch.partition)
                        .and_then(|s| s.first())
                        .is_none_or(|lowest| *lowest == stamp.base_sequence.0)
            }
        }
    }

    /// Stamps a batch being drained (keeps a current stamp; replaces a stale or missing one).
    pub fn stamp(&mut self, batch: &mut ProducerBatch) {
        let (id, epoch) = self.producer.expect("may_drain checked the producer id");
        if let Some(stamp) = batch.stamp
            && stamp.producer_id == id
            && stamp.producer_epoch == epoch
        {
            return;
        }
        let next = self
            .next_sequence
            .entry(batch.partition.clone())
            .or_insert(Sequence(0));
        let base_sequence = *next;
        *next = base_sequence.advance(batch.record_count() as i32);
        self.unresolved
            .entry(batch.partition.clone())
            .or_default()
            .insert(base_sequence.0);
        batch.stamp = Some(ProducerStamp {
            producer_id: id,
            producer_epoch: epoch,
            base_sequence,
        });
    }

    /// The batch succeeded or failed for good: its sequence is resolved.
    pub fn resolve(&mut self, partition: &TopicPartition, stamp: Option<ProducerStamp>) {
        if let (Some(stamp), Some(set)) = (stamp, self.unresolved.get_mut(partition)) {
            set.remove(&stamp.base_sequence.0);
        }
    }

    /// Decides about an `OUT_OF_ORDER_SEQUENCE_NUMBER` (or `UNKNOWN_PRODUCER_ID`) answer.
    pub fn on_out_of_order(
        &mut self,
        partition: &TopicPartition,
        stamp: Option<ProducerStamp>,
    ) -> OutOfOrderAction {
        let earlier_unresolved = match (stamp, self.unresolved.get(partition)) {
            (Some(stamp), Some(set)) => set.iter().any(|s| *s < stamp.base_sequence.0),
            _ => false,
        };
        if earlier_unresolved {
            OutOfOrderAction::Retry
        } else {
            self.bump_epoch();
            OutOfOrderAction::FailAndBump
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::producer::batch::PendingRecord;
    use std::time::Instant;

    fn batch(records: usize) -> ProducerBatch {
        let record = || PendingRecord {
            key: None,
            value: None,
            headers: Vec::new(),
            timestamp_ms: 0,
            completion: tokio::sync::oneshot::channel().0,
        };
        let mut b = ProducerBatch::new(
            TopicPartition::new("t", 0),
            record(),
            100_000,
            None,
            Instant::now(),
        );
        for _ in 1..records {
            b.try_append(record()).unwrap();
        }
        b
    }

    #[test]
    fn nothing_drains_before_init_producer_id() {
        let mut state = IdempotenceState::new();
        assert!(!state.may_drain(&batch(1), 0));
        state.set_producer(ProducerId(7), ProducerEpoch(0));
        assert!(state.may_drain(&batch(1), 0));
    }

    #[test]
    fn sequences_advance_per_partition_by_record_count() {
        let mut state = IdempotenceState::new();
        state.set_producer(ProducerId(7), ProducerEpoch(0));
        let mut a = batch(3);
        let mut b = batch(2);
        state.stamp(&mut a);
        state.stamp(&mut b);
        assert_eq!(a.stamp.unwrap().base_sequence, Sequence(0));
        assert_eq!(b.stamp.unwrap().base_sequence, Sequence(3));
        // A retry keeps its stamp.
        let before = a.stamp;
        state.stamp(&mut a);
        assert_eq!(a.stamp, before);
    }

    #[test]
    fn a_retry_waits_until_it_is_the_lowest_unresolved_and_nothing_is_in_flight() {
        let mut state = IdempotenceState::new();
        state.set_producer(ProducerId(7), ProducerEpoch(0));
        let mut a = batch(1);
        let mut b = batch(1);
        state.stamp(&mut a);
        state.stamp(&mut b);
        assert!(!state.may_drain(&b, 0), "b must wait for a");
        assert!(!state.may_drain(&a, 1), "one in flight during retries");
        assert!(state.may_drain(&a, 0));
        state.resolve(&a.partition, a.stamp);
        assert!(state.may_drain(&b, 0));
    }

    #[test]
    fn out_of_order_behind_an_unresolved_batch_is_retried_else_bumps_the_epoch() {
        let mut state = IdempotenceState::new();
        state.set_producer(ProducerId(7), ProducerEpoch(0));
        let mut a = batch(1);
        let mut b = batch(1);
        state.stamp(&mut a);
        state.stamp(&mut b);
        assert_eq!(
            state.on_out_of_order(&b.partition, b.stamp),
            OutOfOrderAction::Retry
        );
        assert_eq!(
            state.on_out_of_order(&a.partition, a.stamp),
            OutOfOrderAction::FailAndBump
        );
        assert_eq!(state.producer(), Some((ProducerId(7), ProducerEpoch(1))));
        // b's stamp is now stale: it is re-stamped from sequence 0 of the new epoch.
        assert!(state.may_drain(&b, 0));
        state.stamp(&mut b);
        assert_eq!(b.stamp.unwrap().base_sequence, Sequence(0));
        assert_eq!(b.stamp.unwrap().producer_epoch, ProducerEpoch(1));
    }

    #[test]
    fn epoch_exhaustion_drops_the_producer_id() {
        let mut state = IdempotenceState::new();
        state.set_producer(ProducerId(7), ProducerEpoch(i16::MAX));
        state.bump_epoch();
        assert_eq!(state.producer(), None);
    }
}
