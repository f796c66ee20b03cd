//! Each read-committed kind proven both ways on small txn histories: a clean history valid,
//! each bad one caught with its witness, and what Kafka allows only counted.

use logjam_history::builder::{FetchedResult, fetched_poll_micro, send_micro};
use logjam_history::{Function, Header, HistoryBuilder, MicroOp, Op, OpType};

use crate::anomaly::AnomalyKind;
use crate::report::{Report, Verdict};
use crate::{ReadCommittedStats, check_ops};

const READ_COMMITTED: [AnomalyKind; 4] = [
    AnomalyKind::ReadAboveLso,
    AnomalyKind::LsoRegression,
    AnomalyKind::FracturedRead,
    AnomalyKind::IntermediateRead,
];

fn txn_builder() -> HistoryBuilder {
    let mut b = HistoryBuilder::new("txn");
    b.header_mut().config = serde_json::json!({"txn": true, "isolation_level": "read_committed"});
    b
}

/// Process 0 commits one transaction of `sends` (key, value, offset).
fn commit(b: &mut HistoryBuilder, process: u64, sends: &[(i64, i64, i64)]) {
    let invoke = sends
        .iter()
        .map(|&(k, v, _)| send_micro(k, v, None))
        .collect();
    let done = sends
        .iter()
        .map(|&(k, v, o)| send_micro(k, v, Some(o)))
        .collect();
    b.txn(process, OpType::Ok, invoke, done);
}

/// One read_committed poll by `process`, ok.
fn poll(b: &mut HistoryBuilder, process: u64, reads: FetchedResult<'_>) {
    b.txn(
        process,
        OpType::Ok,
        vec![MicroOp::Poll { reads: None }],
        vec![fetched_poll_micro(reads)],
    );
}

fn check(b: HistoryBuilder) -> Report {
    let (header, ops): (Header, Vec<Op>) = b.build();
    check_ops(&header, ops).unwrap()
}

fn stats(report: &Report) -> &ReadCommittedStats {
    report.read_committed().expect("txn runs it")
}

fn found(report: &Report) -> Vec<AnomalyKind> {
    READ_COMMITTED
        .into_iter()
        .filter(|k| report.anomalies.contains_key(k))
        .collect()
}

#[test]
fn a_clean_read_committed_history_is_valid_and_counted() {
    let mut b = txn_builder();
    // Offsets 0, 1 and the commit marker at 2; LSO 3.
    commit(&mut b, 0, &[(0, 10, 0), (0, 20, 1)]);
    poll(&mut b, 1, &[(0, &[(0, 10), (1, 20)], [0, 3, 3, 1])]);
    poll(&mut b, 1, &[(0, &[], [3, 3, 3, 1])]);
    let report = check(b);
    assert_eq!(report.verdict, Verdict::Valid, "{}", report.summary());
    assert!(found(&report).is_empty());
    let s = stats(&report);
    assert_eq!(
        (
            s.polls_checked,
            s.lsos_seen,
            s.records_checked,
            s.leader_epochs_seen
        ),
        (2, 2, 2, 1)
    );
    assert!(report.summary().contains("read_committed: 2 polls checked"));
    // report.json: the workload's own statistics under their own key, not in `stats`.
    let json = serde_json::to_value(&report).unwrap();
    assert_eq!(json["read_committed"]["polls_checked"], 2);
    assert!(json["stats"].get("read_committed").is_none());
    assert!(json.get("producer").is_none() && json.get("zombies").is_none());
}

#[test]
fn a_record_at_or_above_the_answers_lso_is_read_above_lso() {
    // The next answer in the same epoch still says LSO 1: offset 1 was above the LSO when
    // the leader read.
    let mut b = txn_builder();
    commit(&mut b, 0, &[(0, 10, 0), (0, 20, 1)]);
    poll(&mut b, 1, &[(0, &[(0, 10), (1, 20)], [0, 3, 1, 1])]);
    poll(&mut b, 1, &[(0, &[], [2, 2, 1, 1])]);
    let report = check(b);
    assert_eq!(found(&report), vec![AnomalyKind::ReadAboveLso]);
    assert_eq!(report.verdict, Verdict::Invalid);
    let witness = &report.anomalies[&AnomalyKind::ReadAboveLso].witnesses[0];
    assert_eq!(witness.values[0].0, 20);
    assert_eq!((witness.offsets[0].0, witness.offsets[1].0), (1, 1));
    assert_eq!(witness.ops.len(), 2);
}

#[test]
fn a_record_above_only_its_own_answers_lso_is_a_capture_race() {
    // Kafka reports the LSO it captured before reading, and the read is bounded by the LSO at
    // read time: when the next answer's LSO is past the record, the LSO may simply have moved
    // between capture and read. Counted, not reported; likewise with no later answer at all,
    // or a later answer from another leader epoch.
    for later in [Some([2, 2, 3, 1]), None, Some([2, 2, 1, 2])] {
        let mut b = txn_builder();
        commit(&mut b, 0, &[(0, 10, 0), (0, 20, 1)]);
        poll(&mut b, 1, &[(0, &[(0, 10), (1, 20)], [0, 2, 1, 1])]);
        if let Some(fetch) = later {
            poll(&mut b, 1, &[(0, &[], fetch)]);
        }
        let report = check(b);
        assert_eq!(found(&report), vec![], "later answer {later:?}");
        assert_eq!(
            stats(&report).lso_capture_races,
            1,
            "later answer {later:?}"
        );
    }
}

#[test]
fn an_lso_going_back_in_one_epoch_is_a_regression_but_not_across_epochs() {
    let mut b = txn_builder();
    commit(&mut b, 0, &[(0, 10, 0)]);
    poll(&mut b, 1, &[(0, &[(0, 10)], [0, 2, 2, 1])]);
    poll(&mut b, 1, &[(0, &[], [2, 2, 1, 1])]);
    let report = check(b);
    assert_eq!(found(&report), vec![AnomalyKind::LsoRegression]);
    let witness = &report.anomalies[&AnomalyKind::LsoRegression].witnesses[0];
    assert_eq!(witness.ops.len(), 2);

    // A new leader (epoch 2) may answer a lower LSO: counted, not reported. Another process
    // is another reader: not compared.
    let mut b = txn_builder();
    commit(&mut b, 0, &[(0, 10, 0)]);
    poll(&mut b, 1, &[(0, &[(0, 10)], [0, 2, 2, 1])]);
    poll(&mut b, 1, &[(0, &[], [2, 2, 1, 2])]);
    poll(&mut b, 2, &[(0, &[], [0, 0, 0, 1])]);
    let report = check(b);
    assert!(found(&report).is_empty(), "{}", report.summary());
    assert_eq!(stats(&report).lso_drops_across_epochs, 1);
}

#[test]
fn skipping_a_transactions_record_inside_the_range_read_is_a_fractured_read() {
    let mut b = txn_builder();
    commit(&mut b, 0, &[(0, 10, 0), (0, 20, 1)]);
    // Range 0..3 covers both records; only one returned.
    poll(&mut b, 1, &[(0, &[(0, 10)], [0, 3, 3, 1])]);
    let report = check(b);
    assert_eq!(found(&report), vec![AnomalyKind::FracturedRead]);
    let witness = &report.anomalies[&AnomalyKind::FracturedRead].witnesses[0];
    assert_eq!((witness.offsets[0].0, witness.values[0].0), (1, 20));

    // A poll that stopped after the first record (max.poll.records): its range ends at 1.
    let mut b = txn_builder();
    commit(&mut b, 0, &[(0, 10, 0), (0, 20, 1)]);
    poll(&mut b, 1, &[(0, &[(0, 10)], [0, 1, 3, 1])]);
    poll(&mut b, 1, &[(0, &[(1, 20)], [1, 3, 3, 1])]);
    let report = check(b);
    assert!(found(&report).is_empty(), "{}", report.summary());
}

#[test]
fn a_transaction_visible_on_one_partition_only_is_counted_not_reported() {
    let mut b = txn_builder();
    commit(&mut b, 0, &[(0, 10, 0), (1, 11, 0)]);
    // Key 1's marker not yet written: its LSO still 0.
    poll(
        &mut b,
        1,
        &[(0, &[(0, 10)], [0, 2, 2, 1]), (1, &[], [0, 0, 0, 1])],
    );
    poll(&mut b, 1, &[(1, &[(0, 11)], [0, 2, 2, 1])]);
    let report = check(b);
    assert!(found(&report).is_empty(), "{}", report.summary());
    assert_eq!(stats(&report).cross_partition_partial, 1);

    // A poll merely behind on key 1 (T's record there is below its LSO) is not counted.
    let mut b = txn_builder();
    commit(&mut b, 0, &[(0, 10, 0), (1, 11, 0)]);
    poll(
        &mut b,
        1,
        &[(0, &[(0, 10)], [0, 2, 2, 1]), (1, &[], [0, 0, 2, 1])],
    );
    let report = check(b);
    assert_eq!(stats(&report).cross_partition_partial, 0);
}

#[test]
fn a_poll_done_before_the_transaction_began_is_an_intermediate_read() {
    let mut b = txn_builder();
    poll(&mut b, 1, &[(0, &[(0, 10)], [0, 2, 2, 1])]);
    commit(&mut b, 0, &[(0, 10, 0)]);
    let report = check(b);
    assert!(found(&report).contains(&AnomalyKind::IntermediateRead));
    let witness = &report.anomalies[&AnomalyKind::IntermediateRead].witnesses[0];
    assert_eq!(witness.ops[0].f, "txn");
    assert_eq!(
        AnomalyKind::from_name("G1b"),
        Some(AnomalyKind::IntermediateRead)
    );

    // Overlapping in real time proves nothing.
    let mut b = txn_builder();
    b.client(
        0,
        OpType::Invoke,
        Function::Send,
        logjam_history::OpValue::MicroOps(vec![send_micro(0, 10, None)]),
    );
    poll(&mut b, 1, &[(0, &[(0, 10)], [0, 2, 2, 1])]);
    b.client(
        0,
        OpType::Ok,
        Function::Send,
        logjam_history::OpValue::MicroOps(vec![send_micro(0, 10, Some(0))]),
    );
    let report = check(b);
    assert!(found(&report).is_empty(), "{}", report.summary());
}

/// A history whose op `i` happens `i` seconds in, except the ops from `late` on, which are
/// moved to `late_s` seconds and after.
fn timed(b: HistoryBuilder, late: usize, late_s: u64) -> Report {
    let (header, mut ops): (Header, Vec<Op>) = b.build();
    for (i, op) in ops.iter_mut().enumerate() {
        op.time_ns = if i < late {
            i as u64 * 1_000_000_000
        } else {
            (late_s + (i - late) as u64) * 1_000_000_000
        };
    }
    check_ops(&header, ops).unwrap()
}

/// Process 0's transaction wrote offset 0 of key 0 and was aborted (ops 0-1); process 1's
/// polls at ops 2-3 and 4-5 are answered LSO 0 with the high watermark past it.
/// With `fault`, a heal is recorded between the two polls.
fn held_at_zero(timeout_ms: Option<u64>, fault: bool) -> HistoryBuilder {
    let mut b = txn_builder();
    if let Some(ms) = timeout_ms {
        b.header_mut().config["transaction_timeout_ms"] = serde_json::json!(ms);
    }
    b.txn(
        0,
        OpType::Fail,
        vec![send_micro(0, 10, None)],
        vec![send_micro(0, 10, Some(0))],
    );
    poll(&mut b, 1, &[(0, &[], [0, 0, 0, 1])]);
    if fault {
        b.nemesis(Function::Heal, &["n1"]);
    }
    poll(&mut b, 1, &[(0, &[], [0, 0, 0, 1])]);
    b
}

#[test]
fn an_lso_held_by_a_transaction_is_a_stall_counted_with_its_length() {
    let report = timed(held_at_zero(Some(1_000), false), 6, 6);
    assert_ne!(report.verdict, Verdict::Invalid, "{}", report.summary());
    assert!(report.anomalies.is_empty(), "{}", report.summary());
    let stalls = &stats(&report).lso_stalls;
    assert_eq!(stalls.len(), 1, "{stalls:?}");
    assert_eq!(
        (
            stalls[0].offset.0,
            stalls[0].held_by_op,
            stalls[0].duration_ms
        ),
        (0, Some(1), 2_000)
    );
    assert!(report.summary().contains("LSO stalls: 1"));

    // An LSO at an offset no acknowledged record holds proves only that the reader caught
    // up (LSO = high watermark): no stall.
    let mut b = txn_builder();
    commit(&mut b, 0, &[(0, 10, 0)]);
    poll(&mut b, 1, &[(0, &[(0, 10)], [0, 2, 2, 1])]);
    poll(&mut b, 1, &[(0, &[], [2, 2, 2, 1])]);
    let report = timed(b, 6, 6);
    assert!(stats(&report).lso_stalls.is_empty());
}

#[test]
fn an_lso_held_past_every_transaction_clock_is_a_hanging_transaction() {
    // Completed at 1 s; timeout 1 s + the 10 s sweep + 5 s for markers: 17 s. Asked at 30 s.
    let report = timed(held_at_zero(Some(1_000), false), 4, 30);
    assert_eq!(report.verdict, Verdict::Invalid, "{}", report.summary());
    let witness = &report.anomalies[&AnomalyKind::HangingTransaction].witnesses[0];
    assert_eq!(witness.offsets[0].0, 0);
    assert_eq!(witness.ops.len(), 2);
    assert_eq!(witness.ops[0].index.0, 1);
    assert_eq!(witness.ops[1].f, "txn");

    // At 16 s the clocks have not all run out yet.
    let report = timed(held_at_zero(Some(1_000), false), 4, 16);
    assert!(
        !report
            .anomalies
            .contains_key(&AnomalyKind::HangingTransaction)
    );

    // A fault ending at 28 s may have kept the markers from the leader: 43 s.
    let report = timed(held_at_zero(Some(1_000), true), 4, 28);
    assert!(
        !report
            .anomalies
            .contains_key(&AnomalyKind::HangingTransaction),
        "{}",
        report.summary()
    );

    // A history that does not say its timeout gets Kafka's largest, 15 minutes.
    let report = timed(held_at_zero(None, false), 4, 30);
    assert!(
        !report
            .anomalies
            .contains_key(&AnomalyKind::HangingTransaction)
    );
}

#[test]
fn a_hold_by_an_unacknowledged_record_is_proven_by_an_acknowledgement_past_it() {
    // Op 0-1 wrote offset 0 but its answer was lost (info); op 2-3 was acknowledged at
    // offset 1, completing at 3 s, so the high watermark passed 0 and the transaction at 0
    // began before 3 s. Polls answered LSO 0: 3 s + 1 s + 10 s + 5 s = 19 s.
    let hold = |late_s| {
        let mut b = txn_builder();
        b.header_mut().config["transaction_timeout_ms"] = serde_json::json!(1_000);
        b.txn(
            0,
            OpType::Info,
            vec![send_micro(0, 10, None)],
            vec![send_micro(0, 10, None)],
        );
        commit(&mut b, 1, &[(0, 20, 1)]);
        poll(&mut b, 2, &[(0, &[], [0, 0, 0, 1])]);
        poll(&mut b, 2, &[(0, &[], [0, 0, 0, 1])]);
        timed(b, 6, late_s)
    };
    let report = hold(30);
    let witness = &report.anomalies[&AnomalyKind::HangingTransaction].witnesses[0];
    assert_eq!(
        witness.ops[0].index.0, 3,
        "the acknowledgement that bounds it"
    );
    assert!(witness.explanation.contains("no op saw acknowledged"));
    assert_eq!(stats(&report).lso_stalls[0].held_by_op, None);
    let report = hold(18);
    assert!(
        !report
            .anomalies
            .contains_key(&AnomalyKind::HangingTransaction)
    );
}
