//! Removing records from a partition's log: truncation at a follower's divergence point, full
//! truncation to restart at an offset (an unclean election, or a follower below the leader's
//! log start), and deleting records below a new log start. Each keeps `log.rs`'s invariants and
//! rebuilds the producer state (`log/producer.rs`).

use super::*;

impl Log {
    /// Removes every record at or after `offset` (follower divergence truncation). A batch
    /// containing `offset` is removed whole, so the new log end is the start of that batch.
    /// Below the log start this empties the log and restarts it at `offset`. The high watermark
    /// and recovery point are clamped and the epoch cache truncated. Returns whether anything
    /// was removed.
    ///
    /// # Errors
    ///
    /// I/O errors.
    pub fn truncate_to(&mut self, offset: Offset) -> Result<bool> {
        if offset >= self.log_end_offset() {
            return Ok(false);
        }
        if offset < self.log_start_offset {
            self.truncate_fully_and_start_at(offset)?;
            return Ok(true);
        }
        while self.segments.len() > 1 && self.active().base_offset() > offset {
            let segment = self.segments.pop().expect("checked non-empty");
            segment.delete()?;
        }
        let removed_bytes = self.active_mut().truncate_to(offset)?;
        let log_end = self.log_end_offset();
        tracing::info!(tp = %self.tp, offset = offset.0, log_end = log_end.0, removed_bytes, "truncated log");
        self.recovery_point = self.recovery_point.min(log_end);
        self.high_watermark = self.high_watermark.min(log_end);
        self.epoch_cache.truncate_from_end(log_end)?;
        // Batches above the cut may be in the table: reload from a snapshot at or below it.
        self.rebuild_producer_state(log_end)?;
        self.assert_invariants();
        Ok(true)
    }

    /// Deletes every segment and restarts the log empty at `offset` (a follower whose log is
    /// entirely behind the leader's log start). Clears the epoch cache.
    ///
    /// # Errors
    ///
    /// I/O errors.
    pub fn truncate_fully_and_start_at(&mut self, offset: Offset) -> Result<()> {
        for segment in self.segments.drain(..) {
            segment.delete()?;
        }
        let segment = LogSegment::create(&self.dir, offset, &self.config)?;
        durable::sync_dir(&self.dir)?;
        self.segments.push(segment);
        self.log_start_offset = offset;
        self.recovery_point = offset;
        self.high_watermark = offset;
        self.epoch_cache.clear()?;
        self.producers.truncate_fully_and_start_at(offset)?;
        self.rebuild_producer_state(offset)?;
        tracing::info!(tp = %self.tp, offset = offset.0, "truncated log fully");
        self.assert_invariants();
        Ok(())
    }

    /// Advances the log start offset to `offset` (DeleteRecords / retention) and deletes the
    /// segments wholly below it. The caller enforces `offset <= high_watermark` if it wants
    /// Kafka's DeleteRecords rule. Returns the new log start offset.
    ///
    /// # Errors
    ///
    /// [`Error::OffsetOutOfRange`] when `offset` is beyond the log end; I/O errors.
    pub fn delete_records_before(&mut self, offset: Offset) -> Result<Offset> {
        let log_end = self.log_end_offset();
        if offset > log_end {
            return Err(Error::OffsetOutOfRange {
                requested: offset,
                log_start: self.log_start_offset,
                log_end,
            });
        }
        if offset <= self.log_start_offset {
            return Ok(self.log_start_offset);
        }
        self.log_start_offset = offset;
        self.high_watermark = self.high_watermark.max(offset);
        if offset == log_end && self.active().size().0 > 0 {
            // Everything is below the new start: roll so the old active segment can go too.
            self.roll(log_end)?;
        }
        let deletable = self
            .segments
            .windows(2)
            .take_while(|pair| pair[1].base_offset() <= offset)
            .count();
        for segment in self.segments.drain(..deletable) {
            self.producers.delete_snapshot(segment.base_offset())?;
            segment.delete()?;
        }
        self.producers.on_log_start_offset_incremented(offset);
        self.epoch_cache.truncate_from_start(offset)?;
        tracing::info!(tp = %self.tp, log_start = offset.0, deleted_segments = deletable, "advanced log start offset");
        self.assert_invariants();
        Ok(offset)
    }
}
