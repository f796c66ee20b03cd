//! KIP-890 part 1 on the produce path, with the real coordinator over the wire: a
//! transactional batch that would open a transaction on a partition is verified with the
//! producer's coordinator first. Under `transaction.version=1` a partition never added is
//! refused (`INVALID_TXN_STATE`, nothing written), but a delayed Produce from a finished
//! transaction lands in the producer's next one when that one added the partition too: the
//! class of bug behind KAFKA-17754. Under `transaction.version=2` the epoch is bumped at every
//! EndTxn, so the same delayed Produce is refused (`INVALID_PRODUCER_EPOCH`) and partitions
//! are added implicitly by the leader's verification.

mod common;

use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use common::partition::{create_topic, partition_state, topic_name};
use common::{NodeProcess, connect, exchange, wait_until};
use indexmap::IndexMap;
use kafka_protocol::messages::add_partitions_to_txn_request::AddPartitionsToTxnTopic;
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::records::{
    Compression, Record, RecordBatchEncoder, RecordEncodeOptions, TimestampType,
};

const TOPIC: &str = "verified";
const ID: &str = "logjam-verify";

fn txn_id() -> TransactionalId {
    TransactionalId(StrBytes::from_static_str(ID))
}

fn txn_batch(pid: i64, epoch: i16, sequence: i32, value: &str) -> Bytes {
    let record = Record {
        transactional: true,
        control: false,
        delete_horizon: false,
        partition_leader_epoch: -1,
        producer_id: pid,
        producer_epoch: epoch,
        timestamp_type: TimestampType::Creation,
        offset: 0,
        sequence,
        timestamp: 1_700_000_000_000,
        key: None,
        value: Some(Bytes::from(value.to_owned())),
        headers: IndexMap::new(),
    };
    let mut buf = BytesMut::new();
    let options = RecordEncodeOptions {
        version: 2,
        compression: Compression::None,
    };
    RecordBatchEncoder::encode(&mut buf, &[record], &options).unwrap();
    buf.freeze()
}

/// A transactional Produce (acks=all) naming the transactional id: base offset or error code.
fn produce(address: SocketAddr, version: i16, records: Bytes) -> Result<i64, i16> {
    let request = ProduceRequest::default()
        .with_transactional_id(Some(txn_id()))
        .with_acks(-1)
        .with_timeout_ms(10_000)
        .with_topic_data(vec![
            TopicProduceData::default()
                .with_name(topic_name(TOPIC))
                .with_partition_data(vec![
                    PartitionProduceData::default()
                        .with_index(0)
                        .with_records(Some(records)),
                ]),
        ]);
    let response: ProduceResponse =
        exchange(&mut connect(address), ApiKey::Produce, version, &request);
    let partition = &response.responses[0].partition_responses[0];
    match partition.error_code {
        0 => Ok(partition.base_offset),
        code => Err(code),
    }
}

/// InitProducerId with the transactional id, retried while `__transaction_state` is created
/// and loaded: (producer id, epoch).
fn init(stream: &mut TcpStream) -> (i64, i16) {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let response: InitProducerIdResponse = exchange(
            stream,
            ApiKey::InitProducerId,
            4,
            &InitProducerIdRequest::default()
                .with_transactional_id(Some(txn_id()))
                .with_transaction_timeout_ms(60_000)
                .with_producer_id(ProducerId(-1))
                .with_producer_epoch(-1),
        );
        if response.error_code == 0 {
            return (response.producer_id.0, response.producer_epoch);
        }
        assert!(
            [14, 15, 51].contains(&response.error_code) && Instant::now() < deadline,
            "{response:?}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// The client's AddPartitionsToTxn v3 for partition 0: its error code.
fn add_partition(stream: &mut TcpStream, pid: i64, epoch: i16) -> i16 {
    let response: AddPartitionsToTxnResponse = exchange(
        stream,
        ApiKey::AddPartitionsToTxn,
        3,
        &AddPartitionsToTxnRequest::default()
            .with_v3_and_below_transactional_id(txn_id())
            .with_v3_and_below_producer_id(ProducerId(pid))
            .with_v3_and_below_producer_epoch(epoch)
            .with_v3_and_below_topics(vec![
                AddPartitionsToTxnTopic::default()
                    .with_name(topic_name(TOPIC))
                    .with_partitions(vec![0]),
            ]),
    );
    response.results_by_topic_v3_and_below[0].results_by_partition[0].partition_error_code
}

/// EndTxn commit at `version`: the epoch the producer goes on with.
fn commit(stream: &mut TcpStream, version: i16, pid: i64, epoch: i16) -> i16 {
    let response: EndTxnResponse = exchange(
        stream,
        ApiKey::EndTxn,
        version,
        &EndTxnRequest::default()
            .with_transactional_id(txn_id())
            .with_producer_id(ProducerId(pid))
            .with_producer_epoch(epoch)
            .with_committed(true),
    );
    assert_eq!(response.error_code, 0, "{response:?}");
    if version >= 5 {
        response.producer_epoch
    } else {
        epoch
    }
}

/// (high watermark, last stable offset) of partition 0.
fn offsets(address: SocketAddr) -> (i64, i64) {
    let request = FetchRequest::default()
        .with_replica_id(BrokerId(-1))
        .with_max_wait_ms(0)
        .with_max_bytes(1 << 20)
        .with_isolation_level(1)
        .with_topics(vec![
            FetchTopic::default()
                .with_topic(topic_name(TOPIC))
                .with_partitions(vec![
                    FetchPartition::default()
                        .with_partition(0)
                        .with_partition_max_bytes(1 << 20),
                ]),
        ]);
    let response: FetchResponse = exchange(&mut connect(address), ApiKey::Fetch, 12, &request);
    let data = &response.responses[0].partitions[0];
    (data.high_watermark, data.last_stable_offset)
}

fn node(transaction_version: i16) -> (tempfile::TempDir, NodeProcess) {
    let dir = tempfile::tempdir().unwrap();
    let node = NodeProcess::start(
        dir.path(),
        &format!("transaction.version={transaction_version}"),
    );
    create_topic(node.address, TOPIC, 1, 1, &[]);
    wait_until("a leader", Duration::from_secs(20), || {
        partition_state(node.address, TOPIC).is_some_and(|(l, _)| l == 1)
    });
    (dir, node)
}

/// Goal: show the KAFKA-17754 class of bug where TV1 has it. Method: one node with
/// `transaction.version=1`; an unadded partition is refused; transaction 1 writes seq 0 and
/// commits; transaction 2 adds the partition; the delayed seq 1 of transaction 1 arrives and
/// is appended inside transaction 2.
#[test]
fn tv1_verifies_added_partitions_but_lets_a_delayed_produce_into_the_next_transaction() {
    let (_dir, node) = node(1);
    let mut stream = connect(node.address);
    let (pid, epoch) = init(&mut stream);
    assert_eq!(
        produce(node.address, 9, txn_batch(pid, epoch, 0, "unadded")),
        Err(48)
    );
    assert_eq!(offsets(node.address).0, 0, "nothing written");

    assert_eq!(add_partition(&mut stream, pid, epoch), 0);
    assert_eq!(
        produce(node.address, 9, txn_batch(pid, epoch, 0, "txn1-a")),
        Ok(0)
    );
    let delayed = txn_batch(pid, epoch, 1, "txn1-b (delayed)");
    assert_eq!(
        commit(&mut stream, 4, pid, epoch),
        epoch,
        "TV1 keeps the epoch"
    );
    wait_until("the commit marker", Duration::from_secs(20), || {
        offsets(node.address) == (2, 2)
    });

    assert_eq!(add_partition(&mut stream, pid, epoch), 0);
    assert_eq!(
        produce(node.address, 9, delayed),
        Ok(2),
        "the delayed batch of transaction 1 is verified into transaction 2"
    );
}

/// Goal: the same delayed Produce is refused under TV2 (KIP-890 part 2), and partitions are
/// added by the leader's verification. Method: one node with `transaction.version=2`; Produce
/// v12 without AddPartitionsToTxn is appended; EndTxn v5 commits and bumps the epoch; the
/// delayed batch at the old epoch is `INVALID_PRODUCER_EPOCH` and nothing is written.
#[test]
fn tv2_adds_partitions_implicitly_and_refuses_a_delayed_produce_from_a_finished_transaction() {
    let (_dir, node) = node(2);
    let mut stream = connect(node.address);
    let (pid, epoch) = init(&mut stream);
    assert_eq!(
        produce(node.address, 12, txn_batch(pid, epoch, 0, "txn1-a")),
        Ok(0)
    );
    let delayed = txn_batch(pid, epoch, 1, "txn1-b (delayed)");
    let bumped = commit(&mut stream, 5, pid, epoch);
    assert!(
        bumped > epoch,
        "TV2 bumps the epoch at EndTxn: {epoch} -> {bumped}"
    );
    wait_until("the commit marker", Duration::from_secs(20), || {
        offsets(node.address) == (2, 2)
    });

    assert_eq!(produce(node.address, 12, delayed), Err(47));
    assert_eq!(offsets(node.address), (2, 2), "nothing written");
    // The producer's next transaction, at the bumped epoch, is added and written.
    assert_eq!(
        produce(node.address, 12, txn_batch(pid, bumped, 0, "txn2-a")),
        Ok(2)
    );
}
