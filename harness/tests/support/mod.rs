//! What the harness's end-to-end tests share: the node binary they run (the harness never
//! links the node, so the tests build it), and a lock so that one test binary runs one
//! cluster at a time under `cargo test`. Under cargo-nextest (CI) each test is a process of
//! its own and `.config/nextest.toml`'s `lab` group bounds how many run at once instead: each
//! run has its own sandbox, and one scenario measured 2.9 s of CPU in 32 s; three side by side
//! take about as long each as one alone (the scenarios binary: 497-514 s against 491 s).

#![allow(dead_code)]

use std::path::{Path, PathBuf};

use logjam_history::Op;
use std::process::Command;
use std::sync::{Mutex, MutexGuard};

static ONE_CLUSTER_AT_A_TIME: Mutex<()> = Mutex::new(());

/// Builds `logjam-node` and returns its path (beside the `logjam` binary under test), unless
/// `LOGJAM_NODE_BIN` names one (as for the client's tests): `.ci/run` points it at the binary
/// its test build already made, since `cargo build -p logjam-node` resolves the dependencies'
/// features for the node alone and rebuilds them (82 s in CI).
pub fn node_binary() -> PathBuf {
    if let Some(given) = std::env::var_os("LOGJAM_NODE_BIN") {
        let given = PathBuf::from(given);
        assert!(
            given.is_file(),
            "LOGJAM_NODE_BIN: {} is no file",
            given.display()
        );
        return given;
    }
    let node = PathBuf::from(env!("CARGO_BIN_EXE_logjam")).with_file_name("logjam-node");
    let status = Command::new(env!("CARGO"))
        .args(["build", "--quiet", "-p", "logjam-node"])
        .status()
        .expect("cargo runs");
    assert!(status.success(), "building logjam-node failed");
    assert!(node.is_file(), "{} missing after the build", node.display());
    node
}

/// Held while a test runs a cluster.
pub fn one_cluster_at_a_time() -> MutexGuard<'static, ()> {
    ONE_CLUSTER_AT_A_TIME
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Runs `logjam scenario NAME --seed 1` with `extra` arguments under the cluster lock;
/// returns its output and the results directory (`latest` in it is the run).
pub fn run_scenario(name: &str, extra: &[&str]) -> (std::process::Output, tempfile::TempDir) {
    let _guard = one_cluster_at_a_time();
    let results = tempfile::tempdir().expect("tempdir");
    let output = Command::new(env!("CARGO_BIN_EXE_logjam"))
        .args(["scenario", name, "--seed", "1", "--results-dir"])
        .arg(results.path())
        .arg("--node-binary")
        .arg(node_binary())
        .args(extra)
        .output()
        .expect("logjam runs");
    (output, results)
}

/// Runs a shipped scenario as [`run_scenario`] and asserts it showed what it expects (exit 0);
/// returns its stdout, its run directory, and the results directory holding it (keep it alive
/// while the run is read).
pub fn shown_scenario(name: &str) -> (String, PathBuf, tempfile::TempDir) {
    let (output, results) = run_scenario(name, &[]);
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    assert_eq!(
        output.status.code(),
        Some(0),
        "{stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let run = std::fs::read_link(results.path().join("latest"))
        .map(|target| results.path().join(target))
        .expect("results/latest points at the run");
    (stdout, run, results)
}

/// A JSON file of a run (`report.json`, `scenario.json`, ...).
pub fn read_json(path: &Path) -> serde_json::Value {
    let text =
        std::fs::read_to_string(path).unwrap_or_else(|error| panic!("{}: {error}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|error| panic!("{}: {error}", path.display()))
}

/// An op's value as JSON (nemesis ops carry objects: targets, started, ...).
pub fn value(op: &Op) -> serde_json::Value {
    serde_json::to_value(&op.value).expect("an op's value serializes")
}
