//! Table tests of the heartbeat decisions, run through a small shell that writes each
//! outcome's records through the codec and replays them, as the real shell will.

use proptest::prelude::*;
use uuid::Uuid;

use super::*;
use crate::coordinator::consumer_group::state::GroupState;
use crate::coordinator::consumer_group::timers::Timers;

fn tid(name: &str) -> Uuid {
    Uuid::from_bytes([name.as_bytes()[0]; 16])
}

fn image(topics: &[(&str, i32)]) -> TopicsImage {
    topics
        .iter()
        .map(|(name, n)| {
            (
                name.to_string(),
                TopicMetadata {
                    id: tid(name),
                    name: name.to_string(),
                    partitions: *n,
                },
            )
        })
        .collect()
}

fn parts(list: &[(&str, i32)]) -> Assignment {
    let mut a = Assignment::new();
    for (topic, p) in list {
        a.entry(tid(topic)).or_default().insert(*p);
    }
    a
}

fn join(member: &str, topics: &[&str]) -> HeartbeatRequest {
    HeartbeatRequest {
        api_version: 1,
        group_id: "g".into(),
        member_id: member.into(),
        member_epoch: 0,
        rebalance_timeout_ms: 300_000,
        subscribed_topic_names: Some(topics.iter().map(|t| t.to_string()).collect()),
        owned: Some(Assignment::new()),
        client_id: "c".into(),
        client_host: "/127.0.0.1".into(),
        ..HeartbeatRequest::default()
    }
}

fn beat(member: &str, epoch: i32, owned: Assignment) -> HeartbeatRequest {
    HeartbeatRequest {
        api_version: 1,
        group_id: "g".into(),
        member_id: member.into(),
        member_epoch: epoch,
        rebalance_timeout_ms: -1,
        owned: Some(owned),
        client_id: "c".into(),
        client_host: "/127.0.0.1".into(),
        ..HeartbeatRequest::default()
    }
}

/// The state and clocks of one partition, and the shell's write path.
struct Shell {
    groups: ConsumerGroups,
    timers: Timers,
    topics: TopicsImage,
    config: Config,
    log: Vec<crate::coordinator::CoordinatorRecord>,
}

impl Shell {
    fn new(topics: &[(&str, i32)]) -> Self {
        Shell {
            groups: ConsumerGroups::default(),
            timers: Timers::default(),
            topics: image(topics),
            config: Config::default(),
            log: Vec::new(),
        }
    }

    fn write<R>(&mut self, outcome: &Outcome<R>) {
        for record in &outcome.records {
            let encoded = record.encode();
            let decoded = ConsumerGroupRecord::decode(&encoded).unwrap().unwrap();
            self.groups.replay(&decoded).unwrap();
            self.log.push(encoded);
        }
        self.timers.apply(&outcome.timers);
        if let Some(cause) = &outcome.cause {
            self.groups.note_cause("g", cause.clone());
        }
        self.check_no_double_ownership();
    }

    fn hb(
        &mut self,
        request: HeartbeatRequest,
        now: i64,
    ) -> Result<Outcome<HeartbeatResponse>, HeartbeatError> {
        let outcome = heartbeat(&self.groups, &request, now, &self.config, &self.topics)?;
        self.write(&outcome);
        Ok(outcome)
    }

    fn ok(&mut self, request: HeartbeatRequest, now: i64) -> HeartbeatResponse {
        self.hb(request, now).unwrap().response
    }

    fn group(&self) -> &ConsumerGroup {
        self.groups.get("g").unwrap()
    }

    /// What the `double-assign` canary breaks: a partition held by two members at once.
    fn check_no_double_ownership(&self) {
        let Some(group) = self.groups.get("g") else {
            return;
        };
        let mut seen = BTreeSet::new();
        for member in group.members.values() {
            for (topic, ids) in member
                .current
                .assigned
                .iter()
                .chain(&member.current.pending_revocation)
            {
                for id in ids {
                    assert!(
                        seen.insert((*topic, *id)),
                        "{topic}-{id} owned twice: {group:#?}"
                    );
                }
            }
        }
    }
}

fn err(result: Result<Outcome<HeartbeatResponse>, HeartbeatError>) -> (ResponseError, String) {
    let error = result.unwrap_err();
    (error.error, error.message)
}

#[test]
fn invalid_requests_get_kafkas_errors() {
    use ResponseError::{InvalidRequest, UnsupportedAssignor};
    let cases: Vec<(&str, HeartbeatRequest, ResponseError, &str)> = vec![
        (
            "empty group",
            HeartbeatRequest {
                group_id: String::new(),
                ..join("a", &["t"])
            },
            InvalidRequest,
            "GroupId can't be empty.",
        ),
        (
            "empty instance",
            HeartbeatRequest {
                instance_id: Some(String::new()),
                ..join("a", &["t"])
            },
            InvalidRequest,
            "InstanceId can't be empty.",
        ),
        (
            "empty rack",
            HeartbeatRequest {
                rack_id: Some(String::new()),
                ..join("a", &["t"])
            },
            InvalidRequest,
            "RackId can't be empty.",
        ),
        (
            "v1 without member id",
            join("", &["t"]),
            InvalidRequest,
            "MemberId can't be empty.",
        ),
        (
            "v0 heartbeat without member id",
            HeartbeatRequest {
                api_version: 0,
                ..beat("", 3, Assignment::new())
            },
            InvalidRequest,
            "MemberId can't be empty.",
        ),
        (
            "join without rebalance timeout",
            HeartbeatRequest {
                rebalance_timeout_ms: -1,
                ..join("a", &["t"])
            },
            InvalidRequest,
            "RebalanceTimeoutMs must be provided in first request.",
        ),
        (
            "join owning partitions",
            HeartbeatRequest {
                owned: Some(parts(&[("t", 0)])),
                ..join("a", &["t"])
            },
            InvalidRequest,
            "TopicPartitions must be empty when (re-)joining.",
        ),
        (
            "join without owned field",
            HeartbeatRequest {
                owned: None,
                ..join("a", &["t"])
            },
            InvalidRequest,
            "TopicPartitions must be empty when (re-)joining.",
        ),
        (
            "join without topics",
            join("a", &[]),
            InvalidRequest,
            "SubscribedTopicNames must be set in first request.",
        ),
        (
            "static leave without instance",
            beat("a", -2, Assignment::new()),
            InvalidRequest,
            "InstanceId can't be null.",
        ),
        (
            "epoch -3",
            beat("a", -3, Assignment::new()),
            InvalidRequest,
            "MemberEpoch is invalid.",
        ),
        (
            "regex",
            HeartbeatRequest {
                subscribed_topic_regex: Some("t.*".into()),
                ..join("a", &["t"])
            },
            InvalidRequest,
            "SubscribedTopicRegex",
        ),
        (
            "unknown assignor",
            HeartbeatRequest {
                server_assignor: Some("sticky".into()),
                ..join("a", &["t"])
            },
            UnsupportedAssignor,
            "ServerAssignor sticky is not supported. Supported assignors: uniform, range.",
        ),
    ];
    for (name, request, code, message) in cases {
        let mut shell = Shell::new(&[("t", 2)]);
        let (error, text) = err(shell.hb(request, 0));
        assert_eq!(error, code, "{name}");
        assert!(text.starts_with(message), "{name}: {text}");
        assert!(shell.log.is_empty(), "{name}: an error writes nothing");
    }
}

#[test]
fn a_first_join_creates_the_group_and_assigns_everything() {
    let mut shell = Shell::new(&[("t", 3)]);
    let outcome = shell.hb(join("a", &["t"]), 0).unwrap();
    assert_eq!(
        outcome.response,
        HeartbeatResponse {
            member_id: "a".into(),
            member_epoch: 1,
            heartbeat_interval_ms: 5_000,
            assignment: Some(parts(&[("t", 0), ("t", 1), ("t", 2)]))
        }
    );
    let kinds: Vec<i16> = shell
        .log
        .iter()
        .map(|r| i16::from_be_bytes([r.key.as_ref().unwrap()[0], r.key.as_ref().unwrap()[1]]))
        .collect();
    // Member, partition metadata, group epoch, target member, target epoch, current.
    assert_eq!(kinds, [5, 4, 3, 7, 6, 8]);
    assert_eq!(
        outcome.cause,
        Some(RebalanceCause::Join {
            member_id: "a".into()
        })
    );
    assert!(outcome.timers.contains(&TimerOp::Session {
        group_id: "g".into(),
        member_id: "a".into(),
        deadline_ms: 45_000
    }));
    assert_eq!(shell.group().state(), GroupState::Stable);
    assert_eq!(
        shell.group().last_cause.as_ref().map(RebalanceCause::name),
        Some("join")
    );
}

#[test]
fn version_zero_joins_get_a_member_id_from_the_coordinator() {
    let mut shell = Shell::new(&[("t", 1)]);
    let request = HeartbeatRequest {
        api_version: 0,
        generated_member_id: "fresh".into(),
        ..join("", &["t"])
    };
    assert_eq!(shell.ok(request, 0).member_id, "fresh");
}

#[test]
fn a_second_member_gets_partitions_only_after_the_first_revokes_them() {
    let mut shell = Shell::new(&[("t", 4)]);
    shell.ok(join("a", &["t"]), 0);
    let all = parts(&[("t", 0), ("t", 1), ("t", 2), ("t", 3)]);
    // b joins: epoch 2, but a still owns everything, so b waits with nothing.
    let b = shell.hb(join("b", &["t"]), 1).unwrap();
    assert_eq!(
        (b.response.member_epoch, b.response.assignment.clone()),
        (2, Some(Assignment::new()))
    );
    assert_eq!(
        shell.group().members["b"].current.state,
        MemberState::UnreleasedPartitions
    );
    assert_eq!(shell.group().state(), GroupState::Reconciling);
    // a is asked to revoke two partitions at its old epoch, and a revocation clock starts.
    let a = shell.hb(beat("a", 1, all.clone()), 2).unwrap();
    let kept = shell.group().members["a"].current.assigned.clone();
    assert_eq!(
        (a.response.member_epoch, a.response.assignment.clone()),
        (1, Some(kept.clone()))
    );
    assert_eq!(kept.values().map(BTreeSet::len).sum::<usize>(), 2);
    assert_eq!(
        shell.group().members["a"].current.state,
        MemberState::UnrevokedPartitions
    );
    assert!(a.timers.iter().any(|t| matches!(
        t,
        TimerOp::Rebalance {
            member_epoch: 1,
            deadline_ms: 300_002,
            ..
        }
    )));
    // b still gets nothing while a has not revoked.
    assert_eq!(
        shell.ok(beat("b", 2, Assignment::new()), 3).assignment,
        None
    );
    // a acknowledges: epoch 2, stable, clock cancelled.
    let a = shell.hb(beat("a", 1, kept.clone()), 4).unwrap();
    assert_eq!(a.response.member_epoch, 2);
    assert!(
        a.timers
            .iter()
            .any(|t| matches!(t, TimerOp::CancelRebalance { .. }))
    );
    // Now b gets the released partitions.
    let b = shell.ok(beat("b", 2, Assignment::new()), 5);
    let b_parts = b.assignment.unwrap();
    assert_eq!(b_parts.values().map(BTreeSet::len).sum::<usize>(), 2);
    assert!(b_parts[&tid("t")].is_disjoint(&kept[&tid("t")]));
    assert_eq!(shell.group().state(), GroupState::Stable);
}

#[test]
fn stale_and_future_epochs_are_fenced_but_a_lost_response_is_tolerated() {
    let mut shell = Shell::new(&[("t", 2)]);
    shell.ok(join("a", &["t"]), 0);
    shell.ok(join("b", &["t"]), 0);
    // a is asked to revoke one partition and stays at epoch 1.
    let a = shell.ok(beat("a", 1, parts(&[("t", 0), ("t", 1)])), 1);
    assert_eq!(a.member_epoch, 1, "still revoking");
    let now = shell.group().members["a"].current.clone();
    let mine = now.assigned.clone();
    let (error, _) = err(shell.hb(beat("a", now.member_epoch + 1, Assignment::new()), 2));
    assert_eq!(error, ResponseError::FencedMemberEpoch, "future epoch");
    shell.ok(beat("a", 1, mine.clone()), 3);
    let current = shell.group().members["a"].current.clone();
    assert_eq!(
        (current.member_epoch, current.previous_member_epoch),
        (2, 1)
    );
    // The previous epoch with a subset of the assignment is accepted (lost response)...
    assert_eq!(shell.ok(beat("a", 1, mine.clone()), 4).member_epoch, 2);
    // ...but not with a partition outside it.
    let (error, _) = err(shell.hb(beat("a", 1, parts(&[("t", 0), ("t", 1)])), 5));
    assert_eq!(error, ResponseError::FencedMemberEpoch);
    // A rejoin at epoch 0 with the same id is accepted (KAFKA-19233).
    assert_eq!(shell.ok(join("a", &["t"]), 6).member_epoch, 2);
    // Two epochs on, an epoch below the previous one is fenced whatever it owns.
    shell.ok(join("c", &["t"]), 7);
    let current = shell.group().members["a"].current.clone();
    shell.ok(beat("a", current.member_epoch, current.assigned.clone()), 8);
    let current = shell.group().members["a"].current.clone();
    assert_eq!(
        (current.member_epoch, current.previous_member_epoch),
        (3, 2)
    );
    let (error, _) = err(shell.hb(beat("a", 1, Assignment::new()), 9));
    assert_eq!(
        error,
        ResponseError::FencedMemberEpoch,
        "epoch below the previous"
    );
}

#[test]
fn unknown_members_and_groups() {
    let mut shell = Shell::new(&[("t", 1)]);
    assert_eq!(
        err(shell.hb(beat("a", 1, Assignment::new()), 0)).0,
        ResponseError::GroupIdNotFound
    );
    shell.ok(join("a", &["t"]), 0);
    assert_eq!(
        err(shell.hb(beat("x", 1, Assignment::new()), 0)).0,
        ResponseError::UnknownMemberId
    );
    assert_eq!(
        err(shell.hb(beat("x", -1, Assignment::new()), 0)).0,
        ResponseError::UnknownMemberId
    );
    shell.config.max_size = 1;
    assert_eq!(
        err(shell.hb(join("b", &["t"]), 0)).0,
        ResponseError::GroupMaxSizeReached
    );
}

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
            member_id: "a".into()
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
