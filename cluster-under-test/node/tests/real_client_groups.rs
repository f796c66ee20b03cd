//! Consumer groups (classic protocol) with real clients against a 3-node cluster of
//! `logjam-node` processes: librdkafka consumers (Python `confluent-kafka`,
//! `group.protocol=classic`) and kafka-python's `KafkaConsumer` in one group
//! (`tests/python/groups.py`): partitions split disjoint and complete, a member leaving moves
//! its partitions, a new member resumes from the committed offsets, and a static member's
//! restart within its session timeout causes no rebalance.
//!
//! The clients come from `.venv` at the repository root or `LOGJAM_PYTHON`; a missing client
//! fails the test.

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

/// Runs `groups.py` in `mode` on a fresh 4-partition topic; it must meet every expectation.
fn scenario(cluster: &Cluster, topic: &str, mode: &str) -> String {
    assert_eq!(
        common::create_topics(cluster.nodes[0].address, &[(topic, 4, 3)]),
        vec![0]
    );
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/python/groups.py");
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
    if !output.status.success() {
        // The coordinators' account of each rebalance, to show what the clients saw.
        for i in 1..=3 {
            let dir = cluster_root(cluster).join(format!("node{i}"));
            let log = std::fs::read_to_string(dir.join("node.log")).unwrap_or_default();
            for line in log.lines().filter(|l| l.contains("group rebalance")) {
                eprintln!("node{i}: {line}");
            }
        }
    }
    assert!(
        output.status.success(),
        "{mode} failed\nstdout: {stdout}\nstderr: {stderr}"
    );
    stdout
}

fn cluster_root(cluster: &Cluster) -> PathBuf {
    cluster.nodes[0].dir.parent().unwrap().to_path_buf()
}

fn cluster(root: &std::path::Path) -> Cluster {
    Cluster::start(
        root,
        3,
        "broker.heartbeat.interval.ms=500\nbroker.session.timeout.ms=3000\n\
         group.initial.rebalance.delay.ms=500",
    )
}

#[test]
fn confluent_and_kafka_python_split_move_and_resume() {
    let root = tempfile::tempdir().unwrap();
    let cluster = cluster(root.path());
    scenario(&cluster, "groups-split", "split-leave-resume");
}

#[test]
fn a_static_member_restarts_without_a_rebalance() {
    let root = tempfile::tempdir().unwrap();
    let cluster = cluster(root.path());
    scenario(&cluster, "groups-static", "static-restart");
}
