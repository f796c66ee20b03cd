//! Operations keep flowing while a fault is in force (issue #21), through the real binaries:
//! a single node paused for 14 s blocks every send, yet the schedule keeps handing ops to
//! fresh processes (more ops open at once than `--concurrency`), processes whose op ended
//! `info` are retired and never reused, and run.json reports the achieved rate of the fault
//! window; a process whose op ended is reused rather than replaced. Everything is counted in
//! the history, not timed.

mod support;

use std::collections::{BTreeMap, BTreeSet};
use std::process::Command;

use logjam_history::{Function, HistoryReader, Op, OpType, Process};

#[test]
fn a_long_pause_does_not_stop_the_schedule() {
    let _guard = support::one_cluster_at_a_time();
    let results = tempfile::tempdir().unwrap();
    let script = results.path().join("pause.txt");
    std::fs::write(&script, "2 pause all\n16 resume\n").unwrap();
    let output = Command::new(env!("CARGO_BIN_EXE_logjam"))
        .arg("run")
        .arg("--results-dir")
        .arg(results.path())
        .arg("--node-binary")
        .arg(support::node_binary())
        .args([
            "--nodes",
            "1",
            "--set",
            "replication.factor=1",
            "--seed",
            "11",
            "--time-limit",
            "18",
            "--rate",
            "50",
            "--concurrency",
            "5",
            "--network",
            "loopback",
            "--nemesis-script",
        ])
        .arg(&script)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(
        output.status.code(),
        Some(0),
        "a pause loses nothing\n{stdout}\n{stderr}"
    );
    assert!(
        stderr.contains("client timeouts request.timeout.ms=3000 delivery.timeout.ms=10000"),
        "the harness's client timeouts are announced: {stderr}"
    );

    let run = results.path().join("latest");
    let ops: Vec<Op> = HistoryReader::open(run.join("history.jsonl"))
        .unwrap()
        .map(|op| op.unwrap())
        .collect();
    let time_of = |f: Function| {
        ops.iter()
            .find(|op| op.process == Process::Nemesis && op.f == f)
            .map(|op| op.time_ns)
            .unwrap_or_else(|| panic!("no {f:?} in the history"))
    };
    let (paused, resumed) = (time_of(Function::Pause), time_of(Function::Resume));
    assert!(resumed > paused + 10_000_000_000, "the pause lasted");

    // Walk the pause: ops invoked, ops open at once, processes seen, processes retired.
    let mut open: BTreeSet<u64> = BTreeSet::new();
    let mut peak_open = 0;
    let mut invoked_in_pause = 0;
    let mut processes_in_pause = BTreeSet::new();
    let mut retired_at: BTreeMap<u64, u64> = BTreeMap::new();
    for op in &ops {
        let Process::Client(process) = op.process else {
            continue;
        };
        let in_pause = (paused..resumed).contains(&op.time_ns);
        if op.op_type == OpType::Invoke {
            if let Some(at) = retired_at.get(&process.0) {
                panic!(
                    "process {} invoked {:?} after its info at {at} ns: a retired process is never reused",
                    process.0, op.f
                );
            }
            assert!(open.insert(process.0), "one open op per process");
            if in_pause {
                invoked_in_pause += 1;
                processes_in_pause.insert(process.0);
                peak_open = peak_open.max(open.len());
            }
        } else {
            open.remove(&process.0);
            if op.op_type == OpType::Info && op.f != Function::FinalPoll {
                retired_at.insert(process.0, op.time_ns);
            }
        }
    }
    // With 5 processes each stuck in a send, at most 5 ops could be open and a handful
    // invoked; the schedule keeps going with fresh processes instead.
    assert!(
        peak_open > 5,
        "more ops open at once than --concurrency while sends are blocked: {peak_open}"
    );
    assert!(
        invoked_in_pause >= 60,
        "the schedule kept handing out ops during the 14 s pause (target 700): {invoked_in_pause}"
    );
    assert!(
        processes_in_pause.len() > 5,
        "fresh processes took ops while others were blocked: {processes_in_pause:?}"
    );

    // run.json: the timeouts, the schedule and the pause's window.
    let run_json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(run.join("run.json")).unwrap()).unwrap();
    assert_eq!(
        run_json["client_defaults"]["delivery.timeout.ms"], "10000",
        "{run_json}"
    );
    assert!(run_json["schedule"]["peak_open"].as_u64().unwrap() > 5);
    let windows = run_json["rates"]["fault_windows"].as_array().unwrap();
    assert_eq!(windows.len(), 1, "{windows:?}");
    assert_eq!(windows[0]["fault"], "pause n1");
    let in_faults = &run_json["rates"]["in_faults"];
    assert!(in_faults["seconds"].as_f64().unwrap() > 10.0, "{in_faults}");
    let summary = std::fs::read_to_string(run.join("summary.txt")).unwrap();
    assert!(
        summary.contains("while faults were in force"),
        "the summary reports the rate inside faults: {summary}"
    );
}

/// A process whose op ended is used again by the next ops (#19): the schedule starts a fresh
/// process only when every live one is busy (or one was retired after `info`, or closed after
/// sitting idle), so the process ids in the history stay within the most ops ever open plus
/// the retired and the idle-closed ones. Closing every process beyond `--concurrency` the
/// moment it finished (the old schedule) started thousands of fresh processes, each with new
/// connections, and broke this bound.
#[test]
fn finished_processes_are_reused() {
    let _guard = support::one_cluster_at_a_time();
    let results = tempfile::tempdir().unwrap();
    let output = Command::new(env!("CARGO_BIN_EXE_logjam"))
        .arg("run")
        .arg("--results-dir")
        .arg(results.path())
        .arg("--node-binary")
        .arg(support::node_binary())
        .args([
            "--nodes",
            "1",
            "--set",
            "replication.factor=1",
            "--seed",
            "12",
            "--time-limit",
            "8",
            "--rate",
            "300",
            "--concurrency",
            "2",
            "--network",
            "loopback",
            "--nemesis",
            "none",
        ])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(0), "{stderr}");

    let run = results.path().join("latest");
    let ops: Vec<Op> = HistoryReader::open(run.join("history.jsonl"))
        .unwrap()
        .map(|op| op.unwrap())
        .collect();
    let mut open: BTreeSet<u64> = BTreeSet::new();
    let mut peak_open = 0;
    let mut processes = BTreeSet::new();
    let mut retired = 0u64;
    let mut invoked = 0u64;
    for op in &ops {
        let Process::Client(process) = op.process else {
            continue;
        };
        if matches!(op.f, Function::FinalPoll | Function::LogEnd) {
            continue;
        }
        if op.op_type == OpType::Invoke {
            open.insert(process.0);
            processes.insert(process.0);
            peak_open = peak_open.max(open.len());
            invoked += 1;
        } else {
            open.remove(&process.0);
            retired += u64::from(op.op_type == OpType::Info);
        }
    }
    let run_json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(run.join("run.json")).unwrap()).unwrap();
    let closed_idle = run_json["schedule"]["closed_idle"].as_u64().unwrap();
    assert!(invoked >= 1000, "the run did its ops: {invoked}");
    assert!(
        peak_open > 2,
        "more ops were open at once than --concurrency, so fresh processes were needed: {peak_open}"
    );
    let bound = peak_open as u64 + retired + closed_idle;
    assert!(
        processes.len() as u64 <= bound,
        "{} processes for {invoked} ops: more than the peak of open ops ({peak_open}) plus the \
         retired ({retired}) and idle-closed ({closed_idle}) ones",
        processes.len()
    );
}
