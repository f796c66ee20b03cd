//! Issue #15, checker side: the checker claims only what the history proves. Each test is a
//! minimal history for one claim (loss, positions across re-assignment, partial reads) and its
//! near twins; the Jepsen cases are ported from `jepsen.tests.kafka-test` (keys x = 1, y = 2;
//! values a..g = 1..7).

use logjam_checkers::{AnomalyKind, Report, Verdict, check_ops};
use logjam_history::builder::{poll_micro, send_micro};
use logjam_history::{Function, HistoryBuilder, Key, MicroOp, OpType, OpValue};

fn check(b: HistoryBuilder) -> Report {
    let (header, ops) = b.build();
    check_ops(&header, ops).expect("well-formed history")
}

fn kinds(r: &Report) -> Vec<AnomalyKind> {
    r.anomalies.keys().copied().collect()
}

fn poll_invoke() -> MicroOp {
    MicroOp::Poll { reads: None }
}

/// An `assign`/`subscribe` of `keys` completing with `outcome`.
fn assign_with(b: &mut HistoryBuilder, process: u64, f: Function, outcome: OpType, keys: &[i64]) {
    let keys = OpValue::Keys(keys.iter().map(|&k| Key(k)).collect());
    b.client(process, OpType::Invoke, f.clone(), keys.clone());
    b.client(process, outcome, f, keys);
}

// ---- 1. a write beyond everything the final reads covered is unseen, not lost ----

/// The issue's history: p0 sends 4, acknowledged at offset 1; then p1 sends 3 (info); p2's
/// final poll returns `final_reads` of key 1.
fn issue_case(final_reads: &[(i64, i64)]) -> HistoryBuilder {
    let mut b = HistoryBuilder::new("queue");
    b.send_ok(0, 1, 4, 1);
    b.send_info(1, 1, 3);
    b.final_poll_ok(2, &[(1, final_reads)]);
    b
}

#[test]
fn a_write_past_every_final_read_is_unseen_not_lost() {
    let r = check(issue_case(&[(0, 3)]));
    assert!(
        !r.anomalies.contains_key(&AnomalyKind::UnseenLost),
        "no read reached offset 1, so 4 is not proven lost:\n{}",
        r.summary()
    );
    let unseen = &r.anomalies[&AnomalyKind::Unseen];
    assert_eq!(unseen.witnesses[0].values[0].0, 4);
    assert_eq!(r.durability.lost, 0, "{}", r.summary());
    assert_eq!(r.durability.unconfirmed, 1);
    // 3 was sent after 4 was acknowledged yet sits before it: that part is proven.
    assert!(r.anomalies.contains_key(&AnomalyKind::NonlinearizableLog));
}

#[test]
fn a_write_a_final_read_read_across_is_lost() {
    // Twin: the final read returns offsets 0 and 2, so it read across offset 1.
    let mut b = HistoryBuilder::new("queue");
    b.send_ok(0, 1, 4, 1);
    b.send_info(1, 1, 3);
    b.send_ok(3, 1, 5, 2);
    b.final_poll_ok(2, &[(1, &[(0, 3), (2, 5)])]);
    let r = check(b);
    assert!(
        r.anomalies.contains_key(&AnomalyKind::LostWrite),
        "{}",
        r.summary()
    );
    assert_eq!(r.durability.lost, 1);
}

#[test]
fn a_write_at_or_past_the_log_end_the_final_reads_reached_is_lost() {
    // Twin: the workload's log-end says the final reads read the whole log, which ends at 1.
    let mut b = issue_case(&[(0, 3)]);
    let ends = OpValue::Json(serde_json::json!({ "ends": { "1": 1 } }));
    b.client(2, OpType::Invoke, Function::LogEnd, ends.clone());
    b.client(2, OpType::Ok, Function::LogEnd, ends);
    let r = check(b);
    assert!(
        r.anomalies.contains_key(&AnomalyKind::UnseenLost),
        "{}",
        r.summary()
    );
    assert!(!r.anomalies.contains_key(&AnomalyKind::Unseen));
    assert_eq!(r.durability.lost, 1);
    // The anomaly and the durability count agree.
    assert_eq!(
        r.anomalies[&AnomalyKind::UnseenLost].count,
        r.durability.lost
    );
}

/// The `log-end` op claims the final reads read every offset below the end; the checker does
/// not take that on trust. Here it says the log ends at 2, but no recorded read returned
/// offset 1: value 4, acknowledged at offset 1, is unseen, not lost.
#[test]
fn a_log_end_the_recorded_final_reads_did_not_reach_proves_no_loss() {
    let mut b = issue_case(&[(0, 3)]);
    let ends = OpValue::Json(serde_json::json!({ "ends": { "1": 2 } }));
    b.client(2, OpType::Invoke, Function::LogEnd, ends.clone());
    b.client(2, OpType::Ok, Function::LogEnd, ends);
    let r = check(b);
    assert!(
        !r.anomalies.contains_key(&AnomalyKind::UnseenLost),
        "{}",
        r.summary()
    );
    assert!(
        r.anomalies.contains_key(&AnomalyKind::Unseen),
        "{}",
        r.summary()
    );
    assert_eq!(r.durability.lost, 0);
}

#[test]
fn an_unknown_offset_write_is_lost_only_when_the_final_reads_cover_the_log_up_to_a_later_send() {
    // 4 acknowledged without an offset, then 3 sent (and read at offset 0 from the start of the
    // log): 4 must precede 3, and offsets 0.. were read: lost.
    let mut b = HistoryBuilder::new("queue");
    b.send_ok_no_offset(0, 1, 4);
    b.send_ok(1, 1, 3, 0);
    b.final_poll_ok(2, &[(1, &[(0, 3)])]);
    let r = check(b);
    assert!(
        r.anomalies.contains_key(&AnomalyKind::UnseenLost),
        "{}",
        r.summary()
    );

    // Twin: the final read started at offset 5, so 4 may sit at offsets 0..4, never read.
    let mut b = HistoryBuilder::new("queue");
    b.send_ok_no_offset(0, 1, 4);
    b.send_ok(1, 1, 3, 5);
    b.final_poll_ok(2, &[(1, &[(5, 3)])]);
    let r = check(b);
    assert!(
        !r.anomalies.contains_key(&AnomalyKind::UnseenLost),
        "offsets before 5 were never read:\n{}",
        r.summary()
    );
    assert!(r.anomalies.contains_key(&AnomalyKind::Unseen));
    assert_eq!(r.durability.lost, 0);
}

// ---- 2, 3. positions across assign/subscribe (Jepsen's poll-skip-test, nonmonotonic-poll-test) ----

/// Jepsen's poll-skip-test history; `between_1` goes after poll-1-2/poll-3 and `between_2`
/// after poll-4, each an assign/subscribe of process 0 (f, outcome, keys).
fn poll_skip_history(
    between_1: Option<(Function, OpType, &[i64])>,
    between_2: Option<(Function, OpType, &[i64])>,
) -> HistoryBuilder {
    let mut b = HistoryBuilder::new("queue");
    b.poll_ok(0, &[(1, &[(1, 1), (2, 2)])]);
    b.poll_ok(1, &[(1, &[(3, 3)])]);
    if let Some((f, outcome, keys)) = between_1 {
        assign_with(&mut b, 0, f, outcome, keys);
    }
    b.poll_ok(0, &[(1, &[(4, 4)])]);
    if let Some((f, outcome, keys)) = between_2 {
        assign_with(&mut b, 0, f, outcome, keys);
    }
    b.send_ok(2, 1, 6, 6);
    b.poll_ok(0, &[(1, &[(7, 7)])]);
    b.txn(
        3,
        OpType::Info,
        [1, 2, 3, 4, 7]
            .into_iter()
            .map(|v| send_micro(1, v, None))
            .collect(),
        [1, 2, 3, 4, 7]
            .into_iter()
            .map(|v| send_micro(1, v, None))
            .collect(),
    );
    b
}

fn poll_skip_count(r: &Report) -> u64 {
    r.anomalies
        .get(&AnomalyKind::PollSkip)
        .map_or(0, |g| g.count)
}

#[test]
fn jepsen_poll_skip_plain() {
    let r = check(poll_skip_history(None, None));
    assert_eq!(poll_skip_count(&r), 2, "{}", r.summary());
}

#[test]
fn poll_skips_are_still_seen_across_assignments_that_keep_the_key() {
    for f in [Function::Subscribe, Function::Assign] {
        let r = check(poll_skip_history(
            Some((f.clone(), OpType::Ok, &[1, 2])),
            Some((f, OpType::Ok, &[1, 2])),
        ));
        assert_eq!(poll_skip_count(&r), 2, "{}", r.summary());
    }
}

#[test]
fn poll_skips_are_forgotten_once_the_key_is_no_longer_assigned() {
    // Jepsen: subscribe [y] (ok) then assign [y] (info): both drop x's position.
    let r = check(poll_skip_history(
        Some((Function::Subscribe, OpType::Ok, &[2])),
        Some((Function::Assign, OpType::Info, &[2])),
    ));
    assert_eq!(poll_skip_count(&r), 0, "{}", r.summary());
}

#[test]
fn an_info_assign_counts_as_possibly_applied() {
    // Only the info assign [y] sits between poll-4 and poll-7: it may have dropped x.
    let r = check(poll_skip_history(
        None,
        Some((Function::Assign, OpType::Info, &[2])),
    ));
    assert_eq!(poll_skip_count(&r), 1, "{}", r.summary());
    // A failed one did not happen.
    let r = check(poll_skip_history(
        None,
        Some((Function::Assign, OpType::Fail, &[2])),
    ));
    assert_eq!(poll_skip_count(&r), 2, "{}", r.summary());
    // An info one that keeps x keeps x's position either way.
    let r = check(poll_skip_history(
        None,
        Some((Function::Assign, OpType::Info, &[1, 2])),
    ));
    assert_eq!(poll_skip_count(&r), 2, "{}", r.summary());
}

/// Jepsen's nonmonotonic-poll-test: process 0 sends a..d, polls 1 2 3, then 2 3 4.
fn nonmonotonic_history(between: Option<(Function, &[i64])>) -> HistoryBuilder {
    let mut b = HistoryBuilder::new("queue");
    b.txn(
        0,
        OpType::Ok,
        (1..=4).map(|v| send_micro(1, v, None)).collect(),
        (1..=4).map(|v| send_micro(1, v, None)).collect(),
    );
    b.poll_ok(0, &[(1, &[(1, 1), (2, 2), (3, 3)])]);
    if let Some((f, keys)) = between {
        assign_with(&mut b, 0, f, OpType::Ok, keys);
    }
    b.poll_ok(0, &[(1, &[(2, 2), (3, 3), (4, 4)])]);
    b
}

#[test]
fn jepsen_nonmonotonic_poll_across_assignments() {
    let has = |r: &Report| r.anomalies.contains_key(&AnomalyKind::NonmonotonicPoll);
    assert!(has(&check(nonmonotonic_history(None))));
    for f in [Function::Subscribe, Function::Assign] {
        let r = check(nonmonotonic_history(Some((f.clone(), &[2]))));
        assert!(!has(&r), "{}", r.summary());
        let r = check(nonmonotonic_history(Some((f, &[1, 2]))));
        assert!(has(&r), "{}", r.summary());
    }
}

// ---- 5. send tracking survives assignment changes (logjam, not Jepsen) ----

#[test]
fn nonmonotonic_send_is_seen_across_an_assignment_that_drops_the_key() {
    // Jepsen's nonmonotonic-send-test expects nothing here: its send tracking copies its poll
    // tracking. An assignment moves where a consumer reads, not where a producer's records
    // land, so logjam keeps reporting the send that went backwards.
    let mut b = HistoryBuilder::new("queue");
    b.txn(
        0,
        OpType::Ok,
        vec![send_micro(1, 3, None), send_micro(1, 4, None)],
        vec![send_micro(1, 3, Some(3)), send_micro(1, 4, Some(4))],
    );
    assign_with(&mut b, 0, Function::Assign, OpType::Info, &[2]);
    b.txn(
        0,
        OpType::Ok,
        vec![send_micro(1, 1, None), send_micro(1, 2, None)],
        vec![send_micro(1, 1, Some(1)), send_micro(1, 2, Some(2))],
    );
    let r = check(b);
    assert!(
        r.anomalies.contains_key(&AnomalyKind::NonmonotonicSend),
        "{}",
        r.summary()
    );
}

// ---- 4. a partial read of one multi-record send is not G-single ----

/// T1 sends 11 to key 1 and 30 to key 3 in one op; T0 reads 30 and key 1 only up to 10.
fn half_of_one_send() -> HistoryBuilder {
    let mut b = HistoryBuilder::new("queue");
    b.send_ok(2, 1, 10, 0);
    b.txn(
        1,
        OpType::Ok,
        vec![send_micro(1, 11, None), send_micro(3, 30, None)],
        vec![send_micro(1, 11, Some(1)), send_micro(3, 30, Some(0))],
    );
    b.txn(
        0,
        OpType::Ok,
        vec![poll_invoke()],
        vec![poll_micro(&[(1, &[(0, 10)]), (3, &[(0, 30)])])],
    );
    // A later read sees everything, so nothing is unseen.
    b.poll_ok(4, &[(1, &[(0, 10), (1, 11)]), (3, &[(0, 30)])]);
    b
}

#[test]
fn a_partial_read_of_one_send_is_its_own_kind_not_g_single() {
    let r = check(half_of_one_send());
    assert!(
        !r.anomalies.contains_key(&AnomalyKind::GSingle),
        "{}",
        r.summary()
    );
    let group = &r.anomalies[&AnomalyKind::PartialRead];
    let w = &group.witnesses[0];
    assert_eq!(w.ops.len(), 2, "reader and writer");
    assert!(w.values.iter().any(|v| v.0 == 11), "names the value missed");
    // Non-transactional sends are not atomic to readers: allowed for the queue.
    assert!(r.policy.allows(AnomalyKind::PartialRead));
    assert_eq!(r.verdict, Verdict::Valid, "{}", r.summary());
}

#[test]
fn a_partial_read_within_one_key_is_its_own_kind_too() {
    let mut b = HistoryBuilder::new("queue");
    b.txn(
        1,
        OpType::Ok,
        vec![send_micro(1, 10, None), send_micro(1, 11, None)],
        vec![send_micro(1, 10, Some(0)), send_micro(1, 11, Some(1))],
    );
    b.poll_ok(0, &[(1, &[(0, 10)])]);
    b.poll_ok(2, &[(1, &[(0, 10), (1, 11)])]);
    let r = check(b);
    assert_eq!(kinds(&r), vec![AnomalyKind::PartialRead], "{}", r.summary());
}

/// read_committed hides aborted and open transactions, but a poll still stops at
/// `max.poll.records` or the fetch limits: ending between one transaction's records is not an
/// anomaly there either. Only snapshot reads make it one.
#[test]
fn a_partial_read_is_allowed_under_read_committed_and_bad_under_snapshot_reads() {
    let mut b = half_of_one_send();
    b.header_mut().config = serde_json::json!({ "isolation_level": "read_committed" });
    let r = check(b);
    assert!(r.policy.allows(AnomalyKind::PartialRead));
    assert_eq!(r.verdict, Verdict::Valid, "{}", r.summary());

    let mut b = half_of_one_send();
    b.header_mut().config = serde_json::json!({ "snapshot_reads": true });
    let r = check(b);
    assert!(
        r.anomalies.contains_key(&AnomalyKind::PartialRead),
        "{}",
        r.summary()
    );
    assert!(!r.policy.allows(AnomalyKind::PartialRead));
    assert_eq!(r.verdict, Verdict::Invalid, "{}", r.summary());
}

#[test]
fn a_real_single_anti_dependency_cycle_is_still_g_single() {
    // T0 reads key 1 only up to 10, missing T1's 11; T1 also sends 20 to key 2, which T2 reads
    // before sending 30 to key 3, which T0 reads: T0 -rw-> T1 -wr-> T2 -wr-> T0.
    let mut b = HistoryBuilder::new("queue");
    b.send_ok(3, 1, 10, 0);
    b.txn(
        1,
        OpType::Ok,
        vec![send_micro(1, 11, None), send_micro(2, 20, None)],
        vec![send_micro(1, 11, Some(1)), send_micro(2, 20, Some(0))],
    );
    b.txn(
        2,
        OpType::Ok,
        vec![poll_invoke(), send_micro(3, 30, None)],
        vec![poll_micro(&[(2, &[(0, 20)])]), send_micro(3, 30, Some(0))],
    );
    b.txn(
        0,
        OpType::Ok,
        vec![poll_invoke()],
        vec![poll_micro(&[(1, &[(0, 10)]), (3, &[(0, 30)])])],
    );
    let r = check(b);
    let w = &r.anomalies[&AnomalyKind::GSingle].witnesses[0];
    assert_eq!(w.cycle.len(), 3, "{}", r.summary());
    assert!(!r.anomalies.contains_key(&AnomalyKind::PartialRead));
}

#[test]
fn the_final_phase_starts_a_fresh_consumer() {
    // The workload's final reads retire the consumer and read every log from offset 0 after an
    // assign of the same keys: not a rewind. A rewind inside the final phase still is.
    let mut b = HistoryBuilder::new("queue");
    b.send_ok(1, 1, 10, 0);
    b.send_ok(1, 1, 11, 1);
    b.poll_ok(0, &[(1, &[(0, 10), (1, 11)])]);
    assign_with(&mut b, 0, Function::Assign, OpType::Ok, &[1]);
    b.final_poll_ok(0, &[(1, &[(0, 10), (1, 11)])]);
    let r = check(b.clone());
    assert!(r.anomalies.is_empty(), "{}", r.summary());
    b.final_poll_ok(0, &[(1, &[(1, 11)])]);
    let r = check(b);
    assert!(
        r.anomalies.contains_key(&AnomalyKind::NonmonotonicPoll),
        "{}",
        r.summary()
    );
}

// ---- Jepsen's lost-write-test: where logjam agrees ----

fn lost_values(r: &Report, kind: AnomalyKind) -> Vec<i64> {
    let mut values: Vec<i64> = r
        .anomalies
        .get(&kind)
        .map(|g| g.witnesses.iter().map(|w| w.values[0].0).collect())
        .unwrap_or_default();
    values.sort_unstable();
    values
}

#[test]
fn jepsen_lost_write_consistent() {
    // a at 0, b at 1 and d at 3 acknowledged; c (info) read at 2. a and b lie below a read
    // record: lost. d lies past every read: unseen, as in Jepsen (it has no lost-write for d).
    let mut b = HistoryBuilder::new("queue");
    b.send_ok(0, 1, 1, 0);
    b.txn(
        0,
        OpType::Ok,
        vec![send_micro(1, 2, None), send_micro(1, 4, None)],
        vec![send_micro(1, 2, Some(1)), send_micro(1, 4, Some(3))],
    );
    b.send_info(1, 1, 3);
    b.poll_ok(0, &[(1, &[(2, 3)])]);
    let r = check(b);
    assert_eq!(
        lost_values(&r, AnomalyKind::LostWrite),
        [1, 2],
        "{}",
        r.summary()
    );
    assert_eq!(lost_values(&r, AnomalyKind::Unseen), [4], "{}", r.summary());
    assert!(!r.anomalies.contains_key(&AnomalyKind::UnseenLost));
}

#[test]
fn jepsen_lost_write_atomic() {
    // send-ab is info; b acknowledged at y:0. c (info) is read at y:1.
    let history = |with_poll_a: bool| {
        let mut b = HistoryBuilder::new("queue");
        b.txn(
            0,
            OpType::Info,
            vec![send_micro(1, 1, None), send_micro(2, 2, None)],
            vec![send_micro(1, 1, None), send_micro(2, 2, Some(0))],
        );
        b.send_info(1, 2, 3);
        if with_poll_a {
            b.poll_ok(2, &[(1, &[(0, 1)])]);
        }
        b.poll_ok(3, &[(2, &[(1, 3)])]);
        check(b)
    };
    // Without a read of a, nothing proves send-ab happened: not lost.
    let r = history(false);
    assert!(
        !r.anomalies.contains_key(&AnomalyKind::LostWrite),
        "{}",
        r.summary()
    );
    // A read of a proves it committed, so b, below the read c, is lost.
    let r = history(true);
    assert_eq!(
        lost_values(&r, AnomalyKind::LostWrite),
        [2],
        "{}",
        r.summary()
    );
}

#[test]
fn a_write_acknowledged_after_the_log_end_is_not_judged_by_it() {
    // The log-end op comes first; 4 is acknowledged at offset 1 only afterwards: the end the
    // final reads saw says nothing about it.
    let mut b = HistoryBuilder::new("queue");
    b.send_info(1, 1, 3);
    b.final_poll_ok(2, &[(1, &[(0, 3)])]);
    let ends = OpValue::Json(serde_json::json!({ "ends": { "1": 1 } }));
    b.client(2, OpType::Invoke, Function::LogEnd, ends.clone());
    b.client(2, OpType::Ok, Function::LogEnd, ends);
    b.send_ok(0, 1, 4, 1);
    let r = check(b);
    assert!(
        !r.anomalies.contains_key(&AnomalyKind::UnseenLost),
        "{}",
        r.summary()
    );
    assert_eq!(r.durability.lost, 0, "{}", r.summary());
    assert_eq!(r.durability.unconfirmed, 1);
}
