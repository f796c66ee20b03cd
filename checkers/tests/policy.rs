//! Policy and verdict: which kinds fail a queue run, when the verdict is unknown, and the
//! durability report's ranges, ack times and nemesis windows.

use logjam_checkers::{AnomalyKind, Policy, QueueOptions, Verdict, check_ops, check_ops_with};
use logjam_history::builder::{poll_micro, send_micro};
use logjam_history::{Function, HistoryBuilder, OpType};

fn verdict(b: HistoryBuilder) -> logjam_checkers::Report {
    let (header, ops) = b.build();
    check_ops(&header, ops).unwrap()
}

#[test]
fn history_without_reads_is_unknown_never_valid() {
    let mut b = HistoryBuilder::new("queue");
    b.assign(0, Function::Assign, &[1]);
    let report = verdict(b);
    assert_eq!(report.verdict, Verdict::Unknown);
    assert_eq!(report.verdict.exit_code(), 2);
}

#[test]
fn empty_history_is_unknown() {
    assert_eq!(
        verdict(HistoryBuilder::new("queue")).verdict,
        Verdict::Unknown
    );
}

#[test]
fn poll_skip_fails_an_assign_run_but_not_a_subscribe_run() {
    let build = |f: Function| {
        let mut b = HistoryBuilder::new("queue");
        b.send_ok(0, 1, 10, 0);
        b.send_ok(0, 1, 11, 1);
        b.send_ok(0, 1, 12, 2);
        b.assign(1, f, &[1]);
        b.poll_ok(1, &[(1, &[(0, 10)])]);
        b.poll_ok(1, &[(1, &[(2, 12)])]);
        b.poll_ok(2, &[(1, &[(0, 10), (1, 11), (2, 12)])]);
        b
    };
    let assign = verdict(build(Function::Assign));
    assert_eq!(assign.verdict, Verdict::Invalid);
    assert_eq!(assign.bad_kinds, [AnomalyKind::PollSkip]);
    let subscribe = verdict(build(Function::Subscribe));
    assert_eq!(subscribe.verdict, Verdict::Valid, "{}", subscribe.summary());
    assert_eq!(subscribe.allowed_kinds, [AnomalyKind::PollSkip]);
}

#[test]
fn int_send_skip_is_allowed_for_queues_but_not_under_strict_policy() {
    let mut b = HistoryBuilder::new("queue");
    b.send_ok(1, 1, 99, 1);
    b.txn(
        0,
        OpType::Ok,
        vec![send_micro(1, 10, None), send_micro(1, 11, None)],
        vec![send_micro(1, 10, Some(0)), send_micro(1, 11, Some(2))],
    );
    b.poll_ok(2, &[(1, &[(0, 10), (1, 99), (2, 11)])]);
    let (header, ops) = b.build();
    let queue = check_ops(&header, ops.clone()).unwrap();
    assert_eq!(queue.verdict, Verdict::Valid, "{}", queue.summary());
    let strict = check_ops_with(&header, ops, Some(Policy::strict())).unwrap();
    assert_eq!(strict.verdict, Verdict::Invalid);
}

#[test]
fn g1c_is_allowed_with_ww_edges_and_g2_only_without_snapshot_reads() {
    let with_ww = Policy::queue(QueueOptions::default());
    assert!(with_ww.allows(AnomalyKind::G0));
    assert!(with_ww.allows(AnomalyKind::G1c));
    assert!(with_ww.allows(AnomalyKind::G2));
    let no_ww = Policy::queue(QueueOptions {
        ww_edges: false,
        ..QueueOptions::default()
    });
    assert!(!no_ww.allows(AnomalyKind::G1c));
    let snapshot = Policy::queue(QueueOptions {
        snapshot_reads: true,
        ..QueueOptions::default()
    });
    assert!(!snapshot.allows(AnomalyKind::GSingle));
    assert!(!snapshot.allows(AnomalyKind::G2));
    for kind in [
        AnomalyKind::LostWrite,
        AnomalyKind::Unseen,
        AnomalyKind::AbortedRead,
    ] {
        assert!(!with_ww.allows(kind), "{kind} must always fail a queue run");
    }
}

#[test]
fn anomaly_names_round_trip() {
    for kind in AnomalyKind::ALL {
        assert_eq!(AnomalyKind::from_name(kind.as_str()), Some(kind));
    }
    assert_eq!(
        AnomalyKind::from_name("G1a"),
        Some(AnomalyKind::AbortedRead)
    );
}

#[test]
fn durability_report_lists_lost_ranges_ack_times_and_faults_in_between() {
    let mut b = HistoryBuilder::new("queue");
    b.header_mut().config = serde_json::json!({
        "key_topic_partitions": {"1": {"topic": "t0", "partition": 1}}
    });
    b.send_ok(0, 1, 10, 0);
    b.send_ok(0, 1, 11, 1);
    b.send_ok(0, 1, 12, 2);
    b.send_ok(0, 1, 13, 3);
    b.send_ok(0, 1, 14, 4);
    b.poll_ok(1, &[(1, &[(0, 10), (1, 11), (2, 12), (3, 13), (4, 14)])]);
    let before_kill = b.nemesis(Function::Kill, &["n1"]);
    b.nemesis(Function::Restart, &["n1"]);
    b.send_ok(0, 1, 15, 5);
    // After recovery offsets 1..=2 and 4 are gone; new writes reused nothing.
    b.final_poll_ok(2, &[(1, &[(0, 10), (3, 13), (5, 15)])]);
    let report = verdict(b);
    let d = &report.durability;
    assert_eq!(d.acknowledged, 6);
    assert_eq!(d.lost, 3, "{}", report.summary());
    let p = &d.partitions[0];
    assert_eq!(p.topic_partition.as_ref().unwrap().to_string(), "t0-1");
    let ranges: Vec<(i64, i64)> = p
        .offset_ranges
        .iter()
        .map(|r| (r.first.0, r.last.0))
        .collect();
    assert_eq!(ranges, [(1, 2), (4, 4)]);
    let lost: Vec<i64> = p.lost.iter().map(|w| w.value.0).collect();
    assert_eq!(lost, [11, 12, 14]);
    assert!(p.lost.iter().all(|w| w.ack_time_ns > 0));
    assert_eq!(p.lost[0].nemesis_between.len(), 2);
    assert_eq!(p.lost[0].nemesis_between[0], before_kill);
    assert_eq!(d.nemesis_events.len(), 2);
    assert!(
        report
            .summary()
            .contains("t0-1 (key 1): 3 lost at offsets [1..=2, 4]"),
        "{}",
        report.summary()
    );
}

#[test]
fn reads_after_the_last_fault_serve_as_final_reads_without_final_polls() {
    let mut b = HistoryBuilder::new("queue");
    b.send_ok(0, 1, 10, 0);
    b.send_ok(0, 1, 11, 1);
    b.nemesis(Function::Heal, &["n1"]);
    b.poll_ok(1, &[(1, &[(0, 10), (1, 11)])]);
    let report = verdict(b);
    assert_eq!(report.verdict, Verdict::Valid);
    assert_eq!(
        serde_json::to_value(report.durability.final_reads).unwrap(),
        "after-last-nemesis"
    );
}

#[test]
fn info_txn_with_one_visible_write_must_have_committed_all() {
    // Transactions are atomic: reading one write of an info txn means all its writes happened.
    let mut b = HistoryBuilder::new("queue");
    b.txn(
        0,
        OpType::Info,
        vec![send_micro(1, 10, None), send_micro(2, 20, None)],
        vec![send_micro(1, 10, None), send_micro(2, 20, None)],
    );
    b.send_ok(1, 2, 21, 1);
    b.txn(
        2,
        OpType::Ok,
        vec![],
        vec![poll_micro(&[(1, &[(0, 10)]), (2, &[(1, 21)])])],
    );
    let report = verdict(b);
    // 20's offset is unknown, so it cannot be placed: it is unseen, but it is reported at all
    // only because reading 10 proved the info txn committed.
    let unseen = &report.anomalies[&AnomalyKind::Unseen];
    assert_eq!(unseen.witnesses[0].values[0].0, 20, "{}", report.summary());
}

/// Regression: two final readers at different positions leave a gap between them; values in
/// the gap were not read across by any one reader, so they are unconfirmed, not "truncated".
#[test]
fn gap_between_two_final_readers_is_unconfirmed_not_lost() {
    let mut b = HistoryBuilder::new("queue");
    for (value, offset) in [(10, 0), (11, 1), (12, 2), (13, 3)] {
        b.send_ok(0, 1, value, offset);
    }
    b.poll_ok(1, &[(1, &[(0, 10), (1, 11), (2, 12), (3, 13)])]);
    b.nemesis(Function::Heal, &["n1"]);
    b.poll_ok(2, &[(1, &[(0, 10)])]);
    b.poll_ok(3, &[(1, &[(3, 13)])]);
    let report = verdict(b);
    assert_eq!(report.durability.lost, 0, "{}", report.summary());
    assert_eq!(report.durability.unconfirmed, 2);
    assert_eq!(report.verdict, Verdict::Valid);
}

#[test]
fn a_registered_workload_gets_its_checker_schema_and_policy() {
    use logjam_checkers::{Registry, WorkloadSpec, check_ops_in};
    let mut b = HistoryBuilder::new("streams");
    b.send_ok(0, 1, 10, 0);
    b.send_ok(0, 1, 11, 0); // two values at one offset
    b.poll_ok(1, &[(1, &[(0, 10)])]);
    let (header, ops) = b.build();
    assert!(check_ops(&header, ops.clone()).is_err(), "not built in");
    let mut registry = Registry::builtin();
    let queue = *registry.get("queue").unwrap();
    registry.register(WorkloadSpec {
        name: "streams",
        functions: &[logjam_history::Function::Send],
        policy: |_, _| Policy::strict(),
        ..queue
    });
    let report = check_ops_in(&registry, &header, ops, None).unwrap();
    assert_eq!(report.policy.name, "strict");
    assert_eq!(report.verdict, Verdict::Invalid);
    assert!(
        report
            .warnings
            .iter()
            .any(|w| w.contains("unknown f \"poll\"")),
        "poll is outside this workload's schema: {:?}",
        report.warnings
    );
}
