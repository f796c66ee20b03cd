//! The group workload's checker on hand-built histories, both ways: members whose recorded
//! rebalances hand keys over between generations are valid (with the duplicates and position
//! jumps a rebalance brings allowed by the subscribe policy), and two members owning one key
//! in one generation (what the node's `double-assign` canary does) are `double-assign`,
//! witnessed by both rebalance ops; the plain queue checker misses it.

use logjam_checkers::anomaly::AnomalyKind;
use logjam_checkers::check_ops;
use logjam_history::{Function, HistoryBuilder, Key, OpType, OpValue, Rebalance};

fn rebalance(
    b: &mut HistoryBuilder,
    process: u64,
    generation: i32,
    member: &str,
    assigned: &[i64],
    revoked: &[i64],
) {
    let value = OpValue::Json(
        serde_json::to_value(Rebalance {
            generation,
            member_id: member.to_owned(),
            assigned: assigned.iter().map(|k| Key(*k)).collect(),
            revoked: revoked.iter().map(|k| Key(*k)).collect(),
            cause: "join".to_owned(),
        })
        .unwrap(),
    );
    b.client(process, OpType::Invoke, Function::Rebalance, value.clone());
    b.client(process, OpType::Ok, Function::Rebalance, value);
}

/// Two members of one group; `overlap` makes member b own key 0 in generation 2 too.
fn history(workload: &str, overlap: bool) -> HistoryBuilder {
    let mut b = HistoryBuilder::new(workload);
    b.header_mut().config = serde_json::json!({"sub_via": ["subscribe"]});
    b.send_ok(9, 0, 10, 0);
    b.send_ok(9, 1, 11, 0);
    b.assign(0, Function::Subscribe, &[0, 1]);
    b.assign(1, Function::Subscribe, &[0, 1]);
    // Generation 1: a alone owns both keys; generation 2: b joined, the keys are split.
    rebalance(&mut b, 0, 1, "a", &[0, 1], &[]);
    b.poll_ok(0, &[(0, &[(0, 10)])]);
    rebalance(&mut b, 0, 2, "a", &[0], &[0, 1]);
    let b_keys: &[i64] = if overlap { &[0, 1] } else { &[1] };
    rebalance(&mut b, 1, 2, "b", b_keys, &[]);
    b.poll_ok(1, &[(1, &[(0, 11)])]);
    if overlap {
        // Both members read key 0 in generation 2.
        b.poll_ok(1, &[(0, &[(0, 10)])]);
    }
    b.final_poll_ok(2, &[(0, &[(0, 10)]), (1, &[(0, 11)])]);
    b
}

#[test]
fn members_handing_keys_over_between_generations_are_valid() {
    let (header, ops) = history("group", false).build();
    let report = check_ops(&header, ops).unwrap();
    assert!(report.bad_kinds.is_empty(), "{}", report.summary());
    assert_eq!(report.anomalies.get(&AnomalyKind::DoubleAssign), None);
}

#[test]
fn two_members_owning_one_key_in_one_generation_are_double_assign() {
    let (header, ops) = history("group", true).build();
    let report = check_ops(&header, ops).unwrap();
    assert_eq!(
        report.bad_kinds,
        vec![AnomalyKind::DoubleAssign],
        "{}",
        report.summary()
    );
    let group = &report.anomalies[&AnomalyKind::DoubleAssign];
    assert_eq!(group.count, 1);
    let witness = &group.witnesses[0];
    assert_eq!(witness.key, Some(Key(0)));
    let processes: Vec<u64> = witness.ops.iter().map(|op| op.process.0).collect();
    assert_eq!(processes, vec![0, 1], "both members' rebalances witness it");
    assert!(witness.ops.iter().all(|op| op.f == "rebalance"));
    assert!(
        witness.explanation.contains("generation 2"),
        "{}",
        witness.explanation
    );
}

#[test]
fn the_queue_checker_alone_does_not_see_an_overlapping_assignment() {
    // The same history judged as a queue workload: both members read key 0's record, which
    // the queue checker cannot tell from redelivery after a rebalance.
    let (header, ops) = history("queue", true).build();
    let report = check_ops(&header, ops).unwrap();
    assert!(report.bad_kinds.is_empty(), "{}", report.summary());
}

#[test]
fn a_malformed_rebalance_is_a_warning_naming_its_op() {
    let mut b = history("group", false);
    b.client(
        3,
        OpType::Invoke,
        Function::Rebalance,
        OpValue::Json(serde_json::json!({"generation": "x"})),
    );
    b.client(
        3,
        OpType::Ok,
        Function::Rebalance,
        OpValue::Json(serde_json::json!({"generation": "x"})),
    );
    let (header, ops) = b.build();
    let report = check_ops(&header, ops).unwrap();
    assert!(report.bad_kinds.is_empty(), "{}", report.summary());
    assert!(
        report
            .warnings
            .iter()
            .any(|w| w.contains("a rebalance whose value is not")),
        "{:?}",
        report.warnings
    );
}
