//! The transactional part of a partition's producer state (KIP-98; Kafka's
//! `ProducerAppendInfo.appendEndTxnMarker`): checking a transaction marker against what the
//! partition knows of its producer (an older producer epoch, an older coordinator epoch) and
//! recording it, which closes the producer's open transaction. Pure, like the table.

use crate::control::{ControlType, EndTxnMarker};
use crate::ids::Offset;

use super::{ProducerEntry, ProducerEpoch, ProducerId, ProducerStateError, ProducerStateTable};

/// A transaction closed by a marker (`CompletedTxn`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CompletedTxn {
    /// Whose transaction.
    pub producer_id: ProducerId,
    /// Its first record.
    pub first_offset: Offset,
    /// Its marker.
    pub last_offset: Offset,
    /// Closed by an ABORT marker.
    pub is_aborted: bool,
}

impl ProducerStateTable {
    /// Checks a marker the coordinator wants written for `producer_id` (Kafka's
    /// `checkProducerEpoch` and `checkCoordinatorEpoch`): an epoch older than the partition's
    /// is `INVALID_PRODUCER_EPOCH`, a coordinator epoch older than the last marker's is
    /// `TRANSACTION_COORDINATOR_FENCED`. A producer the partition does not know passes.
    ///
    /// # Errors
    /// [`ProducerStateError::StaleEpoch`] or [`ProducerStateError::CoordinatorFenced`].
    pub fn check_marker(
        &self,
        producer_id: ProducerId,
        producer_epoch: ProducerEpoch,
        coordinator_epoch: i32,
    ) -> Result<(), ProducerStateError> {
        let Some(entry) = self.producers.get(&producer_id) else {
            return Ok(());
        };
        if producer_epoch < entry.epoch {
            return Err(ProducerStateError::StaleEpoch {
                producer_id,
                epoch: producer_epoch,
                current: entry.epoch,
            });
        }
        if coordinator_epoch < entry.coordinator_epoch {
            return Err(ProducerStateError::CoordinatorFenced {
                producer_id,
                coordinator_epoch,
                current: entry.coordinator_epoch,
            });
        }
        Ok(())
    }

    /// Records a marker now in the log at `offset`, without validation (the log's order is the
    /// truth): the producer's open transaction, if any, is completed; its epoch becomes the
    /// marker's (a newer one drops the retained batches); the coordinator epoch is kept for
    /// fencing. A marker for no open transaction completes nothing (a retried marker).
    pub fn record_marker(
        &mut self,
        producer_id: ProducerId,
        producer_epoch: ProducerEpoch,
        marker: EndTxnMarker,
        offset: Offset,
        timestamp_ms: i64,
    ) -> Option<CompletedTxn> {
        let entry = self
            .producers
            .entry(producer_id)
            .or_insert_with(|| ProducerEntry::new(producer_epoch));
        if entry.epoch != producer_epoch {
            entry.epoch = producer_epoch;
            entry.batches.clear();
        }
        let completed = entry
            .current_txn_first_offset
            .take()
            .map(|first_offset| CompletedTxn {
                producer_id,
                first_offset,
                last_offset: offset,
                is_aborted: marker.control_type == ControlType::Abort,
            });
        entry.coordinator_epoch = marker.coordinator_epoch;
        entry.last_timestamp_ms = timestamp_ms;
        completed
    }

    /// The first offsets of every open transaction, with their producers.
    pub fn open_transactions(&self) -> Vec<(Offset, ProducerId)> {
        let mut open: Vec<_> = self
            .producers
            .iter()
            .filter_map(|(id, entry)| entry.current_txn_first_offset.map(|first| (first, *id)))
            .collect();
        open.sort();
        open
    }
}

#[cfg(test)]
mod tests {
    use super::super::{ProducerBatch, Sequence, Verdict};
    use super::*;

    const PID: ProducerId = ProducerId(7);

    fn data(epoch: i16, first: i32, transactional: bool) -> ProducerBatch {
        ProducerBatch {
            producer_id: PID,
            producer_epoch: ProducerEpoch(epoch),
            first_sequence: Sequence(first),
            last_sequence: Sequence(first),
            max_timestamp_ms: 0,
            is_transactional: transactional,
        }
    }

    fn marker(control_type: ControlType, coordinator_epoch: i32) -> EndTxnMarker {
        EndTxnMarker {
            control_type,
            coordinator_epoch,
        }
    }

    /// What happens at each step of a producer's life in one partition.
    enum Step {
        /// A data batch (epoch, first sequence, transactional) at the next offset.
        Data(i16, i32, bool),
        /// A marker (epoch, type, coordinator epoch) at the next offset.
        Marker(i16, ControlType, i32),
    }

    /// Replays `steps` from offset 0; returns the table and every completed transaction.
    fn replay(steps: &[Step]) -> (ProducerStateTable, Vec<CompletedTxn>) {
        let mut table = ProducerStateTable::new();
        let mut completed = Vec::new();
        for (offset, step) in steps.iter().enumerate() {
            let offset = Offset(offset as i64);
            match *step {
                Step::Data(epoch, first, txn) => {
                    table.record(&data(epoch, first, txn), offset, offset)
                }
                Step::Marker(epoch, kind, coordinator) => completed.extend(table.record_marker(
                    PID,
                    ProducerEpoch(epoch),
                    marker(kind, coordinator),
                    offset,
                    0,
                )),
            }
        }
        (table, completed)
    }

    /// (name, steps, the open transaction's first offset after them, completed transactions
    /// as (first, last, aborted)).
    type Case = (
        &'static str,
        &'static [Step],
        Option<i64>,
        &'static [(i64, i64, bool)],
    );

    #[test]
    fn transactions_open_at_their_first_batch_and_close_at_the_marker() {
        use ControlType::*;
        use Step::*;
        let cases: &[Case] = &[
            ("open", &[Data(0, 0, true), Data(0, 1, true)], Some(0), &[]),
            (
                "commit",
                &[Data(0, 0, true), Data(0, 1, true), Marker(0, Commit, 0)],
                None,
                &[(0, 2, false)],
            ),
            (
                "abort",
                &[Data(0, 0, true), Marker(0, Abort, 0)],
                None,
                &[(0, 1, true)],
            ),
            (
                "second transaction after a commit",
                &[Data(0, 0, true), Marker(0, Commit, 0), Data(0, 1, true)],
                Some(2),
                &[(0, 1, false)],
            ),
            (
                "marker with nothing open (a retry)",
                &[Marker(0, Abort, 0)],
                None,
                &[],
            ),
            (
                "idempotent data opens nothing",
                &[Data(0, 0, false)],
                None,
                &[],
            ),
        ];
        for (name, steps, open, completed) in cases {
            let (table, done) = replay(steps);
            let entry = table.entry(PID).unwrap();
            assert_eq!(entry.current_txn_first_offset, open.map(Offset), "{name}");
            let done: Vec<_> = done
                .iter()
                .map(|txn| (txn.first_offset.0, txn.last_offset.0, txn.is_aborted))
                .collect();
            assert_eq!(done, *completed, "{name}");
        }
    }

    /// TV2: the coordinator answers EndTxn at the bumped epoch before its marker reaches the
    /// partition. The next transaction's first batch, at that epoch, must wait for the
    /// marker: appended now, it would join the open transaction and be committed (or
    /// aborted) by the old marker.
    #[test]
    fn a_newer_epoch_waits_for_the_open_transaction_s_marker() {
        use ControlType::*;
        use Step::*;
        let check = |table: &ProducerStateTable, batch: ProducerBatch| {
            table
                .check(&batch)
                .map_err(|error| error.kafka_error_code())
        };
        let (open, _) = replay(&[Data(3, 0, true), Data(3, 1, true)]);
        assert_eq!(check(&open, data(4, 0, true)), Err(51), "next transaction");
        assert_eq!(
            check(&open, data(3, 2, true)),
            Ok(Verdict::Append),
            "same one"
        );
        let (closed, _) = replay(&[Data(3, 0, true), Marker(4, Commit, 0)]);
        assert_eq!(
            check(&closed, data(4, 0, true)),
            Ok(Verdict::Append),
            "after it"
        );
        let (idle, _) = replay(&[Data(3, 0, false)]);
        assert_eq!(
            check(&idle, data(4, 0, true)),
            Ok(Verdict::Append),
            "none open"
        );
    }

    /// A verified batch (the coordinator has the partition in the transaction at its epoch)
    /// is not held back by an older open transaction: that one hangs, and refusing the batch
    /// at every retry would block the producer here for good.
    #[test]
    fn a_verified_newer_epoch_is_not_held_back_by_a_hanging_transaction() {
        use Step::*;
        let (open, _) = replay(&[Data(3, 0, true)]);
        let check = |batch: ProducerBatch, verified: bool| {
            open.check_verified(&batch, verified)
                .map_err(|error| error.kafka_error_code())
        };
        let cases = [
            (data(4, 0, true), false, Err(51), "unverified, newer"),
            (
                data(4, 0, true),
                true,
                Ok(Verdict::Append),
                "verified, newer",
            ),
            (data(3, 1, true), true, Ok(Verdict::Append), "same epoch"),
            (data(2, 0, true), true, Err(47), "older epoch: still fenced"),
            (
                data(4, 1, true),
                true,
                Err(45),
                "new epoch: sequence 0 first",
            ),
        ];
        for (batch, verified, expected, why) in cases {
            assert_eq!(check(batch, verified), expected, "{why}");
        }
    }

    #[test]
    fn markers_are_fenced_by_producer_and_coordinator_epochs() {
        use ControlType::*;
        use Step::*;
        let (table, _) = replay(&[Data(3, 0, true), Marker(3, Commit, 5)]);
        let check = |epoch, coordinator| {
            table
                .check_marker(PID, ProducerEpoch(epoch), coordinator)
                .map_err(|error| error.kafka_error_code())
        };
        assert_eq!(check(3, 5), Ok(()), "same epochs (a retried marker)");
        assert_eq!(check(4, 6), Ok(()), "newer epochs");
        assert_eq!(check(2, 5), Err(47), "stale producer epoch");
        assert_eq!(check(3, 4), Err(52), "stale coordinator epoch");
        assert_eq!(
            ProducerStateTable::new().check_marker(PID, ProducerEpoch(0), 0),
            Ok(()),
            "unknown producer"
        );
    }

    #[test]
    fn a_marker_with_a_new_epoch_takes_it_and_drops_the_batches() {
        use Step::*;
        let (table, _) = replay(&[Data(0, 0, true), Marker(1, ControlType::Abort, 0)]);
        let entry = table.entry(PID).unwrap();
        assert_eq!(entry.epoch, ProducerEpoch(1));
        assert!(entry.batches.is_empty());
        assert_eq!(entry.coordinator_epoch, 0);
        // Issue #13: the next batch at the marker's epoch must start at sequence 0 (Kafka's
        // last sequence is -1 after the bump), not at any sequence.
        let out_of_order = table.check(&data(1, 5, true)).unwrap_err();
        assert_eq!(out_of_order.kafka_error_code(), 45);
        assert_eq!(table.check(&data(1, 0, true)), Ok(Verdict::Append));
    }

    #[test]
    fn non_transactional_data_inside_an_open_transaction_is_invalid_txn_state() {
        use Step::*;
        let (table, _) = replay(&[Data(0, 0, true)]);
        let refused = table.check(&data(0, 1, false)).unwrap_err();
        assert_eq!(refused.kafka_error_code(), 48);
        assert_eq!(table.check(&data(0, 1, true)), Ok(Verdict::Append));
        // A stale epoch is still INVALID_PRODUCER_EPOCH, checked first, as Kafka does.
        let (table, _) = replay(&[Data(1, 0, true)]);
        assert_eq!(
            table
                .check(&data(0, 1, false))
                .unwrap_err()
                .kafka_error_code(),
            47
        );
        let (table, _) = replay(&[Data(0, 0, true), Marker(0, ControlType::Commit, 0)]);
        assert_eq!(table.check(&data(0, 1, false)), Ok(Verdict::Append));
    }
}
