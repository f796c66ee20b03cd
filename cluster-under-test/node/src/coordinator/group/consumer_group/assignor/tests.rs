//! Table and property tests of the assignors: validity (each subscribed partition to exactly
//! one subscriber), balance, stickiness, and `range`'s co-partitioning.

use proptest::prelude::*;

use super::*;

fn topic(n: u8) -> Uuid {
    Uuid::from_bytes([n; 16])
}

fn spec(topics: &[u8], current: &[(u8, i32)]) -> MemberSpec {
    let mut assignment = Assignment::new();
    for (t, p) in current {
        assignment.entry(topic(*t)).or_default().insert(*p);
    }
    MemberSpec {
        instance_id: None,
        subscribed: topics.iter().map(|t| topic(*t)).collect(),
        current: assignment,
    }
}

fn count(assignment: &Assignment) -> usize {
    assignment.values().map(BTreeSet::len).sum()
}

/// Every partition of a topic some member subscribes to is assigned exactly once, to a
/// subscriber, and nothing else is assigned.
fn assert_valid(
    members: &BTreeMap<String, MemberSpec>,
    partitions: &BTreeMap<Uuid, i32>,
    result: &BTreeMap<String, Assignment>,
) {
    assert_eq!(
        result.keys().collect::<Vec<_>>(),
        members.keys().collect::<Vec<_>>()
    );
    let mut seen = BTreeSet::new();
    for (member, assignment) in result {
        for (t, ids) in assignment {
            assert!(
                members[member].subscribed.contains(t),
                "{member} got unsubscribed topic {t}"
            );
            for id in ids {
                assert!(
                    (0..partitions[t]).contains(id),
                    "{member} got {t}-{id}, which does not exist"
                );
                assert!(seen.insert((*t, *id)), "{t}-{id} assigned twice");
            }
        }
    }
    let subscribed: BTreeSet<Uuid> = members
        .values()
        .flat_map(|m| m.subscribed.iter().copied())
        .collect();
    let expected: usize = subscribed
        .iter()
        .filter_map(|t| partitions.get(t))
        .map(|c| *c as usize)
        .sum();
    assert_eq!(
        seen.len(),
        expected,
        "some subscribed partition is unassigned"
    );
}

#[test]
fn range_gives_consecutive_ranges_extra_first() {
    let members: BTreeMap<String, MemberSpec> = [
        ("a".into(), spec(&[1], &[])),
        ("b".into(), spec(&[1], &[])),
        ("c".into(), spec(&[1], &[])),
    ]
    .into();
    let result = assign(RANGE, &members, &[(topic(1), 7)].into()).unwrap();
    assert_eq!(result["a"][&topic(1)], BTreeSet::from([0, 1, 2]));
    assert_eq!(result["b"][&topic(1)], BTreeSet::from([3, 4]));
    assert_eq!(result["c"][&topic(1)], BTreeSet::from([5, 6]));
}

#[test]
fn range_sorts_static_members_first_by_instance_id() {
    let mut members: BTreeMap<String, MemberSpec> =
        [("a".into(), spec(&[1], &[])), ("b".into(), spec(&[1], &[]))].into();
    members.get_mut("b").unwrap().instance_id = Some("i".into());
    let result = assign(RANGE, &members, &[(topic(1), 2)].into()).unwrap();
    assert_eq!(result["b"][&topic(1)], BTreeSet::from([0]));
    assert_eq!(result["a"][&topic(1)], BTreeSet::from([1]));
}

#[test]
fn uniform_moves_only_what_balance_needs_when_a_member_joins() {
    let members: BTreeMap<String, MemberSpec> = [
        ("a".into(), spec(&[1], &[(1, 0), (1, 1), (1, 2)])),
        ("b".into(), spec(&[1], &[(1, 3), (1, 4), (1, 5)])),
        ("c".into(), spec(&[1], &[])),
    ]
    .into();
    let result = assign(UNIFORM, &members, &[(topic(1), 6)].into()).unwrap();
    assert_eq!(result["a"][&topic(1)], BTreeSet::from([0, 1]));
    assert_eq!(result["b"][&topic(1)], BTreeSet::from([3, 4]));
    assert_eq!(result["c"][&topic(1)], BTreeSet::from([2, 5]));
}

#[test]
fn uniform_heterogeneous_gives_each_topic_to_its_subscribers_only() {
    let members: BTreeMap<String, MemberSpec> = [
        ("a".into(), spec(&[1, 2], &[])),
        ("b".into(), spec(&[2], &[])),
        ("c".into(), spec(&[3], &[])),
    ]
    .into();
    let partitions = [(topic(1), 2), (topic(2), 4), (topic(3), 1)].into();
    let result = assign(UNIFORM, &members, &partitions).unwrap();
    assert_valid(&members, &partitions, &result);
    assert_eq!(count(&result["a"]), 3);
    assert_eq!(count(&result["b"]), 3);
    assert_eq!(result["c"], [(topic(3), BTreeSet::from([0]))].into());
}

#[test]
fn unknown_assignors_are_refused_by_name() {
    let error = assign("sticky", &BTreeMap::new(), &BTreeMap::new()).unwrap_err();
    assert!(error.contains("sticky"), "{error}");
    assert!(is_known(UNIFORM) && is_known(RANGE) && !is_known("sticky"));
}

fn group() -> impl Strategy<Value = (BTreeMap<String, MemberSpec>, BTreeMap<Uuid, i32>, bool)> {
    (
        prop::collection::vec(0i32..9, 1..5),
        1usize..7,
        any::<bool>(),
        prop::collection::vec((0u8..5, 0u8..5, 0i32..10, any::<u8>()), 0..40),
    )
        .prop_map(|(counts, n, homogeneous, noise)| {
            let partitions: BTreeMap<Uuid, i32> = counts
                .iter()
                .enumerate()
                .map(|(i, c)| (topic(i as u8), *c))
                .collect();
            let mut members: BTreeMap<String, MemberSpec> = BTreeMap::new();
            for m in 0..n {
                let subscribed: BTreeSet<Uuid> = if homogeneous {
                    // Topic 4 may not exist: a subscription to a missing topic is skipped.
                    (0..counts.len() as u8).chain([4]).map(topic).collect()
                } else {
                    (0..5u8)
                        .filter(|t| !(t + m as u8).is_multiple_of(3))
                        .map(topic)
                        .collect()
                };
                members.insert(
                    format!("m{m}"),
                    MemberSpec {
                        instance_id: None,
                        subscribed,
                        current: Assignment::new(),
                    },
                );
            }
            // Arbitrary (even overlapping, stale) current assignments.
            for (m, t, p, _) in noise {
                if let Some(spec) = members.get_mut(&format!("m{}", m as usize % n)) {
                    spec.current.entry(topic(t)).or_default().insert(p);
                }
            }
            (members, partitions, homogeneous)
        })
}

proptest! {
    #[test]
    fn every_assignor_assigns_each_subscribed_partition_once((members, partitions, _) in group()) {
        for name in [UNIFORM, RANGE] {
            let result = assign(name, &members, &partitions).unwrap();
            assert_valid(&members, &partitions, &result);
        }
    }

    #[test]
    fn uniform_balances_homogeneous_groups_within_one((members, partitions, homogeneous) in group()) {
        prop_assume!(homogeneous);
        let result = assign(UNIFORM, &members, &partitions).unwrap();
        let counts: Vec<usize> = result.values().map(count).collect();
        prop_assert!(counts.iter().max().unwrap() - counts.iter().min().unwrap() <= 1, "{counts:?}");
    }

    #[test]
    fn uniform_is_sticky((members, partitions, homogeneous) in group()) {
        let first = assign(UNIFORM, &members, &partitions).unwrap();
        // Fed its own result, it changes nothing.
        let mut again = members.clone();
        for (member, spec) in again.iter_mut() {
            spec.current = first[member].clone();
        }
        prop_assert_eq!(&assign(UNIFORM, &again, &partitions).unwrap(), &first);
        // A new member takes partitions, but each old member keeps its share of what it had.
        if homogeneous {
            let subscribed = again.values().next().unwrap().subscribed.clone();
            again.insert("new".into(), MemberSpec { instance_id: None, subscribed, current: Assignment::new() });
            let second = assign(UNIFORM, &again, &partitions).unwrap();
            let total: usize = second.values().map(count).sum();
            let quota = total / again.len();
            for (member, before) in &first {
                let kept = before.iter().map(|(t, ids)| {
                    ids.intersection(second[member].get(t).unwrap_or(&BTreeSet::new())).count()
                }).sum::<usize>();
                prop_assert!(kept >= count(before).min(quota), "{member} kept {kept} of {before:?}");
            }
        }
    }

    #[test]
    fn range_co_partitions_topics_of_equal_size(n in 1usize..6, partitions in 0i32..12) {
        let members: BTreeMap<String, MemberSpec> =
            (0..n).map(|m| (format!("m{m}"), spec(&[1, 2], &[]))).collect();
        let result = assign(RANGE, &members, &[(topic(1), partitions), (topic(2), partitions)].into()).unwrap();
        for assignment in result.values() {
            prop_assert_eq!(assignment.get(&topic(1)), assignment.get(&topic(2)));
        }
    }
}
