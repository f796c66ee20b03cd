//! Transactional offset commits on the group side, as pure data for the consumer-group
//! coordinator to take over (Kafka's `GroupMetadata.pendingTransactionalOffsetCommits` and
//! the KIP-447 check of `validateOffsetCommit`):
//!
//! - [`PendingTxnOffsets`]: the offsets a TxnOffsetCommit stored for a producer id, invisible
//!   until the transaction's marker reaches the group's `__consumer_offsets` partition, which
//!   moves them to the committed offsets (commit) or drops them (abort). Kafka writes them to
//!   `__consumer_offsets` as transactional records; logjam has no `__consumer_offsets` topic
//!   yet, so this store is in memory and nothing here is durable: the group issue backs it
//!   with the log and calls [`PendingTxnOffsets::complete`] when it applies the marker.
//! - [`check_member`]: KIP-447's generation and member-id fencing of a TxnOffsetCommit
//!   against the group's current state. A group the node does not know (no group coordinator
//!   yet) is accepted unchecked, as a Kafka broker accepts a commit for an empty group.
//!
//! Nothing here does I/O or reads a clock.

use std::collections::{BTreeMap, HashMap};

use kafka_protocol::ResponseError;

/// A partition, as (topic, index).
pub type TopicPartition = (String, i32);

/// One committed offset (OffsetCommit's fields).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OffsetEntry {
    /// The next offset to consume.
    pub offset: i64,
    /// The leader epoch of the last consumed record, or -1.
    pub leader_epoch: i32,
    /// The client's metadata string.
    pub metadata: Option<String>,
}

/// Pending and committed transactional offsets of every group this node coordinates.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct PendingTxnOffsets {
    /// producer id → group → partition → offset, not yet visible.
    pending: HashMap<i64, HashMap<String, BTreeMap<TopicPartition, OffsetEntry>>>,
    /// group → partition → offset, visible to OffsetFetch.
    committed: HashMap<String, BTreeMap<TopicPartition, OffsetEntry>>,
}

impl PendingTxnOffsets {
    /// Stores `offsets` of `group` in `producer_id`'s open transaction; a later commit of the
    /// same partition in the same transaction replaces the earlier one.
    pub fn stage(
        &mut self,
        producer_id: i64,
        group: &str,
        offsets: impl IntoIterator<Item = (TopicPartition, OffsetEntry)>,
    ) {
        self.pending
            .entry(producer_id)
            .or_default()
            .entry(group.to_owned())
            .or_default()
            .extend(offsets);
    }

    /// Applies the marker of `producer_id`'s transaction: a commit makes its offsets the
    /// groups' committed offsets, an abort drops them. Returns the groups touched.
    pub fn complete(&mut self, producer_id: i64, commit: bool) -> Vec<String> {
        let Some(groups) = self.pending.remove(&producer_id) else {
            return Vec::new();
        };
        let mut touched: Vec<String> = groups.keys().cloned().collect();
        touched.sort();
        if commit {
            for (group, offsets) in groups {
                self.committed.entry(group).or_default().extend(offsets);
            }
        }
        touched
    }

    /// The committed offset of `partition` in `group` (what OffsetFetch answers).
    pub fn committed(&self, group: &str, partition: &TopicPartition) -> Option<&OffsetEntry> {
        self.committed.get(group)?.get(partition)
    }

    /// Whether `group` has offsets in an open transaction (OffsetFetch with
    /// `RequireStable` answers `UNSTABLE_OFFSET_COMMIT` for them, KIP-447).
    pub fn has_pending(&self, group: &str) -> bool {
        self.pending
            .values()
            .any(|groups| groups.contains_key(group))
    }
}

/// Kafka's classic group states, as far as the check needs them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GroupState {
    /// No members.
    Empty,
    /// A rebalance is collecting members.
    PreparingRebalance,
    /// The leader's assignment is awaited.
    CompletingRebalance,
    /// Assigned and running.
    Stable,
    /// Removed or migrated.
    Dead,
}

/// What the check reads of a group.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupView {
    /// The state.
    pub state: GroupState,
    /// The current generation.
    pub generation_id: i32,
    /// Member ids.
    pub members: Vec<String>,
    /// Static members: `group.instance.id` → member id.
    pub static_members: HashMap<String, String>,
}

/// The group fields of a TxnOffsetCommit (v3+, KIP-447; earlier versions send none:
/// generation -1, member "", no instance id).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CommitMember<'a> {
    /// `GenerationId`.
    pub generation_id: i32,
    /// `MemberId`.
    pub member_id: &'a str,
    /// `GroupInstanceId`.
    pub group_instance_id: Option<&'a str>,
}

/// KIP-447's check of a TxnOffsetCommit against its group (Kafka's `doTxnCommitOffsets` and
/// `validateOffsetCommit` for a transactional commit): a dead group is
/// `COORDINATOR_NOT_AVAILABLE`; a commit carrying no group metadata (generation < 0, empty
/// member id, no instance id) is not checked; a static member whose instance id maps to
/// another member id is `FENCED_INSTANCE_ID` (to none: `UNKNOWN_MEMBER_ID`); an unknown
/// member is `UNKNOWN_MEMBER_ID`; another generation is `ILLEGAL_GENERATION`. A rebalance in
/// progress does not refuse a transactional commit. `group` is `None` for a group the node
/// does not know: accepted (there is no group coordinator yet).
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

    fn entry(offset: i64) -> OffsetEntry {
        OffsetEntry {
            offset,
            leader_epoch: -1,
            metadata: None,
        }
    }

    fn tp(partition: i32) -> TopicPartition {
        ("in".to_owned(), partition)
    }

    #[test]
    fn offsets_become_visible_only_at_a_commit_marker() {
        let mut store = PendingTxnOffsets::default();
        store.stage(7, "g", [(tp(0), entry(5)), (tp(1), entry(9))]);
        store.stage(7, "g", [(tp(0), entry(6))]);
        store.stage(8, "g", [(tp(0), entry(100))]);
        assert_eq!(store.committed("g", &tp(0)), None);
        assert!(store.has_pending("g"));
        // Producer 8 aborts: its offset is dropped.
        assert_eq!(store.complete(8, false), vec!["g".to_owned()]);
        assert_eq!(store.committed("g", &tp(0)), None);
        // Producer 7 commits: its last offsets per partition become visible.
        assert_eq!(store.complete(7, true), vec!["g".to_owned()]);
        assert_eq!(store.committed("g", &tp(0)), Some(&entry(6)));
        assert_eq!(store.committed("g", &tp(1)), Some(&entry(9)));
        assert!(!store.has_pending("g"));
        // A marker for a producer with nothing pending changes nothing.
        assert!(store.complete(7, false).is_empty());
        assert_eq!(store.committed("g", &tp(0)), Some(&entry(6)));
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
