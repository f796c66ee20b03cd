//! Idempotent-producer state of one partition (kafka-semantics.md §2): per producer id, its
//! epoch and the last [`NUM_BATCHES_TO_RETAIN`] batches (first and last sequence, first and
//! last offset, timestamp), and the validation of a client batch against it (Kafka's
//! `ProducerStateEntry`, `ProducerAppendInfo`).
//!
//! Pure and synchronous: no I/O, no clock, no locks. The partition's [`crate::Log`] owns one
//! table and records every batch it appends (leader and follower), so dedupe survives a leader
//! change when the batch was replicated; the node checks a client batch with
//! [`ProducerStateTable::check`] before the leader append. Snapshots, recovery and truncation
//! live in `producer_snapshot.rs` and `log/producer.rs`. Expiry (`producer.id.expiration.ms`)
//! is not implemented: ids stay until the log is replayed without their batches. Transactions
//! (the open transaction's first offset, markers, coordinator epochs) are in `producer_state/txn.rs`.

mod txn;
mod verification;

pub use txn::CompletedTxn;
pub use verification::{VerificationGuard, VerificationGuards};

use std::collections::{HashMap, VecDeque};

use crate::batch::BatchHeader;
use crate::ids::Offset;

/// Batches remembered per producer for dedupe (`ProducerStateEntry.NUM_BATCHES_TO_RETAIN`);
/// the reason idempotence needs `max.in.flight.requests.per.connection ≤ 5`.
pub const NUM_BATCHES_TO_RETAIN: usize = 5;

/// An idempotent producer's id (`ProducerId`), handed out by `InitProducerId`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ProducerId(pub i64);

/// A producer's epoch; a batch with an older one than the partition knows is fenced.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ProducerEpoch(pub i16);

/// A per (producer, epoch, partition) record sequence number; wraps at `i32::MAX` to 0.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Sequence(pub i32);

impl Sequence {
    /// `self + delta`, wrapping past `i32::MAX` to 0 (`DefaultRecordBatch.incrementSequence`).
    pub fn plus(self, delta: i32) -> Sequence {
        if self.0 > i32::MAX - delta {
            Sequence(delta - (i32::MAX - self.0) - 1)
        } else {
            Sequence(self.0 + delta)
        }
    }

    /// `self - delta`, wrapping below 0 to `i32::MAX` (`DefaultRecordBatch.decrementSequence`).
    pub fn minus(self, delta: i32) -> Sequence {
        if self.0 < delta {
            Sequence(i32::MAX - (delta - self.0) + 1)
        } else {
            Sequence(self.0 - delta)
        }
    }

    /// Whether `next` directly follows `self` (`ProducerAppendInfo.inSequence`).
    pub fn is_followed_by(self, next: Sequence) -> bool {
        next.0 == self.0.wrapping_add(1) || (next.0 == 0 && self.0 == i32::MAX)
    }
}

/// The producer fields of one record batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProducerBatch {
    /// Who wrote it.
    pub producer_id: ProducerId,
    /// In which epoch.
    pub producer_epoch: ProducerEpoch,
    /// `BaseSequence`.
    pub first_sequence: Sequence,
    /// `BaseSequence + LastOffsetDelta`, wrapping.
    pub last_sequence: Sequence,
    /// The batch's `MaxTimestamp` (Kafka keeps it for the duplicate answer and for expiry).
    pub max_timestamp_ms: i64,
    /// Part of a transaction (the batch's transactional bit).
    pub is_transactional: bool,
}

impl ProducerBatch {
    /// The producer fields of a batch header; `None` for a batch without a producer id
    /// (`ProducerId = -1`: not idempotent, nothing to track).
    pub fn from_header(header: &BatchHeader) -> Option<ProducerBatch> {
        (header.producer_id >= 0).then(|| ProducerBatch {
            producer_id: ProducerId(header.producer_id),
            producer_epoch: ProducerEpoch(header.producer_epoch),
            first_sequence: Sequence(header.base_sequence),
            last_sequence: Sequence(header.base_sequence).plus(header.last_offset_delta.max(0)),
            max_timestamp_ms: header.max_timestamp_ms,
            is_transactional: header.is_transactional(),
        })
    }
}

/// A retained batch (`BatchMetadata`): its sequences and where it landed in the log.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BatchMetadata {
    /// First sequence of the batch.
    pub first_sequence: Sequence,
    /// Last sequence of the batch.
    pub last_sequence: Sequence,
    /// Offset of its first record.
    pub first_offset: Offset,
    /// Offset of its last record.
    pub last_offset: Offset,
    /// Its `MaxTimestamp`.
    pub timestamp_ms: i64,
}

/// What the partition knows of one producer (`ProducerStateEntry`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProducerEntry {
    /// The latest epoch seen in the log.
    pub epoch: ProducerEpoch,
    /// The last batches of that epoch, oldest first, at most [`NUM_BATCHES_TO_RETAIN`].
    pub batches: VecDeque<BatchMetadata>,
    /// The epoch of the transaction coordinator that wrote this producer's last marker (-1:
    /// none); a marker from an older coordinator is fenced.
    pub coordinator_epoch: i32,
    /// The first offset of the producer's open transaction, if any (Kafka's
    /// `currentTxnFirstOffset`): set by its first transactional batch, cleared by a marker.
    pub current_txn_first_offset: Option<Offset>,
    /// The timestamp of the producer's last write (Kafka's `lastTimestamp`, for expiry).
    pub last_timestamp_ms: i64,
}

impl ProducerEntry {
    /// An entry of `epoch` with no batch retained yet.
    pub fn new(epoch: ProducerEpoch) -> ProducerEntry {
        ProducerEntry {
            epoch,
            batches: VecDeque::new(),
            coordinator_epoch: -1,
            current_txn_first_offset: None,
            last_timestamp_ms: -1,
        }
    }
}

/// What to do with a client batch that passed validation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Append it.
    Append,
    /// A retry of a retained batch: append nothing and answer with the original offsets.
    Duplicate(BatchMetadata),
}

/// Why a client batch is refused; nothing is appended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum ProducerStateError {
    /// The batch's epoch is older than the partition's: a zombie (`INVALID_PRODUCER_EPOCH`).
    #[error("producer {producer_id:?} epoch {epoch:?} is older than the current {current:?}")]
    StaleEpoch {
        /// The producer.
        producer_id: ProducerId,
        /// The batch's epoch.
        epoch: ProducerEpoch,
        /// The partition's epoch for it.
        current: ProducerEpoch,
    },
    /// The batch does not continue the producer's sequence (`OUT_OF_ORDER_SEQUENCE_NUMBER`).
    #[error(
        "producer {producer_id:?} epoch {epoch:?}: sequence {first_sequence:?} does not follow {last_sequence:?}"
    )]
    OutOfOrderSequence {
        /// The producer.
        producer_id: ProducerId,
        /// The batch's epoch.
        epoch: ProducerEpoch,
        /// The batch's first sequence.
        first_sequence: Sequence,
        /// The last sequence retained for the producer (`None` for a new epoch, which must
        /// start at 0).
        last_sequence: Option<Sequence>,
    },
    /// A non-transactional batch from a producer whose transaction is open
    /// (`INVALID_TXN_STATE`).
    #[error(
        "producer {producer_id:?} wrote outside its open transaction (from {txn_first_offset:?})"
    )]
    InvalidTxnState {
        /// The producer.
        producer_id: ProducerId,
        /// Where its open transaction starts.
        txn_first_offset: Offset,
    },
    /// A marker from a coordinator older than the last one that wrote for the producer
    /// (`TRANSACTION_COORDINATOR_FENCED`).
    #[error(
        "producer {producer_id:?}: coordinator epoch {coordinator_epoch} is older than {current}"
    )]
    CoordinatorFenced {
        /// The producer.
        producer_id: ProducerId,
        /// The marker's coordinator epoch.
        coordinator_epoch: i32,
        /// The last coordinator epoch recorded.
        current: i32,
    },
    /// A transactional batch at a newer epoch while the producer's transaction at an older
    /// epoch is still open here: under TV2 the coordinator bumped the epoch when it prepared
    /// that transaction, whose marker has not arrived yet, and appending now would put the
    /// batch inside it, to be committed or aborted by the old marker (Kafka's KAFKA-18575:
    /// `CONCURRENT_TRANSACTIONS`, retried by the client until the marker lands).
    #[error(
        "producer {producer_id:?} epoch {epoch:?}: its transaction at {open_epoch:?} is still open"
    )]
    ConcurrentTransactions {
        /// The producer.
        producer_id: ProducerId,
        /// The batch's epoch.
        epoch: ProducerEpoch,
        /// The epoch of the open transaction.
        open_epoch: ProducerEpoch,
    },
}

impl ProducerStateError {
    /// The Kafka error code the response carries: 47 `INVALID_PRODUCER_EPOCH`, 45
    /// `OUT_OF_ORDER_SEQUENCE_NUMBER`, 48 `INVALID_TXN_STATE`, 52
    /// `TRANSACTION_COORDINATOR_FENCED` or 51 `CONCURRENT_TRANSACTIONS`.
    pub fn kafka_error_code(&self) -> i16 {
        match self {
            ProducerStateError::StaleEpoch { .. } => 47,
            ProducerStateError::OutOfOrderSequence { .. } => 45,
            ProducerStateError::InvalidTxnState { .. } => 48,
            ProducerStateError::CoordinatorFenced { .. } => 52,
            ProducerStateError::ConcurrentTransactions { .. } => 51,
        }
    }
}

/// The idempotent-producer state of one partition.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ProducerStateTable {
    producers: HashMap<ProducerId, ProducerEntry>,
}

impl ProducerStateTable {
    /// An empty table.
    pub fn new() -> ProducerStateTable {
        ProducerStateTable::default()
    }

    /// What the table knows of `producer_id`.
    pub fn entry(&self, producer_id: ProducerId) -> Option<&ProducerEntry> {
        self.producers.get(&producer_id)
    }

    /// How many producers the table tracks.
    pub fn len(&self) -> usize {
        self.producers.len()
    }

    /// Whether the table tracks no producer.
    pub fn is_empty(&self) -> bool {
        self.producers.is_empty()
    }

    /// Every producer and its entry, by ascending producer id (the snapshot order).
    pub fn entries(&self) -> Vec<(ProducerId, &ProducerEntry)> {
        let mut entries: Vec<_> = self
            .producers
            .iter()
            .map(|(id, entry)| (*id, entry))
            .collect();
        entries.sort_by_key(|(id, _)| *id);
        entries
    }

    /// Puts `entry` in for `producer_id`, replacing what was there (loading a snapshot).
    pub fn insert(&mut self, producer_id: ProducerId, entry: ProducerEntry) {
        self.producers.insert(producer_id, entry);
    }

    /// Forgets every producer.
    pub fn clear(&mut self) {
        self.producers.clear();
    }

    /// Validates a batch from a client, in Kafka's order (§2): a duplicate of a retained
    /// batch of the same epoch; an older epoch; a new epoch must start at sequence 0; the same
    /// epoch must continue at last sequence + 1. A producer the partition has no state for is
    /// accepted at any sequence (KIP-360: no `UNKNOWN_PRODUCER_ID` from Kafka 2.5 on).
    ///
    /// A batch that passes those checks is then refused when it is not transactional while the
    /// producer's transaction is open (`INVALID_TXN_STATE`, Kafka's `appendDataBatch`), or
    /// transactional at a newer epoch than the open transaction's (`CONCURRENT_TRANSACTIONS`).
    ///
    /// # Errors
    /// [`ProducerStateError`] when the batch must be refused.
    pub fn check(&self, batch: &ProducerBatch) -> Result<Verdict, ProducerStateError> {
        self.check_verified(batch, false)
    }

    /// [`Self::check`] of a batch the transaction coordinator `verified` (KIP-890): the
    /// coordinator has the partition in the producer's transaction at the batch's epoch, so a
    /// transaction at an older epoch still open here hangs (its coordinator will never end it
    /// here) and the batch is not refused with `CONCURRENT_TRANSACTIONS` for it: refused at
    /// every retry, the producer could never write here again (Kafka verifies unless the
    /// open transaction has the batch's epoch).
    ///
    /// # Errors
    /// As [`Self::check`].
    pub fn check_verified(
        &self,
        batch: &ProducerBatch,
        verified: bool,
    ) -> Result<Verdict, ProducerStateError> {
        let verdict = self.check_sequence(batch)?;
        if verdict == Verdict::Append
            && !verified
            && batch.is_transactional
            && let Some(entry) = self.producers.get(&batch.producer_id)
            && entry.current_txn_first_offset.is_some()
            && batch.producer_epoch > entry.epoch
        {
            return Err(ProducerStateError::ConcurrentTransactions {
                producer_id: batch.producer_id,
                epoch: batch.producer_epoch,
                open_epoch: entry.epoch,
            });
        }
        if verdict == Verdict::Append
            && !batch.is_transactional
            && let Some(txn_first_offset) = self
                .producers
                .get(&batch.producer_id)
                .and_then(|entry| entry.current_txn_first_offset)
        {
            return Err(ProducerStateError::InvalidTxnState {
                producer_id: batch.producer_id,
                txn_first_offset,
            });
        }
        Ok(verdict)
    }

    /// The idempotence part of [`Self::check`].
    fn check_sequence(&self, batch: &ProducerBatch) -> Result<Verdict, ProducerStateError> {
        let Some(entry) = self.producers.get(&batch.producer_id) else {
            return Ok(Verdict::Append);
        };
        if batch.producer_epoch == entry.epoch
            && let Some(original) = entry.batches.iter().find(|retained| {
                retained.first_sequence == batch.first_sequence
                    && retained.last_sequence == batch.last_sequence
            })
        {
            return Ok(Verdict::Duplicate(*original));
        }
        if batch.producer_epoch < entry.epoch {
            return Err(ProducerStateError::StaleEpoch {
                producer_id: batch.producer_id,
                epoch: batch.producer_epoch,
                current: entry.epoch,
            });
        }
        if batch.producer_epoch > entry.epoch {
            return if batch.first_sequence == Sequence(0) {
                Ok(Verdict::Append)
            } else {
                Err(ProducerStateError::OutOfOrderSequence {
                    producer_id: batch.producer_id,
                    epoch: batch.producer_epoch,
                    first_sequence: batch.first_sequence,
                    last_sequence: None,
                })
            };
        }
        match entry.batches.back() {
            // Same epoch but nothing retained (the epoch came with a TV2 marker): Kafka's
            // last sequence is -1 then, so the next batch must start at 0. An entry with no
            // epoch accepts any sequence, as Kafka's does.
            None if entry.epoch == ProducerEpoch(-1) || batch.first_sequence == Sequence(0) => {
                Ok(Verdict::Append)
            }
            None => Err(ProducerStateError::OutOfOrderSequence {
                producer_id: batch.producer_id,
                epoch: batch.producer_epoch,
                first_sequence: batch.first_sequence,
                last_sequence: None,
            }),
            Some(last) if last.last_sequence.is_followed_by(batch.first_sequence) => {
                Ok(Verdict::Append)
            }
            Some(last) => Err(ProducerStateError::OutOfOrderSequence {
                producer_id: batch.producer_id,
                epoch: batch.producer_epoch,
                first_sequence: batch.first_sequence,
                last_sequence: Some(last.last_sequence),
            }),
        }
    }

    /// Records a batch that is now in the log at `first_offset..=last_offset`, without
    /// validation (the log's order is the truth on the replication and replay paths). A
    /// different epoch replaces the retained batches, as `maybeUpdateProducerEpoch` does. A
    /// transactional batch of a producer with no open transaction opens one at `first_offset`.
    pub fn record(&mut self, batch: &ProducerBatch, first_offset: Offset, last_offset: Offset) {
        let entry = self
            .producers
            .entry(batch.producer_id)
            .or_insert_with(|| ProducerEntry::new(batch.producer_epoch));
        if entry.epoch != batch.producer_epoch {
            entry.epoch = batch.producer_epoch;
            entry.batches.clear();
        }
        entry.batches.push_back(BatchMetadata {
            first_sequence: batch.first_sequence,
            last_sequence: batch.last_sequence,
            first_offset,
            last_offset,
            timestamp_ms: batch.max_timestamp_ms,
        });
        entry.last_timestamp_ms = batch.max_timestamp_ms;
        if batch.is_transactional && entry.current_txn_first_offset.is_none() {
            entry.current_txn_first_offset = Some(first_offset);
        }
        while entry.batches.len() > NUM_BATCHES_TO_RETAIN {
            entry.batches.pop_front();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const PID: ProducerId = ProducerId(1000);

    fn batch(epoch: i16, first: i32, last: i32) -> ProducerBatch {
        ProducerBatch {
            producer_id: PID,
            producer_epoch: ProducerEpoch(epoch),
            first_sequence: Sequence(first),
            last_sequence: Sequence(last),
            max_timestamp_ms: 0,
            is_transactional: false,
        }
    }

    /// A table holding `batches` (epoch, first seq, last seq) appended back to back from
    /// offset 0, one offset per sequence.
    fn table(batches: &[(i16, i32, i32)]) -> ProducerStateTable {
        let mut table = ProducerStateTable::new();
        let mut offset = 0;
        for &(epoch, first, last) in batches {
            let count = i64::from(last - first);
            table.record(
                &batch(epoch, first, last),
                Offset(offset),
                Offset(offset + count),
            );
            offset += count + 1;
        }
        table
    }

    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    enum Expect {
        Append,
        DuplicateAt(i64),
        StaleEpoch,
        OutOfOrder,
    }

    /// (epoch, first sequence, last sequence) of a batch.
    type Batch = (i16, i32, i32);

    /// (name, batches already in the log, incoming batch, expected verdict).
    type Case = (&'static str, &'static [Batch], Batch, Expect);

    #[test]
    fn client_batches_are_judged_as_kafka_does() {
        use Expect::*;
        let cases: &[Case] = &[
            ("unknown producer at 0", &[], (0, 0, 4), Append),
            (
                "unknown producer at any sequence (KIP-360)",
                &[],
                (0, 17, 20),
                Append,
            ),
            ("next in sequence", &[(0, 0, 4)], (0, 5, 9), Append),
            ("gap", &[(0, 0, 4)], (0, 6, 9), OutOfOrder),
            (
                "retry of the last batch",
                &[(0, 0, 4)],
                (0, 0, 4),
                DuplicateAt(0),
            ),
            (
                "retry of an older retained batch",
                &[(0, 0, 4), (0, 5, 9), (0, 10, 14)],
                (0, 5, 9),
                DuplicateAt(5),
            ),
            (
                "same first sequence, different length",
                &[(0, 0, 4)],
                (0, 0, 3),
                OutOfOrder,
            ),
            (
                "retry outside the 5-batch window",
                &[
                    (0, 0, 0),
                    (0, 1, 1),
                    (0, 2, 2),
                    (0, 3, 3),
                    (0, 4, 4),
                    (0, 5, 5),
                ],
                (0, 0, 0),
                OutOfOrder,
            ),
            (
                "oldest batch still inside the window",
                &[
                    (0, 0, 0),
                    (0, 1, 1),
                    (0, 2, 2),
                    (0, 3, 3),
                    (0, 4, 4),
                    (0, 5, 5),
                ],
                (0, 1, 1),
                DuplicateAt(1),
            ),
            ("stale epoch", &[(3, 0, 4)], (2, 5, 9), StaleEpoch),
            (
                "stale epoch retrying a batch",
                &[(3, 0, 4)],
                (2, 0, 4),
                StaleEpoch,
            ),
            ("new epoch from 0", &[(0, 0, 4)], (1, 0, 2), Append),
            ("new epoch not from 0", &[(0, 0, 4)], (1, 5, 9), OutOfOrder),
            (
                "wrap past i32::MAX",
                &[(0, i32::MAX - 4, i32::MAX)],
                (0, 0, 3),
                Append,
            ),
        ];
        for (name, state, (epoch, first, last), expected) in cases {
            let verdict = table(state).check(&batch(*epoch, *first, *last));
            let got = match verdict {
                Ok(Verdict::Append) => Append,
                Ok(Verdict::Duplicate(original)) => DuplicateAt(original.first_offset.0),
                Err(ProducerStateError::StaleEpoch { .. }) => StaleEpoch,
                Err(ProducerStateError::OutOfOrderSequence { .. }) => OutOfOrder,
                Err(other) => panic!("{name}: {other}"),
            };
            assert_eq!(got, *expected, "{name}");
        }
    }

    #[test]
    fn a_new_epoch_in_the_log_replaces_the_retained_batches() {
        let table = table(&[(0, 0, 4), (1, 0, 1)]);
        let entry = table.entry(PID).unwrap();
        assert_eq!(entry.epoch, ProducerEpoch(1));
        assert_eq!(entry.batches.len(), 1);
        assert_eq!(entry.batches[0].first_offset, Offset(5));
    }

    #[test]
    fn only_the_last_five_batches_are_retained() {
        let table = table(&[
            (0, 0, 0),
            (0, 1, 1),
            (0, 2, 2),
            (0, 3, 3),
            (0, 4, 4),
            (0, 5, 5),
        ]);
        let entry = table.entry(PID).unwrap();
        assert_eq!(entry.batches.len(), NUM_BATCHES_TO_RETAIN);
        assert_eq!(entry.batches[0].first_sequence, Sequence(1));
    }

    #[test]
    fn last_sequence_wraps_like_kafka() {
        assert_eq!(Sequence(i32::MAX).plus(0), Sequence(i32::MAX));
        assert_eq!(Sequence(i32::MAX).plus(1), Sequence(0));
        assert_eq!(Sequence(i32::MAX - 1).plus(3), Sequence(1));
        assert_eq!(Sequence(5).plus(4), Sequence(9));
        assert_eq!(Sequence(0).minus(1), Sequence(i32::MAX));
        assert_eq!(Sequence(1).minus(3), Sequence(i32::MAX - 1));
        assert_eq!(Sequence(9).minus(4), Sequence(5));
        assert!(Sequence(i32::MAX).is_followed_by(Sequence(0)));
        assert!(Sequence(3).is_followed_by(Sequence(4)));
        assert!(!Sequence(3).is_followed_by(Sequence(5)));
    }

    #[test]
    fn errors_map_to_kafka_codes() {
        let stale = table(&[(1, 0, 0)]).check(&batch(0, 1, 1)).unwrap_err();
        assert_eq!(stale.kafka_error_code(), 47);
        let gap = table(&[(0, 0, 0)]).check(&batch(0, 2, 2)).unwrap_err();
        assert_eq!(gap.kafka_error_code(), 45);
    }
}
