//! OffsetCommit throughput on three combined `logjam-node` processes (default durability
//! settings: `__consumer_offsets` with 3 replicas, a commit answered once replicated), one
//! connection to the group's coordinator. For 1, 10 and 100 partitions per commit, a simple
//! (memberless) group commits `LOGJAM_COMMIT_BENCH_COUNT` times (default 500) one after
//! another, then the same with 8 commits in flight on the connection (pipelined, as a client
//! with `commitAsync` does); prints commits/s, offsets/s and the commit latency p50/p99 of the
//! sequential run. Every answer is checked: a commit that is not NONE for every partition stops
//! the bench.
//!
//! Run with `cargo bench -p logjam-node --bench offset_commit`.

#[path = "../tests/common/mod.rs"]
mod common;

use std::io::Write;
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use common::{Cluster, connect, exchange, read_frame, request_frame};
use kafka_protocol::messages::offset_commit_request::{
    OffsetCommitRequestPartition, OffsetCommitRequestTopic,
};
use kafka_protocol::messages::*;
use kafka_protocol::protocol::{Decodable, StrBytes};

const TOPIC: &str = "bench-commits";
const PARTITIONS: i32 = 100;
const VERSION: i16 = 8;
const IN_FLIGHT: usize = 8;

fn text(value: &str) -> StrBytes {
    StrBytes::from_string(value.to_owned())
}

/// The coordinator of `group`, asked until the group coordinator serves it.
fn find(via: SocketAddr, group: &str) -> i32 {
    let mut stream = connect(via);
    loop {
        let response: FindCoordinatorResponse = exchange(
            &mut stream,
            ApiKey::FindCoordinator,
            4,
            &FindCoordinatorRequest::default()
                .with_key_type(0)
                .with_coordinator_keys(vec![text(group)]),
        );
        if response.coordinators[0].error_code == 0 {
            return response.coordinators[0].node_id.0;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A memberless commit of `partitions` partitions at offset `offset`.
fn commit(group: &str, partitions: i32, offset: i64) -> OffsetCommitRequest {
    OffsetCommitRequest::default()
        .with_group_id(GroupId(text(group)))
        .with_generation_id_or_member_epoch(-1)
        .with_member_id(text(""))
        .with_topics(vec![
            OffsetCommitRequestTopic::default()
                .with_name(TopicName(text(TOPIC)))
                .with_partitions(
                    (0..partitions)
                        .map(|partition| {
                            OffsetCommitRequestPartition::default()
                                .with_partition_index(partition)
                                .with_committed_offset(offset)
                        })
                        .collect(),
                ),
        ])
}

/// Whether every partition of the answer is NONE; a load in progress is worth another try.
fn accepted(response: &OffsetCommitResponse) -> Result<(), i16> {
    let codes = response
        .topics
        .iter()
        .flat_map(|t| t.partitions.iter().map(|p| p.error_code));
    match codes.clone().find(|code| *code != 0) {
        None => Ok(()),
        Some(code) => Err(code),
    }
}

fn decode(frame: bytes::Bytes) -> OffsetCommitResponse {
    let mut body = frame;
    let header_version = ApiKey::OffsetCommit.response_header_version(VERSION);
    ResponseHeader::decode(&mut body, header_version).expect("header");
    OffsetCommitResponse::decode(&mut body, VERSION).expect("body")
}

fn percentile(sorted: &[Duration], p: f64) -> f64 {
    let index = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[index].as_secs_f64() * 1000.0
}

/// `count` commits of `partitions` partitions, one at a time; returns the latencies.
fn sequential(stream: &mut TcpStream, group: &str, partitions: i32, count: usize) -> Vec<Duration> {
    let mut latencies = Vec::with_capacity(count);
    let mut offset = 0;
    while latencies.len() < count {
        offset += 1;
        let started = Instant::now();
        let response: OffsetCommitResponse = exchange(
            stream,
            ApiKey::OffsetCommit,
            VERSION,
            &commit(group, partitions, offset),
        );
        match accepted(&response) {
            Ok(()) => latencies.push(started.elapsed()),
            // COORDINATOR_LOAD_IN_PROGRESS right after the group's partition got its leader.
            Err(14) => std::thread::sleep(Duration::from_millis(20)),
            Err(code) => panic!("OffsetCommit answered {code}"),
        }
    }
    latencies
}

/// `count` commits with `IN_FLIGHT` outstanding; returns the elapsed time.
fn pipelined(stream: &mut TcpStream, group: &str, partitions: i32, count: usize) -> Duration {
    let started = Instant::now();
    let (mut sent, mut answered) = (0usize, 0usize);
    while answered < count {
        while sent < count && sent - answered < IN_FLIGHT {
            let frame = request_frame(
                ApiKey::OffsetCommit,
                VERSION,
                i32::try_from(sent).unwrap_or(i32::MAX),
                &commit(group, partitions, 1_000_000 + sent as i64),
            );
            stream.write_all(&frame).expect("send");
            sent += 1;
        }
        let frame = read_frame(stream).expect("an answer");
        if let Err(code) = accepted(&decode(frame)) {
            panic!("pipelined OffsetCommit answered {code}");
        }
        answered += 1;
    }
    started.elapsed()
}

fn main() {
    if std::env::args().any(|arg| arg == "--list" || arg == "--test") {
        return;
    }
    let count: usize = std::env::var("LOGJAM_COMMIT_BENCH_COUNT")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(500);
    let root = tempfile::tempdir().unwrap();
    let cluster = Cluster::start(
        root.path(),
        3,
        "broker.heartbeat.interval.ms=500\nbroker.session.timeout.ms=3000",
    );
    let first = cluster.nodes[0].address;
    assert_eq!(
        common::create_topics(first, &[(TOPIC, PARTITIONS, 3)]),
        vec![0]
    );
    let address = |node: i32| cluster.nodes[(node - 1) as usize].address;
    println!(
        "| partitions per commit | sequential commits/s | offsets/s | p50 ms | p99 ms | \
         {IN_FLIGHT} in flight: commits/s | offsets/s |"
    );
    println!("|---|---|---|---|---|---|---|");
    for partitions in [1, 10, 100] {
        let group = format!("bench-group-{partitions}");
        let mut stream = connect(address(find(first, &group)));
        // Warm up: the first commits of a group may wait for its partition's load.
        sequential(&mut stream, &group, partitions, 5);
        let started = Instant::now();
        let mut latencies = sequential(&mut stream, &group, partitions, count);
        let elapsed = started.elapsed().as_secs_f64();
        latencies.sort();
        let piped = pipelined(&mut stream, &group, partitions, count).as_secs_f64();
        let per_second = count as f64 / elapsed;
        let piped_per_second = count as f64 / piped;
        println!(
            "| {partitions} | {per_second:.0} | {:.0} | {:.2} | {:.2} | {piped_per_second:.0} | {:.0} |",
            per_second * f64::from(partitions),
            percentile(&latencies, 0.5),
            percentile(&latencies, 0.99),
            piped_per_second * f64::from(partitions),
        );
    }
}
