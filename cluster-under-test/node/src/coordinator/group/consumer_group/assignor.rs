//! The server-side assignors of KIP-848: `uniform` (balanced and sticky: a member keeps the
//! partitions of its previous target while that stays balanced) and `range` (co-partitioned
//! ranges per topic over the members sorted as Kafka's `RangeAssignor` sorts them: static
//! members by instance id first, then the rest by member id). Pure functions of their input.
//! `range` places partitions exactly as Kafka's server-side `RangeAssignor`; `uniform` keeps
//! the properties of Kafka's `UniformAssignor` (every partition once, to a subscriber;
//! balanced within one for identical subscriptions; a member keeps what it can) but its
//! choice among equally good placements is its own.

use std::collections::{BTreeMap, BTreeSet};

use uuid::Uuid;

use super::record::Assignment;

/// The `range` assignor's name.
pub use crate::config::group_consumer::RANGE;
/// The `uniform` assignor's name (Kafka's default, first in `group.consumer.assignors`).
pub use crate::config::group_consumer::UNIFORM;

/// What an assignor knows of one member.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct MemberSpec {
    /// The member's instance id (static members sort first for `range`).
    pub instance_id: Option<String>,
    /// The ids of the topics it subscribes to (existing or not).
    pub subscribed: BTreeSet<Uuid>,
    /// Its current target assignment, which `uniform` keeps where it can.
    pub current: Assignment,
}

/// Runs the assignor called `name` (one of [`UNIFORM`], [`RANGE`]) over `members` and the
/// partition counts of the existing topics; topics missing from `partitions` are skipped.
///
/// # Errors
/// A message when `name` is not a known assignor.
pub fn assign(
    name: &str,
    members: &BTreeMap<String, MemberSpec>,
    partitions: &BTreeMap<Uuid, i32>,
) -> Result<BTreeMap<String, Assignment>, String> {
    match name {
        UNIFORM => Ok(uniform(members, partitions)),
        RANGE => Ok(range(members, partitions)),
        other => Err(format!("unknown assignor {other:?}")),
    }
}

/// Whether `name` names an assignor this module has.
pub fn is_known(name: &str) -> bool {
    crate::config::group_consumer::is_known_assignor(name)
}

type Partition = (Uuid, i32);

fn valid(topics: &BTreeSet<Uuid>, partitions: &BTreeMap<Uuid, i32>) -> Vec<Partition> {
    topics
        .iter()
        .filter_map(|topic| partitions.get(topic).map(|count| (*topic, *count)))
        .flat_map(|(topic, count)| (0..count.max(0)).map(move |p| (topic, p)))
        .collect()
}

fn to_assignment(owned: &BTreeSet<Partition>) -> Assignment {
    let mut assignment = Assignment::new();
    for (topic, partition) in owned {
        assignment.entry(*topic).or_default().insert(*partition);
    }
    assignment
}

/// The partitions of `spec.current` the member may keep (still subscribed and existing), in
/// order, skipping any already claimed by a member before it.
fn retained(
    spec: &MemberSpec,
    partitions: &BTreeMap<Uuid, i32>,
    claimed: &mut BTreeSet<Partition>,
) -> Vec<Partition> {
    let mut kept = Vec::new();
    for (topic, ids) in &spec.current {
        let Some(count) = partitions.get(topic) else {
            continue;
        };
        if !spec.subscribed.contains(topic) {
            continue;
        }
        for id in ids.iter().filter(|id| (0..*count).contains(*id)) {
            if claimed.insert((*topic, *id)) {
                kept.push((*topic, *id));
            }
        }
    }
    kept
}

fn uniform(
    members: &BTreeMap<String, MemberSpec>,
    partitions: &BTreeMap<Uuid, i32>,
) -> BTreeMap<String, Assignment> {
    let mut subscriptions = members.values().map(|spec| &spec.subscribed);
    let homogeneous = match subscriptions.next() {
        None => return BTreeMap::new(),
        Some(first) => subscriptions.all(|other| other == first),
    };
    let owned = if homogeneous {
        uniform_homogeneous(members, partitions)
    } else {
        uniform_heterogeneous(members, partitions)
    };
    owned
        .into_iter()
        .map(|(member, owned)| (member, to_assignment(&owned)))
        .collect()
}

/// Every member gets `total / n` partitions and `total % n` of them one more; each keeps what
/// it had up to its share, the rest moves.
fn uniform_homogeneous(
    members: &BTreeMap<String, MemberSpec>,
    partitions: &BTreeMap<Uuid, i32>,
) -> BTreeMap<String, BTreeSet<Partition>> {
    let all = valid(
        &members.values().next().expect("members").subscribed,
        partitions,
    );
    let min_quota = all.len() / members.len();
    let mut extra = all.len() % members.len();
    let mut claimed = BTreeSet::new();
    let mut owned: BTreeMap<String, BTreeSet<Partition>> = BTreeMap::new();
    let mut overflow: BTreeMap<&String, Vec<Partition>> = BTreeMap::new();
    for (member, spec) in members {
        let mut kept = retained(spec, partitions, &mut claimed);
        let rest = kept.split_off(kept.len().min(min_quota));
        owned.insert(member.clone(), kept.into_iter().collect());
        overflow.insert(member, rest);
    }
    // Members that had more than the minimum keep one more while extra slots remain.
    let mut released: BTreeSet<Partition> = BTreeSet::new();
    for (member, mut rest) in overflow {
        if extra > 0 && !rest.is_empty() {
            owned
                .get_mut(member)
                .expect("member")
                .insert(rest.remove(0));
            extra -= 1;
        }
        released.extend(rest);
    }
    let mut pool = all
        .into_iter()
        .filter(|p| !claimed.contains(p) || released.contains(p));
    for owned in owned.values_mut() {
        while owned.len() < min_quota {
            owned.insert(
                pool.next()
                    .expect("enough partitions for the minimum quota"),
            );
        }
    }
    for owned in owned.values_mut() {
        if extra == 0 {
            break;
        }
        if owned.len() == min_quota {
            owned.insert(pool.next().expect("enough partitions for the extra slots"));
            extra -= 1;
        }
    }
    debug_assert!(pool.next().is_none(), "every partition assigned");
    owned
}

/// Members keep what they had; new partitions go to the least-loaded subscriber; then single
/// partitions move from a member to a subscriber with at least two fewer until none can.
fn uniform_heterogeneous(
    members: &BTreeMap<String, MemberSpec>,
    partitions: &BTreeMap<Uuid, i32>,
) -> BTreeMap<String, BTreeSet<Partition>> {
    let mut claimed = BTreeSet::new();
    let mut owned: BTreeMap<String, BTreeSet<Partition>> = BTreeMap::new();
    for (member, spec) in members {
        owned.insert(
            member.clone(),
            retained(spec, partitions, &mut claimed)
                .into_iter()
                .collect(),
        );
    }
    let topics: BTreeSet<Uuid> = members
        .values()
        .flat_map(|spec| spec.subscribed.iter().copied())
        .collect();
    let least_loaded = |owned: &BTreeMap<String, BTreeSet<Partition>>, topic: Uuid| {
        members
            .iter()
            .filter(|(_, spec)| spec.subscribed.contains(&topic))
            .map(|(member, _)| (owned[member].len(), member.clone()))
            .min()
    };
    for partition in valid(&topics, partitions) {
        if claimed.contains(&partition) {
            continue;
        }
        if let Some((_, member)) = least_loaded(&owned, partition.0) {
            owned.get_mut(&member).expect("member").insert(partition);
        }
    }
    // Each move lowers the sum of squared counts, so this ends.
    loop {
        let mut moved = false;
        let holders: Vec<(String, Partition)> = owned
            .iter()
            .flat_map(|(member, set)| set.iter().map(move |p| (member.clone(), *p)))
            .collect();
        for (holder, partition) in holders {
            let Some((count, target)) = least_loaded(&owned, partition.0) else {
                continue;
            };
            if owned[&holder].len() > count + 1 {
                owned.get_mut(&holder).expect("holder").remove(&partition);
                owned.get_mut(&target).expect("target").insert(partition);
                moved = true;
            }
        }
        if !moved {
            return owned;
        }
    }
}

fn range(
    members: &BTreeMap<String, MemberSpec>,
    partitions: &BTreeMap<Uuid, i32>,
) -> BTreeMap<String, Assignment> {
    let mut order: Vec<(&String, &MemberSpec)> = members.iter().collect();
    order.sort_by(
        |(a_id, a), (b_id, b)| match (&a.instance_id, &b.instance_id) {
            (Some(a), Some(b)) => a.cmp(b),
            (Some(_), None) => std::cmp::Ordering::Less,
            (None, Some(_)) => std::cmp::Ordering::Greater,
            (None, None) => a_id.cmp(b_id),
        },
    );
    // Per topic: (partition count, subscribers, next partition, extra slots left).
    let mut topics: BTreeMap<Uuid, (i32, i32, i32, i32)> = BTreeMap::new();
    for (_, spec) in &order {
        for topic in &spec.subscribed {
            if let Some(count) = partitions.get(topic) {
                topics.entry(*topic).or_insert((*count, 0, 0, 0)).1 += 1;
            }
        }
    }
    for (count, subscribers, _, extra) in topics.values_mut() {
        *extra = *count % *subscribers;
    }
    let mut result = BTreeMap::new();
    for (member, spec) in order {
        let mut assignment = Assignment::new();
        for topic in &spec.subscribed {
            let Some((count, subscribers, next, extra)) = topics.get_mut(topic) else {
                continue;
            };
            let mut size = *count / *subscribers;
            if *extra > 0 {
                size += 1;
                *extra -= 1;
            }
            if size > 0 {
                assignment.insert(*topic, (*next..*next + size).collect());
            }
            *next += size;
        }
        result.insert(member.clone(), assignment);
    }
    result
}

#[cfg(test)]
mod tests;
