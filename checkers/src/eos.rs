//! The exactly-once checker for the `eos` workload (a consume-transform-produce pipeline; op
//! schema in `logjam_history::eos`). It compares three things the history proves: the input
//! records (the final read of `eos-in`, and acknowledged `produce` sends), the committed
//! output (the final read_committed read of `eos-out`, each record naming the input it
//! reflects and the pipeline transaction that wrote it) and the group's committed offsets
//! (the final `group-offsets` op). Each finding names which of the three mechanisms failed:
//!
//! | kind | definition | mechanism |
//! |---|---|---|
//! | `eos-duplicate` | an input record reflected by ≥ 2 committed output records | offsets not atomic with output, or a zombie not fenced |
//! | `eos-lost` | an input below the group's committed offset never reflected, and the output read reached every partition's high watermark | offsets committed without their output |
//! | `eos-unseen` | as `eos-lost`, but the output read did not provably reach the log end | unknown |
//! | `offsets-not-atomic` | an input reflected in committed output at or above the group's committed offset for its partition, after the pipeline ended | output committed without its offsets |
//! | `aborted-output-visible` | a committed-output record written by a transaction whose op ended `fail` (aborted, or its producer fenced) | transaction abort / fencing |
//!
//! Zombies (pipeline ops that paused mid-transaction, `paused_ms`) are counted in
//! `zombies` in `report.json`: how many, how many had inputs another pipeline op committed while they
//! slept (their partitions were taken over), and how each ended. A zombie that commits after
//! a takeover duplicates the inputs both consumed, and `eos-duplicate` names it.
//!
//! Nothing read of `eos-out` ⇒ no loss claims. Only output records count as records read, so
//! a run whose committed output is empty (the pipeline processed nothing) is `unknown`.

#[cfg(test)]
mod tests;

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;

use logjam_history::{
    CompletedOp, EosEndValue, EosReadValue, EosRecords, Function, GroupOffsetsValue, Header, Key,
    Offset, OpValue, Outcome, Paired, PipelineValue, ProduceValue, SendOutcome, Value,
    eos::OUTPUT_TOPIC,
};

use crate::anomaly::{Anomalies, Anomaly, AnomalyKind, OpRef};
use crate::checker::{Checker, Findings};
use crate::durability::DurabilityReport;
pub use crate::findings::ZombieStats;
use crate::findings::{Stats, WorkloadStats};
use crate::fxhash::FxHashMap;
use crate::policy::Policy;
use crate::queue::realtime::LinearizabilitySummary;

/// An input record's place: (partition, offset).
type Place = (i32, i64);

/// One committed-output record reflecting an input.
#[derive(Debug, Clone, Copy)]
struct Reflection {
    partition: i32,
    offset: i64,
    txn: u64,
    /// Index into `read_ops`.
    read_op: u32,
}

/// A pipeline transaction: its op and what it committed.
#[derive(Debug, Clone)]
struct Txn {
    op: OpRef,
    producer: Option<String>,
    offsets_in_txn: bool,
    rebalances: usize,
    crashed: bool,
    group_metadata: bool,
    /// A zombie's pause and its inputs (kept for zombies only).
    zombie: Option<(u64, Vec<Place>)>,
}

/// Streaming exactly-once checker.
pub struct EosChecker {
    stats: Stats,
    warnings: Vec<String>,
    /// txn number → its pipeline op.
    txns: FxHashMap<u64, Txn>,
    /// Input place → the transactions that consumed it.
    consumed: FxHashMap<Place, Vec<u64>>,
    /// Input place → its value, from the final read of `eos-in` and acknowledged sends.
    inputs: FxHashMap<Place, i64>,
    /// Input place → committed-output records reflecting it.
    reflected: FxHashMap<Place, Vec<Reflection>>,
    /// Ok `eos-read` ops of `eos-out`.
    read_ops: Vec<OpRef>,
    /// The `log-end` of the output read.
    output_end: Option<(EosEndValue, OpRef)>,
    /// The group's final committed offsets.
    group_offsets: Option<(GroupOffsetsValue, OpRef)>,
    /// Nemesis events: (time, what).
    faults: Vec<(u64, String)>,
    /// Records the final read of `eos-in` returned (not counted as checked: only output
    /// records are what the pipeline did).
    input_records_read: u64,
}

/// The eos workload's policy: every finding fails the run.
pub fn policy(_header: &Header, _findings: &Findings) -> Policy {
    Policy {
        name: "eos".to_owned(),
        allowed: BTreeMap::new(),
    }
}

impl EosChecker {
    /// A checker for an eos history.
    pub fn new(_header: &Header) -> EosChecker {
        EosChecker {
            stats: Stats::default(),
            warnings: Vec::new(),
            txns: FxHashMap::default(),
            consumed: FxHashMap::default(),
            inputs: FxHashMap::default(),
            reflected: FxHashMap::default(),
            read_ops: Vec::new(),
            output_end: None,
            group_offsets: None,
            faults: Vec::new(),
            input_records_read: 0,
        }
    }

    fn push_op(&mut self, op: CompletedOp) {
        self.stats.client_ops += 1;
        let counts = self.stats.by_f.entry(op.f.to_string()).or_default();
        match op.outcome {
            Outcome::Ok => counts.ok += 1,
            Outcome::Fail => counts.fail += 1,
            Outcome::Info => counts.info += 1,
        }
        let OpValue::Json(json) = &op.value else {
            return;
        };
        let result = match op.f {
            Function::Pipeline => self.push_pipeline(&op, json),
            Function::EosRead if op.outcome == Outcome::Ok => self.push_read(&op, json),
            Function::LogEnd if op.outcome == Outcome::Ok => {
                <EosEndValue as serde::Deserialize>::deserialize(json).map(|end| {
                    if end.topic == OUTPUT_TOPIC {
                        self.output_end = Some((end, OpRef::from_op(&op)));
                    }
                })
            }
            Function::GroupOffsets if op.outcome == Outcome::Ok => {
                <GroupOffsetsValue as serde::Deserialize>::deserialize(json)
                    .map(|offsets| self.group_offsets = Some((offsets, OpRef::from_op(&op))))
            }
            Function::Produce => ProduceValue::from_json(json).map(|value| {
                for send in value.sends {
                    if let (Some(SendOutcome::Ok), Some(offset)) = (send.outcome, send.offset) {
                        self.stats.ok_sends += 1;
                        let partition = i32::try_from(send.key).unwrap_or(i32::MAX);
                        self.inputs.insert((partition, offset), send.value);
                    }
                }
            }),
            _ => Ok(()),
        };
        if let Err(error) = result {
            self.warnings.push(format!(
                "op {} ({}): a value this checker cannot read: {error}",
                op.index(),
                op.f
            ));
        }
    }

    fn push_pipeline(
        &mut self,
        op: &CompletedOp,
        json: &serde_json::Value,
    ) -> Result<(), serde_json::Error> {
        let value = <PipelineValue as serde::Deserialize>::deserialize(json)?;
        for input in &value.inputs {
            self.consumed
                .entry((input.partition, input.offset))
                .or_default()
                .push(value.txn);
        }
        let txn = Txn {
            op: OpRef::from_op(op),
            producer: value.producer,
            offsets_in_txn: value.offsets_in_txn,
            rebalances: value.rebalances.len(),
            crashed: value.crashed_after_commit,
            group_metadata: value.group_metadata,
            zombie: value.paused_ms.map(|ms| {
                let places = value
                    .inputs
                    .iter()
                    .map(|i| (i.partition, i.offset))
                    .collect();
                (ms, places)
            }),
        };
        if let Some(previous) = self.txns.insert(value.txn, txn) {
            self.warnings.push(format!(
                "txn {} is used by two pipeline ops ({} and {}): the workload must number \
                 transactions uniquely",
                value.txn,
                previous.op.index,
                op.index()
            ));
        }
        Ok(())
    }

    fn push_read(
        &mut self,
        op: &CompletedOp,
        json: &serde_json::Value,
    ) -> Result<(), serde_json::Error> {
        match EosReadValue::decode(json)? {
            EosRecords::Inputs(records) => {
                for r in records {
                    self.input_records_read += 1;
                    self.inputs.insert((r.partition, r.offset), r.value);
                }
            }
            EosRecords::Outputs(records) => {
                let read_op = u32::try_from(self.read_ops.len()).unwrap_or(u32::MAX);
                self.read_ops.push(OpRef::from_op(op));
                for r in records {
                    self.stats.ok_records_read += 1;
                    let list = self
                        .reflected
                        .entry((r.input.partition, r.input.offset))
                        .or_default();
                    // One output record read twice (a re-read) reflects its input once.
                    if !list
                        .iter()
                        .any(|x| x.partition == r.partition && x.offset == r.offset)
                    {
                        list.push(Reflection {
                            partition: r.partition,
                            offset: r.offset,
                            txn: r.txn,
                            read_op,
                        });
                    }
                }
            }
        }
        Ok(())
    }

    /// "txn 7 (op 12, ok pipeline by process 3, producer eos-p3)".
    fn describe_txn(&self, txn: u64) -> String {
        match self.txns.get(&txn) {
            Some(t) => format!(
                "txn {txn} ({}{}{}{}{}{})",
                t.op,
                t.producer
                    .as_deref()
                    .map_or(String::new(), |p| format!(", producer {p}")),
                if t.offsets_in_txn {
                    ""
                } else {
                    ", offsets committed outside the transaction"
                },
                match (&t.zombie, t.group_metadata) {
                    (Some((ms, _)), true) => format!(
                        ", a zombie: paused {ms} ms mid-transaction, then committed with its \
                         group metadata"
                    ),
                    (Some((ms, _)), false) => format!(
                        ", a zombie: paused {ms} ms mid-transaction, then committed its \
                         offsets with the group id alone (no generation fence)"
                    ),
                    (None, _) => String::new(),
                },
                if t.rebalances > 0 {
                    format!(", {} rebalance(s) seen", t.rebalances)
                } else {
                    String::new()
                },
                if t.crashed {
                    ", the process crashed as the commit returned"
                } else {
                    ""
                }
            ),
            None => format!("txn {txn} (no pipeline op recorded it)"),
        }
    }

    fn txn_ops(&self, txns: impl IntoIterator<Item = u64>) -> Vec<OpRef> {
        let mut seen = BTreeSet::new();
        txns.into_iter()
            .filter_map(|t| self.txns.get(&t))
            .filter(|t| seen.insert(t.op.index))
            .map(|t| t.op.clone())
            .collect()
    }

    /// Faults recorded between two times, in words ("" when none).
    fn faults_between(&self, from: u64, to: u64) -> String {
        let (from, to) = (from.min(to), from.max(to));
        let between: Vec<&str> = self
            .faults
            .iter()
            .filter(|(t, _)| (from..=to).contains(t))
            .map(|(_, what)| what.as_str())
            .collect();
        if between.is_empty() {
            String::new()
        } else {
            format!("; faults between them: {}", between.join(", "))
        }
    }

    fn input_note(&self, place: Place) -> String {
        self.inputs
            .get(&place)
            .map_or(String::new(), |v| format!(" (value {v})"))
    }

    /// `zombies` in `report.json`; `None` without zombies.
    fn zombie_stats(&self) -> Option<ZombieStats> {
        let mut stats = ZombieStats::default();
        for (txn, t) in &self.txns {
            let Some((_, places)) = &t.zombie else {
                continue;
            };
            stats.paused += 1;
            let taken_over = places.iter().any(|place| {
                self.consumed.get(place).is_some_and(|txns| {
                    txns.iter().any(|other| {
                        other != txn
                            && self
                                .txns
                                .get(other)
                                .is_some_and(|o| o.op.outcome == Outcome::Ok)
                    })
                })
            });
            if !taken_over {
                continue;
            }
            stats.taken_over += 1;
            match t.op.outcome {
                Outcome::Ok => stats.committed += 1,
                Outcome::Fail => stats.refused += 1,
                Outcome::Info => stats.unknown += 1,
            }
        }
        (stats.paused > 0).then_some(stats)
    }

    fn duplicates(&self, places: &[Place], out: &mut Anomalies) {
        for place in places {
            let list = &self.reflected[place];
            if list.len() < 2 {
                continue;
            }
            let mut text = format!(
                "input eos-in[{}]@{}{} is reflected {} times in the committed output:",
                place.0,
                place.1,
                self.input_note(*place),
                list.len()
            );
            for r in list {
                let _ = write!(
                    text,
                    " eos-out[{}]@{} by {} (read in op {});",
                    r.partition,
                    r.offset,
                    self.describe_txn(r.txn),
                    self.read_ops[r.read_op as usize].index
                );
            }
            let times: Vec<u64> = list
                .iter()
                .filter_map(|r| self.txns.get(&r.txn).map(|t| t.op.time_ns))
                .collect();
            if let (Some(first), Some(last)) = (times.iter().min(), times.iter().max()) {
                text.push_str(&self.faults_between(*first, *last));
            }
            let mut anomaly = Anomaly::new(
                AnomalyKind::EosDuplicate,
                Some(Key(i64::from(place.0))),
                text,
            );
            let mut ops = self.txn_ops(list.iter().map(|r| r.txn));
            for r in list {
                let read = &self.read_ops[r.read_op as usize];
                if !ops.iter().any(|o| o.index == read.index) {
                    ops.push(read.clone());
                }
            }
            anomaly.ops = ops;
            anomaly.offsets = vec![Offset(place.1)];
            anomaly.values = self
                .inputs
                .get(place)
                .map(|v| Value(*v))
                .into_iter()
                .collect();
            out.push(anomaly);
        }
    }

    fn aborted_visible(&self, places: &[Place], out: &mut Anomalies) {
        for place in places {
            for r in &self.reflected[place] {
                let Some(txn) = self.txns.get(&r.txn) else {
                    continue;
                };
                if txn.op.outcome != Outcome::Fail {
                    continue;
                }
                let mut anomaly = Anomaly::new(
                    AnomalyKind::AbortedOutputVisible,
                    Some(Key(i64::from(r.partition))),
                    format!(
                        "eos-out[{}]@{} (input eos-in[{}]@{}{}) was written by {}, which \
                         aborted or was fenced, yet the read_committed final read (op {}) \
                         returned it",
                        r.partition,
                        r.offset,
                        place.0,
                        place.1,
                        self.input_note(*place),
                        self.describe_txn(r.txn),
                        self.read_ops[r.read_op as usize].index
                    ),
                );
                anomaly.ops = vec![txn.op.clone(), self.read_ops[r.read_op as usize].clone()];
                anomaly.offsets = vec![Offset(r.offset)];
                out.push(anomaly);
            }
        }
    }

    /// `eos-lost`/`eos-unseen` and `offsets-not-atomic`, against the group's final offsets.
    fn against_offsets(&self, places: &[Place], out: &mut Anomalies) {
        let Some((group, group_op)) = &self.group_offsets else {
            return;
        };
        let committed = |p: i32| group.offsets.get(&p).copied().unwrap_or(0);
        // Output for an input the group never committed past.
        for place in places {
            if place.1 < committed(place.0) {
                continue;
            }
            let list = &self.reflected[place];
            let mut anomaly = Anomaly::new(
                AnomalyKind::OffsetsNotAtomic,
                Some(Key(i64::from(place.0))),
                format!(
                    "input eos-in[{}]@{}{} is reflected in the committed output (eos-out[{}]@{} \
                     by {}) but the group {}'s committed offset for partition {} is {} (op {}), \
                     after the pipeline ended: the output was committed without its offsets",
                    place.0,
                    place.1,
                    self.input_note(*place),
                    list[0].partition,
                    list[0].offset,
                    self.describe_txn(list[0].txn),
                    group.group,
                    place.0,
                    committed(place.0),
                    group_op.index
                ),
            );
            anomaly.ops = self.txn_ops(list.iter().map(|r| r.txn));
            anomaly.ops.push(group_op.clone());
            anomaly.offsets = vec![Offset(place.1)];
            out.push(anomaly);
        }
        if self.read_ops.is_empty() && self.output_end.is_none() {
            return;
        }
        let covered = self
            .output_end
            .as_ref()
            .is_some_and(|(end, _)| end.covers_log());
        let mut universe: Vec<Place> = self
            .inputs
            .keys()
            .chain(self.consumed.keys())
            .copied()
            .filter(|place| place.1 < committed(place.0) && !self.reflected.contains_key(place))
            .collect();
        universe.sort_unstable();
        universe.dedup();
        for place in universe {
            let consumed_by = self.consumed.get(&place).map_or(&[][..], Vec::as_slice);
            let by: Vec<String> = consumed_by.iter().map(|t| self.describe_txn(*t)).collect();
            let (kind, why) = if covered {
                (
                    AnomalyKind::EosLost,
                    "the final read_committed read of eos-out reached every partition's high \
                     watermark: the offset was committed without its output"
                        .to_owned(),
                )
            } else {
                (
                    AnomalyKind::EosUnseen,
                    "the final read of eos-out did not provably reach the log end: lost or late, \
                     unknown"
                        .to_owned(),
                )
            };
            let mut anomaly = Anomaly::new(
                kind,
                Some(Key(i64::from(place.0))),
                format!(
                    "input eos-in[{}]@{}{} lies below the group {}'s committed offset {} (op {}) \
                     but no committed output reflects it; consumed by {}; {why}",
                    place.0,
                    place.1,
                    self.input_note(place),
                    group.group,
                    committed(place.0),
                    group_op.index,
                    if by.is_empty() {
                        "no recorded pipeline op".to_owned()
                    } else {
                        by.join(", ")
                    }
                ),
            );
            anomaly.ops = self.txn_ops(consumed_by.iter().copied());
            anomaly.ops.push(group_op.clone());
            if let Some((_, end_op)) = &self.output_end {
                anomaly.ops.push(end_op.clone());
            }
            anomaly.offsets = vec![Offset(place.1)];
            anomaly.values = self
                .inputs
                .get(&place)
                .map(|v| Value(*v))
                .into_iter()
                .collect();
            out.push(anomaly);
        }
    }
}

impl Checker for EosChecker {
    fn push(&mut self, item: Paired) {
        match item {
            Paired::Client(op) => self.push_op(op),
            Paired::Nemesis(event) => {
                self.stats.nemesis_events += 1;
                let what = if event.targets.is_empty() {
                    event.f.to_string()
                } else {
                    format!("{} {}", event.f, event.targets.join(","))
                };
                self.faults.push((event.time_ns, what));
            }
        }
    }

    fn finish(mut self: Box<Self>) -> Findings {
        let mut anomalies = Anomalies::default();
        let mut places: Vec<Place> = self.reflected.keys().copied().collect();
        places.sort_unstable();
        self.duplicates(&places, &mut anomalies);
        self.aborted_visible(&places, &mut anomalies);
        if self.group_offsets.is_none() {
            self.warnings.push(
                "no group-offsets op: committed offsets were not compared with the output"
                    .to_owned(),
            );
        }
        if self.read_ops.is_empty() && self.output_end.is_none() {
            self.warnings
                .push("eos-out was never read: nothing reflected could be checked".to_owned());
        } else if self.reflected.is_empty() {
            self.warnings.push(format!(
                "the committed output is empty although {} input record(s) were read: the \
                 pipeline processed nothing, so exactly-once was not exercised",
                self.input_records_read.max(self.inputs.len() as u64)
            ));
        }
        self.against_offsets(&places, &mut anomalies);
        let partitions: BTreeSet<i32> = self.inputs.keys().map(|p| p.0).collect();
        self.stats.keys = partitions.len() as u64;
        let workload = self.zombie_stats().map(WorkloadStats::Zombies);
        Findings {
            anomalies,
            durability: DurabilityReport::empty(),
            linearizability: LinearizabilitySummary::default(),
            stats: self.stats,
            warnings: self.warnings,
            workload_stats: workload,
        }
    }
}
