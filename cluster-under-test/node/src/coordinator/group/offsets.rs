//! The pure decisions of OffsetCommit and OffsetFetch (Kafka's `OffsetMetadataManager` and
//! `ClassicGroup.validateOffsetCommit`): whether a commit is accepted for the group as it is,
//! and what a fetch answers from a partition's committed offsets. No I/O, no clock.

use kafka_protocol::ResponseError;

use crate::coordinator::group::record::OffsetValue;
use crate::coordinator::group::shard::GroupEntry;
use crate::coordinator::group::txn_offsets::PendingTxnOffsets;
use crate::coordinator::group::view::{CommitMember, GroupState, GroupView};

/// Kafka's `offset.metadata.max.bytes` default.
pub const MAX_METADATA_BYTES: usize = 4096;

/// Whether an OffsetCommit (not transactional) of `commit` is accepted by `group` (`None`: the
/// group does not exist). `skip_fence` is the `skip-offset-fence` canary.
///
/// - No group: a commit without generation (generation < 0) creates a simple group and is
///   accepted; otherwise `GROUP_ID_NOT_FOUND` (v9+) or `ILLEGAL_GENERATION` (older versions).
/// - A dead group: `COORDINATOR_NOT_AVAILABLE`.
/// - An empty group takes commits without generation.
/// - A commit naming a member (generation ≥ 0, a member id or an instance id) must name a
///   current member (`UNKNOWN_MEMBER_ID`; a static member under another member id:
///   `FENCED_INSTANCE_ID`) of the current generation (`ILLEGAL_GENERATION`), and the group
///   must not await its assignment (`REBALANCE_IN_PROGRESS`).
/// - A commit without generation to a group with members: `UNKNOWN_MEMBER_ID`.
///
/// # Errors
/// As above.
pub fn validate_commit(
    group: Option<&GroupView>,
    commit: &CommitMember<'_>,
    version: i16,
    skip_fence: bool,
) -> Result<(), ResponseError> {
    let Some(group) = group else {
        if commit.generation_id < 0 {
            return Ok(());
        }
        return Err(if version >= 9 {
            ResponseError::GroupIdNotFound
        } else {
            ResponseError::IllegalGeneration
        });
    };
    if group.state == GroupState::Dead {
        return Err(ResponseError::CoordinatorNotAvailable);
    }
    if commit.generation_id < 0 && group.state == GroupState::Empty {
        return Ok(());
    }
    if commit.generation_id >= 0
        || !commit.member_id.is_empty()
        || commit.group_instance_id.is_some()
    {
        validate_member(group, commit.member_id, commit.group_instance_id)?;
        // CANARY(skip-offset-fence): a commit from another generation is accepted.
        if commit.generation_id != group.generation_id && !skip_fence {
            return Err(ResponseError::IllegalGeneration);
        }
    } else if group.state != GroupState::Empty {
        return Err(ResponseError::UnknownMemberId);
    }
    if group.state == GroupState::CompletingRebalance {
        return Err(ResponseError::RebalanceInProgress);
    }
    Ok(())
}

/// Kafka's `ClassicGroup.validateMember`.
///
/// # Errors
/// `UNKNOWN_MEMBER_ID`, `FENCED_INSTANCE_ID`.
pub fn validate_member(
    group: &GroupView,
    member_id: &str,
    instance: Option<&str>,
) -> Result<(), ResponseError> {
    if let Some(instance) = instance {
        return match group.static_members.get(instance) {
            None => Err(ResponseError::UnknownMemberId),
            Some(member) if member != member_id => Err(ResponseError::FencedInstanceId),
            Some(_) => Ok(()),
        };
    }
    if group.members.iter().any(|m| m == member_id) {
        Ok(())
    } else {
        Err(ResponseError::UnknownMemberId)
    }
}

/// The per-partition error of a committed offset's fields (`OFFSET_METADATA_TOO_LARGE`).
pub fn check_metadata(metadata: Option<&str>) -> Option<ResponseError> {
    (metadata.map_or(0, str::len) > MAX_METADATA_BYTES)
        .then_some(ResponseError::OffsetMetadataTooLarge)
}

/// OffsetFetch with `RequireStable` (KIP-447): a partition an open transaction holds an
/// offset for answers `UNSTABLE_OFFSET_COMMIT` and no offset (Kafka's
/// `hasPendingTransactionalOffsets`); the client retries until the marker lands.
pub fn mark_unstable(
    fetched: &mut [(String, Vec<FetchedOffset>)],
    group: &str,
    pending: &PendingTxnOffsets,
) {
    for (topic, partitions) in fetched {
        for answer in partitions {
            if pending.is_pending(group, &(topic.clone(), answer.partition)) {
                *answer = FetchedOffset {
                    partition: answer.partition,
                    offset: -1,
                    leader_epoch: -1,
                    metadata: String::new(),
                    error: Some(ResponseError::UnstableOffsetCommit),
                };
            }
        }
    }
}

/// One answered partition of a fetch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FetchedOffset {
    /// The partition.
    pub partition: i32,
    /// The committed offset, -1 when none.
    pub offset: i64,
    /// Its leader epoch, -1 when none.
    pub leader_epoch: i32,
    /// Its metadata ("" when none, as Kafka's `NO_METADATA`).
    pub metadata: String,
    /// `UNSTABLE_OFFSET_COMMIT` when a transaction holds an offset for it and the fetch
    /// requires stable offsets.
    pub error: Option<ResponseError>,
}

impl FetchedOffset {
    fn of(partition: i32, value: Option<&OffsetValue>) -> FetchedOffset {
        FetchedOffset {
            partition,
            offset: value.map_or(-1, |v| v.offset),
            leader_epoch: value.map_or(-1, |v| v.leader_epoch),
            metadata: value.map(|v| v.metadata.clone()).unwrap_or_default(),
            error: None,
        }
    }
}

/// What a fetch answers for `group` (`None`: no entry). `topics` `None` is every committed
/// offset; otherwise each asked partition, -1 when it has no offset.
pub fn fetch(
    group: Option<&GroupEntry>,
    topics: Option<&[(String, Vec<i32>)]>,
) -> Vec<(String, Vec<FetchedOffset>)> {
    match topics {
        Some(topics) => topics
            .iter()
            .map(|(topic, partitions)| {
                let fetched = partitions
                    .iter()
                    .map(|&partition| {
                        let value = group.and_then(|g| g.offsets.get(&(topic.clone(), partition)));
                        FetchedOffset::of(partition, value)
                    })
                    .collect();
                (topic.clone(), fetched)
            })
            .collect(),
        None => {
            let mut all: Vec<(String, Vec<FetchedOffset>)> = Vec::new();
            for ((topic, partition), value) in group.into_iter().flat_map(|g| g.offsets.iter()) {
                if all.last().is_none_or(|(last, _)| last != topic) {
                    all.push((topic.clone(), Vec::new()));
                }
                if let Some((_, partitions)) = all.last_mut() {
                    partitions.push(FetchedOffset::of(*partition, Some(value)));
                }
            }
            all
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::*;

    fn view(state: GroupState) -> GroupView {
        GroupView {
            state,
            generation_id: 4,
            members: vec!["m1".to_owned(), "m2".to_owned()],
            static_members: HashMap::from([("i1".to_owned(), "m1".to_owned())]),
        }
    }

    fn member(
        generation_id: i32,
        member_id: &'static str,
        instance: Option<&'static str>,
    ) -> CommitMember<'static> {
        CommitMember {
            generation_id,
            member_id,
            group_instance_id: instance,
        }
    }

    #[test]
    fn commits_are_fenced_as_kafka_fences_them() {
        use ResponseError as E;
        let stable = view(GroupState::Stable);
        let empty = GroupView {
            state: GroupState::Empty,
            members: vec![],
            static_members: HashMap::new(),
            ..stable.clone()
        };
        type Row<'a> = (Option<&'a GroupView>, CommitMember<'a>, i16, Result<(), E>);
        let table: Vec<Row<'_>> = vec![
            (None, member(-1, "", None), 9, Ok(())),
            (None, member(1, "m", None), 8, Err(E::IllegalGeneration)),
            (None, member(1, "m", None), 9, Err(E::GroupIdNotFound)),
            (Some(&empty), member(-1, "", None), 9, Ok(())),
            (
                Some(&empty),
                member(4, "m1", None),
                9,
                Err(E::UnknownMemberId),
            ),
            (Some(&stable), member(4, "m1", None), 9, Ok(())),
            (Some(&stable), member(4, "m1", Some("i1")), 9, Ok(())),
            (
                Some(&stable),
                member(3, "m1", None),
                9,
                Err(E::IllegalGeneration),
            ),
            (
                Some(&stable),
                member(4, "zz", None),
                9,
                Err(E::UnknownMemberId),
            ),
            (
                Some(&stable),
                member(4, "m2", Some("i1")),
                9,
                Err(E::FencedInstanceId),
            ),
            (
                Some(&stable),
                member(4, "m1", Some("i9")),
                9,
                Err(E::UnknownMemberId),
            ),
            (
                Some(&stable),
                member(-1, "", None),
                9,
                Err(E::UnknownMemberId),
            ),
        ];
        for (row, (group, commit, version, want)) in table.into_iter().enumerate() {
            assert_eq!(
                validate_commit(group, &commit, version, false),
                want,
                "row {row}"
            );
        }
        let completing = view(GroupState::CompletingRebalance);
        assert_eq!(
            validate_commit(Some(&completing), &member(4, "m1", None), 9, false),
            Err(E::RebalanceInProgress)
        );
        let dead = view(GroupState::Dead);
        assert_eq!(
            validate_commit(Some(&dead), &member(-1, "", None), 9, false),
            Err(E::CoordinatorNotAvailable)
        );
        // The canary accepts a stale generation, and only that.
        assert_eq!(
            validate_commit(Some(&stable), &member(3, "m1", None), 9, true),
            Ok(())
        );
        assert_eq!(
            validate_commit(Some(&stable), &member(3, "zz", None), 9, true),
            Err(E::UnknownMemberId)
        );
    }

    #[test]
    fn fetch_answers_minus_one_for_what_is_not_committed() {
        let mut entry = GroupEntry::default();
        let value = OffsetValue {
            offset: 7,
            leader_epoch: 2,
            metadata: "x".into(),
            commit_timestamp: 1,
        };
        entry.offsets.insert(("a".into(), 1), value.clone());
        entry.offsets.insert(("b".into(), 0), value);
        let asked = vec![("a".to_owned(), vec![0, 1])];
        let got = fetch(Some(&entry), Some(&asked));
        assert_eq!(got[0].1[0].offset, -1);
        assert_eq!(got[0].1[0].metadata, "");
        assert_eq!(got[0].1[1].offset, 7);
        assert_eq!(got[0].1[1].leader_epoch, 2);
        let all = fetch(Some(&entry), None);
        assert_eq!(all.len(), 2);
        assert_eq!(all[1].0, "b");
        assert!(fetch(None, None).is_empty());
        assert_eq!(fetch(None, Some(&asked))[0].1[1].offset, -1);
        assert_eq!(
            check_metadata(Some(&"x".repeat(4097))),
            Some(ResponseError::OffsetMetadataTooLarge)
        );
        assert_eq!(check_metadata(Some("ok")), None);
        let mut pending = PendingTxnOffsets::default();
        let staged = OffsetValue {
            offset: 9,
            leader_epoch: -1,
            metadata: String::new(),
            commit_timestamp: 1,
        };
        pending.stage(5, "g", ("a".into(), 1), staged, 1);
        let mut got = fetch(Some(&entry), Some(&asked));
        mark_unstable(&mut got, "g", &pending);
        assert_eq!(got[0].1[0].error, None);
        assert_eq!(got[0].1[1].error, Some(ResponseError::UnstableOffsetCommit));
        assert_eq!(got[0].1[1].offset, -1);
        let mut other = fetch(Some(&entry), Some(&asked));
        mark_unstable(&mut other, "h", &pending);
        assert_eq!(other[0].1[1].offset, 7);
    }
}
