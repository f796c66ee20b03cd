//! `--workload txn` end to end against a real three-node cluster, proven both ways: fault-free
//! runs under Transactions V2 (the node's default) and V1 end valid with committed and
//! deliberately aborted transactions in the history, and the `skip-abort-marker` canary
//! (aborted transactions left open, so under TV1 the next commit exposes them) is caught as
//! `aborted-read`, or as `hanging-transaction` where no commit came back for them. Every run's report carries the read-committed checker's figures: polls
//! whose fetch ranges (LSO, leader epoch) it checked. The `delayed-produce-tv2` scenario cuts
//! the harness's own traffic to a leader so Produces of aborted transactions arrive late, and
//! shows transactions V2 refusing them.

mod support;

use std::path::Path;
use std::process::Command;

use logjam_history::{Function, HistoryReader, OpType};

/// Runs a fault-free txn test of `seconds` with `sets`; returns the exit code and the run
/// directory.
fn txn_run(results: &Path, seconds: u32, sets: &[&str]) -> (i32, std::path::PathBuf) {
    let _cluster = support::one_cluster_at_a_time();
    let mut command = Command::new(env!("CARGO_BIN_EXE_logjam"));
    command
        .arg("run")
        .arg("--results-dir")
        .arg(results)
        .arg("--node-binary")
        .arg(support::node_binary())
        .args(["--workload", "txn", "--nemesis", "none"])
        .args(["--time-limit", &seconds.to_string()])
        .args(["--seed", "11"]);
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
            "txn run ended {code}\n{}",
            String::from_utf8_lossy(&output.stderr)
        );
    }
    (code, run)
}

/// Committed and deliberately aborted transactions, as the history shows them.
fn outcomes(run: &Path) -> (usize, usize) {
    let reader = HistoryReader::open(run.join("history.jsonl")).expect("history opens");
    assert_eq!(reader.header().workload, "txn");
    let (mut committed, mut aborted) = (0, 0);
    for op in reader {
        let op = op.expect("every line is well formed");
        if op.f == Function::Txn && op.op_type == OpType::Ok {
            committed += 1;
        }
        if op.op_type == OpType::Fail
            && op
                .error
                .as_ref()
                .is_some_and(|e| e.to_string().contains("aborted on purpose"))
        {
            aborted += 1;
        }
    }
    (committed, aborted)
}

/// The anomaly kinds the policy counts as bugs.
fn bad_kinds(run: &Path) -> serde_json::Value {
    let report = std::fs::read_to_string(run.join("report.json")).expect("report.json");
    let report: serde_json::Value = serde_json::from_str(&report).expect("report.json parses");
    report["bad_kinds"].clone()
}

/// The read-committed checker's figures in report.json.
fn read_committed_stats(run: &Path) -> serde_json::Value {
    let report = std::fs::read_to_string(run.join("report.json")).expect("report.json");
    let report: serde_json::Value = serde_json::from_str(&report).expect("report.json parses");
    report["read_committed"].clone()
}

fn valid_run(sets: &[&str]) {
    let results = tempfile::tempdir().expect("tempdir");
    let (code, run) = txn_run(results.path(), 20, sets);
    let bad = bad_kinds(&run);
    assert_eq!(code, 0, "a fault-free txn run is valid; bad: {bad}");
    let rc = read_committed_stats(&run);
    eprintln!("read_committed: {rc}");
    for figure in ["polls_checked", "lsos_seen", "records_checked"] {
        assert!(
            rc[figure].as_u64().is_some_and(|n| n > 100),
            "the read-committed checker checked the polls' fetch ranges: {rc}"
        );
    }
    let (committed, aborted) = outcomes(&run);
    assert!(committed > 100, "transactions committed: {committed}");
    assert!(aborted > 10, "transactions aborted on purpose: {aborted}");
}

#[test]
fn a_fault_free_run_under_transactions_v2_is_valid() {
    valid_run(&[]);
}

#[test]
fn a_fault_free_run_under_transactions_v1_is_valid() {
    valid_run(&["transaction.version=1"]);
}

#[test]
fn the_skip_abort_marker_canary_is_caught_as_aborted_read_or_a_hanging_transaction() {
    let results = tempfile::tempdir().expect("tempdir");
    // Under TV1 the producer's next transaction (same epoch) joins the one left open on the
    // partition and its commit marker commits the aborted records too: aborted-read. A
    // producer that never returns to the partition (its process closed idle or crashed)
    // leaves it open for good, and every read_committed reader stops at it: with a 2 s
    // transaction.timeout.ms, a hold from the run's first seconds outlives every clock by the
    // final reads, hanging-transaction. Which comes first is the scheduler's timing; a run
    // with neither (only unseen-lost) would be the checkers missing the canary.
    let sets = [
        "logjam.canaries=skip-abort-marker",
        "transaction.version=1",
        "transaction.timeout.ms=2000",
    ];
    let (code, run) = txn_run(results.path(), 25, &sets);
    let bad = bad_kinds(&run);
    assert_eq!(code, 1, "the canary's run is invalid; bad: {bad}");
    let kinds: Vec<&str> = bad
        .as_array()
        .map(|kinds| kinds.iter().filter_map(|k| k.as_str()).collect())
        .unwrap_or_default();
    assert!(
        kinds.contains(&"aborted-read") || kinds.contains(&"hanging-transaction"),
        "aborted transactions left open are read (aborted-read) or hold the LSO for good \
         (hanging-transaction): {bad}"
    );
    let stalls = &read_committed_stats(&run)["lso_stalls"];
    assert!(
        stalls.as_array().is_some_and(|s| !s.is_empty()),
        "the open transactions' holds on the LSO are listed: {stalls}"
    );
}

/// KAFKA-17754's class in the lab: the harness's frames to partition 0's leader are cut, so
/// sends wait in TCP and their transactions are aborted; at the heal the late Produces arrive
/// and, under transactions V2, every one is refused (INVALID_PRODUCER_EPOCH, logged by the
/// leader) and the run stays valid. Without the client cut nothing would be late, and without
/// the epoch bump the leader would append them: either way no refusal would be counted.
#[test]
fn a_late_produce_of_an_aborted_transaction_is_refused_under_transactions_v2() {
    let (_, run, _results) = support::shown_scenario("delayed-produce-tv2");
    let judged = support::read_json(&run.join("scenario.json"));
    let refused = judged["checks"]
        .as_array()
        .expect("checks")
        .iter()
        .find(|check| check["expect"] == "stale-produce-refused:1")
        .expect("the refusal was judged");
    assert_eq!(refused["holds"], true, "{judged}");
    // The cut was in the history, and sends did time out behind it.
    let reader = HistoryReader::open(run.join("history.jsonl")).expect("history opens");
    let (mut cuts, mut timed_out) = (0, 0);
    for op in reader {
        let op = op.expect("well formed");
        if op.f == Function::from_name("partition-clients") {
            cuts += 1;
        }
        if op.f == Function::Txn
            && op.op_type == OpType::Fail
            && op
                .error
                .as_ref()
                .is_some_and(|e| e.to_string().contains("timed out"))
        {
            timed_out += 1;
        }
    }
    assert_eq!(cuts, 2, "cut-clients and cut-clients-new");
    assert!(timed_out > 0, "no send timed out behind the cut");
}

/// delayed-produce-tv1: the same late batch under transactions V1 without verification, from
/// a client older than KIP-360, is appended after the abort marker: it commits with the
/// producer's next transaction (the transactional checker names the aborted read) or nothing
/// ever ends it (the read-committed checker names the hanging transaction).
#[test]
fn a_late_produce_from_a_pre_kip360_client_joins_the_next_transaction_or_hangs_under_v1() {
    let (stdout, run, _results) = support::shown_scenario("delayed-produce-tv1");
    let report = support::read_json(&run.join("report.json"));
    assert_eq!(report["verdict"], "invalid", "{stdout}");
    let bad = report["bad_kinds"].as_array().expect("bad_kinds");
    let aborted_read = bad.iter().any(|kind| kind == "aborted-read");
    let hanging = bad.iter().any(|kind| kind == "hanging-transaction");
    assert!(aborted_read || hanging, "{stdout}");
    if aborted_read {
        // The aborted read's witness names a transaction that ended `fail`: its own client
        // saw it aborted. A transaction of sends only is tagged `send` (Jepsen's `tag-rw`).
        let witness = stdout
            .lines()
            .find(|line| line.trim_start().starts_with("- aborted-read:"))
            .unwrap_or_else(|| panic!("no aborted-read witness:\n{stdout}"));
        assert!(
            witness.contains("fail txn by process") || witness.contains("fail send by process"),
            "{witness}"
        );
    }
}
