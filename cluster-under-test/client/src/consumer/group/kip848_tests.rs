//! Table tests of the KIP-848 member: the fields each heartbeat carries, the answers' meaning,
//! the poll clock's leave and the rejoin after a fence.

use super::*;

fn topic(n: u128) -> uuid::Uuid {
    uuid::Uuid::from_u128(n)
}

fn assignment(parts: &[(u128, &[i32])]) -> TopicIdAssignment {
    parts
        .iter()
        .map(|(t, ps)| (topic(*t), ps.iter().copied().collect()))
        .collect()
}

fn member(instance: Option<&str>) -> Member848 {
    Member848::new(
        "m1".into(),
        vec!["t".into()],
        instance.map(str::to_owned),
        Duration::from_secs(300),
        None,
    )
}

fn ok(epoch: i32, assigned: Option<TopicIdAssignment>) -> Answer {
    Answer {
        error_code: 0,
        member_id: Some("m1".into()),
        member_epoch: epoch,
        heartbeat_interval_ms: 5000,
        assignment: assigned,
    }
}

fn error(code: i16) -> Answer {
    Answer {
        error_code: code,
        member_id: None,
        member_epoch: -1,
        heartbeat_interval_ms: 0,
        assignment: None,
    }
}

#[test]
fn a_join_carries_every_field_and_later_beats_only_what_changed() {
    let mut m = member(Some("i"));
    let join = m.request().unwrap();
    assert_eq!(join.member_epoch, 0);
    assert_eq!(join.rebalance_timeout_ms, 300_000);
    assert_eq!(join.subscribed_topic_names, Some(vec!["t".to_owned()]));
    assert_eq!(join.instance_id.as_deref(), Some("i"));
    // Kafka refuses a (re-)join whose TopicPartitions is null or not empty.
    assert_eq!(join.owned, Some(TopicIdAssignment::new()));
    assert!(m.urgent());
    assert_eq!(
        m.on_answer(&ok(1, Some(assignment(&[(7, &[0, 1])])))),
        Next::Beat
    );
    assert_eq!(m.state, State::Member);
    assert_eq!(m.heartbeat_interval, Duration::from_secs(5));
    assert_eq!(m.target(), Some(&assignment(&[(7, &[0, 1])])));
    // Nothing changed yet: a bare heartbeat (the instance id always goes, as Java's).
    let beat = m.request().unwrap();
    assert_eq!(
        (
            beat.member_epoch,
            beat.rebalance_timeout_ms,
            beat.subscribed_topic_names,
            beat.owned,
            beat.instance_id.as_deref()
        ),
        (1, -1, None, None, Some("i"))
    );
    assert!(!m.urgent());
    // The consumer took the partitions: the acknowledgement is owed at once, once.
    m.reconciled(assignment(&[(7, &[0, 1])]));
    assert_eq!(m.target(), None);
    assert!(m.urgent());
    assert_eq!(
        m.request().unwrap().owned,
        Some(assignment(&[(7, &[0, 1])]))
    );
    assert_eq!(m.request().unwrap().owned, None);
    // A new subscription goes out with the next beat.
    m.subscribe(vec!["t".into(), "u".into()]);
    assert_eq!(
        m.request().unwrap().subscribed_topic_names,
        Some(vec!["t".to_owned(), "u".to_owned()])
    );
}

#[test]
fn a_failed_request_makes_the_next_one_whole() {
    let mut m = member(None);
    m.request();
    m.on_answer(&ok(3, Some(assignment(&[(1, &[0])]))));
    m.reconciled(assignment(&[(1, &[0])]));
    m.request();
    assert_eq!(m.on_failure(), Next::Rediscover);
    let beat = m.request().unwrap();
    assert_eq!(beat.member_epoch, 3);
    assert_eq!(beat.owned, Some(assignment(&[(1, &[0])])));
    assert_eq!(beat.subscribed_topic_names, Some(vec!["t".to_owned()]));
    assert_eq!(beat.rebalance_timeout_ms, 300_000);
    // The same after the coordinator moved or while it loads.
    assert_eq!(
        m.on_answer(&error(codes::NOT_COORDINATOR)),
        Next::Rediscover
    );
    assert!(m.request().unwrap().owned.is_some());
    assert_eq!(
        m.on_answer(&error(codes::COORDINATOR_LOAD_IN_PROGRESS)),
        Next::Retry
    );
    assert!(m.request().unwrap().owned.is_some());
    assert_eq!(m.state, State::Member);
}

#[test]
fn fenced_members_release_then_rejoin_at_epoch_zero() {
    for code in [codes::FENCED_MEMBER_EPOCH, codes::UNKNOWN_MEMBER_ID] {
        let mut m = member(None);
        m.request();
        m.on_answer(&ok(2, Some(assignment(&[(1, &[0, 1])]))));
        m.reconciled(assignment(&[(1, &[0, 1])]));
        assert_eq!(m.on_answer(&error(code)), Next::Wait);
        assert!(m.must_release());
        assert_eq!(
            (m.member_epoch, m.last_epoch),
            (0, 2),
            "the lost epoch is kept"
        );
        assert_eq!(m.request(), None, "a fenced member sends nothing");
        assert!(!m.urgent());
        assert!(m.release(), "fenced: rejoins at once");
        let join = m.request().unwrap();
        assert_eq!((join.member_epoch, join.member_id.as_str()), (0, "m1"));
        assert_eq!(join.owned, Some(TopicIdAssignment::new()));
    }
    // Under v0 the coordinator names members: the first join goes out without an id and the
    // member keeps the one it is answered with, rejoins included; from v1 on the client's own
    // id goes out.
    let mut m = member(None);
    let join = m.request().unwrap();
    assert_eq!((join.wire_member_id(0), join.wire_member_id(1)), ("", "m1"));
    m.on_answer(&Answer {
        member_id: Some("given".into()),
        ..ok(1, None)
    });
    assert_eq!(m.member_id, "given");
    assert_eq!(m.request().unwrap().wire_member_id(0), "given");
    m.on_answer(&error(codes::FENCED_MEMBER_EPOCH));
    m.release();
    assert_eq!(m.request().unwrap().wire_member_id(0), "given");
}

#[test]
fn the_poll_clock_leaves_and_the_member_turns_stale() {
    for (instance, epoch) in [(None, LEAVE_EPOCH), (Some("i"), LEAVE_STATIC_EPOCH)] {
        let mut m = member(instance);
        m.request();
        m.on_answer(&ok(4, None));
        m.leave_on_poll_timeout();
        assert!(m.urgent());
        let leave = m.request().unwrap();
        assert_eq!(leave.member_epoch, epoch);
        // The group may hand the partitions on before the leave is answered: they are given
        // up at once, but the member rejoins only once the leave is done.
        assert!(m.must_release());
        assert!(!m.release());
        assert!(matches!(m.state, State::Leaving { stale: true }));
        // The coordinator moved meanwhile: still leaving.
        assert_eq!(
            m.on_answer(&error(codes::NOT_COORDINATOR)),
            Next::Rediscover
        );
        assert!(matches!(m.state, State::Leaving { stale: true }));
        assert_eq!(m.on_answer(&ok(LEAVE_EPOCH, None)), Next::Wait);
        assert_eq!(m.state, State::Stale);
        assert!(m.must_release());
        assert_eq!(m.request(), None);
        assert!(m.release());
        assert_eq!(m.request().unwrap().member_epoch, 0);
    }
    // A leave that gets no answer still ends the membership: the session clock removes it.
    let mut m = member(None);
    m.request();
    m.on_answer(&ok(4, None));
    m.leave_on_poll_timeout();
    m.request();
    assert_eq!(m.on_failure(), Next::Wait);
    assert!(m.must_release());
}

#[test]
fn close_leaves_once_and_late_answers_change_nothing() {
    let mut m = member(None);
    assert!(!m.clone().close(), "no join sent: nothing to leave");
    m.request();
    assert!(
        m.clone().close(),
        "a join went out: its answer may have made a member"
    );
    m.request();
    m.on_answer(&ok(2, None));
    assert!(m.close());
    assert_eq!(m.leave_request().member_epoch, LEAVE_EPOCH);
    assert_eq!(m.state, State::Left);
    // An answer to a beat sent before close does not bring the member back.
    assert_eq!(
        m.on_answer(&ok(3, Some(assignment(&[(1, &[0])])))),
        Next::Wait
    );
    assert_eq!(m.state, State::Left);
    assert_eq!(m.target(), None);
}

#[test]
fn errors_no_retry_fixes_are_fatal() {
    // UNRELEASED_INSTANCE_ID, INVALID_REQUEST, UNSUPPORTED_ASSIGNOR, GROUP_MAX_SIZE_REACHED.
    for code in [111, 42, 112, 81] {
        let mut m = member(Some("i"));
        m.request();
        assert_eq!(m.on_answer(&error(code)), Next::Wait);
        assert_eq!(m.state, State::Fatal(code));
        assert_eq!(m.request(), None);
    }
}

#[test]
fn every_target_is_kept_and_only_its_own_reconciliation_clears_it() {
    let owned = assignment(&[(1, &[0])]);
    let more = assignment(&[(1, &[0, 1])]);
    let mut m = member(None);
    m.request();
    m.on_answer(&ok(1, Some(owned.clone())));
    m.reconciled(owned.clone());
    m.request();
    // The coordinator repeats what is owned: a target, reconciled as a no-op.
    m.on_answer(&ok(2, Some(owned.clone())));
    assert_eq!(m.target(), Some(&owned));
    m.reconciled(owned.clone());
    assert_eq!(m.target(), None);
    assert!(!m.urgent(), "nothing new to acknowledge");
    // A reconciliation of `more` is under way when the coordinator takes it back to `owned`:
    // finishing the first must not clear the second (it would never be acknowledged).
    m.on_answer(&ok(3, Some(more.clone())));
    assert!(m.still_reconciling(3, &more));
    m.on_answer(&ok(3, Some(owned.clone())));
    assert!(
        !m.still_reconciling(3, &more),
        "abandoned: another target came"
    );
    m.reconciled(more.clone());
    assert_eq!(m.target(), Some(&owned));
    assert_eq!(m.request().unwrap().owned, Some(more.clone()));
    m.reconciled(owned.clone());
    assert_eq!(m.target(), None);
    assert_eq!(m.request().unwrap().owned, Some(owned.clone()));
    // A fence while reconciling abandons it too.
    m.on_answer(&ok(4, Some(more.clone())));
    m.on_answer(&error(codes::FENCED_MEMBER_EPOCH));
    assert!(!m.still_reconciling(4, &more));
    assert_eq!(m.target(), None);
}
