//! The achieved client op rate of a run, overall and per fault window: did the faults get
//! exercised? Pure and sync: a pass over the history's ops between the workload phase's start
//! and end (history times).
//!
//! A client op counts where it completed (`ok`, `fail` or `info`; the scheduling artefact
//! `crash` and the final phase's ops do not count). A fault window runs from a nemesis fault
//! op that happened (`info`) to the undo that puts it right (`restart` for kill, power-loss
//! and corrupt; `start` for stop; `resume` for pause; `heal` for any partition; `disk-free`
//! for disk-full), or to the end of the workload phase; an undo ends every window of its kind
//! still open, as a scripted undo does. Windows may overlap (scripts); an op completing while
//! several are open counts in each, and once in the "in faults" total. Ops completing while
//! no fault is in force count as "between faults".

use logjam_history::{Function, Op, OpType, Process};
use serde::{Deserialize, Serialize};

/// Client completions by type.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Counts {
    /// `ok` completions.
    pub ok: u64,
    /// `fail` completions.
    pub fail: u64,
    /// `info` completions.
    pub info: u64,
}

impl Counts {
    fn add(&mut self, op_type: OpType) {
        match op_type {
            OpType::Ok => self.ok += 1,
            OpType::Fail => self.fail += 1,
            OpType::Info => self.info += 1,
            OpType::Invoke => {}
        }
    }

    /// Every completion.
    pub fn total(&self) -> u64 {
        self.ok + self.fail + self.info
    }
}

/// Completions over a stretch of time, and their rate.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct Span {
    /// Seconds the stretch lasted.
    pub seconds: f64,
    /// Completions in it.
    pub counts: Counts,
    /// Completions per second (0 for an empty stretch).
    pub ops_per_second: f64,
}

impl Span {
    fn finish(&mut self, seconds: f64) {
        self.seconds = seconds;
        self.ops_per_second = if seconds > 0.0 {
            self.counts.total() as f64 / seconds
        } else {
            0.0
        };
    }
}

/// One fault, while it was in force.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FaultWindow {
    /// The fault and its targets, e.g. `kill n2`.
    pub fault: String,
    /// Seconds into the workload phase it started.
    pub start_s: f64,
    /// What happened while it was in force.
    #[serde(flatten)]
    pub span: Span,
}

/// The achieved rate of a run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Rates {
    /// The rate the run asked for (ops/s over all processes).
    pub target_ops_per_second: f64,
    /// The whole workload phase.
    pub overall: Span,
    /// While at least one fault was in force.
    pub in_faults: Span,
    /// While no fault was in force.
    pub between_faults: Span,
    /// Each fault window.
    pub fault_windows: Vec<FaultWindow>,
    /// Set when faults were in force but no client op completed during any of them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub warning: Option<String>,
}

/// The undo that ends a fault of this name, if it is one.
fn undo_of(fault: &str) -> Option<&'static str> {
    match fault {
        "kill" | "power-loss" | "corrupt" => Some("restart"),
        "stop" => Some("start"),
        "pause" => Some("resume"),
        "disk-full" => Some("disk-free"),
        "isr-shrink-kill" | "isr-shrink-power-loss" => Some("heal-restart"),
        name if name == "partition" || name.starts_with("partition-") => Some("heal"),
        _ => None,
    }
}

fn targets(op: &Op) -> String {
    match &op.value {
        logjam_history::OpValue::Json(value) => value["targets"]
            .as_array()
            .map(|names| {
                names
                    .iter()
                    .filter_map(|name| name.as_str())
                    .collect::<Vec<_>>()
                    .join(",")
            })
            .unwrap_or_default(),
        _ => String::new(),
    }
}

/// The rates of the workload phase `[start_ns, end_ns]` (history times) of `ops`, which
/// must come in history order.
pub fn measure(
    ops: impl IntoIterator<Item = Op>,
    start_ns: u64,
    end_ns: u64,
    target_ops_per_second: f64,
) -> Rates {
    let seconds = |ns: u64| ns as f64 / 1e9;
    let mut overall = Span::default();
    let mut in_faults = Span::default();
    let mut between = Span::default();
    // (window, its undo, when it started), while open.
    let mut open: Vec<(FaultWindow, &'static str, u64)> = Vec::new();
    let mut closed: Vec<FaultWindow> = Vec::new();
    let mut fault_ns = 0u64;
    // When the current stretch of "some fault in force" began.
    let mut faulted_since: Option<u64> = None;
    let close = |window: &mut FaultWindow, from: u64, at: u64| {
        window
            .span
            .finish(seconds(at.clamp(start_ns, end_ns) - from));
    };
    for op in ops {
        let at = op.time_ns;
        if op.process == Process::Nemesis {
            if op.op_type != OpType::Info {
                continue;
            }
            let name = op.f.as_str();
            if let Some(undo) = undo_of(name) {
                if at >= end_ns {
                    continue;
                }
                let from = at.max(start_ns);
                if open.is_empty() {
                    faulted_since = Some(from);
                }
                let window = FaultWindow {
                    fault: format!("{name} {}", targets(&op)).trim_end().to_owned(),
                    start_s: seconds(from - start_ns),
                    span: Span::default(),
                };
                open.push((window, undo, from));
            } else if open.iter().any(|(_, undo, _)| *undo == name) {
                let (done, kept): (Vec<_>, Vec<_>) =
                    open.into_iter().partition(|(_, undo, _)| *undo == name);
                open = kept;
                for (mut window, _, from) in done {
                    close(&mut window, from, at);
                    closed.push(window);
                }
                if open.is_empty()
                    && let Some(since) = faulted_since.take()
                {
                    fault_ns += at.clamp(start_ns, end_ns) - since;
                }
            }
            continue;
        }
        if op.op_type == OpType::Invoke
            || matches!(
                op.f,
                Function::Crash | Function::FinalPoll | Function::LogEnd
            )
            || at < start_ns
            || at > end_ns
        {
            continue;
        }
        overall.counts.add(op.op_type);
        if open.is_empty() {
            between.counts.add(op.op_type);
        } else {
            in_faults.counts.add(op.op_type);
            for (window, _, _) in &mut open {
                window.span.counts.add(op.op_type);
            }
        }
    }
    for (mut window, _, from) in open {
        close(&mut window, from, end_ns);
        closed.push(window);
    }
    if let Some(since) = faulted_since {
        fault_ns += end_ns.saturating_sub(since);
    }
    closed.sort_by(|a, b| a.start_s.total_cmp(&b.start_s));
    let total_ns = end_ns.saturating_sub(start_ns);
    overall.finish(seconds(total_ns));
    in_faults.finish(seconds(fault_ns));
    between.finish(seconds(total_ns.saturating_sub(fault_ns)));
    let warning = (!closed.is_empty() && in_faults.counts.total() == 0).then(|| {
        format!(
            "no client op completed while faults were in force ({} fault window(s), {:.1} s): \
             the faults were not exercised",
            closed.len(),
            in_faults.seconds
        )
    });
    Rates {
        target_ops_per_second,
        overall,
        in_faults,
        between_faults: between,
        fault_windows: closed,
        warning,
    }
}

impl Rates {
    /// The lines the run's summary prints.
    pub fn summary(&self) -> String {
        let span = |span: &Span| {
            format!(
                "{:.1} ops/s over {:.1} s ({} ok, {} fail, {} info)",
                span.ops_per_second,
                span.seconds,
                span.counts.ok,
                span.counts.fail,
                span.counts.info
            )
        };
        let share = |span: &Span| {
            if self.target_ops_per_second > 0.0 {
                format!(
                    ", {:.0}% of the target",
                    100.0 * span.ops_per_second / self.target_ops_per_second
                )
            } else {
                String::new()
            }
        };
        let mut text = format!(
            "achieved rate (target {} ops/s): {}{}\n  while faults were in force: {}{}\n  between faults: {}\n",
            self.target_ops_per_second,
            span(&self.overall),
            share(&self.overall),
            span(&self.in_faults),
            share(&self.in_faults),
            span(&self.between_faults),
        );
        for window in &self.fault_windows {
            text.push_str(&format!(
                "  {:>6.1} s {}: {}\n",
                window.start_s,
                window.fault,
                span(&window.span)
            ));
        }
        if let Some(warning) = &self.warning {
            text.push_str(&format!("WARNING: {warning}\n"));
        }
        text
    }
}

#[cfg(test)]
mod tests {
    use logjam_history::{OpIndex, OpValue, ProcessId};

    use super::*;

    fn op(ms: u64, process: Process, op_type: OpType, f: &str, targets: &[&str]) -> Op {
        Op {
            index: OpIndex(0),
            time_ns: ms * 1_000_000,
            process,
            op_type,
            f: Function::from_name(f),
            value: OpValue::Json(serde_json::json!({ "targets": targets })),
            error: None,
        }
    }

    fn client(ms: u64, op_type: OpType) -> Op {
        op(ms, Process::Client(ProcessId(0)), op_type, "send", &[])
    }

    #[test]
    fn completions_are_split_between_fault_windows_and_the_time_between() {
        let n = Process::Nemesis;
        let ops = vec![
            client(500, OpType::Invoke),
            client(1_000, OpType::Ok),
            op(2_000, n, OpType::Info, "kill", &["n2"]),
            client(2_500, OpType::Ok),
            client(3_000, OpType::Info),
            client(3_100, OpType::Info),
            op(3_500, n, OpType::Info, "leader-change", &[]),
            op(4_000, n, OpType::Info, "restart", &["n2"]),
            client(5_000, OpType::Fail),
            op(6_000, n, OpType::Fail, "pause", &["n1"]),
            op(7_000, n, OpType::Info, "partition-one", &["n1", "n2", "n3"]),
            client(8_000, OpType::Ok),
            client(12_000, OpType::Ok),
        ];
        let rates = measure(ops, 0, 10_000_000_000, 10.0);
        assert_eq!(
            rates.overall.counts,
            Counts {
                ok: 3,
                fail: 1,
                info: 2
            }
        );
        assert!((rates.overall.ops_per_second - 0.6).abs() < 1e-9);
        assert_eq!(
            rates.fault_windows.len(),
            2,
            "the failed pause is no window"
        );
        let kill = &rates.fault_windows[0];
        assert_eq!(kill.fault, "kill n2");
        assert_eq!(
            kill.span.counts,
            Counts {
                ok: 1,
                fail: 0,
                info: 2
            }
        );
        assert!((kill.span.seconds - 2.0).abs() < 1e-9);
        let partition = &rates.fault_windows[1];
        assert_eq!(partition.fault, "partition-one n1,n2,n3");
        assert!(
            (partition.span.seconds - 3.0).abs() < 1e-9,
            "cut at the end"
        );
        assert_eq!(
            partition.span.counts.total(),
            1,
            "the op after the end is left out"
        );
        assert!((rates.in_faults.seconds - 5.0).abs() < 1e-9);
        assert_eq!(rates.in_faults.counts.total(), 4);
        assert_eq!(
            rates.between_faults.counts,
            Counts {
                ok: 1,
                fail: 1,
                info: 0
            }
        );
        assert!(rates.warning.is_none());
        assert!(rates.summary().contains("kill n2: 1.5 ops/s over 2.0 s"));
    }

    #[test]
    fn fault_windows_without_a_completed_op_give_a_warning() {
        let n = Process::Nemesis;
        let ops = vec![
            client(100, OpType::Ok),
            op(1_000, n, OpType::Info, "pause", &["n1"]),
            client(1_100, OpType::Invoke),
            op(4_000, n, OpType::Info, "resume", &["n1"]),
            client(4_100, OpType::Info),
        ];
        let rates = measure(ops, 0, 5_000_000_000, 10.0);
        assert_eq!(rates.in_faults.counts.total(), 0);
        let warning = rates.warning.as_deref().expect("a warning");
        assert!(warning.contains("no client op completed"), "{warning}");
        assert!(rates.summary().contains("WARNING"));
        // No faults at all: nothing to warn about.
        let quiet = measure(vec![client(100, OpType::Ok)], 0, 1_000_000_000, 10.0);
        assert!(quiet.warning.is_none());
        assert!(quiet.fault_windows.is_empty());
    }
}
