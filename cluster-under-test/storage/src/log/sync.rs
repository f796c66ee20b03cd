//! Whether an append could wait on the disk: the node runs appends that cannot on its async
//! workers and moves the others (a segment roll, a new epoch's checkpoint or a
//! `flush.messages` flush fsyncs) to a blocking thread, so the common append costs no thread
//! hand-off.

use super::*;

impl Log {
    /// True when a leader's append of `append_bytes` bytes at `leader_epoch` could fsync: it
    /// would roll a segment (Kafka flushes the old one), replace an empty active segment, start
    /// a new epoch (the leader-epoch checkpoint is rewritten and synced), or `flush.messages` is
    /// set below its never-flush default. A hint, not a promise: an append that fsyncs anyway
    /// is still correct, only on the wrong kind of thread.
    pub fn append_may_sync(&self, append_bytes: usize, leader_epoch: LeaderEpoch) -> bool {
        self.may_sync(
            append_bytes,
            self.log_end_offset(),
            leader_epoch != self.latest_epoch_or_none(),
        )
    }

    /// [`Log::append_may_sync`] for a follower's append of `batches` (whole batches, as
    /// [`Log::append_as_follower`] takes them): their own offsets and epochs decide. Bytes
    /// that do not parse are left to the append to refuse, answered `true`.
    pub fn follower_append_may_sync(&self, batches: &[u8]) -> bool {
        let latest = self.latest_epoch_or_none();
        let mut first = None;
        for item in batch::batches(batches) {
            let Ok((_, header)) = item else {
                return true;
            };
            if header.partition_leader_epoch != latest {
                return true;
            }
            first.get_or_insert(header.base_offset);
        }
        first.is_none_or(|first| self.may_sync(batches.len(), first, false))
    }

    /// The newest epoch in the epoch cache, or the undefined epoch -1 when it is empty (an
    /// append at -1 records nothing, so compares equal).
    fn latest_epoch_or_none(&self) -> LeaderEpoch {
        self.latest_epoch().unwrap_or(LeaderEpoch(-1))
    }

    fn may_sync(&self, append_bytes: usize, first_offset: Offset, new_epoch: bool) -> bool {
        let active = self.active();
        new_epoch
            || active.size().0 == 0
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
        let epoch = LeaderEpoch(0);
        // The first append replaces or starts the empty active segment.
        assert!(log.append_may_sync(record.len(), epoch));
        log.append_as_leader(&record, epoch, 2_000).unwrap();
        assert!(!log.append_may_sync(record.len(), epoch));
        // A new epoch rewrites and syncs the leader-epoch checkpoint.
        assert!(log.append_may_sync(record.len(), LeaderEpoch(1)));
        // A follower's batches: their own offsets and epochs decide.
        let end = log.log_end_offset();
        let at = |offset: i64, epoch: i32| {
            let mut bytes = record.clone();
            crate::batch::set_base_offset(&mut bytes, crate::Offset(offset));
            crate::batch::set_partition_leader_epoch(&mut bytes, LeaderEpoch(epoch));
            bytes
        };
        assert!(!log.follower_append_may_sync(&at(end.0, 0)));
        assert!(
            log.follower_append_may_sync(&at(end.0 + 5, 0)),
            "a jump starts a segment"
        );
        assert!(log.follower_append_may_sync(&at(end.0, 1)), "a new epoch");
        assert!(log.follower_append_may_sync(b"not a batch"));
        // One that would not fit in the segment rolls it.
        assert!(log.append_may_sync(4096, epoch));
        // Appending until the predicate says yes, the next append rolls.
        while !log.append_may_sync(record.len(), epoch) {
            let info = log.append_as_leader(&record, epoch, 2_000).unwrap();
            assert!(!info.rolled && !info.flushed);
        }
        let info = log.append_as_leader(&record, epoch, 2_000).unwrap();
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
        assert!(log.append_may_sync(record.len(), LeaderEpoch(0)));
    }
}
