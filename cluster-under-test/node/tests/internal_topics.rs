//! The internal topics' replication factors, as Kafka answers them (issue 14): a cluster with
//! fewer live brokers than `offsets.topic.replication.factor` /
//! `transaction.state.log.replication.factor` (default 3) creates neither topic, and
//! FindCoordinator (group and transaction) and InitProducerId answer
//! `COORDINATOR_NOT_AVAILABLE`; with the factors set to 1 the same node serves them.

mod common;

use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use common::{NodeProcess, connect, exchange, free_port, metadata};
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;

/// FindCoordinator v3 for `key` (0 group, 1 transaction): its error code.
fn find(stream: &mut TcpStream, key: &str, key_type: i8) -> i16 {
    let response: FindCoordinatorResponse = exchange(
        stream,
        ApiKey::FindCoordinator,
        3,
        &FindCoordinatorRequest::default()
            .with_key_type(key_type)
            .with_key(StrBytes::from_string(key.to_owned())),
    );
    response.error_code
}

/// InitProducerId v4 with a transactional id: its error code.
fn init(stream: &mut TcpStream, id: &str) -> i16 {
    let response: InitProducerIdResponse = exchange(
        stream,
        ApiKey::InitProducerId,
        4,
        &InitProducerIdRequest::default()
            .with_transactional_id(Some(TransactionalId(StrBytes::from_string(id.to_owned()))))
            .with_transaction_timeout_ms(60_000)
            .with_producer_id(ProducerId(-1))
            .with_producer_epoch(-1),
    );
    response.error_code
}

/// A single node with exactly `extra` beside its listener and data (none of the test
/// defaults: Kafka's replication factors of 3 unless `extra` sets them).
fn start_node(dir: &std::path::Path, extra: &str) -> NodeProcess {
    let port = free_port();
    let text = format!(
        "node.id=1\nprocess.roles=broker,controller\nlisteners=PLAINTEXT://127.0.0.1:{port}\n\
         log.dirs={}\n{extra}\n",
        dir.join("data").display()
    );
    let address: SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
    NodeProcess::start_with_config(dir, &text, address)
}

/// The codes of (FindCoordinator group, FindCoordinator transaction, InitProducerId) once
/// they stop changing for 3 s or all are 0 (the first answers create the topics).
fn settled(address: SocketAddr) -> (i16, i16, i16) {
    let mut stream = connect(address);
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut since = Instant::now();
    let mut last = None;
    loop {
        let codes = (
            find(&mut stream, "a-group", 0),
            find(&mut stream, "a-txn", 1),
            init(&mut stream, "a-txn"),
        );
        if codes == (0, 0, 0) {
            return codes;
        }
        if last != Some(codes) {
            (last, since) = (Some(codes), Instant::now());
        }
        if since.elapsed() > Duration::from_secs(3) || Instant::now() > deadline {
            return codes;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Goal: Kafka's answer on a cluster smaller than the internal topics' replication factor.
/// Method: a 1-node cluster without the settings answers 15 (COORDINATOR_NOT_AVAILABLE) to
/// FindCoordinator (group, transaction) and InitProducerId, and has created neither topic;
/// another with both factors set to 1 serves all three.
#[test]
fn a_cluster_smaller_than_the_replication_factor_has_no_coordinator() {
    let dir = tempfile::tempdir().unwrap();
    let node = start_node(dir.path(), "");
    assert_eq!(settled(node.address), (15, 15, 15));
    let topics: Vec<String> = metadata(node.address)
        .expect("metadata")
        .topics
        .iter()
        .filter_map(|topic| topic.name.as_ref().map(|name| name.to_string()))
        .collect();
    assert!(
        topics.iter().all(|topic| !topic.starts_with("__")),
        "no internal topic created: {topics:?}"
    );
    drop(node);

    let dir = tempfile::tempdir().unwrap();
    let node = start_node(
        dir.path(),
        "offsets.topic.replication.factor=1\ntransaction.state.log.replication.factor=1",
    );
    assert_eq!(settled(node.address), (0, 0, 0));
}
