//! The marker sender against a crashed partition leader, with a real client (librdkafka's
//! transactional producer, Python `confluent-kafka`) on a 3-node cluster: a transaction's
//! records are produced (replicated to every replica), the partition's leader is killed
//! before the commit (its session, 30 s, does not expire: it stays the leader in the
//! metadata), so the first WriteTxnMarkers to it fails; it is restarted 8 s later, and the
//! consumer reads once the coordinator reports the commit complete. The
//! coordinator must retry until the marker is written, so a read_committed consumer reads the
//! records; with canary `commit-before-markers` it writes CompleteCommit first and sends the
//! markers once, so the commit never reaches the partition. (A pause would not do: a request
//! the paused leader's socket buffered is still served after it resumes.)

mod common;

use std::io::{BufRead, BufReader, Write};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use kafka_protocol::messages::{
    ApiKey, DescribeTransactionsRequest, DescribeTransactionsResponse, FindCoordinatorRequest,
    FindCoordinatorResponse, TransactionalId,
};
use kafka_protocol::protocol::StrBytes;

use common::{Cluster, connect, exchange};

const TOPIC: &str = "txn-paused";

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

/// The coordinator of `id`, waiting while `__transaction_state` is created.
fn coordinator_of(via: SocketAddr, id: &str) -> i32 {
    let mut stream = connect(via);
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let response: FindCoordinatorResponse = exchange(
            &mut stream,
            ApiKey::FindCoordinator,
            4,
            &FindCoordinatorRequest::default()
                .with_key_type(1)
                .with_coordinator_keys(vec![StrBytes::from_string(id.to_owned())]),
        );
        if response.coordinators[0].error_code == 0 {
            return response.coordinators[0].node_id.0;
        }
        assert!(Instant::now() < deadline, "{response:?}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Waits until the coordinator at `coordinator` reports `id` in CompleteCommit, which it
/// writes only once every commit marker is written (with canary `commit-before-markers`,
/// before them): reading earlier could find the restarted leader before the marker sender's
/// next round reached it, with the records still open above the LSO.
fn wait_for_complete_commit(coordinator: SocketAddr, id: &str) {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let response: DescribeTransactionsResponse = exchange(
            &mut connect(coordinator),
            ApiKey::DescribeTransactions,
            0,
            &DescribeTransactionsRequest::default().with_transactional_ids(vec![TransactionalId(
                StrBytes::from_string(id.to_owned()),
            )]),
        );
        let state = &response.transaction_states[0];
        if state.error_code == 0 && state.transaction_state.as_str() == "CompleteCommit" {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "the coordinator never completed the commit: {state:?}"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// Runs the scenario; returns whether the client read its committed records, and its JSON.
fn commit_with_paused_leader(canaries: &str) -> (bool, String) {
    let root = tempfile::tempdir().unwrap();
    let mut cluster = Cluster::start(
        root.path(),
        3,
        &format!(
            "broker.heartbeat.interval.ms=500\nbroker.session.timeout.ms=30000\n\
             replica.lag.time.max.ms=1000\nlogjam.canaries={canaries}"
        ),
    );
    let first = cluster.nodes[0].address;
    assert_eq!(common::create_topics(first, &[(TOPIC, 3, 3)]), vec![0]);
    let (controller, _) = cluster.wait_for_leader(&[0, 1, 2], 0, Duration::from_secs(30));
    let controller = controller as i32 + 1;
    // A partition led by a node that is not the active controller (pausing that would stop
    // the ISR changes the commit needs).
    let metadata = common::metadata(first).unwrap();
    let (partition, leader) = metadata
        .topics
        .iter()
        .find(|t| t.name.as_ref().map(|n| n.as_str()) == Some(TOPIC))
        .unwrap()
        .partitions
        .iter()
        .map(|p| (p.partition_index, p.leader_id.0))
        .find(|(_, leader)| *leader > 0 && *leader != controller)
        .expect("a partition led away from the controller");
    // A transactional id coordinated by another node than that leader.
    let id = (0..)
        .map(|i| format!("paused-{i}"))
        .find(|id| coordinator_of(first, id) != leader)
        .unwrap();
    let bootstrap: Vec<String> = cluster
        .nodes
        .iter()
        .map(|n| n.address.to_string())
        .collect();
    let mut child = Command::new(python())
        .arg(PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/python/transactions.py"))
        .arg(bootstrap.join(","))
        .arg(TOPIC)
        .arg("commit-paused")
        .arg(partition.to_string())
        .arg(&id)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("python runs");
    let mut stdin = child.stdin.take().unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let mut expect = |want: &str| {
        let line = lines.next().and_then(Result::ok).unwrap_or_default();
        assert_eq!(line, want, "the client stopped before {want}");
    };
    expect("READY");
    let crashed = &mut cluster.nodes[(leader - 1) as usize];
    crashed.kill();
    writeln!(stdin).unwrap();
    expect("COMMITTED");
    std::thread::sleep(Duration::from_secs(8));
    crashed.restart();
    let coordinator = coordinator_of(first, &id);
    wait_for_complete_commit(cluster.nodes[(coordinator - 1) as usize].address, &id);
    writeln!(stdin).unwrap();
    let seen = lines.next().and_then(Result::ok).unwrap_or_default();
    let status = child.wait().unwrap();
    (status.success(), seen)
}

#[test]
fn markers_are_retried_until_a_crashed_leader_is_back() {
    let (ok, seen) = commit_with_paused_leader("");
    assert!(ok, "{seen}");
}

/// Canary `commit-before-markers`, the twin of the test above.
#[test]
fn canary_commit_before_markers_loses_the_commit_on_a_crashed_leader() {
    let (ok, seen) = commit_with_paused_leader("commit-before-markers");
    assert!(!ok, "{seen}");
    assert!(seen.contains("\"acked\": 5"), "{seen}");
    assert!(seen.contains("\"read_committed\": []"), "{seen}");
}
