//! Table tests of the classic group's transitions.

use bytes::Bytes;
use kafka_protocol::ResponseError as E;

use super::*;

const LIMITS: Limits = Limits {
    min_session_timeout_ms: 6_000,
    max_session_timeout_ms: 1_800_000,
    initial_rebalance_delay_ms: 3_000,
};

fn join(
    member_id: &str,
    instance: Option<&str>,
    fresh: &str,
    metadata: &'static [u8],
) -> JoinRequest {
    JoinRequest {
        member_id: member_id.to_owned(),
        instance_id: instance.map(str::to_owned),
        protocol_type: "consumer".to_owned(),
        protocols: vec![("range".to_owned(), Bytes::from_static(metadata))],
        session_timeout_ms: 10_000,
        rebalance_timeout_ms: 60_000,
        client_id: "c".to_owned(),
        client_host: "/127.0.0.1".to_owned(),
        version: 9,
        fresh_id: fresh.to_owned(),
    }
}

fn sync(member_id: &str, generation: i32, assignments: &[(&str, &'static [u8])]) -> SyncRequest {
    SyncRequest {
        member_id: member_id.to_owned(),
        instance_id: None,
        generation,
        protocol_type: Some("consumer".to_owned()),
        protocol: Some("range".to_owned()),
        assignments: assignments
            .iter()
            .map(|(m, a)| ((*m).to_owned(), Bytes::from_static(a)))
            .collect(),
    }
}

/// Two dynamic members through MEMBER_ID_REQUIRED, the initial delay, join and sync.
fn stable_pair() -> ClassicGroup {
    let mut group = ClassicGroup::new(LIMITS);
    let first = group.join(&join("", None, "a", b"s"), 0);
    assert_eq!(first.joins[0].1.error, Some(E::MemberIdRequired));
    assert_eq!(first.joins[0].0, "c-a");
    let parked = group.join(&join("c-a", None, "", b"s"), 10);
    assert!(parked.joins.is_empty(), "waits for the join phase");
    assert_eq!(parked.rebalance, Some(Cause::Join));
    assert_eq!(group.state, GroupState::PreparingRebalance);
    group.join(&join("", None, "b", b"s"), 100);
    assert!(
        group
            .join(&join("c-b", None, "", b"s"), 200)
            .joins
            .is_empty()
    );
    // All joined, but the initial delay holds the phase open until it ends.
    assert!(group.tick(2_999).joins.is_empty());
    let done = group.tick(3_300);
    assert_eq!(done.joins.len(), 2);
    assert_eq!(group.generation, 1);
    assert_eq!(group.state, GroupState::CompletingRebalance);
    let leader = &done.joins[0].1;
    assert_eq!((leader.leader.as_str(), leader.members.len()), ("c-a", 2));
    assert!(
        done.joins[1].1.members.is_empty(),
        "followers get no members"
    );
    assert_eq!(leader.protocol.as_deref(), Some("range"));
    // The follower's sync waits for the leader's, which answers both and writes the group.
    assert!(
        group
            .sync(&sync("c-b", 1, &[]), 3_400, false)
            .syncs
            .is_empty()
    );
    let synced = group.sync(
        &sync("c-a", 1, &[("c-a", b"p0"), ("c-b", b"p1")]),
        3_500,
        false,
    );
    // Nobody is answered before the assignment's record is written.
    assert!(synced.syncs.is_empty());
    assert_eq!(synced.assignment, Some(1));
    assert_eq!(group.state, GroupState::CompletingRebalance);
    let written = group.assignment_written(1, Ok(()), 3_510);
    assert_eq!(group.state, GroupState::Stable);
    let mut syncs = written.syncs.clone();
    syncs.sort_by(|a, b| a.0.cmp(&b.0));
    assert_eq!(
        syncs,
        vec![
            ("c-a".to_owned(), Ok(Bytes::from_static(b"p0"))),
            ("c-b".to_owned(), Ok(Bytes::from_static(b"p1")))
        ]
    );
    let persisted = synced.persist.expect("the generation is written");
    assert_eq!((persisted.generation, persisted.members.len()), (1, 2));
    group
}

#[test]
fn members_join_sync_and_settle() {
    let group = stable_pair();
    // Reloaded from what was written, the group is Stable at that generation.
    let loaded = ClassicGroup::from_value(&group.to_value(0), LIMITS, 0);
    assert_eq!((loaded.state, loaded.generation), (GroupState::Stable, 1));
    assert_eq!(loaded.members["c-b"].assignment, Bytes::from_static(b"p1"));
}

#[test]
fn bad_requests_get_kafkas_errors() {
    let mut group = stable_pair();
    let table: Vec<(Result<(), E>, Result<(), E>)> = vec![
        (group.heartbeat("c-a", None, 1, 4_000), Ok(())),
        (
            group.heartbeat("c-a", None, 0, 4_000),
            Err(E::IllegalGeneration),
        ),
        (
            group.heartbeat("nobody", None, 1, 4_000),
            Err(E::UnknownMemberId),
        ),
        (
            group.heartbeat("c-a", Some("i"), 1, 4_000),
            Err(E::UnknownMemberId),
        ),
    ];
    for (row, (got, want)) in table.into_iter().enumerate() {
        assert_eq!(got, want, "row {row}");
    }
    assert_eq!(
        group.sync(&sync("nobody", 1, &[]), 4_000, false).syncs[0].1,
        Err(E::UnknownMemberId)
    );
    assert_eq!(
        group.sync(&sync("c-a", 7, &[]), 4_000, false).syncs[0].1,
        Err(E::IllegalGeneration)
    );
    let mut short = join("", None, "z", b"s");
    short.session_timeout_ms = 5_999;
    assert_eq!(
        group.join(&short, 4_000).joins[0].1.error,
        Some(E::InvalidSessionTimeout)
    );
    short.session_timeout_ms = 1_800_001;
    assert_eq!(
        group.join(&short, 4_000).joins[0].1.error,
        Some(E::InvalidSessionTimeout)
    );
    let mut other = join("", None, "z", b"s");
    other.protocols = vec![("roundrobin".to_owned(), Bytes::new())];
    assert_eq!(
        group.join(&other, 4_000).joins[0].1.error,
        Some(E::InconsistentGroupProtocol)
    );
    assert_eq!(
        group.join(&join("ghost", None, "", b"s"), 4_000).joins[0]
            .1
            .error,
        Some(E::UnknownMemberId)
    );
    // Nothing of that disturbed the group.
    assert_eq!(
        (group.state, group.generation, group.members.len()),
        (GroupState::Stable, 1, 2)
    );
    // Sync before any join: no such member.
    let mut empty = ClassicGroup::new(LIMITS);
    assert_eq!(
        empty.sync(&sync("x", 0, &[]), 0, false).syncs[0].1,
        Err(E::UnknownMemberId)
    );
    assert_eq!(empty.heartbeat("x", None, 0, 0), Err(E::UnknownMemberId));
}

#[test]
fn a_poll_timeout_leave_rebalances_with_its_cause() {
    let mut group = stable_pair();
    let reason = Some("consumer poll timeout has expired.".to_owned());
    let (outcomes, effects) = group.leave(
        &[
            ("c-b".to_owned(), None, reason),
            ("nobody".to_owned(), None, None),
        ],
        5_000,
    );
    assert_eq!(outcomes[0].2, None);
    assert_eq!(outcomes[1].2, Some(E::UnknownMemberId));
    assert_eq!(effects.rebalance, Some(Cause::PollTimeout));
    assert_eq!(
        group.heartbeat("c-a", None, 1, 5_100),
        Err(E::RebalanceInProgress)
    );
    // The last member rejoins: no initial delay outside Empty, so the phase ends at once.
    let rejoined = group.join(&join("c-a", None, "", b"s"), 5_200);
    assert_eq!(rejoined.joins.len(), 1);
    assert_eq!(group.generation, 2);
    assert_eq!(group.last_cause, Some(Cause::PollTimeout));
    assert_eq!(
        Cause::of_leave_reason(Some("the consumer is being closed")),
        Cause::Leave
    );
}

#[test]
fn an_expired_session_removes_the_member() {
    let mut group = stable_pair();
    assert_eq!(group.heartbeat("c-a", None, 1, 12_000), Ok(()));
    // c-b's last sign of life was its sync at 3 400; 10 s session.
    let effects = group.tick(13_401);
    assert_eq!(effects.rebalance, Some(Cause::SessionTimeout));
    assert!(!group.members.contains_key("c-b"));
    // c-a never rejoins: the join phase ends at the rebalance timeout and the group empties.
    let effects = group.tick(13_401 + 60_000);
    assert_eq!(group.state, GroupState::Empty);
    assert!(effects.persist.is_some_and(|v| v.members.is_empty()));
}

#[test]
fn a_static_member_restarts_without_a_rebalance_and_its_old_id_is_fenced() {
    let mut group = ClassicGroup::new(LIMITS);
    group.join(&join("", Some("i1"), "x", b"s"), 0);
    group.join(&join("", Some("i2"), "y", b"s"), 0);
    let done = group.tick(3_000);
    assert_eq!(done.joins.len(), 2);
    group.sync(&sync("i2-y", 1, &[]), 3_100, false);
    group.sync(
        &sync("i1-x", 1, &[("i1-x", b"a"), ("i2-y", b"b")]),
        3_100,
        false,
    );
    group.assignment_written(1, Ok(()), 3_100);
    assert_eq!(group.state, GroupState::Stable);
    // i2 restarts: a new member id, same protocols; no rebalance.
    let rejoined = group.join(&join("", Some("i2"), "z", b"s"), 4_000);
    assert_eq!(rejoined.rebalance, None);
    assert_eq!(rejoined.joins[0].0, "i2-z");
    assert_eq!(rejoined.joins[0].1.generation, 1);
    assert!(rejoined.persist.is_some());
    assert_eq!((group.state, group.generation), (GroupState::Stable, 1));
    assert_eq!(
        group.heartbeat("i2-y", Some("i2"), 1, 4_100),
        Err(E::FencedInstanceId)
    );
    let mut resync = sync("i2-z", 1, &[]);
    resync.instance_id = Some("i2".to_owned());
    assert_eq!(
        group.sync(&resync, 4_200, false).syncs[0].1,
        Ok(Bytes::from_static(b"b"))
    );
    // Other metadata (what a restarted client owned) does not rebalance either.
    let other = group.join(&join("", Some("i2"), "w", b"other"), 5_000);
    assert_eq!(other.rebalance, None);
    // The leader's replacement: no rebalance either. Before JoinGroup v9 it is answered as a
    // follower (the old leader id), from v9 as the leader told to skip the assignment.
    let mut leader = join("", Some("i1"), "v", b"s");
    leader.version = 5;
    let replaced = group.join(&leader, 6_000);
    assert_eq!(replaced.rebalance, None);
    let reply = &replaced.joins[0].1;
    assert_eq!((reply.leader.as_str(), reply.members.len()), ("i1-x", 0));
    let replaced = group.join(&join("", Some("i1"), "u", b"s"), 6_100);
    let reply = &replaced.joins[0].1;
    assert_eq!(
        (
            reply.leader.as_str(),
            reply.members.len(),
            reply.skip_assignment
        ),
        ("i1-u", 2, true)
    );
    assert_eq!((group.state, group.generation), (GroupState::Stable, 1));
}

#[test]
fn the_double_assign_canary_gives_the_leaders_partitions_to_another_member() {
    let mut group = ClassicGroup::new(LIMITS);
    group.join(&join("", Some("i1"), "x", b"s"), 0);
    group.join(&join("", Some("i2"), "y", b"s"), 0);
    group.tick(3_000);
    group.sync(&sync("i2-y", 1, &[]), 3_100, true);
    group.sync(
        &sync("i1-x", 1, &[("i1-x", b"a"), ("i2-y", b"b")]),
        3_100,
        true,
    );
    let synced = group.assignment_written(1, Ok(()), 3_100);
    assert!(
        synced
            .syncs
            .iter()
            .all(|(_, s)| *s == Ok(Bytes::from_static(b"a")))
    );
}

#[test]
fn a_group_loaded_by_a_new_coordinator_names_that_move_at_its_next_rebalance() {
    let written = stable_pair().to_value(0);
    let mut loaded = ClassicGroup::from_value(&written, LIMITS, 100_000);
    let effects = loaded.tick(100_000 + 10_001);
    assert_eq!(effects.rebalance, Some(Cause::CoordinatorMoved));
}

#[test]
fn an_absent_static_member_keeps_its_place_until_its_session_expires() {
    let mut group = ClassicGroup::new(LIMITS);
    group.join(&join("", Some("i1"), "x", b"s"), 0);
    // i2's session (120 s) outlasts the 60 s rebalance timeout.
    let mut long = join("", Some("i2"), "y", b"s");
    long.session_timeout_ms = 120_000;
    group.join(&long, 0);
    assert_eq!(group.tick(3_000).joins.len(), 2);
    group.sync(&sync("i2-y", 1, &[]), 3_100, false);
    group.sync(
        &sync("i1-x", 1, &[("i1-x", b"a"), ("i2-y", b"b")]),
        3_100,
        false,
    );
    group.assignment_written(1, Ok(()), 3_100);
    // A new dynamic member joins; i1 rejoins, i2 (killed) does not.
    group.join(&join("", None, "d", b"s"), 4_000);
    group.join(&join("c-d", None, "", b"s"), 4_000);
    group.join(&join("i1-x", Some("i1"), "", b"s"), 4_100);
    assert_eq!(group.state, GroupState::PreparingRebalance);
    // The phase ends at the rebalance timeout: i2 is still a member of generation 2,
    // unanswered, while i1 and the newcomer heartbeat.
    assert_eq!(
        group.heartbeat("i1-x", Some("i1"), 1, 10_000),
        Err(E::RebalanceInProgress)
    );
    let done = group.tick(4_000 + 60_000);
    assert_eq!(group.generation, 2);
    assert!(group.members.contains_key("i2-y"), "static members stay");
    let answered: Vec<&str> = done.joins.iter().map(|(id, _)| id.as_str()).collect();
    assert_eq!(answered, vec!["c-d", "i1-x"]);
    let leader = done
        .joins
        .iter()
        .find(|(_, reply)| !reply.members.is_empty())
        .expect("a leader among those who rejoined");
    assert_ne!(leader.0, "i2-y");
    assert_eq!(leader.1.members.len(), 3, "the leader assigns i2 too");
}

#[test]
fn a_join_phase_with_only_absent_static_members_is_extended() {
    let mut group = ClassicGroup::new(LIMITS);
    let mut long = join("", Some("i1"), "x", b"s");
    long.session_timeout_ms = 120_000;
    group.join(&long, 0);
    assert_eq!(group.tick(3_000).joins.len(), 1);
    group.sync(&sync("i1-x", 1, &[("i1-x", b"a")]), 3_100, false);
    group.assignment_written(1, Ok(()), 3_100);
    // A dynamic member asks for an id, then never comes back; i1 never rejoins either.
    group.join(&join("", None, "d", b"s"), 4_000);
    group.join(&join("c-d", None, "", b"s"), 4_000);
    group.leave(&[("c-d".to_owned(), None, None)], 4_500);
    let extended = group.tick(4_000 + 60_000);
    assert!(extended.joins.is_empty());
    assert_eq!(group.state, GroupState::PreparingRebalance);
    assert_eq!(
        group.generation, 1,
        "no generation without a rejoined member"
    );
    // i1's session (120 s from its sync at 3 100) ends it: the group empties.
    group.tick(123_101);
    assert!(group.members.is_empty());
    group.tick(123_101 + 60_000);
    assert_eq!(group.state, GroupState::Empty);
}

#[test]
fn an_unused_member_id_expires_after_its_requests_session_timeout() {
    let mut group = stable_pair();
    // A third client is told its id (MEMBER_ID_REQUIRED) but the answer is lost.
    let asked = group.join(&join("", None, "lost", b"s"), 5_000);
    assert_eq!(asked.joins[0].1.error, Some(E::MemberIdRequired));
    // A rebalance starts; both members rejoin. The unused id holds the phase open only until
    // its 10 s session timeout, not the 60 s rebalance timeout.
    group.join(&join("", None, "e", b"s"), 5_100);
    group.join(&join("c-e", None, "", b"s"), 5_100);
    group.join(&join("c-a", None, "", b"s"), 5_200);
    group.join(&join("c-b", None, "", b"s"), 5_200);
    assert!(group.tick(14_999).joins.is_empty(), "c-lost may still come");
    let done = group.tick(15_001);
    assert_eq!(done.joins.len(), 3);
    assert_eq!(group.generation, 2);
}

/// Regression test: the leader's SyncGroup was answered (and the group Stable) before the
/// assignment's record was written, and a failed write left the group Stable with an
/// assignment nobody could load; Kafka propagates the write's error to every waiting member
/// and rebalances (`resetAndPropagateAssignmentError`).
#[test]
fn a_failed_assignment_write_answers_its_error_to_every_waiting_member_and_rebalances() {
    let mut group = ClassicGroup::new(LIMITS);
    group.join(&join("", Some("i1"), "x", b"s"), 0);
    group.join(&join("", Some("i2"), "y", b"s"), 0);
    group.tick(3_000);
    assert!(
        group
            .sync(&sync("i2-y", 1, &[]), 3_100, false)
            .syncs
            .is_empty()
    );
    let led = group.sync(
        &sync("i1-x", 1, &[("i1-x", b"a"), ("i2-y", b"b")]),
        3_100,
        false,
    );
    assert!(led.syncs.is_empty() && led.persist.is_some());
    // A late follower's sync while the write is under way waits too.
    assert_eq!(group.state, GroupState::CompletingRebalance);
    // A stale outcome (another generation) changes nothing.
    assert_eq!(
        group.assignment_written(7, Err(E::NotCoordinator), 3_150),
        Effects::default()
    );
    let failed = group.assignment_written(1, Err(E::CoordinatorNotAvailable), 3_200);
    let mut syncs = failed.syncs.clone();
    syncs.sort_by(|a, b| a.0.cmp(&b.0));
    assert_eq!(
        syncs,
        vec![
            ("i1-x".to_owned(), Err(E::CoordinatorNotAvailable)),
            ("i2-y".to_owned(), Err(E::CoordinatorNotAvailable))
        ]
    );
    assert_eq!(failed.rebalance, Some(Cause::WriteFailed));
    assert_eq!(group.state, GroupState::PreparingRebalance);
    assert_eq!(group.last_cause.map(Cause::name), Some("write-failed"));
    assert!(group.members.values().all(|m| m.assignment.is_empty()));
    // A success arriving after that is stale.
    assert_eq!(
        group.assignment_written(1, Ok(()), 3_300),
        Effects::default()
    );
}

/// Regression test: a member given the generation that never sends SyncGroup was kept once
/// the leader's sync made the group Stable; Kafka's pending-sync timeout removes it after the
/// rebalance timeout and rebalances.
#[test]
fn a_member_that_never_syncs_is_removed_after_the_rebalance_timeout() {
    let mut group = ClassicGroup::new(LIMITS);
    group.join(&join("", Some("i1"), "x", b"s"), 0);
    let mut long = join("", Some("i2"), "y", b"s");
    long.session_timeout_ms = 600_000;
    group.join(&long, 0);
    group.tick(3_000);
    group.sync(
        &sync("i1-x", 1, &[("i1-x", b"a"), ("i2-y", b"b")]),
        3_100,
        false,
    );
    group.assignment_written(1, Ok(()), 3_100);
    assert_eq!(group.state, GroupState::Stable);
    // i1 heartbeats; i2 (session 10 min) never syncs.
    assert_eq!(group.heartbeat("i1-x", None, 1, 55_000), Ok(()));
    assert_eq!(group.tick(62_999), Effects::default());
    let expired = group.tick(63_000);
    assert!(!group.members.contains_key("i2-y"));
    assert!(expired.rebalance.is_some());
    assert_eq!(group.state, GroupState::PreparingRebalance);
}

/// Regression test: DeleteGroups checked "Empty" and wrote its tombstones in two steps, so a
/// JoinGroup in between joined a group being deleted; the group is Dead meanwhile.
#[test]
fn a_group_being_deleted_refuses_joins_and_is_restored_if_the_delete_fails() {
    let mut group = ClassicGroup::new(LIMITS);
    assert_eq!(group.begin_delete(), Ok(()));
    assert_eq!(group.begin_delete(), Err(E::GroupIdNotFound));
    let joined = group.join(&join("", None, "a", b"s"), 0);
    assert_eq!(joined.joins[0].1.error, Some(E::CoordinatorNotAvailable));
    assert!(group.members.is_empty() && group.pending.is_empty());
    group.abort_delete();
    assert_eq!(group.state, GroupState::Empty);
    assert_eq!(
        group.join(&join("", None, "a", b"s"), 0).joins[0].1.error,
        Some(E::MemberIdRequired)
    );
    assert_eq!(stable_pair().begin_delete(), Err(E::NonEmptyGroup));
}

/// Regression test: the member id was the whole client id, a dash and a uuid, so a client id
/// of 32 767 bytes (the most its INT16 string holds) made an id that neither the JoinGroup
/// answer nor the group's record could carry.
#[test]
fn a_huge_client_id_makes_a_member_id_of_at_most_1024_bytes() {
    let mut request = join("", None, "0123456789abcdef0123456789abcdef0123", b"s");
    request.client_id = "é".repeat(20_000);
    let id = request.new_member_id();
    assert!(id.len() <= MAX_MEMBER_ID_BYTES, "{}", id.len());
    assert!(id.len() > MAX_MEMBER_ID_BYTES - 2);
    assert!(id.starts_with("éé") && id.ends_with("-0123456789abcdef0123456789abcdef0123"));
    assert_eq!(join("", None, "u", b"s").new_member_id(), "c-u");
}
