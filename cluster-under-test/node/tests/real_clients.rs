//! Compatibility with real Kafka clients: librdkafka (Python `confluent-kafka`) and the pure
//! Python `kafka-python` (and `aiokafka`, a third protocol implementation) each create a 3-partition topic on a running `logjam-node` process,
//! produce 10,000 messages with acks=all and read every partition back; the script compares
//! keys, values and offsets byte for byte. Each also looks offsets up by timestamp
//! (`offsetsForTimes`, ListOffsets with a timestamp) after producing timestamped messages,
//! and describes a topic's and the broker's configs (DescribeConfigs).
//!
//! The clients come from `.venv` at the repository root (`.ci/run` creates it from
//! `cluster-under-test/node/tests/python/requirements.txt`) or from the interpreter named by `LOGJAM_PYTHON`. A missing
//! client fails the test: a compatibility test that skips itself proves nothing.

mod common;

use std::path::PathBuf;
use std::process::Command;

use common::NodeProcess;

fn python() -> PathBuf {
    if let Some(python) = std::env::var_os("LOGJAM_PYTHON") {
        return PathBuf::from(python);
    }
    let venv = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../.venv/bin/python");
    assert!(
        venv.exists(),
        "no Python with the Kafka clients: run `python3 -m venv .venv && .venv/bin/pip install -r \
         cluster-under-test/node/tests/python/requirements.txt` at the repository root, or set LOGJAM_PYTHON"
    );
    venv
}

/// Starts a node (its properties file gets `settings`), runs `tests/python/<script>` with
/// `args` (`BOOTSTRAP` standing for the node's address), and returns its stdout once it exited
/// 0; otherwise fails with its output and the node log's tail.
fn run_script(script: &str, settings: &str, args: &[&str]) -> String {
    let dir = tempfile::tempdir().unwrap();
    let node = NodeProcess::start(dir.path(), settings);
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/python")
        .join(script);
    let output = Command::new(python())
        .arg(path)
        .args(args.iter().map(|arg| match *arg {
            BOOTSTRAP => node.address.to_string(),
            arg => arg.to_owned(),
        }))
        .output()
        .expect("python runs");
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&output.stderr);
    let log = std::fs::read_to_string(dir.path().join("node.log")).unwrap_or_default();
    assert!(
        output.status.success(),
        "{script} {args:?} failed\nstdout: {stdout}\nstderr: {stderr}\nnode log tail: {}",
        common::tail(&log, 4000)
    );
    stdout
}

/// Stands for the node's address in [`run_script`]'s arguments.
const BOOTSTRAP: &str = "{bootstrap}";

fn round_trip(client: &str) {
    let topic = format!("roundtrip-{client}");
    let stdout = run_script(
        "roundtrip.py",
        "",
        &[client, BOOTSTRAP, &topic, "3", "10000"],
    );
    assert!(
        stdout.contains("\"acked\": 10000") && stdout.contains("\"read\": 10000"),
        "{stdout}"
    );
}

#[test]
fn confluent_kafka_round_trip_of_10000_messages_with_acks_all() {
    round_trip("confluent");
}

#[test]
fn kafka_python_round_trip_of_10000_messages_with_acks_all() {
    round_trip("kafka-python");
}

/// `offsetsForTimes` through `client` (ListOffsets by timestamp; see `offsets_for_times.py`).
fn offsets_for_times(client: &str) {
    let topic = format!("times-{client}");
    let stdout = run_script("offsets_for_times.py", "", &[client, BOOTSTRAP, &topic]);
    assert!(stdout.contains("\"wrong\": {}"), "{stdout}");
}

#[test]
fn confluent_kafka_finds_offsets_by_timestamp() {
    offsets_for_times("confluent");
}

#[test]
fn kafka_python_finds_offsets_by_timestamp() {
    offsets_for_times("kafka-python");
}

/// DescribeConfigs through `client` (see `describe_configs.py`), against a node whose file sets
/// `min.insync.replicas=2`.
fn describe_configs(client: &str) {
    let topic = format!("configs-{client}");
    let stdout = run_script(
        "describe_configs.py",
        "min.insync.replicas=2",
        &[client, BOOTSTRAP, &topic],
    );
    assert!(stdout.contains("\"wrong\": {}"), "{stdout}");
}

#[test]
fn confluent_kafka_describes_topic_and_broker_configs() {
    describe_configs("confluent");
}

#[test]
fn kafka_python_describes_topic_and_broker_configs() {
    describe_configs("kafka-python");
}

/// aiokafka, a third protocol implementation (its own version choices): idempotent produce,
/// a consumer group with commits, offsets by timestamp, a committed and an aborted
/// transaction with the group's offsets, read_committed (see `aiokafka_roundtrip.py`).
#[test]
fn aiokafka_round_trip_groups_and_transactions() {
    let stdout = run_script("aiokafka_roundtrip.py", "", &[BOOTSTRAP, "aiokafka"]);
    assert!(
        stdout.contains("\"acked\": 300") && stdout.contains("\"problems\": []"),
        "{stdout}"
    );
}
