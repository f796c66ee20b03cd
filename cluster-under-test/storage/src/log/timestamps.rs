//! Finding batches by timestamp, for ListOffsets: the first batch whose largest timestamp
//! reaches a target (the batch Kafka's `fetchOffsetByTimestamp` searches for a timestamp) and
//! the first batch holding the log's largest timestamp (`MAX_TIMESTAMP`, KIP-734).
//!
//! Each segment knows the first batch holding its largest timestamp (as Kafka's
//! `maxTimestampAndOffsetSoFar`), learned by one scan of its headers on first use and kept by
//! appends, so a search skips every segment whose largest timestamp is below the target and the
//! max-timestamp batch needs no scan. Kafka also keeps a time index per segment; this log does
//! not, so inside the one segment that can hold the answer the search reads batch headers, one
//! 61-byte positioned read per batch. Both run under the partition's lock, so the first lookup on
//! a large log stalls that partition's appends for as long as its scan takes. Finding the record
//! inside the batch is the caller's: records may be compressed, and decompression belongs to the
//! node's wire crate.

use std::ops::ControlFlow;

use super::*;

impl Log {
    /// The header of the first batch whose largest timestamp is at least `target_ms` and whose
    /// last offset is at least `from` and the log start; `None` when there is none.
    ///
    /// # Errors
    ///
    /// I/O errors and corrupt stored headers.
    pub fn first_batch_reaching_timestamp(
        &self,
        target_ms: i64,
        from: Offset,
    ) -> Result<Option<BatchHeader>> {
        let from = from.max(self.log_start_offset);
        for segment in self.segments_from(from) {
            let reaches = segment
                .largest_timestamp_batch()?
                .is_some_and(|largest| largest.max_timestamp_ms >= target_ms);
            if !reaches {
                continue;
            }
            let mut found = None;
            // Whether it broke is what `found` says.
            let _ = segment.visit_headers(from, &mut |header| {
                if header.max_timestamp_ms >= target_ms {
                    found = Some(*header);
                    ControlFlow::Break(())
                } else {
                    ControlFlow::Continue(())
                }
            })?;
            // The batch that reaches it may lie below `from`: then search on.
            if found.is_some() {
                return Ok(found);
            }
        }
        Ok(None)
    }

    /// The header of the first batch holding the log's largest timestamp (from the log start);
    /// `None` when the log is empty.
    ///
    /// # Errors
    ///
    /// I/O errors and corrupt stored headers.
    pub fn first_batch_with_max_timestamp(&self) -> Result<Option<BatchHeader>> {
        let start = self.log_start_offset;
        let mut best: Option<BatchHeader> = None;
        for segment in self.segments_from(start) {
            let Some(largest) = segment.largest_timestamp_batch()? else {
                continue;
            };
            if largest.last_offset() < start {
                // The segment's largest is gone below the log start (DeleteRecords): look at
                // what is left of it.
                let mut left: Option<BatchHeader> = None;
                let _ = segment.visit_headers(start, &mut |header| {
                    if left.is_none_or(|known| header.max_timestamp_ms > known.max_timestamp_ms) {
                        left = Some(*header);
                    }
                    ControlFlow::Continue(())
                })?;
                let Some(left) = left else { continue };
                if best.is_none_or(|known| left.max_timestamp_ms > known.max_timestamp_ms) {
                    best = Some(left);
                }
            } else if best.is_none_or(|known| largest.max_timestamp_ms > known.max_timestamp_ms) {
                best = Some(largest);
            }
        }
        Ok(best)
    }

    /// The segments from the one holding `from` on.
    fn segments_from(&self, from: Offset) -> &[LogSegment] {
        let first = self
            .segments
            .partition_point(|segment| segment.base_offset() <= from)
            .saturating_sub(1);
        &self.segments[first..]
    }
}

#[cfg(test)]
mod tests {
    use crate::builder::BatchBuilder;
    use crate::config::LogConfig;
    use crate::ids::{LeaderEpoch, Offset};
    use crate::log::{LoadCheckpoints, Log};
    use crate::topic_partition::TopicPartition;

    /// A log of batches with these record timestamps, one batch per inner slice, in small
    /// segments so a search crosses segment boundaries.
    fn log_of(dir: &std::path::Path, batches: &[&[i64]]) -> Log {
        let config = LogConfig {
            segment_bytes: 200,
            ..LogConfig::default()
        };
        let (mut log, _) = Log::open(
            dir,
            TopicPartition::new("t", 0),
            config,
            LoadCheckpoints::NEW,
        )
        .expect("open");
        for timestamps in batches {
            let mut builder = BatchBuilder::new(timestamps[0]);
            for &timestamp in *timestamps {
                builder.record_at(timestamp, None, Some(b"v"), &[]);
            }
            log.append_as_leader(&builder.build(), LeaderEpoch(0), 0)
                .expect("append");
        }
        log
    }

    #[test]
    fn the_batch_found_for_a_timestamp_is_the_first_whose_largest_timestamp_reaches_it() {
        let dir = tempfile::tempdir().unwrap();
        // Offsets 0-1, 2-3, 4-5, 6: timestamps out of order across batches, as producers'
        // clocks allow.
        let log = log_of(dir.path(), &[&[100, 150], &[300, 120], &[200, 250], &[400]]);
        assert!(
            log.segment_base_offsets().len() > 1,
            "the search crosses segments"
        );
        let base = |target, from| {
            log.first_batch_reaching_timestamp(target, Offset(from))
                .unwrap()
                .map(|header| header.base_offset.0)
        };
        assert_eq!(base(0, 0), Some(0));
        assert_eq!(base(150, 0), Some(0));
        assert_eq!(
            base(151, 0),
            Some(2),
            "largest 300 reaches 151 before 250 does"
        );
        assert_eq!(base(260, 0), Some(2));
        assert_eq!(base(301, 0), Some(6));
        assert_eq!(base(401, 0), None);
        assert_eq!(
            base(151, 4),
            Some(4),
            "batches ending before `from` are skipped"
        );
    }

    #[test]
    fn the_max_timestamp_batch_is_the_first_holding_the_largest_timestamp() {
        let dir = tempfile::tempdir().unwrap();
        let log = log_of(dir.path(), &[&[100], &[500, 10], &[200], &[500]]);
        let header = log.first_batch_with_max_timestamp().unwrap().unwrap();
        assert_eq!((header.base_offset.0, header.max_timestamp_ms), (1, 500));
        let empty_dir = tempfile::tempdir().unwrap();
        assert_eq!(
            log_of(empty_dir.path(), &[])
                .first_batch_with_max_timestamp()
                .unwrap(),
            None
        );
    }

    #[test]
    fn the_largest_timestamp_follows_appends_truncation_and_a_reopen() {
        let dir = tempfile::tempdir().unwrap();
        let mut log = log_of(dir.path(), &[&[100], &[300], &[200]]);
        let max = |log: &Log| {
            log.first_batch_with_max_timestamp()
                .unwrap()
                .unwrap()
                .base_offset
                .0
        };
        assert_eq!(max(&log), 1);
        let mut builder = BatchBuilder::new(900);
        builder.record_at(900, None, Some(b"v"), &[]);
        log.append_as_leader(&builder.build(), LeaderEpoch(0), 0)
            .unwrap();
        assert_eq!(max(&log), 3, "an append with a larger timestamp");
        let found = log.first_batch_reaching_timestamp(301, Offset(0)).unwrap();
        assert_eq!(found.map(|h| h.base_offset.0), Some(3));
        log.truncate_to(Offset(3)).unwrap();
        assert_eq!(max(&log), 1, "truncation forgets the removed batch");
        assert_eq!(
            log.first_batch_reaching_timestamp(301, Offset(0)).unwrap(),
            None
        );
    }

    #[test]
    fn records_below_the_log_start_are_not_searched() {
        let dir = tempfile::tempdir().unwrap();
        let mut log = log_of(dir.path(), &[&[900], &[100], &[200]]);
        log.set_high_watermark(Offset(3));
        log.delete_records_before(Offset(1)).unwrap();
        let header = log.first_batch_with_max_timestamp().unwrap().unwrap();
        assert_eq!(header.base_offset.0, 2, "the batch at 0 is gone");
        let found = log.first_batch_reaching_timestamp(150, Offset(0)).unwrap();
        assert_eq!(found.map(|h| h.base_offset.0), Some(2));
    }
}
