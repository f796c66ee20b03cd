//! Transactions on three combined `logjam-node` processes (default durability settings),
//! one transactional producer over the wire: for 1, 10 and 100 records per transaction
//! (100-byte values, one partition with 3 replicas, acks=all), each transaction is
//! AddPartitionsToTxn (retried on `CONCURRENT_TRANSACTIONS` while the previous transaction's
//! markers complete, as clients do), one transactional Produce, EndTxn(commit). Prints
//! transactions/s and the EndTxn latency p50/p99; then coordinator failover: SIGKILL the
//! coordinator of a transactional id and time until InitProducerId succeeds at the new one.
//!
//! Run with `cargo bench -p logjam-node --bench transactions`; `LOGJAM_TXN_BENCH_COUNT` sets
//! the transactions per size (default 300), `LOGJAM_FAILOVER_TRIALS` the failovers (3).

#[path = "../tests/common/mod.rs"]
mod common;

use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use common::{Cluster, connect, exchange};
use indexmap::IndexMap;
use kafka_protocol::messages::add_partitions_to_txn_request::AddPartitionsToTxnTopic;
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::records::{
    Compression, Record, RecordBatchEncoder, RecordEncodeOptions, TimestampType,
};

const TOPIC: &str = "bench-txn";

fn text(value: &str) -> StrBytes {
    StrBytes::from_string(value.to_owned())
}

fn find(via: SocketAddr, id: &str) -> i32 {
    let mut stream = connect(via);
    loop {
        let response: FindCoordinatorResponse = exchange(
            &mut stream,
            ApiKey::FindCoordinator,
            4,
            &FindCoordinatorRequest::default()
                .with_key_type(1)
                .with_coordinator_keys(vec![text(id)]),
        );
        if response.coordinators[0].error_code == 0 {
            return response.coordinators[0].node_id.0;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// InitProducerId, retried on retriable coordinator errors; `None` on any other answer.
fn init(stream: &mut TcpStream, id: &str) -> Option<(i64, i16)> {
    loop {
        let response: InitProducerIdResponse = exchange(
            stream,
            ApiKey::InitProducerId,
            4,
            &InitProducerIdRequest::default()
                .with_transactional_id(Some(TransactionalId(text(id))))
                .with_transaction_timeout_ms(60_000)
                .with_producer_id(ProducerId(-1))
                .with_producer_epoch(-1),
        );
        match response.error_code {
            0 => return Some((response.producer_id.0, response.producer_epoch)),
            14..=16 | 51 => std::thread::sleep(Duration::from_millis(5)),
            _ => return None,
        }
    }
}

fn txn_batch(pid: i64, epoch: i16, sequence: i32, count: usize) -> Bytes {
    let records: Vec<Record> = (0..count)
        .map(|i| Record {
            transactional: true,
            control: false,
            delete_horizon: false,
            partition_leader_epoch: -1,
            producer_id: pid,
            producer_epoch: epoch,
            timestamp_type: TimestampType::Creation,
            offset: i as i64,
            sequence: sequence + i as i32,
            timestamp: 1_700_000_000_000,
            key: None,
            value: Some(Bytes::from(vec![7u8; 100])),
            headers: IndexMap::new(),
        })
        .collect();
    let mut buf = BytesMut::new();
    RecordBatchEncoder::encode(
        &mut buf,
        &records,
        &RecordEncodeOptions {
            version: 2,
            compression: Compression::None,
        },
    )
    .unwrap();
    buf.freeze()
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    sorted[((sorted.len() as f64 - 1.0) * p).round() as usize]
}

fn main() {
    if std::env::args().any(|arg| arg == "--list" || arg == "--test") {
        return;
    }
    let count: usize = std::env::var("LOGJAM_TXN_BENCH_COUNT")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(300);
    let trials: usize = std::env::var("LOGJAM_FAILOVER_TRIALS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(3);
    let root = tempfile::tempdir().unwrap();
    let mut cluster = Cluster::start(
        root.path(),
        3,
        "broker.heartbeat.interval.ms=500\nbroker.session.timeout.ms=3000",
    );
    let first = cluster.nodes[0].address;
    assert_eq!(common::create_topics(first, &[(TOPIC, 1, 3)]), vec![0]);
    let leader = common::metadata(first)
        .unwrap()
        .topics
        .iter()
        .find(|t| t.name.as_ref().map(|n| n.as_str()) == Some(TOPIC))
        .unwrap()
        .partitions[0]
        .leader_id
        .0;
    let address = |node: i32| cluster.nodes[(node - 1) as usize].address;
    println!("| records per transaction | transactions/s | EndTxn p50 ms | EndTxn p99 ms |");
    println!("|---|---|---|---|");
    for per_txn in [1usize, 10, 100] {
        let id = format!("bench-{per_txn}");
        let mut coordinator = connect(address(find(first, &id)));
        let mut producer = connect(address(leader));
        let (pid, epoch) = init(&mut coordinator, &id).expect("InitProducerId");
        let mut sequence = 0;
        let mut commits = Vec::with_capacity(count);
        let started = Instant::now();
        for _ in 0..count {
            loop {
                let added: AddPartitionsToTxnResponse = exchange(
                    &mut coordinator,
                    ApiKey::AddPartitionsToTxn,
                    3,
                    &AddPartitionsToTxnRequest::default()
                        .with_v3_and_below_transactional_id(TransactionalId(text(&id)))
                        .with_v3_and_below_producer_id(ProducerId(pid))
                        .with_v3_and_below_producer_epoch(epoch)
                        .with_v3_and_below_topics(vec![
                            AddPartitionsToTxnTopic::default()
                                .with_name(TopicName(text(TOPIC)))
                                .with_partitions(vec![0]),
                        ]),
                );
                match added.results_by_topic_v3_and_below[0].results_by_partition[0]
                    .partition_error_code
                {
                    0 => break,
                    51 => std::thread::sleep(Duration::from_millis(1)),
                    other => panic!("AddPartitionsToTxn: {other}"),
                }
            }
            let produced: ProduceResponse = exchange(
                &mut producer,
                ApiKey::Produce,
                9,
                &ProduceRequest::default()
                    .with_transactional_id(Some(TransactionalId(text(&id))))
                    .with_acks(-1)
                    .with_timeout_ms(30_000)
                    .with_topic_data(vec![
                        TopicProduceData::default()
                            .with_name(TopicName(text(TOPIC)))
                            .with_partition_data(vec![
                                PartitionProduceData::default()
                                    .with_index(0)
                                    .with_records(Some(txn_batch(pid, epoch, sequence, per_txn))),
                            ]),
                    ]),
            );
            let code = produced.responses[0].partition_responses[0].error_code;
            assert_eq!(code, 0, "Produce: {produced:?}");
            sequence += per_txn as i32;
            let committing = Instant::now();
            let ended: EndTxnResponse = exchange(
                &mut coordinator,
                ApiKey::EndTxn,
                4,
                &EndTxnRequest::default()
                    .with_transactional_id(TransactionalId(text(&id)))
                    .with_producer_id(ProducerId(pid))
                    .with_producer_epoch(epoch)
                    .with_committed(true),
            );
            assert_eq!(ended.error_code, 0, "EndTxn: {ended:?}");
            commits.push(committing.elapsed().as_secs_f64() * 1000.0);
        }
        let rate = count as f64 / started.elapsed().as_secs_f64();
        commits.sort_by(f64::total_cmp);
        println!(
            "| {per_txn} | {rate:.0} | {:.2} | {:.2} |",
            percentile(&commits, 0.5),
            percentile(&commits, 0.99)
        );
    }
    println!();
    println!("| failover trial | killed coordinator | ms until InitProducerId succeeds |");
    println!("|---|---|---|");
    for trial in 1..=trials {
        let id = format!("bench-failover-{trial}");
        let coordinator = find(first, &id);
        let killed_at = Instant::now();
        let index = (coordinator - 1) as usize;
        cluster.nodes[index].kill();
        let survivor = cluster.nodes[(index + 1) % 3].address;
        let elapsed = loop {
            let next = find(survivor, &id);
            if next != coordinator {
                let mut stream = connect(cluster.nodes[(next - 1) as usize].address);
                if init(&mut stream, &id).is_some() {
                    break killed_at.elapsed();
                }
            }
            std::thread::sleep(Duration::from_millis(10));
        };
        println!(
            "| {trial} | {coordinator} | {:.0} |",
            elapsed.as_secs_f64() * 1000.0
        );
        cluster.nodes[index].restart();
    }
}
