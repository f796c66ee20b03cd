//! What a consumer keeps for readers that must prove what they read and go back exactly: the
//! range each partition's fetches covered with the leader's last stable offset and epoch
//! ([`FetchRange`], for read_committed checking), and positions with the leader epoch of the
//! record before them ([`Position`], Kafka's `OffsetAndMetadata.leaderEpoch`, to seek back
//! without losing KIP-320 truncation detection).

use std::collections::BTreeMap;

use super::{Consumer, PartitionState, SeekTo, isolation};
use crate::error::{Error, Result};
use crate::ids::{LeaderEpoch, Offset, TopicPartition};

/// A position with the leader epoch of the record consumed before it: Kafka's
/// `OffsetAndMetadata` with its `leaderEpoch` (KIP-320), what a consumer must keep to seek
/// back without losing truncation detection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Position {
    /// The next offset to fetch.
    pub offset: Offset,
    /// The leader epoch of the last record consumed before it, when known.
    pub leader_epoch: Option<LeaderEpoch>,
}

/// What the fetches of one partition covered since the last
/// [`Consumer::take_fetch_ranges`], and what its leader answered last: what a
/// read_committed reader needs to show it never read above the last stable offset, that the
/// LSO did not move back, and that it skipped no committed record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FetchRange {
    /// The position before the first of these fetches.
    pub from: Offset,
    /// The position after the last: every offset in `from..to` was returned, or skipped as
    /// aborted data or a control record.
    pub to: Offset,
    /// The last answer's `last_stable_offset` (`-1` when the broker did not say).
    pub last_stable_offset: i64,
    /// The last answer's high watermark.
    pub high_watermark: i64,
    /// The leader epoch the last fetch was sent with and the leader accepted.
    pub leader_epoch: LeaderEpoch,
}

impl Consumer {
    /// The position of `partition` with the leader epoch of the record before it, once known.
    pub fn position_with_epoch(&self, partition: &TopicPartition) -> Option<Position> {
        let state = self.partitions.get(partition)?;
        state.position.map(|offset| Position {
            offset,
            leader_epoch: state.last_record_epoch,
        })
    }

    /// Kafka's `seek(partition, OffsetAndMetadata(offset, leaderEpoch))`: moves the position
    /// and keeps the epoch of the record before it, so the next poll validates the position
    /// against the current leader (KIP-320) instead of trusting it blindly.
    ///
    /// # Errors
    /// [`Error::NotAssigned`].
    pub fn seek_to_position(&mut self, partition: &TopicPartition, to: Position) -> Result<()> {
        self.seek(partition, SeekTo::Offset(to.offset))?;
        let state = self.partitions.get_mut(partition).expect("just sought");
        state.last_record_epoch = to.leader_epoch;
        state.validated_epoch = None;
        Ok(())
    }

    /// Forgets the position of `partition`: the next poll resets it by `auto.offset.reset`,
    /// as for a partition just assigned.
    ///
    /// # Errors
    /// [`Error::NotAssigned`].
    pub fn reset_position(&mut self, partition: &TopicPartition) -> Result<()> {
        let state = self
            .partitions
            .get_mut(partition)
            .ok_or_else(|| Error::NotAssigned {
                partition: partition.clone(),
            })?;
        *state = PartitionState::default();
        Ok(())
    }

    /// The consumer's `isolation.level`.
    pub fn isolation_level(&self) -> isolation::IsolationLevel {
        self.config.isolation_level
    }

    /// What the fetches of each partition covered since the last call (take it after each
    /// poll to know what that poll covered). Successive fetches that continue where the
    /// previous one ended are merged; a fetch from elsewhere (after a seek or a reset)
    /// replaces the range. A poll that fails leaves the ranges as they were before it.
    pub fn take_fetch_ranges(&mut self) -> BTreeMap<TopicPartition, FetchRange> {
        std::mem::take(&mut self.fetched)
    }

    /// Notes one fetch answer of `tp` that moved its position from `from` to `to`.
    pub(super) fn note_fetch(
        &mut self,
        tp: &TopicPartition,
        from: Offset,
        to: Offset,
        answer: FetchRange,
    ) {
        match self.fetched.get_mut(tp) {
            Some(range) if range.to == from => {
                *range = FetchRange {
                    from: range.from,
                    to,
                    ..answer
                };
            }
            _ => {
                self.fetched
                    .insert(tp.clone(), FetchRange { from, to, ..answer });
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Fetches that continue one another merge into one range with the last answer's LSO
    /// and epoch; a fetch from elsewhere starts a new range; taking empties them.
    #[test]
    fn fetch_ranges_merge_when_contiguous_and_restart_after_a_jump() {
        let mut consumer =
            Consumer::from_properties([("bootstrap.servers", "127.0.0.1:1")]).unwrap();
        let tp = TopicPartition::new("t", 0);
        let answer = |lso, epoch| FetchRange {
            from: Offset(-1),
            to: Offset(-1),
            last_stable_offset: lso,
            high_watermark: lso + 1,
            leader_epoch: LeaderEpoch(epoch),
        };
        consumer.note_fetch(&tp, Offset(3), Offset(5), answer(5, 1));
        consumer.note_fetch(&tp, Offset(5), Offset(9), answer(9, 2));
        let ranges = consumer.take_fetch_ranges();
        assert_eq!(
            ranges[&tp],
            FetchRange {
                from: Offset(3),
                to: Offset(9),
                last_stable_offset: 9,
                high_watermark: 10,
                leader_epoch: LeaderEpoch(2),
            }
        );
        assert!(consumer.take_fetch_ranges().is_empty());
        consumer.note_fetch(&tp, Offset(3), Offset(5), answer(5, 1));
        consumer.note_fetch(&tp, Offset(0), Offset(2), answer(6, 1));
        let range = consumer.take_fetch_ranges()[&tp];
        assert_eq!(
            (range.from, range.to, range.last_stable_offset),
            (Offset(0), Offset(2), 6)
        );
    }

    /// Seeking to a saved position keeps its leader epoch and asks for validation; forgetting
    /// a position leaves it to `auto.offset.reset`.
    #[test]
    fn seeking_to_a_saved_position_keeps_its_leader_epoch() {
        let mut consumer =
            Consumer::from_properties([("bootstrap.servers", "127.0.0.1:1")]).unwrap();
        let tp = TopicPartition::new("t", 0);
        consumer.assign([tp.clone()]);
        let saved = Position {
            offset: Offset(5),
            leader_epoch: Some(LeaderEpoch(3)),
        };
        consumer.seek_to_position(&tp, saved).unwrap();
        assert_eq!(consumer.position_with_epoch(&tp), Some(saved));
        assert_eq!(consumer.partitions[&tp].validated_epoch, None);
        consumer.reset_position(&tp).unwrap();
        assert_eq!(consumer.position_with_epoch(&tp), None);
        assert_eq!(consumer.partitions[&tp].reset, None);
        let other = TopicPartition::new("t", 1);
        assert!(consumer.seek_to_position(&other, saved).is_err());
        assert!(consumer.reset_position(&other).is_err());
    }
}
