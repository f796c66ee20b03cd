//! Transactions with a real client: librdkafka's transactional producer (Python
//! `confluent-kafka`) against a 3-node cluster of `logjam-node` processes, each scenario on
//! its own topic (2 partitions, 3 replicas), checked with a read_committed consumer:
//!
//! - commit, abort, commit: every call succeeds and read_committed sees exactly the two
//!   committed transactions' records;
//! - a zombie: a second producer with the same `transactional.id` fences the first, whose
//!   commit then fails with librdkafka's fatal fenced error; read_committed sees only the
//!   new producer's records;
//! - the commit-abort scenario again with kafka-python's transactional producer.
//!
//! The clients come from `.venv` at the repository root or `LOGJAM_PYTHON`, as in
//! `real_clients.rs`; a missing client fails the test.

mod common;

use std::path::PathBuf;
use std::process::Command;

use common::Cluster;

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

/// Runs `transactions.py` in `mode` on a fresh topic; returns whether every expectation
/// held, and its JSON line.
fn run(cluster: &Cluster, topic: &str, mode: &str) -> (bool, String) {
    assert_eq!(
        common::create_topics(cluster.nodes[0].address, &[(topic, 2, 3)]),
        vec![0]
    );
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/python/transactions.py");
    let bootstrap: Vec<String> = cluster
        .nodes
        .iter()
        .map(|n| n.address.to_string())
        .collect();
    let output = Command::new(python())
        .arg(script)
        .arg(bootstrap.join(","))
        .arg(topic)
        .arg(mode)
        .output()
        .expect("python runs");
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stdout.trim_start().starts_with('{'),
        "{mode}: the script did not finish\nstdout: {stdout}\nstderr: {stderr}"
    );
    (output.status.success(), stdout)
}

/// [`run`], which must meet every expectation.
fn scenario(cluster: &Cluster, topic: &str, mode: &str) -> String {
    let (ok, seen) = run(cluster, topic, mode);
    assert!(ok, "{mode} failed: {seen}");
    seen
}

fn cluster_with(root: &std::path::Path, canaries: &str) -> Cluster {
    cluster_with_settings(root, canaries, "")
}

/// The original transaction protocol without KIP-890 part 1: the coordinator's epoch bump at
/// InitProducerId is the only fence against a zombie (Kafka before 3.6, or
/// `transaction.partition.verification.enable=false` with transaction version 1).
const FENCE_ONLY: &str = "transaction.version=1\ntransaction.partition.verification.enable=false\n";

fn cluster_with_settings(root: &std::path::Path, canaries: &str, settings: &str) -> Cluster {
    Cluster::start(
        root,
        3,
        &format!(
            "broker.heartbeat.interval.ms=500\nbroker.session.timeout.ms=3000\n{settings}\
             logjam.canaries={canaries}"
        ),
    )
}

#[test]
fn confluent_kafka_commits_aborts_and_is_fenced_as_a_zombie() {
    let root = tempfile::tempdir().unwrap();
    let cluster = cluster_with(root.path(), "");
    let seen = scenario(&cluster, "txn-commit-abort", "commit-abort");
    assert!(seen.contains("\"acked\": 30"), "{seen}");
    let seen = scenario(&cluster, "txn-zombie", "zombie");
    assert!(seen.contains("\"fatal\": true"), "{seen}");
}

/// Consume-transform-produce with confluent-kafka: `send_offsets_to_transaction` then commit
/// makes the consumer's positions the group's committed offsets (a second consumer resumes
/// from them); with an abort, the next consumer still resumes from the committed ones.
#[test]
fn confluent_kafka_sends_offsets_to_a_transaction() {
    let root = tempfile::tempdir().unwrap();
    let cluster = cluster_with_settings(root.path(), "", "group.initial.rebalance.delay.ms=0\n");
    assert_eq!(
        common::create_topics(cluster.nodes[0].address, &[("txo-out", 1, 3)]),
        vec![0]
    );
    let seen = scenario(&cluster, "txo", "send-offsets");
    assert!(seen.contains("\"committed\""), "{seen}");
}

/// The commit-abort scenario with kafka-python's transactional producer (its own
/// implementation of the protocol: InitProducerId, AddPartitionsToTxn, EndTxn, at the versions
/// it negotiates), under the default transaction version and under TV1 without verification.
#[test]
fn kafka_python_commits_and_aborts() {
    for (name, settings) in [("default", ""), ("tv1", FENCE_ONLY)] {
        let root = tempfile::tempdir().unwrap();
        let cluster = cluster_with_settings(root.path(), "", settings);
        let seen = scenario(&cluster, "txn-kp", "kafka-python-commit-abort");
        assert!(seen.contains("\"acked\": 30"), "{name}: {seen}");
    }
}

/// The zombie scenario where the coordinator's fence is the only defence (TV1, partition
/// verification off): the twin of the canary below, without the canary, fences the zombie.
#[test]
fn confluent_kafka_zombie_is_fenced_by_the_coordinator_alone() {
    let root = tempfile::tempdir().unwrap();
    let cluster = cluster_with_settings(root.path(), "", FENCE_ONLY);
    let seen = scenario(&cluster, "txn-zombie", "zombie");
    assert!(seen.contains("\"fatal\": true"), "{seen}");
    assert!(!seen.contains("\"zombie-late-0\""), "{seen}");
}

/// Canary `no-zombie-fence` (the twin of the test above, in the same configuration):
/// InitProducerId does not bump the epoch, so the zombie is not fenced: the record it writes
/// after the new producer took over lands in the new producer's transaction (same producer id
/// and epoch) and is read as committed, and the zombie's own commit fails with something other
/// than the fence. With KIP-890 part 1 verification on (the default) the late record is
/// refused INVALID_TXN_STATE instead, as Kafka 3.6+ does: the verification, not the fence,
/// stops the zombie there.
#[test]
fn canary_no_zombie_fence_lets_the_zombie_commit() {
    let root = tempfile::tempdir().unwrap();
    let cluster = cluster_with_settings(root.path(), "no-zombie-fence", FENCE_ONLY);
    let (ok, seen) = run(&cluster, "txn-zombie", "zombie");
    assert!(!ok, "{seen}");
    eprintln!("{seen}");
    assert!(!seen.contains("_FENCED"), "{seen}");
    assert!(
        seen.contains("\"zombie-late-0\""),
        "the zombie's late record is committed: {seen}"
    );
}

/// Canary `skip-abort-marker` (the twin of the commit-abort scenario above): the aborted
/// transaction gets no abort markers, so its records stay open on their partitions and the
/// next transaction's commit markers (same producer id and epoch) commit them: a
/// read_committed consumer reads the aborted records.
#[test]
fn canary_skip_abort_marker_breaks_read_committed() {
    let root = tempfile::tempdir().unwrap();
    let cluster = cluster_with(root.path(), "skip-abort-marker");
    let (ok, seen) = run(&cluster, "txn-commit-abort", "commit-abort");
    eprintln!("{seen}");
    assert!(!ok, "{seen}");
    assert!(
        seen.contains("\"a1-0\""),
        "an aborted record is read as committed: {seen}"
    );
    assert!(
        seen.contains("\"acked\": 30"),
        "every call still succeeded: {seen}"
    );
}
