//! `--workload eos` end to end against a real three-node cluster, proven both ways: a
//! fault-free pipeline (offsets committed in the output transaction, members crashing as
//! their commit returns) ends valid with every input processed exactly once, and the common
//! mistake, offsets committed with a plain
//! commit after the transaction (`logjam.eos=offsets-outside-transaction`), duplicates output
//! when a process crashes as its transaction's commit returns: caught as `eos-duplicate`.
//! The zombie pair: a member paused past its session timeout mid-transaction is refused by
//! KIP-447's fence when it wakes (`zombie-fencing`), and commits duplicates when its offsets
//! carry the group id alone (`zombie-without-group-metadata`), the witness naming the zombie.

mod support;

use std::path::{Path, PathBuf};
use std::process::Command;

use logjam_history::{Function, HistoryReader, OpType, PipelineValue};

/// Runs a 20 s eos test with `nemesis` and `sets`; returns the exit code and the run directory.
fn eos_run(results: &Path, nemesis: &str, sets: &[&str]) -> (i32, PathBuf) {
    let _cluster = support::one_cluster_at_a_time();
    let mut command = Command::new(env!("CARGO_BIN_EXE_logjam"));
    command
        .arg("run")
        .arg("--results-dir")
        .arg(results)
        .arg("--node-binary")
        .arg(support::node_binary())
        .args([
            "--workload",
            "eos",
            "--nemesis",
            nemesis,
            "--time-limit",
            "20",
        ])
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
            "eos run ended {code}\n{}",
            String::from_utf8_lossy(&output.stderr)
        );
    }
    (code, run)
}

/// Inputs consumed by committed pipeline transactions, and transactions whose process crashed
/// as the commit returned.
fn processed(run: &Path) -> (usize, usize) {
    let reader = HistoryReader::open(run.join("history.jsonl")).expect("history opens");
    assert_eq!(reader.header().workload, "eos");
    let (mut inputs, mut crashed) = (0, 0);
    for op in reader {
        let op = op.expect("every line is well formed");
        if op.f != Function::Pipeline || op.op_type != OpType::Ok {
            continue;
        }
        let value = serde_json::to_value(&op.value).expect("value");
        let value: PipelineValue = serde_json::from_value(value).expect("a pipeline value");
        inputs += value.inputs.len();
        crashed += usize::from(value.crashed_after_commit && !value.inputs.is_empty());
    }
    (inputs, crashed)
}

fn report(run: &Path) -> serde_json::Value {
    let report = std::fs::read_to_string(run.join("report.json")).expect("report.json");
    serde_json::from_str(&report).expect("report.json parses")
}

#[test]
fn a_fault_free_pipeline_is_exactly_once() {
    let results = tempfile::tempdir().expect("tempdir");
    let (code, run) = eos_run(results.path(), "none", &[]);
    let report = report(&run);
    assert_eq!(code, 0, "valid; bad: {}", report["bad_kinds"]);
    let (inputs, crashed) = processed(&run);
    assert!(inputs > 100, "inputs processed: {inputs}");
    assert!(
        crashed > 0,
        "members crashed as their commit returned, and nothing doubled"
    );
    // The final read reached eos-out's high watermark and found every output once.
    assert!(
        report["stats"]["ok_records_read"].as_u64().unwrap_or(0) as usize >= inputs,
        "every output and input read back: {}",
        report["stats"]
    );
}

#[test]
fn offsets_outside_the_transaction_duplicate_output_after_a_crash() {
    let results = tempfile::tempdir().expect("tempdir");
    let (code, run) = eos_run(
        results.path(),
        "none",
        &["logjam.eos=offsets-outside-transaction"],
    );
    let report = report(&run);
    let (_, crashed) = processed(&run);
    assert!(
        crashed > 0,
        "some process crashed after a commit with inputs"
    );
    assert_eq!(
        code, 1,
        "the mistake's run is invalid; bad: {}",
        report["bad_kinds"]
    );
    let duplicates = &report["anomalies"]["eos-duplicate"];
    assert!(
        duplicates["count"].as_u64().unwrap_or(0) > 0,
        "offsets committed after the transaction reprocess input: {}",
        report["bad_kinds"]
    );
    let witness = duplicates["witnesses"][0]["explanation"]
        .as_str()
        .unwrap_or_default();
    assert!(
        witness.contains("offsets committed outside the transaction"),
        "the witness names the mechanism: {witness}"
    );
}

/// Runs a shipped scenario at seed 1; returns the exit code, scenario.json and report.json.
fn scenario(name: &str) -> (i32, serde_json::Value, serde_json::Value) {
    let (output, results) = support::run_scenario(name, &[]);
    let read = |file: &str| -> serde_json::Value {
        let text = std::fs::read_to_string(results.path().join("latest").join(file))
            .unwrap_or_else(|_| {
                panic!(
                    "{name} stored {file}\n{}",
                    String::from_utf8_lossy(&output.stderr)
                )
            });
        serde_json::from_str(&text).expect("JSON")
    };
    (
        output.status.code().unwrap_or(-1),
        read("scenario.json"),
        read("report.json"),
    )
}

#[test]
fn a_paused_zombie_is_fenced_by_its_group_metadata_and_duplicates_without_it() {
    let (code, judged, report) = scenario("zombie-fencing");
    let zombies = &report["zombies"];
    assert_eq!(code, 0, "{judged:#}");
    assert!(
        zombies["taken_over"].as_u64().unwrap_or(0) > 0,
        "a zombie's partitions were taken over while it slept: {zombies}"
    );
    assert_eq!(zombies["committed"], 0, "no zombie committed: {zombies}");
    assert_eq!(report["verdict"], "valid", "{}", report["bad_kinds"]);

    let (code, judged, report) = scenario("zombie-without-group-metadata");
    let zombies = &report["zombies"];
    assert_eq!(code, 0, "{judged:#}");
    assert!(
        zombies["committed"].as_u64().unwrap_or(0) > 0,
        "without the generation a taken-over zombie commits: {zombies}"
    );
    let witness = report["anomalies"]["eos-duplicate"]["witnesses"]
        .as_array()
        .expect("eos-duplicate witnesses")
        .iter()
        .filter_map(|w| w["explanation"].as_str())
        .find(|text| text.contains("a zombie"))
        .unwrap_or_else(|| panic!("a duplicate names the zombie: {}", report["anomalies"]))
        .to_owned();
    assert!(witness.contains("group id alone"), "{witness}");
}
