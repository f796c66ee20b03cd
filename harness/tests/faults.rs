//! Every fault kind in a short real run of `logjam run` on a 3-node namespace lab (5 nodes
//! for the majorities ring): the run
//! ends with a verdict, the history is well formed, and every fault appears with its undo on
//! the same targets. And the disk fault is real: with Kafka's default flush settings a power
//! loss of every node loses acknowledged writes that a kill -9 of every node keeps.
//!
//! The runs take a lock under `cargo test`; under nextest the `lab` group bounds them (`support`).

mod support;

use std::path::Path;
use std::process::{Command, Output};

use logjam_history::{HistoryReader, Op, OpType, Process};

fn logjam_run(results: &Path, extra: &[&str]) -> Output {
    logjam_run_on(3, results, extra)
}

fn logjam_run_on(nodes: usize, results: &Path, extra: &[&str]) -> Output {
    let _guard = support::one_cluster_at_a_time();
    Command::new(env!("CARGO_BIN_EXE_logjam"))
        .arg("run")
        .arg("--results-dir")
        .arg(results)
        .arg("--node-binary")
        .arg(support::node_binary())
        .args([
            "--nodes",
            &nodes.to_string(),
            "--seed",
            "11",
            "--rate",
            "100",
        ])
        .args(extra)
        .output()
        .expect("logjam runs")
}

fn history(results: &Path) -> Vec<Op> {
    let reader = HistoryReader::open(results.join("latest/history.jsonl")).expect("history opens");
    let ops: Vec<Op> = reader
        .map(|op| op.expect("every line is well formed"))
        .collect();
    assert!(
        ops.windows(2)
            .all(|pair| pair[0].index < pair[1].index && pair[0].time_ns <= pair[1].time_ns),
        "indexes and times increase"
    );
    ops
}

fn targets(op: &Op) -> serde_json::Value {
    support::value(op)["targets"].clone()
}

/// Runs `fault` for a short while and checks the history's nemesis ops: at least one fault
/// injected, each undone on the same targets before the next and before the final reads.
fn run_fault(fault: &str, undo: &str, expect_valid: bool) {
    run_fault_on(3, fault, undo, expect_valid);
}

fn run_fault_on(nodes: usize, fault: &str, undo: &str, expect_valid: bool) {
    let results = tempfile::tempdir().unwrap();
    let output = logjam_run_on(
        nodes,
        results.path(),
        &[
            "--time-limit",
            "12",
            "--nemesis",
            fault,
            "--nemesis-interval",
            "2",
        ],
    );
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    let code = output.status.code();
    assert!(
        matches!(code, Some(0..=2)),
        "{fault}: the run ends with a verdict, not a harness failure ({code:?})\n{stdout}\n{stderr}"
    );
    if expect_valid {
        assert_eq!(
            code,
            Some(0),
            "{fault}: acks=all on 3 replicas loses nothing\n{stdout}\n{stderr}"
        );
    }
    let ops = history(results.path());
    let nemesis: Vec<&Op> = ops
        .iter()
        .filter(|op| {
            op.process == Process::Nemesis
                && op.op_type == OpType::Info
                && op.f.as_str() != "leader-change"
        })
        .collect();
    let injected = nemesis.iter().filter(|op| op.f.as_str() == fault).count();
    assert!(
        injected >= 1,
        "{fault} was injected at least once\n{stderr}"
    );
    for pair in nemesis.chunks(2) {
        let [done, undone] = pair else {
            panic!("{fault}: a fault without its undo: {:?}", pair[0])
        };
        assert_eq!(done.f.as_str(), fault, "{pair:?}");
        assert_eq!(undone.f.as_str(), undo, "{pair:?}");
        assert_eq!(
            targets(done),
            targets(undone),
            "the undo has the fault's targets"
        );
        if matches!(undo, "restart" | "start") {
            assert_eq!(
                support::value(undone)["started"],
                targets(done),
                "the undo brought the targets back up"
            );
        }
    }
    let last_undo = nemesis.last().unwrap().index;
    assert!(
        ops.iter()
            .filter(|op| op.f.as_str() == "final-poll")
            .all(|op| op.index > last_undo),
        "the final reads come after every undo"
    );
    assert!(
        std::fs::read_to_string(results.path().join("latest/report.json"))
            .unwrap()
            .contains("\"verdict\""),
        "a report is stored"
    );
}

#[test]
fn kill_is_undone_by_restart() {
    run_fault("kill", "restart", true);
}

#[test]
fn clean_stop_is_undone_by_start() {
    run_fault("stop", "start", true);
}

#[test]
fn pause_is_undone_by_resume() {
    run_fault("pause", "resume", true);
}

#[test]
fn partitions_of_every_kind_are_healed() {
    for kind in ["one", "minority", "bridge", "leader", "one-way"] {
        run_fault(&format!("partition-{kind}"), "heal", true);
    }
}

#[test]
fn majorities_ring_on_five_nodes_is_healed() {
    run_fault_on(5, "partition-majorities-ring", "heal", true);
}

#[test]
fn corrupt_is_undone_by_restart() {
    // Not expected valid: with ELR off (Kafka 4.0's default) a damaged replica that is the
    // last one standing in the ISR is elected and its lost tail is lost for good (see the
    // node's tests/unclean_shutdown.rs), which is Kafka's documented behaviour.
    run_fault("corrupt", "restart", false);
}

#[test]
fn disk_full_is_undone_by_freeing_it() {
    run_fault("disk-full", "disk-free", false);
}

#[test]
fn power_loss_is_undone_by_restart() {
    run_fault("power-loss", "restart", false);
}

fn scripted(results: &Path, script: &str) -> (Option<i32>, String) {
    let file = results.join("script.txt");
    std::fs::write(&file, script).unwrap();
    let output = logjam_run(
        results,
        &[
            "--time-limit",
            "10",
            "--nemesis-script",
            file.to_str().unwrap(),
        ],
    );
    let report = std::fs::read_to_string(results.join("latest/report.json")).unwrap_or_default();
    assert!(
        !report.is_empty(),
        "a report is stored\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    (output.status.code(), report)
}

/// The number of acknowledged writes the report calls lost.
fn lost_writes(report: &str) -> u64 {
    let report: serde_json::Value = serde_json::from_str(report).unwrap();
    report["durability"]["lost"]
        .as_u64()
        .unwrap_or_else(|| panic!("report.json has durability.lost: {report:#}"))
}

#[test]
fn power_loss_of_every_node_loses_acknowledged_writes_that_kill_keeps() {
    let killed = tempfile::tempdir().unwrap();
    let (code, report) = scripted(killed.path(), "6 kill all\n7 restart\n");
    assert_eq!(
        code,
        Some(0),
        "kill -9 of every node keeps the page cache: {report}"
    );
    assert_eq!(lost_writes(&report), 0);

    let powered_off = tempfile::tempdir().unwrap();
    let (code, report) = scripted(powered_off.path(), "6 power-loss all\n7 restart\n");
    assert_eq!(
        code,
        Some(1),
        "no fsync by default, so the power loss loses: {report}"
    );
    assert!(lost_writes(&report) > 0, "{report}");
}

/// Faults overlap in a script: healing a partition must not bring back a node that a kill
/// still holds down (it once did, and the unclean-election twins then raced the old leader's
/// return); the kill's own restart brings it back.
#[test]
fn healing_a_partition_leaves_a_killed_node_down() {
    let results = tempfile::tempdir().unwrap();
    let (code, report) = scripted(
        results.path(),
        "2 kill n1\n3 partition-one n2\n5 heal\n8 restart\n",
    );
    assert!(matches!(code, Some(0..=2)), "{report}");
    let ops = history(results.path());
    let undo = |f: &str| {
        ops.iter()
            .find(|op| op.process == Process::Nemesis && op.f.as_str() == f)
            .map(support::value)
            .unwrap_or_else(|| panic!("no {f} in the history"))
    };
    assert_eq!(
        undo("heal").get("started"),
        None,
        "the heal started nothing"
    );
    assert_eq!(undo("restart")["started"], serde_json::json!(["n1"]));
}
