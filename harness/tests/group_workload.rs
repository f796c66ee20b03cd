//! `--workload group` end to end against a real three-node cluster: a fault-free run of the
//! queue in subscribe mode on one consumer group is valid, polls read through the group, and
//! the history's `rebalance` ops account for every poll: each key a process's poll returned
//! was assigned to that process by a rebalance it recorded before (or right after: during)
//! that poll and not revoked since. The node's `double-assign` canary (two members given the
//! same partitions in one generation) is caught as `double-assign`.

mod support;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;

use logjam_history::{Function, HistoryReader, MicroOp, OpType, OpValue, Rebalance};

/// Runs a 20 s group test with `sets`; returns the exit code and the run directory.
fn group_run(results: &Path, sets: &[&str]) -> (i32, PathBuf) {
    let _cluster = support::one_cluster_at_a_time();
    let mut command = Command::new(env!("CARGO_BIN_EXE_logjam"));
    command
        .arg("run")
        .arg("--results-dir")
        .arg(results)
        .arg("--node-binary")
        .arg(support::node_binary())
        .args(["--workload", "group", "--nemesis", "none"])
        .args(["--time-limit", "20", "--seed", "11"]);
    for set in sets {
        command.args(["--set", set]);
    }
    let output = command.output().expect("logjam runs");
    let run = std::fs::read_link(results.join("latest"))
        .map(|target| results.join(target))
        .expect("results/latest points at the run");
    let code = output.status.code().unwrap_or(-1);
    if !matches!(code, 0 | 1) {
        panic!(
            "group run ended {code}\n{}",
            String::from_utf8_lossy(&output.stderr)
        );
    }
    (code, run)
}

/// What the history shows about the group's members.
#[derive(Debug, Default)]
struct Membership {
    /// Ok polls, and those that returned records.
    polls: usize,
    polls_with_records: usize,
    /// Rebalances by cause.
    causes: BTreeMap<String, usize>,
    /// Processes whose polls returned records.
    readers: BTreeSet<u64>,
    /// Processes with at least one rebalance.
    rebalanced: BTreeSet<u64>,
    /// Polls that returned a key their process did not own by its recorded rebalances.
    unowned_reads: Vec<String>,
}

/// One ok op of a process, as the membership check needs it.
enum Seen {
    Rebalance(Rebalance),
    /// A poll: its index and the keys it returned records of.
    Poll(u64, Vec<i64>),
}

fn membership(run: &Path) -> Membership {
    let reader = HistoryReader::open(run.join("history.jsonl")).expect("history opens");
    assert_eq!(reader.header().workload, "group");
    let mut by_process: BTreeMap<u64, Vec<Seen>> = BTreeMap::new();
    let mut seen = Membership::default();
    for op in reader {
        let op = op.expect("every line is well formed");
        let logjam_history::Process::Client(process) = op.process else {
            continue;
        };
        if op.op_type != OpType::Ok {
            continue;
        }
        let ops = by_process.entry(process.0).or_default();
        match (&op.f, &op.value) {
            (Function::Rebalance, OpValue::Json(json)) => {
                let change: Rebalance =
                    serde_json::from_value(json.clone()).expect("a rebalance value");
                *seen.causes.entry(change.cause.clone()).or_default() += 1;
                seen.rebalanced.insert(process.0);
                ops.push(Seen::Rebalance(change));
            }
            (Function::Poll, value) => {
                seen.polls += 1;
                let keys: Vec<i64> = value
                    .micro_ops()
                    .iter()
                    .filter_map(|micro| match micro {
                        MicroOp::Poll { reads: Some(reads) } => Some(reads),
                        _ => None,
                    })
                    .flatten()
                    .filter(|kr| !kr.records.is_empty())
                    .map(|kr| kr.key.0)
                    .collect();
                if !keys.is_empty() {
                    seen.polls_with_records += 1;
                    seen.readers.insert(process.0);
                }
                ops.push(Seen::Poll(op.index.0, keys));
            }
            _ => {}
        }
    }
    // A rebalance is recorded right after the op during which the client saw it: a poll may
    // read the keys the rebalances right after it assigned.
    for (process, ops) in &by_process {
        let mut owned: BTreeSet<i64> = BTreeSet::new();
        for (at, op) in ops.iter().enumerate() {
            match op {
                Seen::Rebalance(change) => {
                    for key in &change.revoked {
                        owned.remove(&key.0);
                    }
                    owned.extend(change.assigned.iter().map(|key| key.0));
                }
                Seen::Poll(index, keys) => {
                    let mut allowed = owned.clone();
                    for next in &ops[at + 1..] {
                        let Seen::Rebalance(change) = next else { break };
                        allowed.extend(change.assigned.iter().map(|key| key.0));
                    }
                    if keys.iter().any(|key| !allowed.contains(key)) {
                        seen.unowned_reads.push(format!(
                            "op {index}: process {process} read keys {keys:?} owning {allowed:?}"
                        ));
                    }
                }
            }
        }
    }
    seen
}

/// The anomaly kinds the policy counts as bugs.
fn bad_kinds(run: &Path) -> serde_json::Value {
    let report = std::fs::read_to_string(run.join("report.json")).expect("report.json");
    let report: serde_json::Value = serde_json::from_str(&report).expect("report.json parses");
    report["bad_kinds"].clone()
}

#[test]
fn a_fault_free_group_run_is_valid_and_its_rebalances_account_for_every_poll() {
    let results = tempfile::tempdir().expect("tempdir");
    let (code, run) = group_run(results.path(), &[]);
    let bad = bad_kinds(&run);
    assert_eq!(code, 0, "a fault-free group run is valid; bad: {bad}");
    let seen = membership(&run);
    eprintln!(
        "polls {} ({} with records), rebalances by cause {:?}, {} readers",
        seen.polls,
        seen.polls_with_records,
        seen.causes,
        seen.readers.len()
    );
    assert!(seen.polls > 100, "polls: {}", seen.polls);
    assert!(
        seen.polls_with_records > 10,
        "members read through the group: {seen:?}"
    );
    assert!(
        seen.causes.get("join").is_some_and(|n| *n >= 1),
        "members joined: {:?}",
        seen.causes
    );
    let silent: Vec<&u64> = seen.readers.difference(&seen.rebalanced).collect();
    assert!(
        silent.is_empty(),
        "every process that read through the group recorded its rebalances: {silent:?}"
    );
    assert!(
        seen.unowned_reads.is_empty(),
        "every poll read only keys its process owned: {:?}",
        &seen.unowned_reads[..seen.unowned_reads.len().min(5)]
    );
}

#[test]
fn the_double_assign_canary_is_caught_as_double_assign() {
    let results = tempfile::tempdir().expect("tempdir");
    // The coordinator gives one other member the leader's assignment: two members own the
    // same partitions in one generation, which their recorded rebalances show.
    let (code, run) = group_run(results.path(), &["logjam.canaries=double-assign"]);
    let bad = bad_kinds(&run);
    assert_eq!(code, 1, "the canary's run is invalid; bad: {bad}");
    assert_eq!(
        bad,
        serde_json::json!(["double-assign"]),
        "two members owning one key in one generation is double-assign, and only that"
    );
}
