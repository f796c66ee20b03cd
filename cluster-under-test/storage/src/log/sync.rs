//! Whether an append could wait on the disk: the node runs appends that cannot on its async
//! workers and moves the others (a segment roll or a `flush.messages` flush fsyncs) to a
//! blocking thread, so the common append costs no thread hand-off.

use super::*;

impl Log {
    /// True when appending `append_bytes` bytes whose first batch starts at `first_offset`
    /// (`None`: at the log end, as a leader's append) could fsync: it would roll a segment
    /// (Kafka flushes the old one), replace an empty active segment, or `flush.messages` is
    /// set below its never-flush default. A hint, not a promise: an append that fsyncs
    /// anyway is still correct, only on the wrong kind of thread.
    pub fn append_may_sync(&self, append_bytes: usize, first_offset: Option<Offset>) -> bool {
        let active = self.active();
        let first_offset = first_offset.unwrap_or_else(|| self.log_end_offset());
        active.size().0 == 0
            || first_offset != active.next_offset()
            || active.should_roll(append_bytes, first_offset, self.config.segment_bytes)
            || self.config.flush_interval_messages != i64::MAX
    }
}

#[cfg(test)]
mod tests {
    use crate::{BatchBuilder, LeaderEpoch, LogConfig, LogManager, TopicPartition, lock_log};

    fn batch(value: &[u8]) -> Vec<u8> {
        let mut builder = BatchBuilder::new(1_000);
        builder.record(None, Some(value));
        builder.build()
    }

    #[test]
    fn only_appends_that_roll_or_flush_may_sync() {
        let dir = tempfile::tempdir().unwrap();
        let tp = TopicPartition::new("t", 0);
        let config = LogConfig {
            segment_bytes: 4096,
            ..LogConfig::default()
        };
        let manager = LogManager::open(dir.path(), config.clone()).unwrap();
        let log = manager.create_log(tp, config).unwrap();
        let mut log = lock_log(&log);
        let record = batch(&[7; 100]);
        // The first append replaces or starts the empty active segment.
        assert!(log.append_may_sync(record.len(), None));
        log.append_as_leader(&record, LeaderEpoch(0), 2_000)
            .unwrap();
        assert!(!log.append_may_sync(record.len(), None));
        // A follower's batch that does not continue the log starts a new segment.
        let end = log.log_end_offset();
        assert!(log.append_may_sync(record.len(), Some(crate::Offset(end.0 + 5))));
        assert!(!log.append_may_sync(record.len(), Some(end)));
        // One that would not fit in the segment rolls it.
        assert!(log.append_may_sync(4096, None));
        // Appending until the predicate says yes, the next append rolls.
        while !log.append_may_sync(record.len(), None) {
            let info = log
                .append_as_leader(&record, LeaderEpoch(0), 2_000)
                .unwrap();
            assert!(!info.rolled && !info.flushed);
        }
        let info = log
            .append_as_leader(&record, LeaderEpoch(0), 2_000)
            .unwrap();
        assert!(info.rolled);
    }

    #[test]
    fn a_flush_messages_setting_makes_every_append_a_candidate() {
        let dir = tempfile::tempdir().unwrap();
        let config = LogConfig {
            flush_interval_messages: 1_000,
            ..LogConfig::default()
        };
        let manager = LogManager::open(dir.path(), config.clone()).unwrap();
        let log = manager
            .create_log(TopicPartition::new("t", 0), config)
            .unwrap();
        let mut log = lock_log(&log);
        let record = batch(b"v");
        log.append_as_leader(&record, LeaderEpoch(0), 2_000)
            .unwrap();
        assert!(log.append_may_sync(record.len(), None));
    }
}
