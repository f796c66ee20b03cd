//! Tests of leaves, static members, the two clocks, metadata changes and reloads, and a
//! property test over random interleavings, through the heartbeat tests' shell.

use std::collections::BTreeSet;

use kafka_protocol::ResponseError;
use proptest::prelude::*;

use super::super::RebalanceCause;
use super::super::decision::HeartbeatRequest;
use super::super::heartbeat::tests::{Shell, beat, err, image, join, parts};
use super::super::record::{Assignment, ConsumerGroupRecord};
use super::super::state::{ConsumerGroups, GroupState};
use super::super::timers::{Expiry, TimerOp, Timers};
use super::expire;

#[test]
fn a_leave_removes_the_member_and_bumps_the_epoch() {
    let mut shell = Shell::new(&[("t", 2)]);
    shell.ok(join("a", &["t"]), 0);
    shell.ok(join("b", &["t"]), 0);
    let epoch = shell.group().group_epoch;
    let outcome = shell.hb(beat("b", 2, Assignment::new()), 1).unwrap();
    let _ = outcome;
    let leave = shell.hb(beat("b", -1, Assignment::new()), 2).unwrap();
    assert_eq!(
        (
            leave.response.member_id.as_str(),
            leave.response.member_epoch
        ),
        ("b", -1)
    );
    assert_eq!(
        leave.cause,
        Some(RebalanceCause::Leave {
            member_id: "b".into()
        })
    );
    assert!(leave.timers.contains(&TimerOp::CancelAll {
        group_id: "g".into(),
        member_id: "b".into()
    }));
    assert!(!shell.group().members.contains_key("b"));
    assert_eq!(shell.group().group_epoch, epoch + 1);
    // a, which never gave anything up, moves to the new epoch keeping everything; an
    // unchanged assignment is not sent again.
    let owned = shell.group().members["a"].current.assigned.clone();
    let a = shell.ok(
        beat("a", shell.group().members["a"].current.member_epoch, owned),
        3,
    );
    assert_eq!((a.member_epoch, a.assignment), (epoch + 1, None));
    assert_eq!(
        shell.group().members["a"].current.assigned,
        parts(&[("t", 0), ("t", 1)])
    );
    assert_eq!(shell.group().state(), GroupState::Stable);
}

#[test]
fn static_members_leave_and_come_back_without_a_rebalance() {
    let mut shell = Shell::new(&[("t", 2)]);
    let static_join = |member: &str| HeartbeatRequest {
        instance_id: Some("i".into()),
        ..join(member, &["t"])
    };
    shell.ok(static_join("a1"), 0);
    shell.ok(join("b", &["t"]), 0);
    let a1 = shell.group().members["a1"].current.clone();
    shell.ok(
        HeartbeatRequest {
            instance_id: Some("i".into()),
            ..beat("a1", a1.member_epoch, a1.assigned.clone())
        },
        1,
    );
    let before = shell.group().members["a1"].current.clone();
    let epoch = shell.group().group_epoch;
    // A second process with the same instance id while a1 is live: refused.
    assert_eq!(
        err(shell.hb(static_join("a2"), 2)).0,
        ResponseError::UnreleasedInstanceId
    );
    // a1 steps out with -2: no epoch bump, its partitions kept for it.
    let out = shell
        .hb(
            HeartbeatRequest {
                instance_id: Some("i".into()),
                ..beat("a1", -2, Assignment::new())
            },
            3,
        )
        .unwrap();
    assert_eq!(
        (
            out.response.member_epoch,
            out.cause.clone(),
            shell.group().group_epoch
        ),
        (-2, None, epoch)
    );
    // a2 takes over: no bump, same partitions, a1's id is gone.
    let a2 = shell.hb(static_join("a2"), 4).unwrap();
    assert_eq!(
        a2.cause.as_ref().map(RebalanceCause::name),
        Some("static-member-replaced")
    );
    assert_eq!(shell.group().group_epoch, epoch);
    // It had been asked to give up one partition; it keeps the rest and, with nothing left
    // to revoke, is at the target epoch at once.
    assert_eq!(
        (a2.response.member_epoch, a2.response.assignment),
        (epoch, Some(before.assigned.clone()))
    );
    assert!(!shell.group().members.contains_key("a1"));
    // The old process is fenced by instance id.
    let (error, _) = err(shell.hb(
        HeartbeatRequest {
            instance_id: Some("i".into()),
            ..beat("a1", before.member_epoch, before.assigned)
        },
        5,
    ));
    assert_eq!(error, ResponseError::FencedInstanceId);
}

#[test]
fn a_silent_member_is_fenced_at_its_session_timeout() {
    let mut shell = Shell::new(&[("t", 2)]);
    shell.ok(join("a", &["t"]), 0);
    shell.ok(join("b", &["t"]), 1_000);
    assert_eq!(shell.timers.next_deadline(), Some(45_000));
    assert!(shell.timers.take_expired(44_999).is_empty());
    let fired = shell.timers.take_expired(45_000);
    assert_eq!(
        fired,
        [Expiry::Session {
            group_id: "g".into(),
            member_id: "a".into(),
            deadline_ms: 45_000
        }]
    );
    let outcome = expire(&shell.groups, &fired[0], &shell.topics).unwrap();
    assert_eq!(
        outcome.cause.as_ref().map(RebalanceCause::name),
        Some("session-timeout")
    );
    let epoch = shell.group().group_epoch;
    shell.write(&outcome);
    assert!(!shell.group().members.contains_key("a"));
    assert_eq!(shell.group().group_epoch, epoch + 1);
    // A clock for a member already gone does nothing.
    assert_eq!(expire(&shell.groups, &fired[0], &shell.topics), None);
}

#[test]
fn a_member_that_does_not_revoke_in_time_is_fenced_by_the_poll_clock() {
    let mut shell = Shell::new(&[("t", 2)]);
    shell.ok(join("a", &["t"]), 0);
    shell.ok(join("b", &["t"]), 0);
    shell.ok(beat("a", 1, parts(&[("t", 0), ("t", 1)])), 10);
    let fired: Vec<Expiry> = shell
        .timers
        .take_expired(300_010)
        .into_iter()
        .filter(|e| matches!(e, Expiry::Rebalance { .. }))
        .collect();
    assert_eq!(
        fired,
        [Expiry::Rebalance {
            group_id: "g".into(),
            member_id: "a".into(),
            member_epoch: 1
        }]
    );
    // Had a moved on from epoch 1, the clock would not apply.
    let mut moved = shell.groups.clone();
    moved
        .groups
        .get_mut("g")
        .unwrap()
        .members
        .get_mut("a")
        .unwrap()
        .current
        .member_epoch = 2;
    assert_eq!(expire(&moved, &fired[0], &shell.topics), None);
    let outcome = expire(&shell.groups, &fired[0], &shell.topics).unwrap();
    assert_eq!(
        outcome.cause,
        Some(RebalanceCause::PollTimeout {
            member_id: "a".into()
        })
    );
    shell.write(&outcome);
    assert!(!shell.group().members.contains_key("a"));
}

#[test]
fn subscription_and_partition_changes_bump_the_epoch_as_metadata_changes() {
    let mut shell = Shell::new(&[("t", 1), ("u", 1)]);
    shell.ok(join("a", &["t"]), 0);
    let sub = HeartbeatRequest {
        subscribed_topic_names: Some(vec!["t".into(), "u".into()]),
        ..beat("a", 1, parts(&[("t", 0)]))
    };
    let outcome = shell.hb(sub, 1).unwrap();
    assert_eq!(
        outcome.cause.as_ref().map(RebalanceCause::name),
        Some("metadata-change")
    );
    assert_eq!(
        (outcome.response.member_epoch, outcome.response.assignment),
        (2, Some(parts(&[("t", 0), ("u", 0)])))
    );
    // A partition added to t: the next heartbeat sees it.
    shell.topics = image(&[("t", 2), ("u", 1)]);
    let outcome = shell
        .hb(beat("a", 2, parts(&[("t", 0), ("u", 0)])), 2)
        .unwrap();
    assert_eq!(
        outcome.cause.as_ref().map(RebalanceCause::name),
        Some("metadata-change")
    );
    assert_eq!(
        (outcome.response.member_epoch, outcome.response.assignment),
        (3, Some(parts(&[("t", 0), ("t", 1), ("u", 0)])))
    );
    // Nothing changed: no records at all.
    assert!(
        shell
            .hb(beat("a", 3, parts(&[("t", 0), ("t", 1), ("u", 0)])), 3)
            .unwrap()
            .records
            .is_empty()
    );
}

#[test]
fn a_static_member_that_steps_out_can_come_back_under_the_same_member_id() {
    // What the Java client does after its poll timer expires with a group.instance.id: it
    // leaves with -2 and rejoins at epoch 0, keeping its member id (KIP-1082).
    let mut shell = Shell::new(&[("t", 2)]);
    let static_join = HeartbeatRequest {
        instance_id: Some("i".into()),
        ..join("a", &["t"])
    };
    shell.ok(static_join.clone(), 0);
    let epoch = shell.group().group_epoch;
    shell.ok(
        HeartbeatRequest {
            instance_id: Some("i".into()),
            ..beat("a", -2, Assignment::new())
        },
        1,
    );
    let back = shell.hb(static_join, 2).unwrap();
    assert_eq!(shell.group().group_epoch, epoch, "no rebalance");
    assert_eq!(
        (back.response.member_epoch, back.response.assignment),
        (epoch, Some(parts(&[("t", 0), ("t", 1)])))
    );
    assert_eq!(shell.group().state(), GroupState::Stable);
}

#[test]
fn a_deleted_topic_is_revoked_before_the_epoch_moves() {
    let mut shell = Shell::new(&[("t", 1), ("u", 1)]);
    shell.ok(join("a", &["t", "u"]), 0);
    shell.topics = image(&[("t", 1)]);
    let both = parts(&[("t", 0), ("u", 0)]);
    let outcome = shell.hb(beat("a", 1, both.clone()), 1).unwrap();
    assert_eq!(
        outcome.cause.as_ref().map(RebalanceCause::name),
        Some("metadata-change")
    );
    // Still at epoch 1 until it stops reporting u-0.
    assert_eq!(
        (outcome.response.member_epoch, outcome.response.assignment),
        (1, Some(parts(&[("t", 0)])))
    );
    assert_eq!(shell.ok(beat("a", 1, both), 2).member_epoch, 1);
    assert_eq!(
        shell.ok(beat("a", 1, parts(&[("t", 0)])), 3).member_epoch,
        2
    );
}

#[test]
fn the_written_log_reloads_to_the_same_state_and_clocks() {
    let mut shell = Shell::new(&[("t", 3)]);
    shell.ok(join("a", &["t"]), 0);
    shell.ok(join("b", &["t"]), 0);
    shell.ok(beat("a", 1, parts(&[("t", 0), ("t", 1), ("t", 2)])), 1);
    let mut loaded = ConsumerGroups::default();
    for record in &shell.log {
        loaded
            .replay(&ConsumerGroupRecord::decode(record).unwrap().unwrap())
            .unwrap();
    }
    let mut expected = shell.groups.clone();
    expected.groups.get_mut("g").unwrap().last_cause = None;
    assert_eq!(loaded, expected);
    let mut timers = Timers::default();
    timers.on_loaded(&loaded, 1_000, 45_000);
    // a is revoking: its revocation clock restarts from the load, as does every session.
    assert_eq!(timers.next_deadline(), Some(46_000));
    let fired = timers.take_expired(301_000);
    assert_eq!(fired.len(), 3, "{fired:?}");
}

proptest! {
    /// Any interleaving of joins, leaves, heartbeats (each reporting what the member was told
    /// it owns) and subscription changes never gives a partition to two members, and once
    /// everyone heartbeats enough, the group is stable with every partition assigned.
    #[test]
    fn reconciliation_never_double_assigns_and_converges(
        steps in prop::collection::vec((0usize..4, 0u8..4), 1..60),
        assignor in prop::sample::select(vec!["uniform", "range"]),
    ) {
        let mut shell = Shell::new(&[("t", 5), ("u", 3)]);
        let names = ["m0", "m1", "m2", "m3"];
        let mut now = 0;
        for (who, what) in steps {
            now += 10;
            let member = names[who];
            let known = shell.groups.get("g").and_then(|g| g.members.get(member)).map(|m| m.current.clone());
            let request = match (known, what) {
                (None, _) => HeartbeatRequest { server_assignor: Some(assignor.into()), ..join(member, if who % 2 == 0 { &["t", "u"] } else { &["t"] }) },
                (Some(_), 0) => beat(member, -1, Assignment::new()),
                (Some(current), 1) => HeartbeatRequest { subscribed_topic_names: Some(vec!["u".into()]), ..beat(member, current.member_epoch, current.assigned.clone()) },
                // Acknowledge the revocation: report only what is still assigned.
                (Some(current), _) => beat(member, current.member_epoch, current.assigned.clone()),
            };
            // Fencing errors are fine; double ownership is checked by every write.
            let _ = shell.hb(request, now);
        }
        for _ in 0..6 {
            for member in names {
                if let Some(current) = shell.groups.get("g").and_then(|g| g.members.get(member)).map(|m| m.current.clone()) {
                    now += 10;
                    shell.hb(beat(member, current.member_epoch, current.assigned.clone()), now).unwrap();
                }
            }
        }
        if let Some(group) = shell.groups.get("g")
            && !group.members.is_empty()
        {
                prop_assert_eq!(group.state(), GroupState::Stable);
                let owned: usize = group.members.values().map(|m| m.current.assigned.values().map(BTreeSet::len).sum::<usize>()).sum();
                let subscribed: BTreeSet<&str> = group.members.values().flat_map(|m| m.subscription.subscribed_topic_names.iter().map(String::as_str)).collect();
                let expected: i32 = subscribed.iter().map(|t| shell.topics[*t].partitions).sum();
                prop_assert_eq!(owned, expected as usize);
        }
    }
}
