//! Replication throughput side by side (issue 19): one `logjam-node` with acks=1 (RF 1)
//! against three combined nodes with RF 3 and acks=all, with the same client settings, in one
//! run, and their ratio; a third row (three nodes, RF 3, acks=1) separates the CPU cost of
//! replicating from the wait for the high watermark. Each row also reports the CPU seconds the
//! node processes and this client spent per million messages (from /proc), since the nodes
//! and the client share this machine's cores and CPU per message bounds throughput as much
//! as latency does. The CPU is counted until every partition's high watermark reaches the
//! log end the last answer reported, since under acks=1 the followers may still be copying
//! when the window closes; "sustained msg/s" divides by that longer time. The closing line
//! turns the cheaper RF 3 row's CPU per message (nodes and client) into a ceiling on this
//! machine's cores: an RF 3 row that replicated as cheaply could not go faster than that.
//!
//! The client is the one of `benches/produce.rs`: one connection per partition (to its
//! leader), each pipelining Produce v9 requests of one batch of 100-byte records.
//!
//! Run with `cargo bench -p logjam-node --bench replication`. `LOGJAM_BENCH_SECONDS` changes
//! the measuring time per row (default 5 s), `LOGJAM_BENCH_ROUNDS` the number of rounds
//! (default 3), `LOGJAM_BENCH_PARTITIONS` the number of partitions and so of connections
//! (default 4; the same for every row), `LOGJAM_BENCH_BATCH_RECORDS` the records per batch
//! (default 100; larger batches show how much of the gap is per-request cost, since acks=all
//! followers fetch about one batch per round trip); every round starts fresh processes.
//! `LOGJAM_BENCH_NODE_SETTINGS` adds node properties to every row, `;` between them (for
//! example `replica.fetch.min.bytes=65536;replica.fetch.wait.max.ms=5`, to trade follower
//! latency for larger fetches). `LOGJAM_NODE_BINARY` runs another build of `logjam-node`,
//! for an A/B comparison of two builds under the same load.
//!
//! Disk: the rows write every byte once (one node) or three times (RF 3) into temporary
//! directories, several GB a round (about 30 GB with 1,000-record batches, most of it in the
//! cluster's directory, which holds both RF 3 rows' topics). A follower that hits ENOSPC stops
//! copying; the bench fails when one has left an ISR, rather than report its work uncounted.

#[path = "../tests/common/mod.rs"]
mod common;
#[path = "support/mod.rs"]
mod support;

use std::io::Write;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use common::partition::{create_topic, latest_offset, partitions};
use common::{Cluster, NodeProcess, batch, connect, read_frame, request_frame, wait_until};
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::*;
use kafka_protocol::protocol::{Decodable, StrBytes};
use support::{cpu_seconds, env_or};

const RECORDS_PER_BATCH: usize = 100;
const IN_FLIGHT: usize = 8;
const VALUE_BYTES: usize = 100;

/// One measured row.
struct Row {
    messages_per_second: f64,
    /// Messages per second from the window's start until every follower had them: what the
    /// cluster sustains, since acks=1 lets followers fall behind the window's rate.
    sustained_per_second: f64,
    /// CPU seconds of the node processes per million messages, counted until every follower
    /// had them.
    node_cpu_per_million: f64,
    /// CPU seconds of this process (the client) per million messages.
    client_cpu_per_million: f64,
}

fn main() {
    if std::env::args().any(|arg| arg == "--list" || arg == "--test") {
        return;
    }
    let seconds: u64 = env_or("LOGJAM_BENCH_SECONDS", 5);
    let rounds: usize = env_or("LOGJAM_BENCH_ROUNDS", 3);
    let partitions: i32 = env_or("LOGJAM_BENCH_PARTITIONS", 4);
    let batch_records: usize = env_or("LOGJAM_BENCH_BATCH_RECORDS", RECORDS_PER_BATCH);
    // Node properties for every row, one `key=value` per line (`\n` or `;` between them).
    let node_settings = std::env::var("LOGJAM_BENCH_NODE_SETTINGS")
        .unwrap_or_default()
        .replace(';', "\n");
    if !node_settings.is_empty() {
        println!("node settings: {}", node_settings.replace('\n', ", "));
    }
    println!(
        "client: {partitions} partitions, one connection each to its leader; {batch_records} \
         records of {VALUE_BYTES} B per batch (one batch per request, no linger), {IN_FLIGHT} \
         requests in flight per connection, {seconds} s per row\n"
    );
    println!(
        "| round | setup | messages/s | sustained msg/s | node CPU s / 1M msg | client CPU s / 1M msg | vs 1 node acks=1 |"
    );
    println!("|---:|---|---:|---:|---:|---:|---:|");
    let mut ratios = Vec::new();
    let mut ceilings = Vec::new();
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get()) as f64;
    for round in 1..=rounds {
        let single = {
            let dir = tempfile::tempdir().unwrap();
            let node = NodeProcess::start(dir.path(), &node_settings);
            create_topic(node.address, "bench", partitions, 1, &[]);
            let leaders = wait_for_leaders(&[node.address], "bench", partitions, 1);
            measure(
                &leaders,
                "bench",
                1,
                seconds,
                batch_records,
                &[node.child.id()],
            )
        };
        print_row(
            round,
            "1 node, RF 1, acks=1",
            &single,
            single.messages_per_second,
        );
        let root = tempfile::tempdir().unwrap();
        let cluster = Cluster::start(root.path(), 3, &node_settings);
        let addresses: Vec<SocketAddr> = cluster.nodes.iter().map(|n| n.address).collect();
        let pids: Vec<u32> = cluster.nodes.iter().map(|n| n.child.id()).collect();
        create_topic(addresses[0], "all", partitions, 3, &[]);
        let leaders = wait_for_leaders(&addresses, "all", partitions, 3);
        let all = measure(&leaders, "all", -1, seconds, batch_records, &pids);
        assert_isr_full(addresses[0], "all", 3);
        print_row(
            round,
            "3 nodes, RF 3, acks=all",
            &all,
            single.messages_per_second,
        );
        create_topic(addresses[0], "one", partitions, 3, &[]);
        let leaders = wait_for_leaders(&addresses, "one", partitions, 3);
        let one = measure(&leaders, "one", 1, seconds, batch_records, &pids);
        assert_isr_full(addresses[0], "one", 3);
        print_row(
            round,
            "3 nodes, RF 3, acks=1",
            &one,
            single.messages_per_second,
        );
        ratios.push(all.messages_per_second / single.messages_per_second);
        // What this machine's CPU leaves for an RF 3 row that copied each message as cheaply
        // as the cheaper RF 3 row of this round (usually acks=1 counted until its followers
        // caught up: they fetch many batches at once): the cores over its CPU per message.
        // Not a proof that no build could do better, but the bar this build's replication
        // sets: the ratio cannot pass it without replicating more cheaply.
        let per_message = [&all, &one]
            .iter()
            .map(|row| (row.node_cpu_per_million + row.client_cpu_per_million) / 1e6)
            .fold(f64::INFINITY, f64::min);
        ceilings.push(cores / per_message / single.messages_per_second);
        drop(cluster);
    }
    println!(
        "\nacks=all (3 nodes, RF 3) / acks=1 (1 node): {}",
        median_of(&ratios)
    );
    println!(
        "CPU ceiling of RF 3 on {cores} cores (at the cheaper RF 3 row's CPU per message) / \
         acks=1 (1 node): {}",
        median_of(&ceilings)
    );
}

/// "median M% over N rounds (a%, b%, ...)" of ratios.
fn median_of(ratios: &[f64]) -> String {
    let mut sorted = ratios.to_vec();
    sorted.sort_by(f64::total_cmp);
    format!(
        "median {:.0}% over {} rounds ({})",
        sorted[sorted.len() / 2] * 100.0,
        sorted.len(),
        ratios
            .iter()
            .map(|r| format!("{:.0}%", r * 100.0))
            .collect::<Vec<_>>()
            .join(", ")
    )
}

fn print_row(round: usize, setup: &str, row: &Row, single: f64) {
    println!(
        "| {round} | {setup} | {:.0} | {:.0} | {:.2} | {:.2} | {:.0}% |",
        row.messages_per_second,
        row.sustained_per_second,
        row.node_cpu_per_million,
        row.client_cpu_per_million,
        row.messages_per_second / single * 100.0
    );
}

/// Waits until every node sees every partition of `topic` with a leader and an ISR of
/// `isr_size`; returns the
/// client address of each partition's leader, in partition order.
fn wait_for_leaders(
    addresses: &[SocketAddr],
    topic: &str,
    count: i32,
    isr_size: usize,
) -> Vec<SocketAddr> {
    let mut leaders = Vec::new();
    wait_until(
        &format!("every partition of {topic} has a full ISR"),
        Duration::from_secs(30),
        || {
            // Every node must have applied the topic, so each leader serves its partitions.
            let views: Vec<_> = addresses.iter().map(|a| partitions(*a, topic)).collect();
            let Some(Some(state)) = views.first().cloned() else {
                return false;
            };
            if views.iter().any(|view| view.as_ref() != Some(&state))
                || state.len() != count as usize
                || state.iter().any(|(l, isr)| *l < 1 || isr.len() != isr_size)
            {
                return false;
            }
            leaders = state
                .iter()
                .map(|(l, _)| addresses[*l as usize - 1])
                .collect();
            true
        },
    );
    leaders
}

/// Fails the bench when a follower left an ISR during the row: the high watermark then stopped
/// waiting for it, so its copying was not all counted.
fn assert_isr_full(address: SocketAddr, topic: &str, isr_size: usize) {
    let state = partitions(address, topic).expect("the topic's partitions");
    assert!(
        state.iter().all(|(_, isr)| isr.len() == isr_size),
        "a follower left the ISR of {topic} during the row ({state:?}), so its work is not all \
         counted: see the nodes' logs (a full disk?)"
    );
}

/// Produces to every partition of `topic` (connection `i` to `leaders[i]`, partition `i`) for
/// `seconds` with `acks` in batches of `batch_records`, asserting every answer is error-free.
fn measure(
    leaders: &[SocketAddr],
    topic: &'static str,
    acks: i16,
    seconds: u64,
    batch_records: usize,
    node_pids: &[u32],
) -> Row {
    let name = topic;
    let topic = TopicName(StrBytes::from_static_str(name));
    let value = vec![b'x'; VALUE_BYTES];
    let values: Vec<&[u8]> = (0..batch_records).map(|_| value.as_slice()).collect();
    let records = batch(&values);
    let nodes_cpu = || -> f64 { node_pids.iter().map(|p| cpu_seconds(&p.to_string())).sum() };
    let barrier = std::sync::Barrier::new(leaders.len() + 1);
    let barrier = &barrier;
    let (acked, elapsed, cpu): (usize, (f64, f64), (f64, f64)) = std::thread::scope(|scope| {
        let handles: Vec<_> = leaders
            .iter()
            .enumerate()
            .map(|(partition, &address)| {
                let request = ProduceRequest::default()
                    .with_acks(acks)
                    .with_timeout_ms(30_000)
                    .with_topic_data(vec![
                        TopicProduceData::default()
                            .with_name(topic.clone())
                            .with_partition_data(vec![
                                PartitionProduceData::default()
                                    .with_index(partition as i32)
                                    .with_records(Some(records.clone())),
                            ]),
                    ]);
                let frame = request_frame(ApiKey::Produce, 9, 1, &request);
                scope.spawn(move || {
                    let mut stream = connect(address);
                    // Warm up outside the measurement: the leader may not have applied the
                    // image that makes it leader yet (NOT_LEADER_OR_FOLLOWER), as a client
                    // would retry.
                    wait_until(
                        "the leader accepts a produce",
                        Duration::from_secs(30),
                        || {
                            stream.write_all(&frame).unwrap();
                            produce_answer(&mut stream).0 == 0
                        },
                    );
                    barrier.wait();
                    let deadline = Instant::now() + Duration::from_secs(seconds);
                    let mut outstanding = 0;
                    let mut acked = 0;
                    let mut log_end = 0;
                    loop {
                        while outstanding < IN_FLIGHT && Instant::now() < deadline {
                            stream.write_all(&frame).unwrap();
                            outstanding += 1;
                        }
                        if outstanding == 0 {
                            return (acked, log_end);
                        }
                        let (error, base_offset) = produce_answer(&mut stream);
                        assert_eq!(error, 0);
                        log_end = base_offset + batch_records as i64;
                        outstanding -= 1;
                        acked += 1;
                    }
                })
            })
            .collect::<Vec<_>>();
        barrier.wait();
        let nodes_before = nodes_cpu();
        let client_before = cpu_seconds("self");
        let started = Instant::now();
        let (acked, log_ends): (Vec<usize>, Vec<i64>) = handles
            .into_iter()
            .map(|handle| handle.join().unwrap())
            .unzip();
        let elapsed = started.elapsed().as_secs_f64();
        // Under acks=1 the followers may still be copying when the window closes: their
        // work belongs to these messages too, so the CPU is counted until every partition's
        // high watermark (its ISR's copy) reaches the log end the last answer reported.
        wait_for_high_watermarks(leaders, name, &log_ends);
        let caught_up = started.elapsed().as_secs_f64();
        let cpu = (
            nodes_cpu() - nodes_before,
            cpu_seconds("self") - client_before,
        );
        (acked.iter().sum(), (elapsed, caught_up), cpu)
    });
    let messages = (acked * batch_records) as f64;
    let millions = messages / 1e6;
    Row {
        messages_per_second: messages / elapsed.0,
        sustained_per_second: messages / elapsed.1,
        node_cpu_per_million: cpu.0 / millions,
        client_cpu_per_million: cpu.1 / millions,
    }
}

/// Reads one Produce v9 response from `stream`: its one partition's error code and base
/// offset.
fn produce_answer(stream: &mut std::net::TcpStream) -> (i16, i64) {
    let mut response = read_frame(stream).expect("node answered");
    ResponseHeader::decode(&mut response, ApiKey::Produce.response_header_version(9)).unwrap();
    let body = ProduceResponse::decode(&mut response, 9).unwrap();
    let partition = &body.responses[0].partition_responses[0];
    (partition.error_code, partition.base_offset)
}

/// Waits until partition `i`'s high watermark, asked of its leader `leaders[i]`, reaches
/// `log_ends[i]`.
fn wait_for_high_watermarks(leaders: &[SocketAddr], topic: &str, log_ends: &[i64]) {
    let mut streams: Vec<_> = leaders.iter().map(|&address| connect(address)).collect();
    wait_until(
        "every follower caught up with its leader",
        Duration::from_secs(120),
        || {
            (0..)
                .zip(streams.iter_mut().zip(log_ends))
                .all(|(index, (stream, end))| latest_offset(stream, topic, index) >= *end)
        },
    );
}
