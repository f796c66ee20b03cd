//! The log's side of transactions: recording each batch in the producer state and writing
//! the aborted-transaction index entry when an ABORT marker completes a transaction (leader,
//! follower and replay alike), the leader's marker append (checked against the producer
//! state first), the last stable offset, and the aborted transactions a read_committed fetch
//! of a range needs.

use super::*;
use crate::control::{self, EndTxnMarker};
use crate::producer_state::{ProducerEpoch, ProducerId};
use crate::txn_index::AbortedTxn;

impl Log {
    /// Records one batch now in the log (`batch` its bytes); an aborted transaction it
    /// completes goes into the `.txnindex` of the segment holding the marker, with the last
    /// stable offset at that moment (Kafka's `updateTxnIndex`).
    pub(super) fn record_producer_batch(
        &mut self,
        header: &BatchHeader,
        batch: &[u8],
    ) -> Result<()> {
        let Some(completed) = self.producers.record(header, batch) else {
            return Ok(());
        };
        if !completed.is_aborted {
            return Ok(());
        }
        let entry = AbortedTxn {
            producer_id: completed.producer_id,
            first_offset: completed.first_offset,
            last_offset: completed.last_offset,
            last_stable_offset: self.producers.last_stable_offset_at_completion(&completed),
        };
        let holding = self
            .segments
            .partition_point(|segment| segment.base_offset() <= completed.last_offset)
            .saturating_sub(1);
        self.segments[holding].txn_index.append(entry)
    }

    /// Fsyncs the `.txnindex` of every segment with an entry whose marker is at or after
    /// `from` (and the directory, for the files those appends created): a producer snapshot
    /// above them must not become durable before they do, or a crash that drops them leaves
    /// a snapshot no replay reaches below, and aborted records readable as committed.
    pub(super) fn flush_txn_indexes_from(&self, from: Offset) -> Result<()> {
        let mut flushed = false;
        for segment in &self.segments {
            let touched = segment
                .txn_index
                .entries()
                .last()
                .is_some_and(|entry| entry.last_offset >= from);
            if touched {
                segment.txn_index.flush()?;
                flushed = true;
            }
        }
        if flushed {
            crate::durable::sync_dir(&self.dir)?;
        }
        Ok(())
    }

    /// For crash tests: each segment's base offset and the bytes of its `.txnindex` known
    /// durable (fsynced, or read at open); cutting each file to it is what a power loss
    /// keeps.
    #[doc(hidden)]
    pub fn txn_index_synced_lens(&self) -> Vec<(Offset, u64)> {
        self.segments
            .iter()
            .map(|segment| (segment.base_offset(), segment.txn_index.synced_len()))
            .collect()
    }

    /// Appends a transaction marker as the partition leader (WriteTxnMarkers): checks it
    /// against the producer state (an older producer epoch, an older coordinator epoch), then
    /// appends one control batch with the producer's id and epoch in `leader_epoch`.
    ///
    /// # Errors
    /// [`Error::MarkerRefused`] (nothing written), or the append's errors.
    pub fn append_marker_as_leader(
        &mut self,
        producer_id: i64,
        producer_epoch: i16,
        marker: EndTxnMarker,
        leader_epoch: LeaderEpoch,
        now_ms: i64,
    ) -> Result<AppendInfo> {
        self.producers.table().check_marker(
            ProducerId(producer_id),
            ProducerEpoch(producer_epoch),
            marker.coordinator_epoch,
        )?;
        let bytes = control::marker_batch(producer_id, producer_epoch, marker, now_ms);
        let validated = validate_producer_batches(&bytes, &self.config, now_ms)?;
        self.append_validated_as_leader(&bytes, validated, leader_epoch, now_ms)
    }

    /// The first offset of an open (or not yet replicated completed) transaction, if any.
    pub fn first_unstable_offset(&self) -> Option<Offset> {
        self.producers.first_unstable_offset()
    }

    /// The last stable offset (LSO): the high watermark, or the first unstable offset when
    /// that is lower. read_committed consumers read below it.
    pub fn last_stable_offset(&self) -> Offset {
        self.first_unstable_offset()
            .map_or(self.high_watermark, |first| first.min(self.high_watermark))
    }

    /// The aborted transactions that overlap `[start, end)` (a read_committed fetch from
    /// `start` whose records end before `end`), from the `.txnindex` of every segment that may
    /// hold their markers, in marker order (Kafka's `collectAbortedTransactions`).
    pub fn aborted_transactions(&self, start: Offset, end: Offset) -> Vec<AbortedTxn> {
        let first = self
            .segments
            .partition_point(|segment| segment.base_offset() <= start)
            .saturating_sub(1);
        self.segments[first..]
            .iter()
            .flat_map(|segment| segment.txn_index.entries())
            .filter(|txn| txn.last_offset >= start && txn.first_offset < end)
            .copied()
            .collect()
    }
}
