//! One minimal history per anomaly kind that must show it, and a near-identical one that must
//! not. Each pair differs in the one detail the definition hinges on, so a reader can check
//! the definition against the pair by hand.

use logjam_checkers::{AnomalyKind, Report, Verdict, check_ops};
use logjam_history::builder::{poll_micro, send_micro};
use logjam_history::{Function, HistoryBuilder, MicroOp, OpType, OpValue};

fn check(b: HistoryBuilder) -> Report {
    let (header, ops) = b.build();
    check_ops(&header, ops).expect("well-formed history")
}

fn shows(b: HistoryBuilder, kind: AnomalyKind) -> Report {
    let report = check(b);
    assert!(
        report.anomalies.contains_key(&kind),
        "expected {kind}, got {:?}\n{}",
        report.anomalies.keys().collect::<Vec<_>>(),
        report.summary()
    );
    let group = &report.anomalies[&kind];
    assert!(!group.witnesses[0].explanation.is_empty());
    assert!(!group.witnesses[0].ops.is_empty(), "witness ops for {kind}");
    report
}

fn lacks(b: HistoryBuilder, kind: AnomalyKind) -> Report {
    let report = check(b);
    assert!(
        !report.anomalies.contains_key(&kind),
        "unexpected {kind}:\n{}",
        report.summary()
    );
    report
}

fn poll_invoke() -> MicroOp {
    MicroOp::Poll { reads: None }
}

/// Three values 10, 11, 12 of key 1 acknowledged at offsets 0, 1, 2.
fn three_sends() -> HistoryBuilder {
    let mut b = HistoryBuilder::new("queue");
    b.send_ok(0, 1, 10, 0);
    b.send_ok(0, 1, 11, 1);
    b.send_ok(0, 1, 12, 2);
    b
}

// ---- inconsistent-offsets ----

#[test]
fn inconsistent_offsets_reported_when_two_values_share_an_offset() {
    let mut b = HistoryBuilder::new("queue");
    b.send_ok(0, 1, 10, 0);
    b.send_ok(1, 1, 11, 0);
    b.poll_ok(2, &[(1, &[(0, 10)])]);
    let r = shows(b, AnomalyKind::InconsistentOffsets);
    let w = &r.anomalies[&AnomalyKind::InconsistentOffsets].witnesses[0];
    assert_eq!(w.offsets.len(), 1);
    assert_eq!(w.values.len(), 2);
}

#[test]
fn inconsistent_offsets_not_reported_when_offsets_differ() {
    let mut b = HistoryBuilder::new("queue");
    b.send_ok(0, 1, 10, 0);
    b.send_ok(1, 1, 11, 1);
    b.poll_ok(2, &[(1, &[(0, 10), (1, 11)])]);
    let r = lacks(b, AnomalyKind::InconsistentOffsets);
    assert!(r.anomalies.is_empty(), "{}", r.summary());
}

// ---- duplicate ----

#[test]
fn duplicate_reported_when_a_value_sits_at_two_offsets() {
    let mut b = HistoryBuilder::new("queue");
    b.send_ok(0, 1, 10, 0);
    b.poll_ok(1, &[(1, &[(0, 10), (1, 10)])]);
    let r = shows(b, AnomalyKind::Duplicate);
    assert_eq!(
        r.anomalies[&AnomalyKind::Duplicate].witnesses[0]
            .offsets
            .len(),
        2
    );
}

#[test]
fn duplicate_not_reported_when_a_value_is_read_twice_at_one_offset() {
    let mut b = HistoryBuilder::new("queue");
    b.send_ok(0, 1, 10, 0);
    b.poll_ok(1, &[(1, &[(0, 10)])]);
    b.poll_ok(2, &[(1, &[(0, 10)])]);
    lacks(b, AnomalyKind::Duplicate);
}

// ---- aborted-read (G1a) ----

#[test]
fn aborted_read_reported_when_ok_poll_returns_a_failed_send() {
    let mut b = HistoryBuilder::new("queue");
    b.send_fail(0, 1, 10);
    b.poll_ok(1, &[(1, &[(0, 10)])]);
    shows(b, AnomalyKind::AbortedRead);
}

#[test]
fn aborted_read_not_reported_when_the_send_was_indeterminate() {
    let mut b = HistoryBuilder::new("queue");
    b.send_info(0, 1, 10);
    b.poll_ok(1, &[(1, &[(0, 10)])]);
    lacks(b, AnomalyKind::AbortedRead);
}

#[test]
fn aborted_read_reported_when_a_failed_txn_polls_a_failed_send() {
    // The reading transaction aborted too: its poll still handed out an aborted record.
    let mut b = HistoryBuilder::new("txn");
    b.send_fail(0, 1, 10);
    b.txn(
        1,
        OpType::Fail,
        vec![poll_invoke(), send_micro(1, 11, None)],
        vec![poll_micro(&[(1, &[(0, 10)])]), send_micro(1, 11, Some(2))],
    );
    let r = shows(b, AnomalyKind::AbortedRead);
    assert_eq!(r.verdict, Verdict::Invalid);
    let w = &r.anomalies[&AnomalyKind::AbortedRead].witnesses[0];
    assert_eq!(w.ops.len(), 2);
}

#[test]
fn aborted_read_not_reported_when_a_failed_txn_polls_a_committed_send() {
    let mut b = HistoryBuilder::new("txn");
    b.send_ok(0, 1, 10, 0);
    b.txn(
        1,
        OpType::Fail,
        vec![poll_invoke()],
        vec![poll_micro(&[(1, &[(0, 10)])])],
    );
    lacks(b, AnomalyKind::AbortedRead);
}

// ---- precommitted-read ----

#[test]
fn precommitted_read_reported_when_a_txn_reads_its_own_send() {
    let mut b = HistoryBuilder::new("queue");
    b.txn(
        0,
        OpType::Ok,
        vec![send_micro(1, 10, None), poll_invoke()],
        vec![send_micro(1, 10, Some(0)), poll_micro(&[(1, &[(0, 10)])])],
    );
    shows(b, AnomalyKind::PrecommittedRead);
}

#[test]
fn precommitted_read_reported_once_when_a_failed_txn_reads_its_own_send() {
    let mut b = HistoryBuilder::new("txn");
    b.txn(
        0,
        OpType::Fail,
        vec![send_micro(1, 10, None), poll_invoke()],
        vec![send_micro(1, 10, Some(0)), poll_micro(&[(1, &[(0, 10)])])],
    );
    let r = shows(b, AnomalyKind::PrecommittedRead);
    assert!(!r.anomalies.contains_key(&AnomalyKind::AbortedRead));
}

#[test]
fn precommitted_read_not_reported_when_a_txn_reads_an_earlier_send() {
    let mut b = HistoryBuilder::new("queue");
    b.send_ok(1, 1, 9, 0);
    b.txn(
        0,
        OpType::Ok,
        vec![send_micro(1, 10, None), poll_invoke()],
        vec![send_micro(1, 10, Some(1)), poll_micro(&[(1, &[(0, 9)])])],
    );
    lacks(b, AnomalyKind::PrecommittedRead);
}

// ---- lost-write ----

#[test]
fn lost_write_reported_when_acked_offset_never_polled() {
    let mut b = HistoryBuilder::new("queue");
    b.send_ok(0, 1, 10, 0);
    b.send_ok(0, 1, 11, 1);
    b.poll_ok(1, &[(1, &[(1, 11)])]);
    let r = shows(b, AnomalyKind::LostWrite);
    let w = &r.anomalies[&AnomalyKind::LostWrite].witnesses[0];
    assert_eq!(w.values[0].0, 10);
    assert_eq!(r.durability.lost, 1);
}

#[test]
fn lost_write_not_reported_when_every_acked_offset_was_polled() {
    let mut b = HistoryBuilder::new("queue");
    b.send_ok(0, 1, 10, 0);
    b.send_ok(0, 1, 11, 1);
    b.poll_ok(1, &[(1, &[(0, 10), (1, 11)])]);
    let r = lacks(b, AnomalyKind::LostWrite);
    assert_eq!(r.verdict, logjam_checkers::Verdict::Valid);
}

// ---- unseen-lost and unseen ----

/// Value 10 is acknowledged without an offset; value 11 is sent to the same key. When 11's
/// send begins after 10's acknowledgement, a final read returning 11 proves 10 lost; when the
/// two sends overlap, 10 may simply be late.
fn unknown_offset_then(later_send_starts_after_ack: bool) -> HistoryBuilder {
    let mut b = HistoryBuilder::new("queue");
    if later_send_starts_after_ack {
        b.send_ok_no_offset(0, 1, 10);
        b.send_ok(1, 1, 11, 0);
    } else {
        b.invoke_send(1, 1, 11);
        b.send_ok_no_offset(0, 1, 10);
        b.complete_send(1, OpType::Ok, 1, 11, Some(0));
    }
    b.nemesis(Function::Heal, &["n1"]);
    b.final_poll_ok(2, &[(1, &[(0, 11)])]);
    b
}

#[test]
fn unseen_lost_reported_when_final_reads_return_a_later_send() {
    let r = shows(unknown_offset_then(true), AnomalyKind::UnseenLost);
    assert!(!r.anomalies.contains_key(&AnomalyKind::Unseen));
    assert_eq!(r.durability.lost, 1);
    let lost = &r.durability.partitions[0].lost[0];
    assert_eq!(lost.value.0, 10);
    assert_eq!(
        lost.nemesis_between.len(),
        1,
        "the heal happened after the ack"
    );
}

#[test]
fn unseen_lost_not_reported_when_the_later_send_overlapped_the_ack() {
    let r = lacks(unknown_offset_then(false), AnomalyKind::UnseenLost);
    assert!(r.anomalies.contains_key(&AnomalyKind::Unseen));
    assert_eq!(r.durability.unconfirmed, 1);
}

#[test]
fn unseen_reported_when_nothing_read_the_key() {
    let mut b = HistoryBuilder::new("queue");
    b.send_ok(0, 2, 20, 0);
    b.poll_ok(1, &[(2, &[(0, 20)])]);
    b.send_ok(0, 1, 10, 0);
    let r = shows(b, AnomalyKind::Unseen);
    assert!(!r.anomalies.contains_key(&AnomalyKind::LostWrite));
}

#[test]
fn unseen_not_reported_when_a_later_poll_returns_the_value() {
    let mut b = HistoryBuilder::new("queue");
    b.send_ok(0, 2, 20, 0);
    b.poll_ok(1, &[(2, &[(0, 20)])]);
    b.send_ok(0, 1, 10, 0);
    b.poll_ok(1, &[(1, &[(0, 10)])]);
    lacks(b, AnomalyKind::Unseen);
}

// ---- nonmonotonic-send ----

#[test]
fn nonmonotonic_send_reported_when_a_later_send_lands_earlier() {
    let mut b = HistoryBuilder::new("queue");
    b.send_ok(0, 1, 10, 5);
    b.send_ok(0, 1, 11, 3);
    shows(b, AnomalyKind::NonmonotonicSend);
}

#[test]
fn nonmonotonic_send_not_reported_when_sends_land_in_order() {
    let mut b = HistoryBuilder::new("queue");
    b.send_ok(0, 1, 10, 3);
    b.send_ok(0, 1, 11, 5);
    lacks(b, AnomalyKind::NonmonotonicSend);
}

// ---- nonmonotonic-poll ----

#[test]
fn nonmonotonic_poll_reported_when_a_poll_rereads_the_last_record() {
    let mut b = three_sends();
    b.poll_ok(1, &[(1, &[(0, 10), (1, 11)])]);
    b.poll_ok(1, &[(1, &[(1, 11), (2, 12)])]);
    shows(b, AnomalyKind::NonmonotonicPoll);
}

#[test]
fn nonmonotonic_poll_not_reported_after_a_reassign_that_dropped_the_key() {
    let mut b = three_sends();
    b.poll_ok(1, &[(1, &[(0, 10), (1, 11)])]);
    b.assign(1, Function::Assign, &[2]);
    b.assign(1, Function::Assign, &[1]);
    b.poll_ok(1, &[(1, &[(0, 10), (1, 11), (2, 12)])]);
    lacks(b, AnomalyKind::NonmonotonicPoll);
}

// ---- poll-skip ----

#[test]
fn poll_skip_reported_when_next_poll_jumps_a_record() {
    let mut b = three_sends();
    b.poll_ok(1, &[(1, &[(0, 10)])]);
    b.poll_ok(1, &[(1, &[(2, 12)])]);
    let r = shows(b, AnomalyKind::PollSkip);
    assert!(
        r.anomalies[&AnomalyKind::PollSkip].witnesses[0]
            .explanation
            .contains("values 11")
    );
}

#[test]
fn poll_skip_not_reported_when_polls_continue_where_they_stopped() {
    let mut b = three_sends();
    b.poll_ok(1, &[(1, &[(0, 10)])]);
    b.poll_ok(1, &[(1, &[(1, 11), (2, 12)])]);
    lacks(b, AnomalyKind::PollSkip);
}

#[test]
fn poll_skip_not_reported_across_processes() {
    let mut b = three_sends();
    b.poll_ok(1, &[(1, &[(0, 10)])]);
    b.poll_ok(2, &[(1, &[(2, 12)])]);
    lacks(b, AnomalyKind::PollSkip);
}

// ---- int-poll-skip / int-nonmonotonic-poll ----

#[test]
fn int_poll_skip_reported_when_one_poll_jumps_a_record() {
    let mut b = three_sends();
    b.poll_ok(1, &[(1, &[(0, 10), (2, 12)])]);
    shows(b, AnomalyKind::IntPollSkip);
}

#[test]
fn int_poll_skip_not_reported_over_sparse_offsets() {
    // Offsets 0 and 5 are adjacent in the log: nothing else was ever seen between them
    // (a transaction marker took the offsets in between).
    let mut b = HistoryBuilder::new("queue");
    b.send_ok(0, 1, 10, 0);
    b.send_ok(0, 1, 11, 5);
    b.poll_ok(1, &[(1, &[(0, 10), (5, 11)])]);
    lacks(b, AnomalyKind::IntPollSkip);
}

#[test]
fn int_nonmonotonic_poll_reported_when_one_poll_goes_backwards() {
    let mut b = three_sends();
    b.poll_ok(1, &[(1, &[(1, 11), (0, 10)])]);
    shows(b, AnomalyKind::IntNonmonotonicPoll);
}

#[test]
fn int_nonmonotonic_poll_not_reported_for_an_ordered_poll() {
    let mut b = three_sends();
    b.poll_ok(1, &[(1, &[(0, 10), (1, 11), (2, 12)])]);
    lacks(b, AnomalyKind::IntNonmonotonicPoll);
}

// ---- int-send-skip / int-nonmonotonic-send ----

fn txn_two_sends(first_offset: i64, second_offset: i64) -> HistoryBuilder {
    let mut b = HistoryBuilder::new("queue");
    b.send_ok(1, 1, 99, 1);
    b.txn(
        0,
        OpType::Ok,
        vec![send_micro(1, 10, None), send_micro(1, 11, None)],
        vec![
            send_micro(1, 10, Some(first_offset)),
            send_micro(1, 11, Some(second_offset)),
        ],
    );
    b
}

#[test]
fn int_send_skip_reported_when_another_record_lands_between_one_ops_sends() {
    shows(txn_two_sends(0, 2), AnomalyKind::IntSendSkip);
}

#[test]
fn int_send_skip_not_reported_for_adjacent_sends() {
    lacks(txn_two_sends(2, 3), AnomalyKind::IntSendSkip);
}

#[test]
fn int_nonmonotonic_send_reported_when_one_ops_sends_land_reversed() {
    shows(txn_two_sends(3, 2), AnomalyKind::IntNonmonotonicSend);
}

#[test]
fn int_nonmonotonic_send_not_reported_for_ordered_sends() {
    lacks(txn_two_sends(2, 3), AnomalyKind::IntNonmonotonicSend);
}

// ---- G0 ----

fn two_txns_two_keys(interleaved: bool) -> HistoryBuilder {
    let mut b = HistoryBuilder::new("queue");
    let (t2_key2_offset, t1_key2_offset) = if interleaved { (0, 1) } else { (1, 0) };
    b.txn(
        0,
        OpType::Ok,
        vec![send_micro(1, 10, None), send_micro(2, 21, None)],
        vec![
            send_micro(1, 10, Some(0)),
            send_micro(2, 21, Some(t1_key2_offset)),
        ],
    );
    b.txn(
        1,
        OpType::Ok,
        vec![send_micro(1, 11, None), send_micro(2, 20, None)],
        vec![
            send_micro(1, 11, Some(1)),
            send_micro(2, 20, Some(t2_key2_offset)),
        ],
    );
    let key2: &[(i64, i64)] = if interleaved {
        &[(0, 20), (1, 21)]
    } else {
        &[(0, 21), (1, 20)]
    };
    b.poll_ok(2, &[(1, &[(0, 10), (1, 11)]), (2, key2)]);
    b
}

#[test]
fn g0_reported_when_two_txns_write_two_keys_in_opposite_orders() {
    let r = shows(two_txns_two_keys(true), AnomalyKind::G0);
    let w = &r.anomalies[&AnomalyKind::G0].witnesses[0];
    assert_eq!(w.cycle.len(), 2);
    assert!(
        w.cycle
            .iter()
            .all(|s| s.relation == logjam_checkers::Relation::Ww)
    );
    assert_eq!(
        r.verdict,
        logjam_checkers::Verdict::Valid,
        "G0 is allowed for queues"
    );
}

#[test]
fn g0_not_reported_when_writes_are_ordered_the_same_on_both_keys() {
    lacks(two_txns_two_keys(false), AnomalyKind::G0);
}

// ---- G1c ----

/// T1 sends 10 to key 1 and reads key 2; T2 sends 20 to key 2 and 11 to key 1.
fn t1_reads_t2(t1_first_on_key1: bool) -> HistoryBuilder {
    let mut b = HistoryBuilder::new("queue");
    let (t1_offset, t2_offset) = if t1_first_on_key1 { (0, 1) } else { (1, 0) };
    b.txn(
        1,
        OpType::Ok,
        vec![send_micro(2, 20, None), send_micro(1, 11, None)],
        vec![
            send_micro(2, 20, Some(0)),
            send_micro(1, 11, Some(t2_offset)),
        ],
    );
    b.txn(
        0,
        OpType::Ok,
        vec![send_micro(1, 10, None), poll_invoke()],
        vec![
            send_micro(1, 10, Some(t1_offset)),
            poll_micro(&[(2, &[(0, 20)])]),
        ],
    );
    b
}

#[test]
fn g1c_reported_when_txns_observe_each_other_circularly() {
    let r = shows(t1_reads_t2(true), AnomalyKind::G1c);
    let w = &r.anomalies[&AnomalyKind::G1c].witnesses[0];
    assert!(
        w.cycle
            .iter()
            .any(|s| s.relation == logjam_checkers::Relation::Wr)
    );
    assert!(!r.anomalies.contains_key(&AnomalyKind::G0));
}

#[test]
fn g1c_not_reported_when_the_reader_also_writes_last() {
    lacks(t1_reads_t2(false), AnomalyKind::G1c);
}

#[test]
fn g1c_not_reported_without_ww_edges() {
    let mut b = t1_reads_t2(true);
    b.header_mut().config = serde_json::json!({ "ww_deps": false });
    lacks(b, AnomalyKind::G1c);
}

// ---- partial-read (formerly reported as G-single) ----

/// T2 sends 11 to key 1 and 30 to key 3; T1 reads key 3 (sees 30) and key 1.
fn read_skew(t1_sees_11: bool) -> HistoryBuilder {
    let mut b = HistoryBuilder::new("queue");
    b.send_ok(2, 1, 10, 0);
    b.txn(
        1,
        OpType::Ok,
        vec![send_micro(1, 11, None), send_micro(3, 30, None)],
        vec![send_micro(1, 11, Some(1)), send_micro(3, 30, Some(0))],
    );
    let key1: &[(i64, i64)] = if t1_sees_11 {
        &[(0, 10), (1, 11)]
    } else {
        &[(0, 10)]
    };
    b.txn(
        0,
        OpType::Ok,
        vec![poll_invoke()],
        vec![poll_micro(&[(1, key1), (3, &[(0, 30)])])],
    );
    b
}

#[test]
fn partial_read_not_g_single_when_a_reader_sees_half_a_txn() {
    // Reader -rw-> writer -wr-> reader is one op seeing part of another's records, not an
    // anti-dependency cycle (a real G-single is in tests/claims.rs).
    let r = shows(read_skew(false), AnomalyKind::PartialRead);
    assert!(!r.anomalies.contains_key(&AnomalyKind::GSingle));
}

#[test]
fn partial_read_not_reported_when_the_reader_sees_the_whole_txn() {
    let r = lacks(read_skew(true), AnomalyKind::PartialRead);
    assert!(!r.anomalies.contains_key(&AnomalyKind::GSingle));
}

// ---- G2 ----

/// T1 reads key 1 up to 10 and sends 21 to key 2; T2 reads key 2 up to 20 and sends 11 to key 1.
fn write_skew(t2_sees_21: bool) -> HistoryBuilder {
    let mut b = HistoryBuilder::new("queue");
    b.send_ok(2, 1, 10, 0);
    b.send_ok(2, 2, 20, 0);
    b.txn(
        0,
        OpType::Ok,
        vec![poll_invoke(), send_micro(2, 21, None)],
        vec![poll_micro(&[(1, &[(0, 10)])]), send_micro(2, 21, Some(1))],
    );
    let key2: &[(i64, i64)] = if t2_sees_21 {
        &[(0, 20), (1, 21)]
    } else {
        &[(0, 20)]
    };
    b.txn(
        1,
        OpType::Ok,
        vec![poll_invoke(), send_micro(1, 11, None)],
        vec![poll_micro(&[(2, key2)]), send_micro(1, 11, Some(1))],
    );
    b
}

#[test]
fn g2_reported_when_two_txns_each_miss_the_others_write() {
    let r = shows(write_skew(false), AnomalyKind::G2);
    let w = &r.anomalies[&AnomalyKind::G2].witnesses[0];
    let rw = w
        .cycle
        .iter()
        .filter(|s| s.relation == logjam_checkers::Relation::Rw)
        .count();
    assert!(rw >= 2);
    assert!(w.cycle.iter().all(|s| !s.explanation.is_empty()));
}

#[test]
fn g2_not_reported_when_one_txn_sees_the_others_write() {
    lacks(write_skew(true), AnomalyKind::G2);
}

// ---- nonlinearizable-log ----

#[test]
fn nonlinearizable_log_reported_when_a_later_send_lands_before_an_acknowledged_one() {
    // Process 0's send of 10 is acknowledged at offset 1 before process 1 even sends 11, yet 11
    // sits at offset 0: no real-time order explains it (Jepsen allows this as G0-realtime).
    let mut b = HistoryBuilder::new("queue");
    b.send_ok(0, 1, 10, 1);
    b.send_ok(1, 1, 11, 0);
    b.poll_ok(2, &[(1, &[(0, 11), (1, 10)])]);
    let r = shows(b, AnomalyKind::NonlinearizableLog);
    assert!(
        r.verdict == logjam_checkers::Verdict::Invalid,
        "{}",
        r.summary()
    );
}

#[test]
fn nonlinearizable_log_not_reported_when_concurrent_sends_land_in_either_order() {
    let mut b = HistoryBuilder::new("queue");
    b.invoke_send(0, 1, 10);
    b.invoke_send(1, 1, 11);
    b.complete_send(0, OpType::Ok, 1, 10, Some(1));
    b.complete_send(1, OpType::Ok, 1, 11, Some(0));
    b.poll_ok(2, &[(1, &[(0, 11), (1, 10)])]);
    let r = lacks(b, AnomalyKind::NonlinearizableLog);
    assert_eq!(r.linearizability.keys_decided, 1, "{}", r.summary());
}

#[test]
fn nonlinearizable_log_reported_when_a_read_sees_a_record_before_it_was_sent() {
    // The poll completes before the send of 12 is invoked, yet returns 12.
    let mut b = three_sends();
    let mut early = HistoryBuilder::new("queue");
    early.send_ok(0, 1, 10, 0);
    early.send_ok(0, 1, 11, 1);
    early.poll_ok(1, &[(1, &[(0, 10), (1, 11), (2, 12)])]);
    early.send_ok(0, 1, 12, 2);
    shows(early, AnomalyKind::NonlinearizableLog);
    // The same read after the third send is fine.
    b.poll_ok(1, &[(1, &[(0, 10), (1, 11), (2, 12)])]);
    lacks(b, AnomalyKind::NonlinearizableLog);
}

/// A power loss: sends acknowledged at offsets 0..=3, then the log lost its tail; the final
/// reads read offsets 0 and 1 and, with `log_end`, record that the log ends at 2.
fn truncated_log(log_end: bool) -> HistoryBuilder {
    let mut b = HistoryBuilder::new("queue");
    for (value, offset) in [(10, 0), (11, 1), (12, 2), (13, 3)] {
        b.send_ok(0, 1, value, offset);
    }
    b.nemesis(Function::from_name("power-loss"), &["n1", "n2", "n3"]);
    b.final_poll_ok(1, &[(1, &[(0, 10), (1, 11)])]);
    if log_end {
        let value = OpValue::Json(serde_json::json!({"ends": {"1": 2}}));
        b.client(1, OpType::Invoke, Function::LogEnd, value.clone());
        b.client(1, OpType::Ok, Function::LogEnd, value);
    }
    b
}

#[test]
fn writes_beyond_the_log_end_the_final_reads_reached_are_lost() {
    let r = check(truncated_log(true));
    assert_eq!(r.durability.lost, 2, "{}", r.summary());
    assert_eq!(r.durability.unconfirmed, 0);
    let lost = &r.durability.partitions[0].lost;
    assert!(
        lost.iter().all(|w| w.reason.contains("ends at 2")),
        "{lost:?}"
    );
    assert_eq!(r.verdict, Verdict::Invalid);
}

#[test]
fn without_the_log_end_writes_beyond_the_final_reads_stay_unconfirmed() {
    let r = check(truncated_log(false));
    assert_eq!(r.durability.lost, 0);
    assert_eq!(r.durability.unconfirmed, 2);
}
