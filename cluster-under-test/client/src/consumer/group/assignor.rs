//! The partition assignors the group leader runs, pure and deterministic: `range` (Java's
//! `RangeAssignor`) and `cooperative-sticky` (Java's `CooperativeStickyAssignor`).
//!
//! `range` works per topic: the members subscribed to it, sorted (by `group.instance.id` when
//! set, else member id, as Java's `MemberInfo` orders them), get consecutive ranges, the first
//! `partitions % members` one partition more. It ignores what members own (eager).
//!
//! `cooperative-sticky` keeps every member's owned partitions that are still valid (the topic
//! exists and the member still subscribes; when two members claim one partition the claim of
//! the higher generation wins, as Java's sticky assignor resolves it), hands the unowned
//! partitions to the eligible member with the fewest, then moves partitions from the most
//! loaded to the least loaded eligible member until no two differ by more than one. Finally,
//! the cooperative rule: a partition whose owner changes is left out of this generation's
//! assignment (its old owner revokes it and rejoins), and assigned in the next one.

use std::collections::{BTreeMap, BTreeSet};

use crate::config::AssignmentStrategy;
use crate::ids::TopicPartition;

/// One member's subscription as the leader decoded it from JoinGroup.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct MemberSubscription {
    /// The member id.
    pub member_id: String,
    /// Its `group.instance.id`, if static.
    pub group_instance_id: Option<String>,
    /// Subscribed topics.
    pub topics: Vec<String>,
    /// Partitions it owned when it joined (ConsumerProtocol v1+).
    pub owned: Vec<TopicPartition>,
    /// The generation those were owned in (v2+), -1 when unknown.
    pub generation: i32,
}

/// Member id → assigned partitions (sorted), one entry for every member.
pub type Assignment = BTreeMap<String, Vec<TopicPartition>>;

/// Runs `strategy` over `members` and the topics' partition counts (topics missing from
/// `partitions_per_topic` are not assigned).
pub fn assign(
    strategy: AssignmentStrategy,
    members: &[MemberSubscription],
    partitions_per_topic: &BTreeMap<String, i32>,
) -> Assignment {
    match strategy {
        AssignmentStrategy::Range => range(members, partitions_per_topic),
        AssignmentStrategy::CooperativeSticky => cooperative_sticky(members, partitions_per_topic),
    }
}

/// Java's `RangeAssignor`.
pub fn range(
    members: &[MemberSubscription],
    partitions_per_topic: &BTreeMap<String, i32>,
) -> Assignment {
    let mut assignment: Assignment = members
        .iter()
        .map(|m| (m.member_id.clone(), Vec::new()))
        .collect();
    for (topic, &count) in partitions_per_topic {
        let mut subscribers: Vec<&MemberSubscription> = members
            .iter()
            .filter(|m| m.topics.iter().any(|t| t == topic))
            .collect();
        if subscribers.is_empty() || count <= 0 {
            continue;
        }
        subscribers.sort_by(|a, b| member_order(a).cmp(&member_order(b)));
        let n = subscribers.len() as i32;
        let (per, extra) = (count / n, count % n);
        for (i, member) in subscribers.iter().enumerate() {
            let i = i as i32;
            let start = per * i + i.min(extra);
            let length = per + i32::from(i < extra);
            let mine = assignment.get_mut(&member.member_id).expect("every member");
            mine.extend((start..start + length).map(|p| TopicPartition::new(topic.clone(), p)));
        }
    }
    for partitions in assignment.values_mut() {
        partitions.sort();
    }
    assignment
}

/// Java's `MemberInfo` order: static members by instance id first, then by member id.
fn member_order(member: &MemberSubscription) -> (bool, &str, &str) {
    match &member.group_instance_id {
        Some(instance) => (false, instance.as_str(), member.member_id.as_str()),
        None => (true, member.member_id.as_str(), ""),
    }
}

/// Java's `CooperativeStickyAssignor` (see the module doc).
pub fn cooperative_sticky(
    members: &[MemberSubscription],
    partitions_per_topic: &BTreeMap<String, i32>,
) -> Assignment {
    let eligible = |member: &MemberSubscription, tp: &TopicPartition| {
        member.topics.iter().any(|t| t.as_str() == &*tp.topic)
            && partitions_per_topic
                .get(&*tp.topic)
                .is_some_and(|&count| tp.partition.0 >= 0 && tp.partition.0 < count)
    };
    // The previous owner of each partition: the valid claim of the highest generation.
    let mut previous: BTreeMap<TopicPartition, (i32, &str)> = BTreeMap::new();
    for member in members {
        for tp in &member.owned {
            if !eligible(member, tp) {
                continue;
            }
            let claim = (member.generation, member.member_id.as_str());
            match previous.get(tp) {
                Some((generation, _)) if *generation >= member.generation => {}
                _ => {
                    previous.insert(tp.clone(), claim);
                }
            }
        }
    }
    let mut current: BTreeMap<&str, BTreeSet<TopicPartition>> = members
        .iter()
        .map(|m| (m.member_id.as_str(), BTreeSet::new()))
        .collect();
    for (tp, (_, owner)) in &previous {
        current.get_mut(owner).expect("a member").insert(tp.clone());
    }
    let by_id: BTreeMap<&str, &MemberSubscription> =
        members.iter().map(|m| (m.member_id.as_str(), m)).collect();
    // Unowned partitions go to the eligible member with the fewest (ties: member id).
    for (topic, &count) in partitions_per_topic {
        for p in 0..count.max(0) {
            let tp = TopicPartition::new(topic.clone(), p);
            if previous.contains_key(&tp) {
                continue;
            }
            let target = current
                .iter()
                .filter(|(id, _)| eligible(by_id[*id], &tp))
                .min_by_key(|(id, owned)| (owned.len(), **id))
                .map(|(id, _)| *id);
            if let Some(id) = target {
                current.get_mut(id).expect("a member").insert(tp);
            }
        }
    }
    // Balance: move one partition at a time from the most to the least loaded eligible member.
    loop {
        let mut moved = false;
        let mut order: Vec<&str> = current.keys().copied().collect();
        order.sort_by_key(|id| (std::cmp::Reverse(current[id].len()), *id));
        'donors: for donor in &order {
            for tp in current[donor].iter().rev() {
                let receiver = current
                    .iter()
                    .filter(|(id, owned)| {
                        *id != donor
                            && owned.len() + 1 < current[donor].len()
                            && eligible(by_id[*id], tp)
                    })
                    .min_by_key(|(id, owned)| (owned.len(), **id))
                    .map(|(id, _)| *id);
                if let Some(receiver) = receiver {
                    let tp = tp.clone();
                    current.get_mut(donor).expect("donor").remove(&tp);
                    current.get_mut(receiver).expect("receiver").insert(tp);
                    moved = true;
                    break 'donors;
                }
            }
        }
        if !moved {
            break;
        }
    }
    // Cooperative: a partition changing owner is only revoked this generation.
    current
        .into_iter()
        .map(|(id, partitions)| {
            let kept = partitions
                .into_iter()
                .filter(|tp| previous.get(tp).is_none_or(|(_, owner)| *owner == id))
                .collect();
            (id.to_owned(), kept)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn member(
        id: &str,
        topics: &[&str],
        owned: &[(&str, i32)],
        generation: i32,
    ) -> MemberSubscription {
        MemberSubscription {
            member_id: id.to_owned(),
            group_instance_id: None,
            topics: topics.iter().map(|t| (*t).to_owned()).collect(),
            owned: owned
                .iter()
                .map(|(t, p)| TopicPartition::new(*t, *p))
                .collect(),
            generation,
        }
    }

    fn topics(list: &[(&str, i32)]) -> BTreeMap<String, i32> {
        list.iter().map(|(t, n)| ((*t).to_owned(), *n)).collect()
    }

    fn render(assignment: &Assignment) -> Vec<String> {
        assignment
            .iter()
            .map(|(id, tps)| {
                let parts: Vec<String> = tps
                    .iter()
                    .map(|tp| format!("{}{}", tp.topic, tp.partition.0))
                    .collect();
                format!("{id}:{}", parts.join(","))
            })
            .collect()
    }

    /// Table of Java RangeAssignor cases: (members with topics, topics, expected).
    #[test]
    fn range_matches_javas_range_assignor() {
        type Case = (
            Vec<MemberSubscription>,
            BTreeMap<String, i32>,
            Vec<&'static str>,
        );
        let cases: Vec<Case> = vec![
            // One topic, three partitions, two members: the first gets the extra one.
            (
                vec![member("c1", &["t"], &[], -1), member("c0", &["t"], &[], -1)],
                topics(&[("t", 3)]),
                vec!["c0:t0,t1", "c1:t2"],
            ),
            // Two topics of three: the first member gets the extra of each (Java's known skew).
            (
                vec![
                    member("c0", &["t", "u"], &[], -1),
                    member("c1", &["t", "u"], &[], -1),
                ],
                topics(&[("t", 3), ("u", 3)]),
                vec!["c0:t0,t1,u0,u1", "c1:t2,u2"],
            ),
            // Different subscriptions: each topic only among its subscribers.
            (
                vec![
                    member("a", &["t"], &[], -1),
                    member("b", &["t", "u"], &[], -1),
                ],
                topics(&[("t", 2), ("u", 2)]),
                vec!["a:t0", "b:t1,u0,u1"],
            ),
            // More members than partitions: the last get nothing.
            (
                vec![
                    member("a", &["t"], &[], -1),
                    member("b", &["t"], &[], -1),
                    member("c", &["t"], &[], -1),
                ],
                topics(&[("t", 2)]),
                vec!["a:t0", "b:t1", "c:"],
            ),
            // A topic that does not exist is not assigned.
            (
                vec![member("a", &["t", "x"], &[], -1)],
                topics(&[("t", 1)]),
                vec!["a:t0"],
            ),
        ];
        for (members, topics, expected) in cases {
            assert_eq!(render(&range(&members, &topics)), expected);
        }
    }

    #[test]
    fn range_orders_static_members_by_instance_id() {
        let mut a = member("zzz", &["t"], &[], -1);
        a.group_instance_id = Some("i0".to_owned());
        let mut b = member("aaa", &["t"], &[], -1);
        b.group_instance_id = Some("i1".to_owned());
        assert_eq!(
            render(&range(&[a, b], &topics(&[("t", 2)]))),
            vec!["aaa:t1", "zzz:t0"]
        );
    }

    #[test]
    fn cooperative_sticky_first_assignment_is_balanced() {
        let members = [member("a", &["t"], &[], -1), member("b", &["t"], &[], -1)];
        assert_eq!(
            render(&cooperative_sticky(&members, &topics(&[("t", 4)]))),
            vec!["a:t0,t2", "b:t1,t3"]
        );
    }

    /// A member joins a group of one: the old owner keeps half and the moving half is assigned
    /// to nobody this generation (revoked first); next generation the newcomer gets it.
    #[test]
    fn cooperative_sticky_revokes_before_it_reassigns() {
        let all = [("t", 0), ("t", 1), ("t", 2), ("t", 3)];
        let first = [member("a", &["t"], &all, 1), member("b", &["t"], &[], -1)];
        let one = cooperative_sticky(&first, &topics(&[("t", 4)]));
        assert_eq!(render(&one), vec!["a:t0,t1", "b:"]);
        let second = [
            member("a", &["t"], &[("t", 0), ("t", 1)], 2),
            member("b", &["t"], &[], 2),
        ];
        let two = cooperative_sticky(&second, &topics(&[("t", 4)]));
        assert_eq!(render(&two), vec!["a:t0,t1", "b:t2,t3"]);
    }

    /// A member leaves: the survivors keep what they had and split the orphans.
    #[test]
    fn cooperative_sticky_keeps_partitions_that_do_not_move() {
        let members = [
            member("a", &["t"], &[("t", 0), ("t", 3)], 5),
            member("b", &["t"], &[("t", 1), ("t", 4)], 5),
        ];
        let assignment = cooperative_sticky(&members, &topics(&[("t", 6)]));
        assert_eq!(render(&assignment), vec!["a:t0,t2,t3", "b:t1,t4,t5"]);
    }

    /// Two members claim one partition: the claim of the higher generation wins.
    #[test]
    fn cooperative_sticky_conflicting_claims_go_to_the_newer_generation() {
        let members = [
            member("a", &["t"], &[("t", 0)], 3),
            member("b", &["t"], &[("t", 0)], 4),
        ];
        let assignment = cooperative_sticky(&members, &topics(&[("t", 2)]));
        assert_eq!(render(&assignment), vec!["a:t1", "b:t0"]);
    }

    /// Unequal subscriptions: only eligible members get a topic, and an unsubscribed topic's
    /// partitions are dropped from the member that owned them.
    #[test]
    fn cooperative_sticky_respects_subscriptions() {
        let members = [
            member("a", &["t"], &[("u", 0)], 1),
            member("b", &["t", "u"], &[], 1),
        ];
        let assignment = cooperative_sticky(&members, &topics(&[("t", 2), ("u", 2)]));
        assert_eq!(render(&assignment), vec!["a:t0,t1", "b:u0,u1"]);
    }

    /// Property: the result never gives a partition to two members, and with equal
    /// subscriptions and no moves pending counts differ by at most one.
    #[test]
    fn cooperative_sticky_never_double_assigns() {
        for members_count in 1..5 {
            for partitions in 0..9 {
                let ids: Vec<String> = (0..members_count).map(|i| format!("m{i}")).collect();
                let members: Vec<MemberSubscription> = ids
                    .iter()
                    .enumerate()
                    .map(|(i, id)| {
                        let owned: Vec<(&str, i32)> = (0..partitions)
                            .filter(|p| p % 3 == i as i32 % 3)
                            .map(|p| ("t", p))
                            .collect();
                        member(id, &["t"], &owned, 1)
                    })
                    .collect();
                let assignment = cooperative_sticky(&members, &topics(&[("t", partitions)]));
                let mut seen = BTreeSet::new();
                for tps in assignment.values() {
                    for tp in tps {
                        assert!(seen.insert(tp.clone()), "{tp} assigned twice");
                    }
                }
            }
        }
    }
}
