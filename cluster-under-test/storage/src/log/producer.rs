//! The log's side of producer state: rebuilding the table from the newest usable snapshot at or
//! below a point and replaying only the batches after it (Kafka's
//! `UnifiedLog.rebuildProducerState`), at open, after a truncation and after a full truncation,
//! and the accessors the node uses. Appends, rolls and segment deletions update the
//! [`ProducerStateManager`] from `log.rs`.

use crate::batch;
use crate::error::Result;
use crate::ids::Offset;
use crate::log::Log;
use crate::producer_state::{ProducerId, ProducerStateTable};
use crate::producer_state_manager::ProducerStateManager;

/// Bytes read at a time while replaying.
const REPLAY_READ_BYTES: usize = 1 << 20;

/// What the last rebuild of the producer state did, for logs, tests and benchmarks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ProducerStateLoad {
    /// The snapshot the table was loaded from (`None`: none usable, or the table was already
    /// built up to the target).
    pub snapshot_offset: Option<Offset>,
    /// Where the replay started.
    pub replayed_from: Offset,
    /// The offset the state was rebuilt up to (exclusive).
    pub rebuilt_to: Offset,
    /// Batches read from the log during the replay.
    pub batches_replayed: u64,
}

impl Log {
    /// The idempotent-producer state of this partition, as of the log end.
    pub fn producer_state(&self) -> &ProducerStateTable {
        self.producers.table()
    }

    /// Takes the KIP-890 verification guard of `producer_id` before the coordinator is asked
    /// about its first transactional batch here (Kafka's `maybeStartTransactionVerification`).
    pub fn start_transaction_verification(
        &mut self,
        producer_id: ProducerId,
    ) -> crate::producer_state::VerificationGuard {
        self.producers.start_verification(producer_id)
    }

    /// Whether `guard` still holds for `producer_id`: no marker for it and no append that
    /// opened its transaction since it was taken. An append opening a transaction under a
    /// guard that no longer holds must be refused (`INVALID_TXN_STATE`).
    pub fn transaction_verification_holds(
        &self,
        producer_id: ProducerId,
        guard: crate::producer_state::VerificationGuard,
    ) -> bool {
        self.producers.verification_holds(producer_id, guard)
    }

    /// The producer state manager (snapshot offsets, map end).
    pub fn producer_state_manager(&self) -> &ProducerStateManager {
        &self.producers
    }

    /// What the last rebuild of the producer state (open or truncation) did.
    pub fn producer_state_load(&self) -> ProducerStateLoad {
        self.producer_load
    }

    /// Writes a producer snapshot at the log end, as Kafka does when a log is closed on clean
    /// shutdown (after the flush, so the snapshot never describes data that is not on disk).
    /// Returns whether a new snapshot was written.
    ///
    /// # Errors
    /// I/O errors.
    pub fn take_producer_snapshot(&mut self) -> Result<bool> {
        self.flush()?;
        self.producers.update_map_end_offset(self.log_end_offset());
        self.producers.take_snapshot()
    }

    /// Rebuilds the producer state up to `last_offset` (the log end): deletes snapshots above
    /// it, loads the newest usable one at or below it, replays the batches after it, taking
    /// snapshots at the bases of the last two segments on the way and one at `last_offset`.
    ///
    /// # Errors
    /// I/O errors; a stored batch failing its CRC during the replay.
    pub(crate) fn rebuild_producer_state(&mut self, last_offset: Offset) -> Result<()> {
        let bases = self.segment_base_offsets();
        let mut to_snapshot: Vec<Offset> = bases.iter().rev().take(2).copied().collect();
        to_snapshot.push(last_offset);
        let log_start = self.log_start_offset;
        let snapshot_offset = self.producers.truncate_and_reload(log_start, last_offset)?;
        let replayed_from = self.producers.map_end_offset();
        // The replay writes the aborted-transaction entries of what it reads again.
        for segment in &mut self.segments {
            segment.txn_index.truncate_to(replayed_from)?;
        }
        let mut batches_replayed = 0;
        if last_offset > replayed_from {
            for (index, base) in bases.iter().enumerate() {
                let segment_end = bases.get(index + 1).copied().unwrap_or(last_offset);
                let map_end = self.producers.map_end_offset();
                if segment_end <= map_end || *base >= last_offset {
                    continue;
                }
                let start = (*base).max(map_end).max(log_start);
                self.producers.update_map_end_offset(start);
                if to_snapshot.contains(base) {
                    self.flush_txn_indexes_from(replayed_from)?;
                    self.producers.take_snapshot()?;
                }
                batches_replayed +=
                    self.replay_producer_batches(start, segment_end.min(last_offset))?;
            }
        }
        self.producers.update_map_end_offset(last_offset);
        self.flush_txn_indexes_from(replayed_from)?;
        self.producers.take_snapshot()?;
        // Transactions the replay completed below the high watermark are stable.
        self.producers
            .on_high_watermark_updated(self.high_watermark.min(last_offset));
        self.producer_load = ProducerStateLoad {
            snapshot_offset,
            replayed_from,
            rebuilt_to: last_offset,
            batches_replayed,
        };
        tracing::debug!(tp = %self.tp, load = ?self.producer_load, "producer state rebuilt");
        Ok(())
    }

    /// Records every batch from `start` up to `end` (within one segment).
    fn replay_producer_batches(&mut self, start: Offset, end: Offset) -> Result<u64> {
        let mut position = start;
        let mut batches = 0;
        while position < end {
            let read = self.read(position, REPLAY_READ_BYTES, end, true)?;
            if read.batch_count == 0 || read.next_offset <= position {
                break;
            }
            for item in batch::batches(&read.records) {
                let Ok((at, header)) = item else { break };
                let bytes = &read.records[at..at + header.size_bytes()];
                self.record_producer_batch(&header, bytes)?;
                batches += 1;
            }
            position = read.next_offset;
        }
        Ok(batches)
    }
}
