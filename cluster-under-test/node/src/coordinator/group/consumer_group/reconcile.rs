//! A member's step toward the target assignment (Kafka's `CurrentAssignmentBuilder`):
//! revoke before assign, and never hand a partition to a new owner before the previous owner
//! has released it. Pure: the caller gives the member, the target and what others own.

use std::collections::BTreeSet;

use uuid::Uuid;

use super::record::{Assignment, CurrentAssignment, MemberState};

/// The fencing error of a member in a state this coordinator does not know that still
/// claims partitions.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MustRejoin;

/// Whether `owned` (the partitions the member reported; `None` when it did not report them)
/// still contains any of `revoking`. Not reporting counts as still owning.
fn still_owns(owned: Option<&Assignment>, revoking: &Assignment) -> bool {
    let Some(owned) = owned else { return true };
    owned
        .iter()
        .any(|(topic, ids)| revoking.get(topic).is_some_and(|r| !r.is_disjoint(ids)))
}

/// The member's next current assignment given the target `(target_epoch, target)`, the
/// partitions the member reported owning, and the partitions other members still own.
///
/// # Errors
/// [`MustRejoin`] for a member in an unknown state that reports partitions (or none at all).
pub fn reconcile(
    current: &CurrentAssignment,
    target_epoch: i32,
    target: &Assignment,
    owned: Option<&Assignment>,
    owned_by_others: &BTreeSet<(Uuid, i32)>,
) -> Result<CurrentAssignment, MustRejoin> {
    match current.state {
        MemberState::Stable if current.member_epoch == target_epoch => Ok(current.clone()),
        MemberState::Stable | MemberState::UnreleasedPartitions => Ok(next(
            current,
            current.member_epoch,
            target_epoch,
            target,
            owned,
            owned_by_others,
        )),
        MemberState::UnrevokedPartitions => {
            if still_owns(owned, &current.pending_revocation) {
                return Ok(current.clone());
            }
            Ok(next(
                current,
                current.member_epoch + 1,
                target_epoch,
                target,
                owned,
                owned_by_others,
            ))
        }
        MemberState::Unknown => {
            if owned.is_none_or(|owned| !owned.is_empty()) {
                return Err(MustRejoin);
            }
            Ok(next(
                current,
                target_epoch,
                target_epoch,
                target,
                owned,
                owned_by_others,
            ))
        }
    }
}

fn with_epoch(
    current: &CurrentAssignment,
    epoch: i32,
    state: MemberState,
    assigned: Assignment,
    revoking: Assignment,
) -> CurrentAssignment {
    CurrentAssignment {
        // Kafka's updateMemberEpoch: the previous epoch is the one the member had.
        previous_member_epoch: current.member_epoch,
        member_epoch: epoch,
        state,
        assigned,
        pending_revocation: revoking,
    }
}

fn next(
    current: &CurrentAssignment,
    member_epoch: i32,
    target_epoch: i32,
    target: &Assignment,
    owned: Option<&Assignment>,
    owned_by_others: &BTreeSet<(Uuid, i32)>,
) -> CurrentAssignment {
    let mut assigned = Assignment::new();
    let mut revoking = Assignment::new();
    let mut pending = Assignment::new();
    let mut unreleased = false;
    let topics: BTreeSet<Uuid> = target
        .keys()
        .chain(current.assigned.keys())
        .copied()
        .collect();
    let empty = BTreeSet::new();
    for topic in topics {
        let wanted = target.get(&topic).unwrap_or(&empty);
        let had = current.assigned.get(&topic).unwrap_or(&empty);
        let keep: BTreeSet<i32> = had.intersection(wanted).copied().collect();
        let give_up: BTreeSet<i32> = had.difference(&keep).copied().collect();
        let mut add: BTreeSet<i32> = wanted.difference(&keep).copied().collect();
        let before = add.len();
        add.retain(|p| !owned_by_others.contains(&(topic, *p)));
        unreleased |= add.len() != before;
        for (map, set) in [
            (&mut assigned, keep),
            (&mut revoking, give_up),
            (&mut pending, add),
        ] {
            if !set.is_empty() {
                map.insert(topic, set);
            }
        }
    }
    if !revoking.is_empty() && still_owns(owned, &revoking) {
        return with_epoch(
            current,
            member_epoch,
            MemberState::UnrevokedPartitions,
            assigned,
            revoking,
        );
    }
    for (topic, ids) in pending {
        assigned.entry(topic).or_default().extend(ids);
    }
    let state = if unreleased {
        MemberState::UnreleasedPartitions
    } else {
        MemberState::Stable
    };
    with_epoch(current, target_epoch, state, assigned, Assignment::new())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(n: u8) -> Uuid {
        Uuid::from_bytes([n; 16])
    }

    fn a(parts: &[(u8, i32)]) -> Assignment {
        let mut assignment = Assignment::new();
        for (topic, p) in parts {
            assignment.entry(t(*topic)).or_default().insert(*p);
        }
        assignment
    }

    fn cur(
        epoch: i32,
        state: MemberState,
        assigned: &[(u8, i32)],
        revoking: &[(u8, i32)],
    ) -> CurrentAssignment {
        CurrentAssignment {
            member_epoch: epoch,
            previous_member_epoch: epoch - 1,
            state,
            assigned: a(assigned),
            pending_revocation: a(revoking),
        }
    }

    use MemberState::{
        Stable, UnreleasedPartitions as Unreleased, UnrevokedPartitions as Unrevoked,
    };

    #[test]
    #[allow(clippy::type_complexity)]
    fn table() {
        let none = BTreeSet::new();
        let p1_taken: BTreeSet<(Uuid, i32)> = [(t(1), 1)].into();
        // (name, current, target epoch, target, owned, owned by others, expected)
        let cases: Vec<(
            &str,
            CurrentAssignment,
            i32,
            Assignment,
            Option<Assignment>,
            &BTreeSet<(Uuid, i32)>,
            CurrentAssignment,
        )> = vec![
            (
                "stable at target: unchanged",
                cur(3, Stable, &[(1, 0)], &[]),
                3,
                a(&[(1, 0)]),
                Some(a(&[(1, 0)])),
                &none,
                cur(3, Stable, &[(1, 0)], &[]),
            ),
            (
                "new partitions, free: assigned at the target epoch",
                cur(3, Stable, &[(1, 0)], &[]),
                4,
                a(&[(1, 0), (1, 1)]),
                Some(a(&[(1, 0)])),
                &none,
                CurrentAssignment {
                    previous_member_epoch: 3,
                    ..cur(4, Stable, &[(1, 0), (1, 1)], &[])
                },
            ),
            (
                "new partition still owned by another: unreleased",
                cur(3, Stable, &[(1, 0)], &[]),
                4,
                a(&[(1, 0), (1, 1)]),
                Some(a(&[(1, 0)])),
                &p1_taken,
                CurrentAssignment {
                    previous_member_epoch: 3,
                    ..cur(4, Unreleased, &[(1, 0)], &[])
                },
            ),
            (
                "a partition to give up: revoke first, epoch kept",
                cur(3, Stable, &[(1, 0), (1, 1)], &[]),
                4,
                a(&[(1, 0), (1, 2)]),
                Some(a(&[(1, 0), (1, 1)])),
                &none,
                CurrentAssignment {
                    previous_member_epoch: 3,
                    ..cur(3, Unrevoked, &[(1, 0)], &[(1, 1)])
                },
            ),
            (
                "already released what it must give up: straight to the target",
                cur(3, Stable, &[(1, 0), (1, 1)], &[]),
                4,
                a(&[(1, 0)]),
                Some(a(&[(1, 0)])),
                &none,
                CurrentAssignment {
                    previous_member_epoch: 3,
                    ..cur(4, Stable, &[(1, 0)], &[])
                },
            ),
            (
                "unrevoked, still owns: waits",
                cur(3, Unrevoked, &[(1, 0)], &[(1, 1)]),
                4,
                a(&[(1, 0), (1, 2)]),
                Some(a(&[(1, 0), (1, 1)])),
                &none,
                cur(3, Unrevoked, &[(1, 0)], &[(1, 1)]),
            ),
            (
                "unrevoked, did not report: waits",
                cur(3, Unrevoked, &[(1, 0)], &[(1, 1)]),
                4,
                a(&[(1, 0), (1, 2)]),
                None,
                &none,
                cur(3, Unrevoked, &[(1, 0)], &[(1, 1)]),
            ),
            (
                "unrevoked, revoked: gets the target",
                cur(3, Unrevoked, &[(1, 0)], &[(1, 1)]),
                4,
                a(&[(1, 0), (1, 2)]),
                Some(a(&[(1, 0)])),
                &none,
                CurrentAssignment {
                    previous_member_epoch: 3,
                    ..cur(4, Stable, &[(1, 0), (1, 2)], &[])
                },
            ),
            (
                "unreleased becomes stable once freed",
                cur(4, Unreleased, &[(1, 0)], &[]),
                4,
                a(&[(1, 0), (1, 1)]),
                Some(a(&[(1, 0)])),
                &none,
                CurrentAssignment {
                    previous_member_epoch: 4,
                    ..cur(4, Stable, &[(1, 0), (1, 1)], &[])
                },
            ),
        ];
        for (name, current, epoch, target, owned, others, expected) in cases {
            assert_eq!(
                reconcile(&current, epoch, &target, owned.as_ref(), others),
                Ok(expected),
                "{name}"
            );
        }
    }

    #[test]
    fn an_unknown_state_with_partitions_must_rejoin() {
        let current = cur(3, MemberState::Unknown, &[(1, 0)], &[]);
        let none = BTreeSet::new();
        assert_eq!(
            reconcile(&current, 4, &a(&[(1, 0)]), Some(&a(&[(1, 0)])), &none),
            Err(MustRejoin)
        );
        assert_eq!(
            reconcile(&current, 4, &a(&[(1, 0)]), None, &none),
            Err(MustRejoin)
        );
        let fresh = reconcile(&current, 4, &a(&[(1, 0)]), Some(&Assignment::new()), &none).unwrap();
        assert_eq!((fresh.member_epoch, fresh.state), (4, Stable));
    }
}
