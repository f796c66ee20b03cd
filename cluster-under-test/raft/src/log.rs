//! [`RaftLog`]: the in-memory metadata log every node keeps, with its leader-epoch cache and
//! latest snapshot. It is both the node's working copy and the reference semantics of
//! [`LogOp`]: a driver that applies the same ops to durable storage can rebuild an equal
//! `RaftLog` at restart (see [`crate::RaftNode::restart`]).
//!
//! Contracts (in the spirit of raft-rs's `Storage`): offsets are contiguous from
//! [`RaftLog::start_offset`] (inclusive) to [`RaftLog::end_offset`] (exclusive); epochs never
//! decrease along the log; everything below the start is covered by [`RaftLog::snapshot`].

use crate::{Entry, Epoch, LogOp, Offset, Snapshot, SnapshotId};

/// The replicated log: a snapshot, then contiguous entries.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RaftLog {
    /// The latest snapshot; `Some` whenever the start offset is above zero.
    snapshot: Option<Snapshot>,
    /// Entries from the start offset on, `entries[i].offset == start + i`.
    entries: Vec<Entry>,
    /// The leader-epoch cache: `(epoch, first offset of that epoch in the log)`, strictly
    /// increasing in both. Answers `end_offset_for_epoch` without a scan.
    epoch_starts: Vec<(Epoch, Offset)>,
}

impl RaftLog {
    /// An empty log starting at offset 0.
    #[must_use]
    pub fn new() -> RaftLog {
        RaftLog::default()
    }

    /// The first offset held as an entry: the latest snapshot's end offset, or 0.
    #[must_use]
    pub fn start_offset(&self) -> Offset {
        self.snapshot
            .as_ref()
            .map_or(Offset::ZERO, |snapshot| snapshot.id.end_offset)
    }

    /// The log end offset: one past the last entry (the next offset to write).
    #[must_use]
    pub fn end_offset(&self) -> Offset {
        self.start_offset().plus(self.entries.len() as u64)
    }

    /// The epoch of the last entry, or of the snapshot when there are no entries, or
    /// [`Epoch::ZERO`] for an empty log.
    #[must_use]
    pub fn last_epoch(&self) -> Epoch {
        match (self.entries.last(), &self.snapshot) {
            (Some(entry), _) => entry.epoch,
            (None, Some(snapshot)) => snapshot.id.epoch,
            (None, None) => Epoch::ZERO,
        }
    }

    /// The latest snapshot, if any.
    #[must_use]
    pub fn snapshot(&self) -> Option<&Snapshot> {
        self.snapshot.as_ref()
    }

    /// The latest snapshot's id, if any.
    #[must_use]
    pub fn snapshot_id(&self) -> Option<SnapshotId> {
        self.snapshot.as_ref().map(|snapshot| snapshot.id)
    }

    /// The entry at `offset`, if it is held (not below the start, not at or past the end).
    #[must_use]
    pub fn entry(&self, offset: Offset) -> Option<&Entry> {
        let index = usize::try_from(offset.0.checked_sub(self.start_offset().0)?).ok()?;
        self.entries.get(index)
    }

    /// The epoch of the entry at `offset`, also answering for the snapshot's last offset.
    #[must_use]
    pub fn epoch_at(&self, offset: Offset) -> Option<Epoch> {
        if let Some(entry) = self.entry(offset) {
            return Some(entry.epoch);
        }
        let snapshot = self.snapshot.as_ref()?;
        (snapshot.id.end_offset.previous() == Some(offset)).then_some(snapshot.id.epoch)
    }

    /// All entries held, in offset order.
    #[must_use]
    pub fn entries(&self) -> &[Entry] {
        &self.entries
    }

    /// Entries in `[from, to)`, clamped to what is held.
    #[must_use]
    pub fn range(&self, from: Offset, to: Offset) -> &[Entry] {
        let start = self.start_offset();
        let low = from.max(start).distance_from(start);
        let high = to.min(self.end_offset()).distance_from(start);
        if low >= high {
            return &[];
        }
        &self.entries[low as usize..high as usize]
    }

    /// Entries from `from` on, up to `max_bytes` of payload but always at least one when any
    /// exist at `from`. Empty when `from` is outside `[start, end)`.
    #[must_use]
    pub fn read(&self, from: Offset, max_bytes: u64) -> Vec<Entry> {
        let mut out = Vec::new();
        let mut bytes = 0_u64;
        for entry in self.range(from, self.end_offset()) {
            bytes = bytes.saturating_add(entry.size_bytes());
            if !out.is_empty() && bytes > max_bytes {
                break;
            }
            out.push(entry.clone());
        }
        out
    }

    /// Kafka's `endOffsetForEpoch`: the largest epoch `<= epoch` this log knows (entries or
    /// snapshot) and the end offset of that epoch (the start of the next epoch, or the log end).
    /// When the log knows no such epoch, returns `(Epoch::ZERO, start_offset)`.
    #[must_use]
    pub fn end_offset_for_epoch(&self, epoch: Epoch) -> (Epoch, Offset) {
        // The cache entries whose epoch is <= the requested one.
        let position = self
            .epoch_starts
            .partition_point(|(cached, _)| *cached <= epoch);
        if position > 0 {
            let (found, _) = self.epoch_starts[position - 1];
            let end = self
                .epoch_starts
                .get(position)
                .map_or(self.end_offset(), |(_, next_start)| *next_start);
            return (found, end);
        }
        match &self.snapshot {
            // No entry of an epoch <= the requested one, but the snapshot's last entry is: its
            // epoch ends at the log start (the first entry starts a later epoch).
            Some(snapshot) if snapshot.id.epoch <= epoch => {
                (snapshot.id.epoch, self.start_offset())
            }
            _ => (Epoch::ZERO, self.start_offset()),
        }
    }

    /// Applies one durable change; the reference semantics of [`LogOp`].
    ///
    /// # Panics
    ///
    /// Panics when the op breaks the log's contracts: an append that does not start at the end
    /// offset, has gaps or decreasing epochs, or a truncation below the start offset. These are
    /// bugs in the caller, never expected control flow.
    pub fn apply(&mut self, op: &LogOp) {
        match op {
            LogOp::Append(entries) => self.append(entries),
            LogOp::TruncateTo(end) => self.truncate_to(*end),
            LogOp::Snapshot(snapshot) => self.install_snapshot(snapshot.clone()),
        }
    }

    fn append(&mut self, entries: &[Entry]) {
        for entry in entries {
            assert_eq!(
                entry.offset,
                self.end_offset(),
                "append must start at the end offset"
            );
            assert!(entry.epoch >= self.last_epoch(), "epochs must not decrease");
            assert!(entry.epoch > Epoch::ZERO, "no entry has epoch 0");
            if self
                .epoch_starts
                .last()
                .is_none_or(|(last, _)| *last < entry.epoch)
            {
                self.epoch_starts.push((entry.epoch, entry.offset));
            }
            self.entries.push(entry.clone());
        }
    }

    fn truncate_to(&mut self, end: Offset) {
        let start = self.start_offset();
        assert!(
            end >= start,
            "truncation to {end} below the log start {start}"
        );
        if end >= self.end_offset() {
            return;
        }
        self.entries.truncate(end.distance_from(start) as usize);
        while self
            .epoch_starts
            .last()
            .is_some_and(|(_, first)| *first >= end)
        {
            let _ = self.epoch_starts.pop();
        }
    }

    fn install_snapshot(&mut self, snapshot: Snapshot) {
        let end = snapshot.id.end_offset;
        let keeps_suffix = end.previous().is_some_and(|last| {
            self.entry(last)
                .is_some_and(|e| e.epoch == snapshot.id.epoch)
        });
        if keeps_suffix {
            let drop = end.distance_from(self.start_offset()) as usize;
            let _ = self.entries.drain(..drop);
        } else {
            self.entries.clear();
        }
        self.snapshot = Some(snapshot);
        self.rebuild_epoch_cache();
    }

    fn rebuild_epoch_cache(&mut self) {
        self.epoch_starts.clear();
        for entry in &self.entries {
            if self
                .epoch_starts
                .last()
                .is_none_or(|(last, _)| *last < entry.epoch)
            {
                self.epoch_starts.push((entry.epoch, entry.offset));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;
    use crate::EntryKind;

    fn log_with_epochs(epochs: &[u32]) -> RaftLog {
        let mut log = RaftLog::new();
        let entries: Vec<Entry> = epochs
            .iter()
            .enumerate()
            .map(|(i, e)| Entry {
                offset: Offset(i as u64),
                epoch: Epoch(*e),
                kind: EntryKind::Data(vec![i as u8]),
            })
            .collect();
        log.apply(&LogOp::Append(entries));
        log
    }

    /// Brute-force `endOffsetForEpoch` over a log without a snapshot.
    fn naive_end_offset_for_epoch(epochs: &[u32], requested: u32) -> (Epoch, Offset) {
        let Some(found) = epochs.iter().copied().filter(|e| *e <= requested).max() else {
            return (Epoch::ZERO, Offset::ZERO);
        };
        let end = epochs
            .iter()
            .position(|e| *e > found)
            .unwrap_or(epochs.len());
        (Epoch(found), Offset(end as u64))
    }

    proptest! {
        #[test]
        fn end_offset_for_epoch_matches_a_scan(
            mut epochs in proptest::collection::vec(1_u32..6, 0..20),
            requested in 0_u32..8,
            truncate in 0_usize..20,
        ) {
            epochs.sort_unstable();
            let mut log = log_with_epochs(&epochs);
            let keep = truncate.min(epochs.len());
            log.apply(&LogOp::TruncateTo(Offset(keep as u64)));
            epochs.truncate(keep);
            prop_assert_eq!(log.end_offset_for_epoch(Epoch(requested)),
                naive_end_offset_for_epoch(&epochs, requested));
        }
    }

    #[test]
    fn snapshot_inside_the_log_keeps_the_suffix() {
        let mut log = log_with_epochs(&[1, 1, 2, 2, 3]);
        let snapshot = Snapshot {
            id: SnapshotId {
                end_offset: Offset(3),
                epoch: Epoch(2),
            },
            data: vec![7],
        };
        log.apply(&LogOp::Snapshot(snapshot));
        assert_eq!(log.start_offset(), Offset(3));
        assert_eq!(log.end_offset(), Offset(5));
        assert_eq!(log.epoch_at(Offset(2)), Some(Epoch(2)));
        assert_eq!(log.end_offset_for_epoch(Epoch(2)), (Epoch(2), Offset(4)));
        assert_eq!(log.end_offset_for_epoch(Epoch(1)), (Epoch::ZERO, Offset(3)));
    }

    #[test]
    fn snapshot_from_a_different_history_replaces_the_log() {
        let mut log = log_with_epochs(&[1, 1, 1]);
        let snapshot = Snapshot {
            id: SnapshotId {
                end_offset: Offset(2),
                epoch: Epoch(2),
            },
            data: vec![],
        };
        log.apply(&LogOp::Snapshot(snapshot));
        assert_eq!(log.start_offset(), Offset(2));
        assert_eq!(log.end_offset(), Offset(2));
        assert_eq!(log.last_epoch(), Epoch(2));
        assert_eq!(log.end_offset_for_epoch(Epoch(5)), (Epoch(2), Offset(2)));
    }

    #[test]
    #[should_panic(expected = "below the log start")]
    fn truncation_below_the_snapshot_is_refused() {
        let mut log = log_with_epochs(&[1, 1, 1]);
        let snapshot = Snapshot {
            id: SnapshotId {
                end_offset: Offset(2),
                epoch: Epoch(1),
            },
            data: vec![],
        };
        log.apply(&LogOp::Snapshot(snapshot));
        log.apply(&LogOp::TruncateTo(Offset(1)));
    }
}
