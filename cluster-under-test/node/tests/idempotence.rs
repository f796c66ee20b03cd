//! The idempotent producer on the broker (kafka-semantics.md §2), through raw requests to a
//! node process: InitProducerId hands out fresh ids at epoch 0 (and refuses transactional
//! ids); a retried batch is answered with its original offset and stored once, also after a
//! crash (state rebuilt from the log), after a clean shutdown (from the `.snapshot` file, which
//! keeps the last batch per producer) and on a new leader after the old one was killed
//! (state built by the follower while replicating); a gap in the sequence is `OUT_OF_ORDER_SEQUENCE_NUMBER`
//! and a stale epoch `INVALID_PRODUCER_EPOCH`.

mod common;

use std::net::SocketAddr;
use std::time::Duration;

use common::{
    Cluster, NodeProcess, connect, create_topics, exchange, metadata, producer_batch, wait_until,
};
use kafka_protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;

const TOPIC: &str = "idempotence";

fn topic() -> TopicName {
    TopicName(StrBytes::from_static_str(TOPIC))
}

fn start() -> (tempfile::TempDir, NodeProcess) {
    let dir = tempfile::tempdir().unwrap();
    let node = NodeProcess::start(dir.path(), "");
    assert_eq!(create_topics(node.address, &[(TOPIC, 1, 1)]), vec![0]);
    (dir, node)
}

fn init_producer_id(address: SocketAddr, transactional_id: Option<&str>) -> InitProducerIdResponse {
    let mut stream = connect(address);
    let request = InitProducerIdRequest::default()
        .with_transactional_id(
            transactional_id.map(|id| TransactionalId(StrBytes::from_string(id.to_owned()))),
        )
        .with_transaction_timeout_ms(i32::MAX)
        .with_producer_id(ProducerId(-1))
        .with_producer_epoch(-1);
    exchange(&mut stream, ApiKey::InitProducerId, 4, &request)
}

/// Produces one idempotent batch of `count` records; returns (error code, base offset).
fn produce(address: SocketAddr, pid: i64, epoch: i16, sequence: i32, count: usize) -> (i16, i64) {
    let values: Vec<Vec<u8>> = (0..count)
        .map(|i| format!("{pid}-{epoch}-{}", sequence + i as i32).into_bytes())
        .collect();
    let slices: Vec<&[u8]> = values.iter().map(Vec::as_slice).collect();
    let mut stream = connect(address);
    let request = ProduceRequest::default()
        .with_acks(-1)
        .with_timeout_ms(5000)
        .with_topic_data(vec![
            TopicProduceData::default()
                .with_name(topic())
                .with_partition_data(vec![
                    PartitionProduceData::default()
                        .with_index(0)
                        .with_records(Some(producer_batch(&slices, pid, epoch, sequence))),
                ]),
        ]);
    let response: ProduceResponse = exchange(&mut stream, ApiKey::Produce, 9, &request);
    let partition = &response.responses[0].partition_responses[0];
    (partition.error_code, partition.base_offset)
}

fn log_end_offset(address: SocketAddr) -> i64 {
    let mut stream = connect(address);
    let request = ListOffsetsRequest::default()
        .with_replica_id(BrokerId(-1))
        .with_topics(vec![
            ListOffsetsTopic::default()
                .with_name(topic())
                .with_partitions(vec![
                    ListOffsetsPartition::default()
                        .with_partition_index(0)
                        .with_timestamp(-1),
                ]),
        ]);
    let response: ListOffsetsResponse = exchange(&mut stream, ApiKey::ListOffsets, 7, &request);
    let partition = &response.topics[0].partitions[0];
    assert_eq!(partition.error_code, 0);
    partition.offset
}

fn new_producer(address: SocketAddr) -> i64 {
    let response = init_producer_id(address, None);
    assert_eq!(response.error_code, 0);
    assert_eq!(response.producer_epoch, 0);
    response.producer_id.0
}

#[test]
fn init_producer_id_hands_out_fresh_ids_and_sends_transactional_ids_to_the_coordinator() {
    let (_dir, node) = start();
    let first = new_producer(node.address);
    let second = new_producer(node.address);
    assert!(first >= 0);
    assert_ne!(first, second);
    // A transactional id is the transaction coordinator's: its first request creates
    // `__transaction_state` and is told to retry, as Kafka answers (tests/txn_coordinator.rs
    // covers the rest).
    let transactional = init_producer_id(node.address, Some("txn"));
    assert_eq!(
        transactional.error_code,
        kafka_protocol::ResponseError::CoordinatorNotAvailable.code()
    );
    assert_eq!(transactional.producer_id.0, -1);
}

#[test]
fn retried_batch_is_answered_with_its_original_offset_and_stored_once() {
    let (_dir, node) = start();
    let pid = new_producer(node.address);
    assert_eq!(produce(node.address, pid, 0, 0, 2), (0, 0));
    assert_eq!(produce(node.address, pid, 0, 2, 3), (0, 2));
    // Retries of both retained batches: original offsets, nothing appended.
    assert_eq!(produce(node.address, pid, 0, 2, 3), (0, 2));
    assert_eq!(produce(node.address, pid, 0, 0, 2), (0, 0));
    assert_eq!(log_end_offset(node.address), 5);
    // The sequence goes on where it was.
    assert_eq!(produce(node.address, pid, 0, 5, 1), (0, 5));
}

#[test]
fn retried_batch_is_deduplicated_after_a_restart() {
    let (_dir, mut node) = start();
    let pid = new_producer(node.address);
    assert_eq!(produce(node.address, pid, 0, 0, 2), (0, 0));
    assert_eq!(produce(node.address, pid, 0, 2, 2), (0, 2));
    node.restart();
    common::wait_until(
        "the node serves produce again",
        std::time::Duration::from_secs(30),
        || log_end_offset_or_error(&node) == Some(4),
    );
    assert_eq!(produce(node.address, pid, 0, 2, 2), (0, 2));
    assert_eq!(produce(node.address, pid, 0, 0, 2), (0, 0));
    assert_eq!(log_end_offset(node.address), 4);
}

/// Goal: producer state survives a clean shutdown through Kafka's `.snapshot` file, with
/// Kafka's window (kafka-semantics.md §7.4). Method: two batches, SIGTERM, check the snapshot
/// at the log end is on disk, restart: the last batch's retry is answered with its original
/// offset, an older batch's retry is `OUT_OF_ORDER_SEQUENCE_NUMBER` (the snapshot keeps one
/// batch per producer, as Kafka's does), and the sequence goes on.
#[test]
fn after_a_clean_shutdown_the_snapshot_keeps_the_last_batch() {
    let (dir, mut node) = start();
    let pid = new_producer(node.address);
    assert_eq!(produce(node.address, pid, 0, 0, 2), (0, 0));
    assert_eq!(produce(node.address, pid, 0, 2, 2), (0, 2));
    node.terminate();
    let snapshot = dir
        .path()
        .join("data")
        .join(format!("{TOPIC}-0"))
        .join("00000000000000000004.snapshot");
    assert!(snapshot.exists(), "no snapshot at {}", snapshot.display());
    node.restart();
    common::wait_until(
        "the node serves produce again",
        std::time::Duration::from_secs(30),
        || log_end_offset_or_error(&node) == Some(4),
    );
    assert_eq!(produce(node.address, pid, 0, 2, 2), (0, 2));
    let out_of_order = kafka_protocol::ResponseError::OutOfOrderSequenceNumber.code();
    assert_eq!(produce(node.address, pid, 0, 0, 2).0, out_of_order);
    assert_eq!(log_end_offset(node.address), 4);
    assert_eq!(produce(node.address, pid, 0, 4, 1), (0, 4));
}

fn log_end_offset_or_error(node: &NodeProcess) -> Option<i64> {
    let mut stream = std::net::TcpStream::connect(node.address).ok()?;
    stream
        .set_read_timeout(Some(std::time::Duration::from_secs(5)))
        .ok()?;
    let request = ListOffsetsRequest::default()
        .with_replica_id(BrokerId(-1))
        .with_topics(vec![
            ListOffsetsTopic::default()
                .with_name(topic())
                .with_partitions(vec![
                    ListOffsetsPartition::default()
                        .with_partition_index(0)
                        .with_timestamp(-1),
                ]),
        ]);
    let response: ListOffsetsResponse = exchange(&mut stream, ApiKey::ListOffsets, 7, &request);
    let partition = response.topics.first()?.partitions.first()?;
    (partition.error_code == 0).then_some(partition.offset)
}

#[test]
fn a_gap_in_the_sequence_is_out_of_order() {
    let (_dir, node) = start();
    let pid = new_producer(node.address);
    assert_eq!(produce(node.address, pid, 0, 0, 2).0, 0);
    assert_eq!(
        produce(node.address, pid, 0, 3, 1).0,
        kafka_protocol::ResponseError::OutOfOrderSequenceNumber.code()
    );
    // A new epoch must start at sequence 0.
    assert_eq!(
        produce(node.address, pid, 1, 5, 1).0,
        kafka_protocol::ResponseError::OutOfOrderSequenceNumber.code()
    );
    assert_eq!(log_end_offset(node.address), 2);
}

#[test]
fn a_stale_producer_epoch_is_fenced() {
    let (_dir, node) = start();
    let pid = new_producer(node.address);
    assert_eq!(produce(node.address, pid, 0, 0, 1), (0, 0));
    // The producer bumped its epoch (as after OUT_OF_ORDER_SEQUENCE_NUMBER) and restarts at 0.
    assert_eq!(produce(node.address, pid, 1, 0, 1), (0, 1));
    assert_eq!(
        produce(node.address, pid, 0, 1, 1).0,
        kafka_protocol::ResponseError::InvalidProducerEpoch.code()
    );
    assert_eq!(log_end_offset(node.address), 2);
}

/// `(leader, isr size)` of partition 0 of the topic as `address` sees it.
fn partition_state(address: SocketAddr) -> Option<(i32, usize)> {
    let response = metadata(address)?;
    let topic = response
        .topics
        .iter()
        .find(|t| t.name.as_ref().is_some_and(|n| n.0.as_str() == TOPIC))?;
    let partition = topic.partitions.first()?;
    Some((partition.leader_id.0, partition.isr_nodes.len()))
}

/// Goal: the done-when of the idempotent producer, "a retried batch is stored once, also
/// across a leader change". Method: RF 3; produce two idempotent batches with acks=all to the
/// leader (so every ISR member has them), kill the leader, retry both batches to the new
/// leader: they are answered with their original offsets and the log does not grow.
#[test]
fn retried_batch_is_deduplicated_by_a_new_leader() {
    let root = tempfile::tempdir().unwrap();
    let mut cluster = Cluster::start(root.path(), 3, "");
    let any = cluster.nodes[0].address;
    assert_eq!(create_topics(any, &[(TOPIC, 1, 3)]), vec![0]);
    let mut leader = -1;
    wait_until(
        "a leader and a full ISR",
        Duration::from_secs(30),
        || match partition_state(any) {
            Some((l, 3)) if l >= 1 => {
                leader = l;
                true
            }
            _ => false,
        },
    );
    let leader_address = cluster.nodes[(leader - 1) as usize].address;
    let pid = new_producer(leader_address);
    assert_eq!(produce(leader_address, pid, 0, 0, 2), (0, 0));
    assert_eq!(produce(leader_address, pid, 0, 2, 3), (0, 2));
    cluster.nodes[(leader - 1) as usize].kill();
    let survivor = cluster.nodes[(leader % 3) as usize].address;
    let mut new_leader = -1;
    wait_until(
        "a new partition leader",
        Duration::from_secs(30),
        || match partition_state(survivor) {
            Some((l, _)) if l >= 1 && l != leader => {
                new_leader = l;
                true
            }
            _ => false,
        },
    );
    let new_address = cluster.nodes[(new_leader - 1) as usize].address;
    // acks=all on the new leader needs min.insync.replicas (1 here) in the ISR: it is.
    assert_eq!(produce(new_address, pid, 0, 2, 3), (0, 2));
    assert_eq!(produce(new_address, pid, 0, 0, 2), (0, 0));
    assert_eq!(log_end_offset(new_address), 5);
    assert_eq!(produce(new_address, pid, 0, 5, 1), (0, 5));
}
