//! One streaming pass over a run's history for its page: every client op as a latency point,
//! completions counted per time bucket and function, the faults' intervals (a fault op opens
//! one, its undo closes it), the leader watcher's changes, and the full lines of the ops that
//! anomalies name. Pure: it takes ops, never touches files or clocks.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use logjam_history::{Op, OpType, Process};

use crate::nemesis;
use logjam_history::{LEADER_CHANGE, LeadershipChange};

/// How an op ended, as the plots colour it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Outcome {
    /// It took effect.
    Ok,
    /// It certainly did not take effect.
    Fail,
    /// It may or may not have taken effect.
    Info,
}

impl Outcome {
    /// `ok`, `fail` or `info`.
    pub fn as_str(self) -> &'static str {
        match self {
            Outcome::Ok => "ok",
            Outcome::Fail => "fail",
            Outcome::Info => "info",
        }
    }
}

/// One client op: invoked at `time_s`, completed `latency_ms` later.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Point {
    /// The completion's history index.
    pub index: u64,
    /// Invoke time, seconds since the run started.
    pub time_s: f64,
    /// Invoke to completion, milliseconds.
    pub latency_ms: f64,
    /// How it ended.
    pub outcome: Outcome,
    /// Index into [`HistoryView::functions`].
    pub f: usize,
}

/// A fault from its op to its undo.
#[derive(Debug, Clone, PartialEq)]
pub struct FaultInterval {
    /// The fault's op index.
    pub index: u64,
    /// The fault's name as the history records it (`kill`, `partition-one`, ...).
    pub name: String,
    /// The nodes it hit.
    pub targets: Vec<String>,
    /// When it was injected, seconds.
    pub start_s: f64,
    /// When it was undone; `None`: never in the history.
    pub end_s: Option<f64>,
}

impl FaultInterval {
    /// `kill n2,n3`.
    pub fn label(&self) -> String {
        if self.targets.is_empty() {
            self.name.clone()
        } else {
            format!("{} {}", self.name, self.targets.join(","))
        }
    }

    /// The end, or `end` when the history never undid it.
    pub fn end_or(&self, end: f64) -> f64 {
        self.end_s.unwrap_or(end)
    }
}

/// A fault the harness tried and could not inject.
#[derive(Debug, Clone, PartialEq)]
pub struct FailedFault {
    /// Its op index.
    pub index: u64,
    /// Its name.
    pub name: String,
    /// When, seconds.
    pub time_s: f64,
    /// Why, as recorded.
    pub error: String,
}

/// One leader change the watcher saw.
#[derive(Debug, Clone, PartialEq)]
pub struct LeaderEvent {
    /// Its op index.
    pub index: u64,
    /// When, seconds.
    pub time_s: f64,
    /// What changed.
    pub change: LeadershipChange,
}

/// An op named by an anomaly, as its history line says.
#[derive(Debug, Clone, PartialEq)]
pub struct OpRow {
    /// History index.
    pub index: u64,
    /// Line number in history.jsonl (the header is line 1).
    pub line: u64,
    /// Seconds since the run started.
    pub time_s: f64,
    /// `0`, `1`, ... or `nemesis`.
    pub process: String,
    /// `invoke`, `ok`, `fail` or `info`.
    pub op_type: String,
    /// Its function.
    pub f: String,
    /// Its value, compact JSON, cut to [`VALUE_CHARS`] characters.
    pub value: String,
    /// Its error, compact JSON, if any.
    pub error: String,
}

/// Characters of an op's value kept for its table row.
pub const VALUE_CHARS: usize = 240;

/// Everything the run page draws from the history.
#[derive(Debug, Clone, Default)]
pub struct HistoryView {
    /// Client ops that completed, in completion order.
    pub points: Vec<Point>,
    /// Every client function seen, in first-seen order.
    pub functions: Vec<String>,
    /// Fault intervals in injection order.
    pub faults: Vec<FaultInterval>,
    /// Faults that could not be injected.
    pub failed_faults: Vec<FailedFault>,
    /// Leader changes per partition, in time order.
    pub leadership: BTreeMap<i64, Vec<LeaderEvent>>,
    /// The ops asked for by index.
    pub named: BTreeMap<u64, OpRow>,
    /// Time of the last op, seconds.
    pub end_s: f64,
    /// Op lines read.
    pub op_lines: u64,
}

/// Undo op names, as `nemesis` records them.
fn is_undo(f: &str) -> bool {
    [
        "restart",
        "start",
        "resume",
        "heal",
        "disk-free",
        "heal-restart",
    ]
    .contains(&f)
}

/// The undo name of a fault name, when the harness knows the fault.
fn undo_of(fault: &str) -> Option<&'static str> {
    nemesis::parse(fault, 5)
        .ok()
        .and_then(|faults| faults.first().map(|f| f.undo_name()))
}

/// Folds ops (in history order) into a [`HistoryView`]; `wanted` are the op indexes whose
/// full rows the page shows. `line_of` gives each op's line number in its file.
#[derive(Debug, Default)]
pub struct Scanner {
    view: HistoryView,
    wanted: BTreeSet<u64>,
    pending: HashMap<u64, (u64, usize)>,
    function_ids: HashMap<String, usize>,
}

impl Scanner {
    /// A scanner that keeps the rows of `wanted`.
    pub fn new(wanted: BTreeSet<u64>) -> Scanner {
        Scanner {
            wanted,
            ..Scanner::default()
        }
    }

    /// Takes the next op, read from line `line`.
    pub fn push(&mut self, op: &Op, line: u64) {
        let view = &mut self.view;
        view.op_lines += 1;
        let time_s = op.time_ns as f64 / 1e9;
        view.end_s = view.end_s.max(time_s);
        if self.wanted.contains(&op.index.0) {
            view.named.insert(op.index.0, row(op, line));
        }
        match op.process {
            Process::Client(process) => {
                if op.op_type == OpType::Invoke {
                    let name = op.f.as_str();
                    let f = match self.function_ids.get(name) {
                        Some(&f) => f,
                        None => {
                            view.functions.push(name.to_owned());
                            self.function_ids
                                .insert(name.to_owned(), view.functions.len() - 1);
                            view.functions.len() - 1
                        }
                    };
                    self.pending.insert(process.0, (op.time_ns, f));
                    return;
                }
                let Some((invoked_ns, f)) = self.pending.remove(&process.0) else {
                    return;
                };
                view.points.push(Point {
                    index: op.index.0,
                    time_s: invoked_ns as f64 / 1e9,
                    latency_ms: op.time_ns.saturating_sub(invoked_ns) as f64 / 1e6,
                    outcome: match op.op_type {
                        OpType::Ok => Outcome::Ok,
                        OpType::Fail => Outcome::Fail,
                        _ => Outcome::Info,
                    },
                    f,
                });
            }
            Process::Nemesis => self.nemesis(op, time_s),
        }
    }

    fn nemesis(&mut self, op: &Op, time_s: f64) {
        let view = &mut self.view;
        let f = op.f.as_str();
        let value = serde_json::to_value(&op.value).unwrap_or_default();
        if f == LEADER_CHANGE {
            if let Ok(change) = serde_json::from_value::<LeadershipChange>(value) {
                view.leadership
                    .entry(change.partition)
                    .or_default()
                    .push(LeaderEvent {
                        index: op.index.0,
                        time_s,
                        change,
                    });
            }
            return;
        }
        let targets: Vec<String> = value
            .get("targets")
            .and_then(|t| t.as_array())
            .map(|list| {
                list.iter()
                    .map(|t| t.as_str().map_or_else(|| t.to_string(), str::to_owned))
                    .collect()
            })
            .unwrap_or_default();
        if is_undo(f) {
            // The most recent open fault with this undo and the same targets, else with
            // this undo at all.
            let open =
                |fault: &FaultInterval| fault.end_s.is_none() && undo_of(&fault.name) == Some(f);
            let exact = view
                .faults
                .iter()
                .rposition(|fault| open(fault) && fault.targets == targets);
            let any = || view.faults.iter().rposition(open);
            if let Some(at) = exact.or_else(any) {
                view.faults[at].end_s = Some(time_s);
            }
            return;
        }
        match op.op_type {
            OpType::Fail => view.failed_faults.push(FailedFault {
                index: op.index.0,
                name: f.to_owned(),
                time_s,
                error: op.error.as_ref().map(compact).unwrap_or_default(),
            }),
            _ => view.faults.push(FaultInterval {
                index: op.index.0,
                name: f.to_owned(),
                targets,
                start_s: time_s,
                end_s: None,
            }),
        }
    }

    /// The view of every op pushed.
    pub fn finish(self) -> HistoryView {
        self.view
    }
}

fn row(op: &Op, line: u64) -> OpRow {
    // Through the whole op, so completions show sends as `[offset, value]`, as on disk.
    let mut value = serde_json::to_value(op)
        .ok()
        .and_then(|json| json.get("value").map(ToString::to_string))
        .unwrap_or_default();
    if value.chars().count() > VALUE_CHARS {
        value = value.chars().take(VALUE_CHARS).collect::<String>() + "…";
    }
    OpRow {
        index: op.index.0,
        line,
        time_s: op.time_ns as f64 / 1e9,
        process: match op.process {
            Process::Client(p) => p.0.to_string(),
            Process::Nemesis => "nemesis".to_owned(),
        },
        op_type: op.op_type.as_str().to_owned(),
        f: op.f.as_str().to_owned(),
        value,
        error: op.error.as_ref().map(compact).unwrap_or_default(),
    }
}

fn compact(value: &serde_json::Value) -> String {
    match value {
        serde_json::Value::String(text) => text.clone(),
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use logjam_history::{Function, OpValue};
    use serde_json::json;

    fn op(index: u64, ms: u64, process: Process, op_type: OpType, f: &str, value: OpValue) -> Op {
        Op {
            index: logjam_history::OpIndex(index),
            time_ns: ms * 1_000_000,
            process,
            op_type,
            f: Function::from_name(f),
            value,
            error: None,
        }
    }

    fn nemesis(index: u64, ms: u64, op_type: OpType, f: &str, targets: &[&str]) -> Op {
        op(
            index,
            ms,
            Process::Nemesis,
            op_type,
            f,
            OpValue::Json(json!({ "targets": targets })),
        )
    }

    #[test]
    fn completions_become_points_with_their_latency() {
        let mut scanner = Scanner::new(BTreeSet::from([1]));
        let client = Process::Client(logjam_history::ProcessId(3));
        scanner.push(
            &op(0, 1000, client, OpType::Invoke, "poll", OpValue::Null),
            2,
        );
        scanner.push(&op(1, 1250, client, OpType::Fail, "poll", OpValue::Null), 3);
        let view = scanner.finish();
        assert_eq!(view.functions, vec!["poll"]);
        assert_eq!(view.points.len(), 1);
        let point = view.points[0];
        assert_eq!((point.index, point.outcome), (1, Outcome::Fail));
        assert!((point.time_s - 1.0).abs() < 1e-9);
        assert!((point.latency_ms - 250.0).abs() < 1e-9);
        assert_eq!(view.named[&1].line, 3);
        assert_eq!(view.named[&1].process, "3");
        assert!(!view.named.contains_key(&0));
    }

    #[test]
    fn undos_close_the_fault_they_undo_and_failed_faults_are_no_bands() {
        let mut scanner = Scanner::new(BTreeSet::new());
        scanner.push(&nemesis(0, 1000, OpType::Info, "kill", &["n1"]), 2);
        scanner.push(
            &nemesis(1, 2000, OpType::Info, "partition-one", &["n1", "n2"]),
            3,
        );
        scanner.push(&nemesis(2, 3000, OpType::Info, "kill", &["n3"]), 4);
        scanner.push(&nemesis(3, 3500, OpType::Fail, "pause", &["n2"]), 5);
        // The kill of n1 is restarted first, though n3's is more recent.
        scanner.push(&nemesis(4, 4000, OpType::Info, "restart", &["n1"]), 6);
        scanner.push(&nemesis(5, 5000, OpType::Info, "heal", &["n1", "n2"]), 7);
        scanner.push(&nemesis(6, 9000, OpType::Info, "resume", &["n2"]), 8);
        let view = scanner.finish();
        let ends: Vec<_> = view.faults.iter().map(|f| (f.label(), f.end_s)).collect();
        assert_eq!(
            ends,
            vec![
                ("kill n1".to_owned(), Some(4.0)),
                ("partition-one n1,n2".to_owned(), Some(5.0)),
                ("kill n3".to_owned(), None),
            ]
        );
        assert_eq!(view.failed_faults.len(), 1);
        assert!((view.end_s - 9.0).abs() < 1e-9);
    }

    #[test]
    fn leader_changes_go_to_their_partition() {
        let mut scanner = Scanner::new(BTreeSet::new());
        let change = LeadershipChange {
            partition: 2,
            leader: Some("n3".into()),
            epoch: 4,
            isr: vec!["n3".into()],
            previous_leader: Some("n1".into()),
            previous_isr: vec!["n1".into()],
            unclean: true,
        };
        let value = OpValue::Json(serde_json::to_value(&change).unwrap());
        scanner.push(
            &op(0, 500, Process::Nemesis, OpType::Info, LEADER_CHANGE, value),
            2,
        );
        let view = scanner.finish();
        assert!(view.faults.is_empty());
        assert_eq!(view.leadership[&2][0].change, change);
    }
}
