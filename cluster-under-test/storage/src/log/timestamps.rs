//! Finding batches by timestamp, for ListOffsets: the first batch whose largest timestamp
//! reaches a target (the batch Kafka's `fetchOffsetByTimestamp` searches for a timestamp) and
//! the first batch holding the log's largest timestamp (`MAX_TIMESTAMP`, KIP-734).
//!
//! Kafka keeps a time index per segment and each segment's largest timestamp in memory; this log
//! has neither yet, so both scan batch headers from the log start, one 61-byte positioned read
//! per batch. Finding the record inside the batch is the caller's: records may be compressed,
//! and decompression belongs to the node's wire crate.

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
        let mut found = None;
        self.visit_headers(from.max(self.log_start_offset), &mut |header| {
            if header.max_timestamp_ms >= target_ms {
                found = Some(*header);
                ControlFlow::Break(())
            } else {
                ControlFlow::Continue(())
            }
        })?;
        Ok(found)
    }

    /// The header of the first batch holding the log's largest timestamp (from the log start);
    /// `None` when the log is empty.
    ///
    /// # Errors
    ///
    /// I/O errors and corrupt stored headers.
    pub fn first_batch_with_max_timestamp(&self) -> Result<Option<BatchHeader>> {
        let mut best: Option<BatchHeader> = None;
        self.visit_headers(self.log_start_offset, &mut |header| {
            if best.is_none_or(|best| header.max_timestamp_ms > best.max_timestamp_ms) {
                best = Some(*header);
            }
            ControlFlow::Continue(())
        })?;
        Ok(best)
    }

    /// Visits the header of every batch whose last offset is at least `from`, in offset order,
    /// until `visit` breaks.
    fn visit_headers(
        &self,
        from: Offset,
        visit: &mut dyn FnMut(&BatchHeader) -> ControlFlow<()>,
    ) -> Result<()> {
        let first = self
            .segments
            .partition_point(|segment| segment.base_offset() <= from)
            .saturating_sub(1);
        for segment in &self.segments[first..] {
            if segment.visit_headers(from, visit)?.is_break() {
                break;
            }
        }
        Ok(())
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
