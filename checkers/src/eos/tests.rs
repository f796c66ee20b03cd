//! Hand-built eos histories, both ways: a clean pipeline is valid, each broken one is caught
//! with the right kind and witnesses.

use logjam_history::{
    EosEndValue, EosReadValue, Function, GroupOffsetsValue, HistoryBuilder, InputRecord, OpType,
    OpValue, OutputRecord, PipelineValue,
};

use crate::{AnomalyKind, Report, Verdict, check_ops};

/// A pipeline history under construction: input partition 0 holds values 100 + offset.
struct Eos {
    b: HistoryBuilder,
}

fn input(offset: i64) -> InputRecord {
    InputRecord::from((0, offset, 100 + offset))
}

impl Eos {
    fn new() -> Eos {
        Eos {
            b: HistoryBuilder::new("eos"),
        }
    }

    /// One pipeline transaction of `process` consuming `offsets` of partition 0, committing
    /// offset `last + 1`, ending `outcome`.
    fn pipeline(&mut self, process: u64, txn: u64, offsets: &[i64], outcome: OpType) -> &mut Self {
        self.pipeline_paused(process, txn, offsets, outcome, None, true)
    }

    /// As [`Eos::pipeline`], for a zombie paused `paused_ms` mid-transaction, its offsets sent
    /// with its group metadata or not.
    fn pipeline_paused(
        &mut self,
        process: u64,
        txn: u64,
        offsets: &[i64],
        outcome: OpType,
        paused_ms: Option<u64>,
        group_metadata: bool,
    ) -> &mut Self {
        let invoke = serde_json::json!({ "txn": txn });
        self.b.client(
            process,
            OpType::Invoke,
            Function::Pipeline,
            OpValue::Json(invoke),
        );
        let value = PipelineValue {
            txn,
            producer: Some(format!("eos-p{process}")),
            inputs: offsets.iter().map(|o| input(*o)).collect(),
            offsets: offsets
                .iter()
                .max()
                .map(|o| (0, o + 1))
                .into_iter()
                .collect(),
            offsets_in_txn: true,
            rebalances: Vec::new(),
            crashed_after_commit: false,
            group_metadata,
            paused_ms,
        };
        self.b.client(
            process,
            outcome,
            Function::Pipeline,
            OpValue::Json(serde_json::to_value(value).unwrap()),
        );
        self
    }

    fn ok_op(&mut self, f: Function, value: serde_json::Value) {
        self.b.client(
            99,
            OpType::Invoke,
            f.clone(),
            OpValue::Json(serde_json::Value::Null),
        );
        self.b.client(99, OpType::Ok, f, OpValue::Json(value));
    }

    /// The final reads: eos-in offsets 0..n, eos-out records (input offset, txn) in order, the
    /// output's log end (`covered`: reached the high watermark), the group's offset.
    fn finish(
        &mut self,
        inputs: i64,
        outputs: &[(i64, u64)],
        covered: bool,
        committed: i64,
    ) -> Report {
        let records: Vec<InputRecord> = (0..inputs).map(input).collect();
        self.ok_op(Function::EosRead, EosReadValue::inputs(&records));
        let out: Vec<OutputRecord> = outputs
            .iter()
            .enumerate()
            .map(|(i, (o, txn))| OutputRecord {
                partition: 0,
                offset: i as i64,
                input: input(*o),
                txn: *txn,
            })
            .collect();
        self.ok_op(Function::EosRead, EosReadValue::outputs(&out));
        let n = out.len() as i64;
        let end = EosEndValue {
            topic: "eos-out".into(),
            ends: [(0, n)].into(),
            high_watermarks: [(0, if covered { n } else { n + 3 })].into(),
        };
        self.ok_op(Function::LogEnd, serde_json::to_value(end).unwrap());
        let group = GroupOffsetsValue {
            group: "eos".into(),
            offsets: [(0, committed)].into(),
        };
        self.ok_op(Function::GroupOffsets, serde_json::to_value(group).unwrap());
        let (header, ops) = std::mem::replace(&mut self.b, HistoryBuilder::new("eos")).build();
        check_ops(&header, ops).unwrap()
    }
}

fn kinds(report: &Report) -> Vec<AnomalyKind> {
    report.anomalies.keys().copied().collect()
}

#[test]
fn a_clean_pipeline_is_valid() {
    let mut h = Eos::new();
    h.pipeline(1, 1, &[0, 1], OpType::Ok)
        .pipeline(2, 2, &[2], OpType::Fail) // aborted: its input is redone
        .pipeline(3, 3, &[2, 3], OpType::Ok);
    let report = h.finish(5, &[(0, 1), (1, 1), (2, 3), (3, 3)], true, 4);
    assert_eq!(report.verdict, Verdict::Valid, "{}", report.summary());
    assert!(report.anomalies.is_empty());
    assert_eq!(report.stats.ok_records_read, 4, "output records");
}

#[test]
fn nothing_read_is_unknown() {
    let mut h = Eos::new();
    h.pipeline(1, 1, &[0], OpType::Ok);
    let (header, ops) = std::mem::replace(&mut h.b, HistoryBuilder::new("eos")).build();
    let report = check_ops(&header, ops).unwrap();
    assert_eq!(report.verdict, Verdict::Unknown, "{}", report.summary());
}

#[test]
fn a_pipeline_that_processed_nothing_is_unknown() {
    let mut h = Eos::new();
    h.pipeline(1, 1, &[], OpType::Ok);
    let report = h.finish(3, &[], true, 0);
    assert_eq!(report.verdict, Verdict::Unknown, "{}", report.summary());
    assert!(
        report
            .warnings
            .iter()
            .any(|w| w.contains("processed nothing"))
    );
}

#[test]
fn an_input_processed_twice_is_a_duplicate() {
    let mut h = Eos::new();
    h.pipeline(1, 1, &[0, 1], OpType::Ok) // output committed; its offsets were not (crash)
        .b
        .nemesis(Function::Kill, &["n1"]);
    h.pipeline(2, 2, &[0, 1, 2], OpType::Ok);
    let report = h.finish(3, &[(0, 1), (1, 1), (0, 2), (1, 2), (2, 2)], true, 3);
    assert_eq!(report.verdict, Verdict::Invalid);
    assert_eq!(kinds(&report), vec![AnomalyKind::EosDuplicate]);
    let group = &report.anomalies[&AnomalyKind::EosDuplicate];
    assert_eq!(group.count, 2);
    let w = &group.witnesses[0];
    assert!(
        w.explanation
            .contains("eos-in[0]@0 (value 100) is reflected 2 times"),
        "{}",
        w.explanation
    );
    assert!(w.explanation.contains("txn 1") && w.explanation.contains("txn 2"));
    assert!(w.explanation.contains("kill n1"), "{}", w.explanation);
    let processes: Vec<u64> = w.ops.iter().map(|o| o.process.0).collect();
    assert!(
        processes.contains(&1) && processes.contains(&2),
        "{processes:?}"
    );
}

#[test]
fn a_committed_offset_without_output_is_lost_only_when_the_read_covered_the_log() {
    for (covered, kind) in [
        (true, AnomalyKind::EosLost),
        (false, AnomalyKind::EosUnseen),
    ] {
        let mut h = Eos::new();
        h.pipeline(1, 1, &[0, 1], OpType::Ok);
        // Input 1 was consumed and its offset committed, but its output is missing.
        let report = h.finish(2, &[(0, 1)], covered, 2);
        assert_eq!(report.verdict, Verdict::Invalid);
        assert_eq!(kinds(&report), vec![kind]);
        let w = &report.anomalies[&kind].witnesses[0];
        assert_eq!(w.offsets, vec![logjam_history::Offset(1)]);
        assert!(
            w.explanation.contains("consumed by txn 1"),
            "{}",
            w.explanation
        );
    }
}

#[test]
fn output_above_the_committed_offset_is_not_atomic() {
    let mut h = Eos::new();
    h.pipeline(1, 1, &[0, 1], OpType::Ok);
    // The group's offset stayed at 1: input 1's output is committed, its offset is not.
    let report = h.finish(2, &[(0, 1), (1, 1)], true, 1);
    assert_eq!(kinds(&report), vec![AnomalyKind::OffsetsNotAtomic]);
    let w = &report.anomalies[&AnomalyKind::OffsetsNotAtomic].witnesses[0];
    assert_eq!(w.offsets, vec![logjam_history::Offset(1)]);
    assert!(
        w.explanation
            .contains("committed offset for partition 0 is 1")
    );
}

#[test]
fn an_aborted_transactions_output_is_caught() {
    let mut h = Eos::new();
    h.pipeline(1, 1, &[0], OpType::Fail)
        .pipeline(2, 2, &[1], OpType::Ok);
    // Txn 1 aborted, yet its output for input 0 is visible (and the group is at 2).
    let report = h.finish(2, &[(0, 1), (1, 2)], true, 2);
    assert_eq!(kinds(&report), vec![AnomalyKind::AbortedOutputVisible]);
    let w = &report.anomalies[&AnomalyKind::AbortedOutputVisible].witnesses[0];
    assert!(
        w.explanation
            .contains("txn 1 (op 1 (fail pipeline by process 1"),
        "{}",
        w.explanation
    );
    assert_eq!(w.ops[0].process.0, 1);
}

#[test]
fn a_malformed_value_is_a_warning_naming_the_op() {
    let mut h = Eos::new();
    h.ok_op(
        Function::EosRead,
        serde_json::json!({"topic": "eos-out", "records": [[1]]}),
    );
    let (header, ops) = std::mem::replace(&mut h.b, HistoryBuilder::new("eos")).build();
    let report = check_ops(&header, ops).unwrap();
    assert!(
        report
            .warnings
            .iter()
            .any(|w| w.contains("op 1 (eos-read)")),
        "{:?}",
        report.warnings
    );
}

#[test]
fn zombies_are_counted_by_how_they_ended_after_a_takeover() {
    // Zombie 1 (inputs 0, 1) is taken over by txn 2 and refused: exactly once, counted.
    let mut h = Eos::new();
    h.pipeline_paused(1, 1, &[0, 1], OpType::Fail, Some(10_000), true);
    h.pipeline(2, 2, &[0, 1], OpType::Ok);
    // Zombie 3 (input 2) is never taken over: paused, but not counted as a takeover.
    h.pipeline_paused(3, 3, &[2], OpType::Ok, Some(10_000), true);
    let report = h.finish(3, &[(0, 2), (1, 2), (2, 3)], true, 3);
    assert_eq!(report.verdict, Verdict::Valid, "{:?}", kinds(&report));
    let zombies = report.zombies().expect("zombies counted");
    assert_eq!(
        (
            zombies.paused,
            zombies.taken_over,
            zombies.refused,
            zombies.committed
        ),
        (2, 1, 1, 0)
    );
    assert!(report.summary().contains("zombies: 2 pipeline ops paused"));

    // Without the group metadata the taken-over zombie commits: a duplicate naming it.
    let mut h = Eos::new();
    h.pipeline(2, 2, &[0, 1], OpType::Ok);
    h.pipeline_paused(1, 1, &[0, 1], OpType::Ok, Some(10_000), false);
    let report = h.finish(2, &[(0, 2), (1, 2), (0, 1), (1, 1)], true, 2);
    assert_eq!(kinds(&report), vec![AnomalyKind::EosDuplicate]);
    let zombies = report.zombies().expect("zombies counted");
    assert_eq!((zombies.taken_over, zombies.committed), (1, 1));
    let w = &report.anomalies[&AnomalyKind::EosDuplicate].witnesses[0];
    assert!(
        w.explanation.contains("a zombie: paused 10000 ms")
            && w.explanation.contains("group id alone"),
        "{}",
        w.explanation
    );

    // A run without zombies reports none.
    let mut h = Eos::new();
    h.pipeline(1, 1, &[0], OpType::Ok);
    assert!(h.finish(1, &[(0, 1)], true, 1).zombies().is_none());
}
