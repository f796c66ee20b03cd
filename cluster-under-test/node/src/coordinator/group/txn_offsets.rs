//! Transactional offset commits on the group side, pure (Kafka's
//! `OffsetMetadataManager.pendingTransactionalOffsets` and the KIP-447 check of
//! `ClassicGroup.validateOffsetCommit` for a transactional commit):
//!
//! - [`PendingTxnOffsets`]: the offsets TxnOffsetCommit wrote to a `__consumer_offsets`
//!   partition inside a producer's transaction, replayed from that partition's log
//!   (`shard.rs`) and invisible to OffsetFetch until the transaction's marker reaches the
//!   partition: COMMIT makes them committed offsets, ABORT drops them.
//! - [`check_member`]: KIP-447's generation and member fencing of a TxnOffsetCommit.
//! - The group view it fences against is `view.rs`'s ([`GroupView`], [`CommitMember`]).
//!
//! Nothing here does I/O or reads a clock.

use std::collections::BTreeMap;

use kafka_protocol::ResponseError;

use crate::coordinator::group::record::OffsetValue;
use crate::coordinator::group::view::{CommitMember, GroupState, GroupView};

/// A partition, as (topic, index).
pub type TopicPartition = (String, i32);

/// One offset written in a transaction, with the replay position of its record (a commit
/// marker applies it only over an offset committed at an earlier position, as Kafka compares
/// record offsets).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Staged {
    /// The offset.
    pub value: OffsetValue,
    /// Its record's replay position.
    pub at: u64,
}

/// group → partition → staged offset.
pub type StagedOffsets = BTreeMap<String, BTreeMap<TopicPartition, Staged>>;

/// The offsets of open transactions on one `__consumer_offsets` partition.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct PendingTxnOffsets {
    /// producer id → its staged offsets.
    pending: BTreeMap<i64, StagedOffsets>,
}

impl PendingTxnOffsets {
    /// Stages `value` for (`group`, `partition`) in `producer_id`'s transaction; a later write
    /// of the same partition in the same transaction replaces it.
    pub fn stage(
        &mut self,
        producer_id: i64,
        group: &str,
        partition: TopicPartition,
        value: OffsetValue,
        at: u64,
    ) {
        self.pending
            .entry(producer_id)
            .or_default()
            .entry(group.to_owned())
            .or_default()
            .insert(partition, Staged { value, at });
    }

    /// Drops a staged offset (a transactional tombstone).
    pub fn unstage(&mut self, producer_id: i64, group: &str, partition: &TopicPartition) {
        if let Some(groups) = self.pending.get_mut(&producer_id)
            && let Some(offsets) = groups.get_mut(group)
        {
            offsets.remove(partition);
            if offsets.is_empty() {
                groups.remove(group);
            }
            if groups.is_empty() {
                self.pending.remove(&producer_id);
            }
        }
    }

    /// Ends `producer_id`'s transaction: returns what it staged (for a COMMIT to apply).
    pub fn end(&mut self, producer_id: i64) -> StagedOffsets {
        self.pending.remove(&producer_id).unwrap_or_default()
    }

    /// Whether an open transaction holds an offset for (`group`, `partition`) (OffsetFetch
    /// with `RequireStable` answers `UNSTABLE_OFFSET_COMMIT` for it, KIP-447).
    pub fn is_pending(&self, group: &str, partition: &TopicPartition) -> bool {
        self.pending.values().any(|groups| {
            groups
                .get(group)
                .is_some_and(|offsets| offsets.contains_key(partition))
        })
    }

    /// Whether an open transaction holds any offset of `group`.
    pub fn has_group(&self, group: &str) -> bool {
        self.pending
            .values()
            .any(|groups| groups.contains_key(group))
    }
}

/// KIP-447's check of a TxnOffsetCommit against its group (Kafka's `doTxnCommitOffsets` and
/// `validateOffsetCommit` for a transactional commit): a dead group is
/// `COORDINATOR_NOT_AVAILABLE`; a commit carrying no group metadata (generation < 0, empty
/// member id, no instance id) is not checked; a static member whose instance id maps to
/// another member id is `FENCED_INSTANCE_ID` (to none: `UNKNOWN_MEMBER_ID`); an unknown
/// member is `UNKNOWN_MEMBER_ID`; another generation is `ILLEGAL_GENERATION`. A rebalance in
/// progress does not refuse a transactional commit. `group` is `None` for a group the
/// coordinator does not know: accepted, as Kafka creates a simple group for it.
///
/// # Errors
/// As above.
pub fn check_member(
    group: Option<&GroupView>,
    commit: &CommitMember<'_>,
) -> Result<(), ResponseError> {
    let Some(group) = group else {
        return Ok(());
    };
    if group.state == GroupState::Dead {
        return Err(ResponseError::CoordinatorNotAvailable);
    }
    if commit.generation_id < 0 && commit.member_id.is_empty() && commit.group_instance_id.is_none()
    {
        return Ok(());
    }
    if let Some(instance) = commit.group_instance_id {
        match group.static_members.get(instance) {
            None => return Err(ResponseError::UnknownMemberId),
            Some(member) if member != commit.member_id => {
                return Err(ResponseError::FencedInstanceId);
            }
            Some(_) => {}
        }
    }
    if !group.members.iter().any(|m| m == commit.member_id) {
        return Err(ResponseError::UnknownMemberId);
    }
    if commit.generation_id != group.generation_id {
        return Err(ResponseError::IllegalGeneration);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn value(offset: i64) -> OffsetValue {
        OffsetValue {
            offset,
            leader_epoch: -1,
            metadata: String::new(),
            commit_timestamp: 1,
        }
    }

    fn tp(partition: i32) -> TopicPartition {
        ("in".to_owned(), partition)
    }

    #[test]
    fn staged_offsets_are_kept_per_producer_until_their_marker() {
        let mut store = PendingTxnOffsets::default();
        store.stage(7, "g", tp(0), value(5), 1);
        store.stage(7, "g", tp(1), value(9), 2);
        store.stage(7, "g", tp(0), value(6), 3);
        store.stage(8, "g", tp(0), value(100), 4);
        store.stage(8, "h", tp(2), value(1), 5);
        assert!(store.is_pending("g", &tp(0)));
        assert!(store.is_pending("h", &tp(2)));
        assert!(!store.is_pending("g", &tp(2)));
        let ended = store.end(8);
        assert_eq!(ended.len(), 2);
        assert!(!store.is_pending("h", &tp(2)));
        // Producer 7 still holds g's partition 0.
        assert!(store.is_pending("g", &tp(0)));
        let ended = store.end(7);
        // The last write of a partition in the transaction wins.
        assert_eq!(
            ended["g"][&tp(0)],
            Staged {
                value: value(6),
                at: 3
            }
        );
        assert_eq!(ended["g"][&tp(1)].value.offset, 9);
        assert!(!store.is_pending("g", &tp(0)));
        assert!(store.end(7).is_empty());
        store.stage(9, "g", tp(0), value(1), 6);
        store.unstage(9, "g", &tp(0));
        assert!(!store.is_pending("g", &tp(0)));
    }

    #[test]
    fn kip_447_fences_stale_generations_and_members() {
        use ResponseError as E;
        let group = GroupView {
            state: GroupState::Stable,
            generation_id: 4,
            members: vec!["m1".to_owned(), "m2".to_owned()],
            static_members: HashMap::from([("i1".to_owned(), "m1".to_owned())]),
        };
        let member = |generation_id, member_id, group_instance_id| CommitMember {
            generation_id,
            member_id,
            group_instance_id,
        };
        let table = [
            (member(4, "m1", None), Ok(())),
            (member(4, "m1", Some("i1")), Ok(())),
            (member(3, "m1", None), Err(E::IllegalGeneration)),
            (member(4, "gone", None), Err(E::UnknownMemberId)),
            (member(4, "m2", Some("i1")), Err(E::FencedInstanceId)),
            (member(4, "m1", Some("i9")), Err(E::UnknownMemberId)),
            // No group metadata (TxnOffsetCommit before v3): not checked.
            (member(-1, "", None), Ok(())),
        ];
        for (index, (commit, want)) in table.into_iter().enumerate() {
            assert_eq!(check_member(Some(&group), &commit), want, "row {index}");
        }
        let rebalancing = GroupView {
            state: GroupState::CompletingRebalance,
            ..group.clone()
        };
        assert_eq!(
            check_member(Some(&rebalancing), &member(4, "m1", None)),
            Ok(())
        );
        let dead = GroupView {
            state: GroupState::Dead,
            ..group
        };
        assert_eq!(
            check_member(Some(&dead), &member(4, "m1", None)),
            Err(E::CoordinatorNotAvailable)
        );
        // A group the node does not know is accepted (no group coordinator yet).
        assert_eq!(check_member(None, &member(9, "x", None)), Ok(()));
    }
}
