//! The leader-epoch cache (KIP-101/279): for each leader epoch, the first offset appended in it,
//! persisted in the partition dir's `leader-epoch-checkpoint` (`docs/kafka-semantics.md` §1.6).
//! It answers OffsetsForLeaderEpoch ([`LeaderEpochCache::end_offset_for_epoch`]) and is truncated
//! together with the log. The log (`log.rs`) decides when to assign and truncate.

use std::path::{Path, PathBuf};

use crate::checkpoint;
use crate::error::Result;
use crate::ids::{LeaderEpoch, Offset};

/// File name of the per-partition epoch checkpoint.
pub const LEADER_EPOCH_CHECKPOINT: &str = "leader-epoch-checkpoint";

/// One cache entry: `epoch` began at `start_offset`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EpochEntry {
    /// The leader epoch.
    pub epoch: LeaderEpoch,
    /// The first offset written in that epoch.
    pub start_offset: Offset,
}

/// The answer to OffsetsForLeaderEpoch for one requested epoch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EpochEndOffset {
    /// The largest known epoch `<=` the requested one (or the requested one, see
    /// [`LeaderEpochCache::end_offset_for_epoch`]); [`LeaderEpoch::UNDEFINED`] if unknown.
    pub leader_epoch: LeaderEpoch,
    /// The offset after the last record of that epoch; [`Offset::UNDEFINED`] if unknown.
    pub end_offset: Offset,
}

impl EpochEndOffset {
    /// Kafka's `(UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET)` answer.
    pub const UNDEFINED: EpochEndOffset = EpochEndOffset {
        leader_epoch: LeaderEpoch::UNDEFINED,
        end_offset: Offset::UNDEFINED,
    };

    /// Whether this is the undefined answer.
    pub fn is_undefined(&self) -> bool {
        *self == EpochEndOffset::UNDEFINED
    }
}

/// Epoch → start-offset entries, strictly increasing in both fields, mirrored to
/// `leader-epoch-checkpoint` on every change (assignments are rare, so writing synchronously is
/// cheap and keeps the file exact).
#[derive(Debug)]
pub struct LeaderEpochCache {
    /// The checkpoint file in the partition dir.
    path: PathBuf,
    /// Entries sorted by epoch and by start offset.
    entries: Vec<EpochEntry>,
}

impl LeaderEpochCache {
    /// Loads the cache from `dir/leader-epoch-checkpoint` (missing file: empty cache). Entries
    /// that break monotonicity are dropped like Kafka does when it re-truncates stale files.
    ///
    /// # Errors
    ///
    /// [`crate::Error::MalformedCheckpoint`] naming the file and line, or I/O errors.
    pub fn load(dir: &Path) -> Result<Self> {
        let path = dir.join(LEADER_EPOCH_CHECKPOINT);
        let mut cache = LeaderEpochCache {
            path,
            entries: Vec::new(),
        };
        if let Some(text) = checkpoint::read_text(&cache.path)? {
            for line in checkpoint::parse_lines(&cache.path, &text, 2)? {
                let epoch: i32 = checkpoint::parse_field(&cache.path, &line, 0, "epoch")?;
                let start: i64 = checkpoint::parse_field(&cache.path, &line, 1, "start_offset")?;
                cache.insert(EpochEntry {
                    epoch: LeaderEpoch(epoch),
                    start_offset: Offset(start),
                });
            }
        }
        Ok(cache)
    }

    /// All entries, oldest first.
    pub fn entries(&self) -> &[EpochEntry] {
        &self.entries
    }

    /// The newest epoch, if any.
    pub fn latest_epoch(&self) -> Option<LeaderEpoch> {
        self.entries.last().map(|entry| entry.epoch)
    }

    /// The newest entry, if any.
    pub fn latest_entry(&self) -> Option<EpochEntry> {
        self.entries.last().copied()
    }

    /// Records that `epoch` starts at `start_offset`, unless the cache already knows it (same
    /// latest epoch with an earlier or equal start). Entries with an epoch `>=` the new one or a
    /// start offset `>=` the new one are removed first, keeping the cache monotonic. Persists the
    /// checkpoint when anything changed. Returns whether the cache changed.
    ///
    /// # Errors
    ///
    /// I/O errors writing the checkpoint.
    pub fn assign(&mut self, epoch: LeaderEpoch, start_offset: Offset) -> Result<bool> {
        if !epoch.is_defined() {
            return Ok(false);
        }
        let changed = self.insert(EpochEntry {
            epoch,
            start_offset,
        });
        if changed {
            self.persist()?;
        }
        Ok(changed)
    }

    /// In-memory part of [`LeaderEpochCache::assign`].
    fn insert(&mut self, entry: EpochEntry) -> bool {
        if let Some(latest) = self.entries.last()
            && latest.epoch == entry.epoch
            && latest.start_offset <= entry.start_offset
        {
            return false;
        }
        let before = self.entries.len();
        self.entries
            .retain(|kept| kept.epoch < entry.epoch && kept.start_offset < entry.start_offset);
        if self.entries.len() != before {
            tracing::warn!(
                path = %self.path.display(),
                epoch = entry.epoch.0,
                start_offset = entry.start_offset.0,
                removed = before - self.entries.len(),
                "leader epoch assignment removed non-monotonic entries"
            );
        }
        self.entries.push(entry);
        true
    }

    /// OffsetsForLeaderEpoch for `requested`, given the log end offset:
    ///
    /// | requested | answer |
    /// |---|---|
    /// | undefined, or the cache is empty, or above every cached epoch | `UNDEFINED` |
    /// | the latest epoch | `(requested, log_end)` |
    /// | below every cached epoch | `(requested, first entry's start)` |
    /// | otherwise | `(largest epoch <= requested, start of the next larger epoch)` |
    pub fn end_offset_for_epoch(&self, requested: LeaderEpoch, log_end: Offset) -> EpochEndOffset {
        if !requested.is_defined() {
            return EpochEndOffset::UNDEFINED;
        }
        let Some(latest) = self.entries.last() else {
            return EpochEndOffset::UNDEFINED;
        };
        if latest.epoch == requested {
            return EpochEndOffset {
                leader_epoch: requested,
                end_offset: log_end,
            };
        }
        // First entry with an epoch above the requested one.
        let higher_index = self
            .entries
            .partition_point(|entry| entry.epoch <= requested);
        let Some(higher) = self.entries.get(higher_index) else {
            return EpochEndOffset::UNDEFINED;
        };
        let leader_epoch = match higher_index.checked_sub(1) {
            Some(floor_index) => self.entries[floor_index].epoch,
            None => requested,
        };
        EpochEndOffset {
            leader_epoch,
            end_offset: higher.start_offset,
        }
    }

    /// Removes entries starting at or after `end_offset` (the log was truncated to it).
    ///
    /// # Errors
    ///
    /// I/O errors writing the checkpoint.
    pub fn truncate_from_end(&mut self, end_offset: Offset) -> Result<()> {
        let before = self.entries.len();
        self.entries.retain(|entry| entry.start_offset < end_offset);
        if self.entries.len() != before {
            self.persist()?;
        }
        Ok(())
    }

    /// Drops entries wholly below `start_offset` (the log start moved there). The newest entry
    /// starting at or before it is kept with its start moved up to `start_offset`.
    ///
    /// # Errors
    ///
    /// I/O errors writing the checkpoint.
    pub fn truncate_from_start(&mut self, start_offset: Offset) -> Result<()> {
        let covering = self
            .entries
            .partition_point(|entry| entry.start_offset <= start_offset);
        let Some(floor_index) = covering.checked_sub(1) else {
            return Ok(());
        };
        let unchanged = floor_index == 0 && self.entries[0].start_offset == start_offset;
        if unchanged {
            return Ok(());
        }
        self.entries.drain(..floor_index);
        self.entries[0].start_offset = start_offset;
        self.persist()
    }

    /// Removes every entry (the log was wiped).
    ///
    /// # Errors
    ///
    /// I/O errors writing the checkpoint.
    pub fn clear(&mut self) -> Result<()> {
        self.entries.clear();
        self.persist()
    }

    /// Writes the checkpoint file (temp file, fsync, rename).
    ///
    /// # Errors
    ///
    /// I/O errors.
    pub fn persist(&self) -> Result<()> {
        let lines: Vec<String> = self
            .entries
            .iter()
            .map(|entry| format!("{} {}", entry.epoch, entry.start_offset))
            .collect();
        checkpoint::write_lines(&self.path, &lines)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(epoch: i32, start: i64) -> EpochEntry {
        EpochEntry {
            epoch: LeaderEpoch(epoch),
            start_offset: Offset(start),
        }
    }

    fn answer(epoch: i32, end: i64) -> EpochEndOffset {
        EpochEndOffset {
            leader_epoch: LeaderEpoch(epoch),
            end_offset: Offset(end),
        }
    }

    #[test]
    fn end_offset_for_epoch_follows_kip_279_table() {
        let dir = tempfile::tempdir().unwrap();
        let mut cache = LeaderEpochCache::load(dir.path()).unwrap();
        assert!(
            cache
                .end_offset_for_epoch(LeaderEpoch(0), Offset(0))
                .is_undefined()
        );
        cache.assign(LeaderEpoch(2), Offset(10)).unwrap();
        cache.assign(LeaderEpoch(4), Offset(20)).unwrap();
        cache.assign(LeaderEpoch(5), Offset(30)).unwrap();
        let log_end = Offset(42);
        assert_eq!(
            cache.end_offset_for_epoch(LeaderEpoch(5), log_end),
            answer(5, 42)
        );
        assert_eq!(
            cache.end_offset_for_epoch(LeaderEpoch(4), log_end),
            answer(4, 30)
        );
        assert_eq!(
            cache.end_offset_for_epoch(LeaderEpoch(3), log_end),
            answer(2, 20)
        );
        assert_eq!(
            cache.end_offset_for_epoch(LeaderEpoch(1), log_end),
            answer(1, 10)
        );
        assert!(
            cache
                .end_offset_for_epoch(LeaderEpoch(6), log_end)
                .is_undefined()
        );
        assert!(
            cache
                .end_offset_for_epoch(LeaderEpoch::UNDEFINED, log_end)
                .is_undefined()
        );
    }

    #[test]
    fn assign_is_idempotent_and_keeps_monotonic() {
        let dir = tempfile::tempdir().unwrap();
        let mut cache = LeaderEpochCache::load(dir.path()).unwrap();
        assert!(cache.assign(LeaderEpoch(1), Offset(0)).unwrap());
        assert!(
            !cache.assign(LeaderEpoch(1), Offset(5)).unwrap(),
            "same epoch later start"
        );
        assert!(cache.assign(LeaderEpoch(3), Offset(10)).unwrap());
        // An older epoch at a later offset wipes the conflicting newer entry.
        assert!(cache.assign(LeaderEpoch(2), Offset(12)).unwrap());
        assert_eq!(cache.entries(), &[entry(1, 0), entry(2, 12)]);
    }

    #[test]
    fn truncation_and_checkpoint_round_trip() {
        let dir = tempfile::tempdir().unwrap();
        let mut cache = LeaderEpochCache::load(dir.path()).unwrap();
        for (epoch, start) in [(0, 0), (1, 10), (2, 20), (3, 30)] {
            cache.assign(LeaderEpoch(epoch), Offset(start)).unwrap();
        }
        cache.truncate_from_end(Offset(25)).unwrap();
        assert_eq!(cache.entries(), &[entry(0, 0), entry(1, 10), entry(2, 20)]);
        cache.truncate_from_start(Offset(15)).unwrap();
        assert_eq!(cache.entries(), &[entry(1, 15), entry(2, 20)]);
        let text = std::fs::read_to_string(dir.path().join(LEADER_EPOCH_CHECKPOINT)).unwrap();
        assert_eq!(text, "0\n2\n1 15\n2 20\n");
        let reloaded = LeaderEpochCache::load(dir.path()).unwrap();
        assert_eq!(reloaded.entries(), cache.entries());
        cache.truncate_from_end(Offset(15)).unwrap();
        assert!(cache.entries().is_empty());
    }
}
