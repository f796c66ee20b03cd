//! KIP-848 consumer groups with a real client against a 3-node cluster of `logjam-node`
//! processes: librdkafka consumers (Python `confluent-kafka`, `group.protocol=consumer`,
//! librdkafka 2.10+ where the new protocol is GA) in one group (`tests/python/kip848.py`):
//! the coordinator's assignor splits the partitions disjoint and complete, a member leaving
//! moves its partitions, a new member resumes from the committed offsets; the node logs each
//! rebalance with its cause.
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

#[test]
fn librdkafka_consumer_protocol_splits_moves_and_resumes() {
    let root = tempfile::tempdir().unwrap();
    let cluster = Cluster::start(
        root.path(),
        3,
        "broker.heartbeat.interval.ms=500\nbroker.session.timeout.ms=3000\n\
         group.consumer.min.heartbeat.interval.ms=100\ngroup.consumer.heartbeat.interval.ms=500",
    );
    let topic = "kip848-split";
    assert_eq!(
        common::create_topics(cluster.nodes[0].address, &[(topic, 4, 3)]),
        vec![0]
    );
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/python/kip848.py");
    let bootstrap: Vec<String> = cluster
        .nodes
        .iter()
        .map(|n| n.address.to_string())
        .collect();
    let output = Command::new(python())
        .arg(script)
        .arg(bootstrap.join(","))
        .arg(topic)
        .output()
        .expect("python runs");
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&output.stderr);
    let mut rebalances = Vec::new();
    for node in &cluster.nodes {
        let log = std::fs::read_to_string(node.dir.join("node.log")).unwrap_or_default();
        rebalances.extend(
            log.lines()
                .filter(|l| l.contains("consumer group rebalance"))
                .map(str::to_owned),
        );
    }
    assert!(
        output.status.success(),
        "kip848.py failed\nstdout: {stdout}\nstderr: {stderr}\nrebalances:\n{}",
        rebalances.join("\n")
    );
    // Three joins (a, b, the resumed c) and two leaves, each logged with its cause.
    let with = |cause: &str| {
        rebalances
            .iter()
            .filter(|l| l.contains("group=kip848-split-group") && l.contains(cause))
            .count()
    };
    assert_eq!(with("cause=join"), 3, "{rebalances:#?}");
    assert!(with("cause=leave") >= 2, "{rebalances:#?}");
}

/// Not a check: the time from a member's death (SIGKILL) to a stable group, and from a clean
/// leave (the consumer closed) to a stable group, classic vs
/// KIP-848, 3 and 30 members, each protocol with a 6 s session timeout and a 500 ms heartbeat
/// (`tests/python/rebalance_bench.py`). Run by hand:
/// `cargo test -p logjam-node --test real_client_kip848 -- --ignored --nocapture`.
#[test]
#[ignore = "a measurement, not a check: run by hand"]
fn bench_member_death_to_stable_classic_vs_consumer() {
    let root = tempfile::tempdir().unwrap();
    let cluster = Cluster::start(
        root.path(),
        3,
        "broker.heartbeat.interval.ms=500\nbroker.session.timeout.ms=3000\n\
         group.initial.rebalance.delay.ms=0\n\
         group.consumer.min.session.timeout.ms=1000\ngroup.consumer.session.timeout.ms=6000\n\
         group.consumer.min.heartbeat.interval.ms=100\ngroup.consumer.heartbeat.interval.ms=500",
    );
    let bootstrap: Vec<String> = cluster
        .nodes
        .iter()
        .map(|n| n.address.to_string())
        .collect();
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/python/rebalance_bench.py");
    for members in [3, 30] {
        let topic = format!("bench-{members}");
        let partitions = 2 * members;
        assert_eq!(
            common::create_topics(cluster.nodes[0].address, &[(&topic, partitions, 3)]),
            vec![0]
        );
        for protocol in ["classic", "consumer"] {
            let output = Command::new(python())
                .arg(&script)
                .arg(bootstrap.join(","))
                .arg(&topic)
                .arg(partitions.to_string())
                .arg(members.to_string())
                .arg(protocol)
                .output()
                .expect("python runs");
            println!(
                "{}{}",
                String::from_utf8_lossy(&output.stdout).trim(),
                if output.status.success() {
                    ""
                } else {
                    " (FAILED)"
                }
            );
        }
    }
}
