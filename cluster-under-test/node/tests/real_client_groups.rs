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

/// The poll clock. Both clients leave the group themselves when `max.poll.interval.ms`
/// expires between polls (their heartbeats go on), but neither sends a LeaveGroup reason
/// (measured: librdkafka of confluent-kafka 2.16.1 and kafka-python 3.0.12 send none; the Java
/// client's KIP-800 reason "consumer poll timeout has expired." is what names `poll-timeout`).
/// So the node sees a leave, within the poll interval plus a little, never a session expiry.
#[test]
fn a_member_past_its_poll_interval_leaves_before_its_session_expires() {
    let root = tempfile::tempdir().unwrap();
    let cluster = cluster(root.path());
    scenario(&cluster, "groups-poll", "poll-timeout");
    let mut causes = Vec::new();
    for i in 1..=3 {
        let log = std::fs::read_to_string(root.path().join(format!("node{i}/node.log")))
            .unwrap_or_default();
        for line in log
            .lines()
            .filter(|l| l.contains("group rebalance started"))
        {
            let group = line
                .split("group=\"")
                .nth(1)
                .and_then(|r| r.split('"').next());
            let cause = line
                .split("cause=\"")
                .nth(1)
                .and_then(|r| r.split('"').next());
            if let (Some(group), Some(cause)) = (group, cause) {
                causes.push((group.to_owned(), cause.to_owned()));
            }
        }
    }
    for group in ["groups-poll-poll", "groups-poll-poll-kp"] {
        let of: Vec<&str> = causes
            .iter()
            .filter(|(g, _)| g == group)
            .map(|(_, c)| c.as_str())
            .collect();
        assert_eq!(of.first(), Some(&"join"), "{group}: {causes:?}");
        // (kafka-python may rejoin once with new subscription metadata in between:
        // `metadata-change`.) The poll clock ends in the client's own leave.
        assert_eq!(
            of.last(),
            Some(&"leave"),
            "{group}: the client left on its own: {causes:?}"
        );
        assert!(!of.contains(&"session-timeout"), "{group}: {causes:?}");
    }
}
