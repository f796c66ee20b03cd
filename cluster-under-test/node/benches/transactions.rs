//! Transactions on three combined `logjam-node` processes (default durability settings),
//! one producer over the wire, one partition with 3 replicas, acks=all, 100-byte values. For
//! 1, 10 and 100 records per transaction, each transaction is AddPartitionsToTxn (retried on
//! `CONCURRENT_TRANSACTIONS` while the previous transaction's markers complete, as clients
//! do), one transactional Produce, EndTxn(commit); in the same run, the idempotent
//! non-transactional producer sends the same records in Produce requests of the same size.
//! Prints transactions/s, records/s of both, and the EndTxn latency p50/p99; then coordinator
//! failover: a transaction is opened (a partition added, a batch written), the coordinator of
//! its transactional id SIGKILLed, and the time measured until the producer, starting over at
//! the new coordinator (InitProducerId, which aborts the open transaction), commits a
//! transaction.
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

/// AddPartitionsToTxn v3 of partition 0, retried on `CONCURRENT_TRANSACTIONS`: the error code.
fn add_partition(coordinator: &mut TcpStream, id: &str, pid: i64, epoch: i16) -> i16 {
    loop {
        let added: AddPartitionsToTxnResponse = exchange(
            coordinator,
            ApiKey::AddPartitionsToTxn,
            3,
            &AddPartitionsToTxnRequest::default()
                .with_v3_and_below_transactional_id(TransactionalId(text(id)))
                .with_v3_and_below_producer_id(ProducerId(pid))
                .with_v3_and_below_producer_epoch(epoch)
                .with_v3_and_below_topics(vec![
                    AddPartitionsToTxnTopic::default()
                        .with_name(TopicName(text(TOPIC)))
                        .with_partitions(vec![0]),
                ]),
        );
        match added.results_by_topic_v3_and_below[0].results_by_partition[0].partition_error_code {
            51 => std::thread::sleep(Duration::from_millis(1)),
            code => return code,
        }
    }
}

/// One acks=all Produce of `records` to partition 0 (v9): the partition's error code.
fn produce(leader: &mut TcpStream, id: Option<&str>, records: Bytes) -> i16 {
    let produced: ProduceResponse = exchange(
        leader,
        ApiKey::Produce,
        9,
        &ProduceRequest::default()
            .with_transactional_id(id.map(|id| TransactionalId(text(id))))
            .with_acks(-1)
            .with_timeout_ms(30_000)
            .with_topic_data(vec![
                TopicProduceData::default()
                    .with_name(TopicName(text(TOPIC)))
                    .with_partition_data(vec![
                        PartitionProduceData::default()
                            .with_index(0)
                            .with_records(Some(records)),
                    ]),
            ]),
    );
    produced.responses[0].partition_responses[0].error_code
}

/// EndTxn v4 commit: the error code.
fn commit(coordinator: &mut TcpStream, id: &str, pid: i64, epoch: i16) -> i16 {
    let ended: EndTxnResponse = exchange(
        coordinator,
        ApiKey::EndTxn,
        4,
        &EndTxnRequest::default()
            .with_transactional_id(TransactionalId(text(id)))
            .with_producer_id(ProducerId(pid))
            .with_producer_epoch(epoch)
            .with_committed(true),
    );
    ended.error_code
}

/// The leader of partition 0 of the bench topic as `via` sees it.
fn leader_of(via: SocketAddr) -> Option<i32> {
    common::metadata(via)?
        .topics
        .iter()
        .find(|t| t.name.as_ref().map(|n| n.as_str()) == Some(TOPIC))?
        .partitions
        .first()
        .map(|p| p.leader_id.0)
        .filter(|leader| *leader >= 1)
}

/// Whether every partition `via` knows has all three replicas in its ISR.
fn fully_replicated(via: SocketAddr) -> bool {
    common::metadata(via).is_some_and(|metadata| {
        metadata
            .topics
            .iter()
            .flat_map(|t| t.partitions.iter())
            .all(|p| p.isr_nodes.len() == 3)
    })
}

/// Idempotent producer: `count` acks=all Produce requests of `per_request` records; records/s.
fn idempotent_rate(leader: SocketAddr, per_request: usize, count: usize) -> f64 {
    let mut stream = connect(leader);
    let response: InitProducerIdResponse = exchange(
        &mut stream,
        ApiKey::InitProducerId,
        4,
        &InitProducerIdRequest::default()
            .with_transactional_id(None)
            .with_transaction_timeout_ms(60_000)
            .with_producer_id(ProducerId(-1))
            .with_producer_epoch(-1),
    );
    assert_eq!(response.error_code, 0, "InitProducerId: {response:?}");
    let (pid, epoch) = (response.producer_id.0, response.producer_epoch);
    let value = [7u8; 100];
    let values: Vec<&[u8]> = vec![&value[..]; per_request];
    let started = Instant::now();
    for request in 0..count {
        let sequence = (request * per_request) as i32;
        let records = common::producer_batch(&values, pid, epoch, sequence);
        assert_eq!(produce(&mut stream, None, records), 0, "idempotent Produce");
    }
    (count * per_request) as f64 / started.elapsed().as_secs_f64()
}

/// One failover trial: opens a transaction of `id`, SIGKILLs its coordinator, and returns the
/// killed node and the time from the kill until a transaction of `id` commits.
fn failover(cluster: &mut Cluster, id: &str) -> (i32, Duration) {
    let address = |cluster: &Cluster, node: i32| cluster.nodes[(node - 1) as usize].address;
    let first = cluster.nodes[0].address;
    let coordinator = find(first, id);
    let mut stream = connect(address(cluster, coordinator));
    let (pid, epoch) = init(&mut stream, id).expect("InitProducerId");
    assert_eq!(add_partition(&mut stream, id, pid, epoch), 0);
    let leader = leader_of(first).expect("a partition leader");
    let mut producer = connect(address(cluster, leader));
    assert_eq!(
        produce(&mut producer, Some(id), txn_batch(pid, epoch, 0, 10)),
        0
    );
    let index = (coordinator - 1) as usize;
    let killed_at = Instant::now();
    cluster.nodes[index].kill();
    let survivor = cluster.nodes[(index + 1) % 3].address;
    // An attempt may meet a node that is dead or not yet leader (a refused connection, a
    // closed stream): that panics inside the attempt and is retried.
    let quiet = std::panic::take_hook();
    std::panic::set_hook(Box::new(|_| {}));
    loop {
        let attempt = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            let next = find(survivor, id);
            if next == coordinator {
                return false;
            }
            let mut stream = connect(address(cluster, next));
            let Some((pid, epoch)) = init(&mut stream, id) else {
                return false;
            };
            if add_partition(&mut stream, id, pid, epoch) != 0 {
                return false;
            }
            let Some(leader) = leader_of(survivor).filter(|leader| *leader != coordinator) else {
                return false;
            };
            let mut producer = connect(address(cluster, leader));
            produce(&mut producer, Some(id), txn_batch(pid, epoch, 0, 10)) == 0
                && commit(&mut stream, id, pid, epoch) == 0
        }));
        if attempt.unwrap_or(false) {
            break;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    let elapsed = killed_at.elapsed();
    std::panic::set_hook(quiet);
    (coordinator, elapsed)
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
    let leader = loop {
        match leader_of(first) {
            Some(leader) => break leader,
            None => std::thread::sleep(Duration::from_millis(20)),
        }
    };
    let address = |node: i32| cluster.nodes[(node - 1) as usize].address;
    println!(
        "| records per transaction | transactions/s | transactional records/s | \
         idempotent records/s (same request size) | EndTxn p50 ms | EndTxn p99 ms |"
    );
    println!("|---|---|---|---|---|---|");
    for per_txn in [1usize, 10, 100] {
        let id = format!("bench-{per_txn}");
        let mut coordinator = connect(address(find(first, &id)));
        let mut producer = connect(address(leader));
        let (pid, epoch) = init(&mut coordinator, &id).expect("InitProducerId");
        let mut sequence = 0;
        let mut commits = Vec::with_capacity(count);
        let started = Instant::now();
        for _ in 0..count {
            let added = add_partition(&mut coordinator, &id, pid, epoch);
            assert_eq!(added, 0, "AddPartitionsToTxn");
            let records = txn_batch(pid, epoch, sequence, per_txn);
            assert_eq!(produce(&mut producer, Some(&id), records), 0, "Produce");
            sequence += per_txn as i32;
            let committing = Instant::now();
            assert_eq!(commit(&mut coordinator, &id, pid, epoch), 0, "EndTxn");
            commits.push(committing.elapsed().as_secs_f64() * 1000.0);
        }
        let elapsed = started.elapsed().as_secs_f64();
        let rate = count as f64 / elapsed;
        let idempotent = idempotent_rate(address(leader), per_txn, count);
        commits.sort_by(f64::total_cmp);
        println!(
            "| {per_txn} | {rate:.0} | {:.0} | {idempotent:.0} | {:.2} | {:.2} |",
            rate * per_txn as f64,
            percentile(&commits, 0.5),
            percentile(&commits, 0.99)
        );
    }
    println!();
    println!(
        "| failover trial | killed coordinator | ms from the kill (mid-transaction) to the next commit |"
    );
    println!("|---|---|---|");
    for trial in 1..=trials {
        let (killed, elapsed) = failover(&mut cluster, &format!("bench-failover-{trial}"));
        println!(
            "| {trial} | {killed} | {:.0} |",
            elapsed.as_secs_f64() * 1000.0
        );
        cluster.nodes[(killed - 1) as usize].restart();
        let first = cluster.nodes[0].address;
        while !fully_replicated(first) {
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}
