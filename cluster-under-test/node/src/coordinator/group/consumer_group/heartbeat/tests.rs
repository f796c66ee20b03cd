//! Table tests of the heartbeat decisions, run through a small shell that writes each
//! outcome's records through the codec and replays them, as the real shell will.

use uuid::Uuid;

use super::*;
use crate::coordinator::group::consumer_group::record::{Assignment, TopicMetadata};
use crate::coordinator::group::consumer_group::state::{ConsumerGroup, GroupState};
use crate::coordinator::group::consumer_group::timers::Timers;

pub(crate) fn tid(name: &str) -> Uuid {
    Uuid::from_bytes([name.as_bytes()[0]; 16])
}

pub(crate) fn image(topics: &[(&str, i32)]) -> TopicsImage {
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

pub(crate) fn parts(list: &[(&str, i32)]) -> Assignment {
    let mut a = Assignment::new();
    for (topic, p) in list {
        a.entry(tid(topic)).or_default().insert(*p);
    }
    a
}

pub(crate) fn join(member: &str, topics: &[&str]) -> HeartbeatRequest {
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

pub(crate) fn beat(member: &str, epoch: i32, owned: Assignment) -> HeartbeatRequest {
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
pub(crate) struct Shell {
    pub(crate) groups: ConsumerGroups,
    pub(crate) timers: Timers,
    pub(crate) topics: TopicsImage,
    pub(crate) config: Config,
    pub(crate) log: Vec<crate::coordinator::CoordinatorRecord>,
}

impl Shell {
    pub(crate) fn new(topics: &[(&str, i32)]) -> Self {
        Shell {
            groups: ConsumerGroups::default(),
            timers: Timers::default(),
            topics: image(topics),
            config: Config::default(),
            log: Vec::new(),
        }
    }

    pub(crate) fn write<R>(&mut self, outcome: &Outcome<R>) {
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

    pub(crate) fn hb(
        &mut self,
        request: HeartbeatRequest,
        now: i64,
    ) -> Result<Outcome<HeartbeatResponse>, HeartbeatError> {
        let outcome = heartbeat(&self.groups, &request, now, &self.config, &self.topics)?;
        self.write(&outcome);
        Ok(outcome)
    }

    pub(crate) fn ok(&mut self, request: HeartbeatRequest, now: i64) -> HeartbeatResponse {
        self.hb(request, now).unwrap().response
    }

    pub(crate) fn group(&self) -> &ConsumerGroup {
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

pub(crate) fn err(
    result: Result<Outcome<HeartbeatResponse>, HeartbeatError>,
) -> (ResponseError, String) {
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
