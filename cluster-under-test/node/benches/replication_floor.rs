//! The floor under the replication bench (issue 19): the client of `benches/replication.rs`
//! served by the least work Kafka's replication protocol allows, on this machine's kernel, so
//! the bench's acks=all ratio can be read against what any implementation could reach here.
//!
//! Both setups are threads of this process with blocking sockets (one thread per connection,
//! woken by the kernel directly: no runtime, no epoll, no Kafka encoding, no index, no
//! metadata). Per batch of a partition:
//!
//! ```text
//! single node, acks=1:  client ─batch─▶ leader: check CRC, append to its file ─ack─▶ client
//!
//! RF 3, acks=all:       client ─batch─▶ leader: check CRC, append ─batch─▶ follower 1 and 2
//!                       (each: check CRC, append ─ack─▶ leader) ─ack─▶ client
//! ```
//!
//! That is 2 sends, 1 append and 1 checksum per batch for one node, and 6 sends (the batch to
//! two followers stands for their fetch answers, their acks for the next fetches that carry
//! their log ends), 3 appends and 3 checksums for RF 3, which is what acks=all costs when the
//! leader has one batch of a partition at a time, as a connection processed one request at a
//! time (Kafka's channel muting) gives it.
//!
//! Everything here is cheaper than a real node, so the single row is a ceiling on a real
//! node's acks=1, and the RF 3 row a ceiling on a real node's acks=all when each leader leads
//! one partition (three partitions on three nodes). With more partitions per leader a real
//! follower's fetch can carry several partitions' batches at once, which this floor, with a
//! connection per partition and follower, does not model. Their ratio says what the two rows
//! of the replication bench are up against on this machine, where all three replicas share
//! its cores.
//!
//! Run with `cargo bench -p logjam-node --bench replication_floor`; `LOGJAM_BENCH_SECONDS`,
//! `LOGJAM_BENCH_ROUNDS`, `LOGJAM_BENCH_PARTITIONS` and `LOGJAM_BENCH_BATCH_RECORDS` as for
//! the replication bench (5 s, 3 rounds, 4 partitions, 100 records of 100 B per batch, 8
//! requests in flight per connection). It writes every byte once or three times into a
//! temporary directory, as the replication bench does (several GB a round).

#[path = "../tests/common/mod.rs"]
mod common;
#[path = "support/mod.rs"]
mod support;

use std::fs::File;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::Barrier;
use std::time::{Duration, Instant};

use support::{cpu_seconds, env_or};

const IN_FLIGHT: usize = 8;
const VALUE_BYTES: usize = 100;
/// The answer to a batch: its base offset, as a Produce answer or a follower's log end.
const ACK_BYTES: usize = 8;

/// One measured row.
struct Row {
    messages_per_second: f64,
    /// CPU seconds of this process (client and replicas) per million messages.
    cpu_per_million: f64,
}

fn main() {
    if std::env::args().any(|arg| arg == "--list" || arg == "--test") {
        return;
    }
    let seconds: u64 = env_or("LOGJAM_BENCH_SECONDS", 5);
    let rounds: usize = env_or("LOGJAM_BENCH_ROUNDS", 3);
    let partitions: usize = env_or("LOGJAM_BENCH_PARTITIONS", 4);
    let batch_records: usize = env_or("LOGJAM_BENCH_BATCH_RECORDS", 100);
    let value = vec![b'x'; VALUE_BYTES];
    let values: Vec<&[u8]> = (0..batch_records).map(|_| value.as_slice()).collect();
    let batch = common::batch(&values);
    println!(
        "client: {partitions} partitions, one connection each to its leader; {batch_records} \
         records of {VALUE_BYTES} B per batch ({} B), {IN_FLIGHT} requests in flight per \
         connection, {seconds} s per row; replicas are threads with blocking sockets\n",
        batch.len()
    );
    println!("| round | setup | messages/s | CPU s / 1M msg (all threads) | vs 1 node acks=1 |");
    println!("|---:|---|---:|---:|---:|");
    let mut ratios = Vec::new();
    for round in 1..=rounds {
        let single = measure(&batch, partitions, 0, seconds);
        print_row(round, "1 replica, acks=1", &single, &single);
        let all = measure(&batch, partitions, 2, seconds);
        print_row(round, "3 replicas, acks=all", &all, &single);
        ratios.push(all.messages_per_second / single.messages_per_second);
    }
    let mut sorted = ratios.clone();
    sorted.sort_by(f64::total_cmp);
    println!(
        "\nfloor: acks=all (3 replicas) / acks=1 (1 replica): median {:.0}% over {} rounds ({})",
        sorted[sorted.len() / 2] * 100.0,
        sorted.len(),
        ratios
            .iter()
            .map(|r| format!("{:.0}%", r * 100.0))
            .collect::<Vec<_>>()
            .join(", ")
    );
}

fn print_row(round: usize, setup: &str, row: &Row, single: &Row) {
    println!(
        "| {round} | {setup} | {:.0} | {:.2} | {:.0}% |",
        row.messages_per_second,
        row.cpu_per_million,
        row.messages_per_second / single.messages_per_second * 100.0
    );
}

/// Produces `batch` to `partitions` leaders, each with `followers` followers, for `seconds`.
fn measure(batch: &[u8], partitions: usize, followers: usize, seconds: u64) -> Row {
    let dir = tempfile::tempdir().unwrap();
    let mut frame = (batch.len() as u32).to_be_bytes().to_vec();
    frame.extend_from_slice(batch);
    let frame = frame.as_slice();
    let barrier = Barrier::new(partitions + 1);
    let barrier = &barrier;
    let (acked, elapsed, cpu) = std::thread::scope(|scope| {
        let mut clients = Vec::new();
        for partition in 0..partitions {
            let mut replicas = Vec::new();
            for follower in 0..followers {
                let path = dir.path().join(format!("{partition}-follower-{follower}"));
                let (address, accepted) = listen();
                scope.spawn(move || follow(accepted(), &path));
                replicas.push(connect(address));
            }
            let path = dir.path().join(format!("{partition}-leader"));
            let (address, accepted) = listen();
            scope.spawn(move || lead(accepted(), replicas, &path));
            let mut stream = connect(address);
            clients.push(scope.spawn(move || {
                barrier.wait();
                let deadline = Instant::now() + Duration::from_secs(seconds);
                let (mut outstanding, mut acked) = (0usize, 0usize);
                let mut ack = [0u8; ACK_BYTES];
                loop {
                    while outstanding < IN_FLIGHT && Instant::now() < deadline {
                        stream.write_all(frame).unwrap();
                        outstanding += 1;
                    }
                    if outstanding == 0 {
                        // Closing the connection ends the leader, which ends its followers.
                        return acked;
                    }
                    stream.read_exact(&mut ack).unwrap();
                    outstanding -= 1;
                    acked += 1;
                }
            }));
        }
        barrier.wait();
        let before = cpu_seconds("self");
        let started = Instant::now();
        let acked: usize = clients.into_iter().map(|c| c.join().unwrap()).sum();
        let elapsed = started.elapsed().as_secs_f64();
        (acked, elapsed, cpu_seconds("self") - before)
    });
    let messages = (acked * (batch_records(batch))) as f64;
    Row {
        messages_per_second: messages / elapsed,
        cpu_per_million: cpu / (messages / 1e6),
    }
}

/// The record count of a v2 batch (bytes 57..61).
fn batch_records(batch: &[u8]) -> usize {
    u32::from_be_bytes(batch[57..61].try_into().unwrap()) as usize
}

/// A loopback listener and a function that accepts its one connection.
fn listen() -> (std::net::SocketAddr, impl FnOnce() -> TcpStream) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let address = listener.local_addr().unwrap();
    (address, move || {
        let (stream, _) = listener.accept().unwrap();
        stream.set_nodelay(true).unwrap();
        stream
    })
}

fn connect(address: std::net::SocketAddr) -> TcpStream {
    let stream = TcpStream::connect(address).unwrap();
    stream.set_nodelay(true).unwrap();
    stream
}

/// Reads one length-prefixed frame into `frame` (prefix included, so it can be forwarded as
/// it is); `false` at the end of the stream.
fn read_frame(stream: &mut TcpStream, frame: &mut Vec<u8>) -> bool {
    let mut size = [0u8; 4];
    if stream.read_exact(&mut size).is_err() {
        return false;
    }
    frame.clear();
    frame.extend_from_slice(&size);
    frame.resize(4 + u32::from_be_bytes(size) as usize, 0);
    stream.read_exact(&mut frame[4..]).unwrap();
    true
}

/// What every replica does with a batch: check its CRC (attributes to the end, as Kafka's
/// `DefaultRecordBatch.isValid`) and append it to the log file.
fn check_and_append(batch: &[u8], log: &mut File) {
    let stored = u32::from_be_bytes(batch[17..21].try_into().unwrap());
    assert_eq!(crc32c::crc32c(&batch[21..]), stored, "corrupt batch");
    log.write_all(batch).unwrap();
}

/// A partition's leader: appends each batch, sends it to every follower, waits for all of
/// their acks, then acks the client.
fn lead(mut client: TcpStream, mut followers: Vec<TcpStream>, path: &std::path::Path) {
    let mut log = File::create(path).unwrap();
    let mut frame = Vec::new();
    let mut ack = [0u8; ACK_BYTES];
    let mut offset = 0u64;
    while read_frame(&mut client, &mut frame) {
        check_and_append(&frame[4..], &mut log);
        for follower in &mut followers {
            follower.write_all(&frame).unwrap();
        }
        for follower in &mut followers {
            follower.read_exact(&mut ack).unwrap();
        }
        client.write_all(&offset.to_be_bytes()).unwrap();
        offset += batch_records(&frame[4..]) as u64;
    }
}

/// A follower of one partition: appends each batch it is sent and acks its new log end.
fn follow(mut leader: TcpStream, path: &std::path::Path) {
    let mut log = File::create(path).unwrap();
    let mut frame = Vec::new();
    let mut log_end = 0u64;
    while read_frame(&mut leader, &mut frame) {
        check_and_append(&frame[4..], &mut log);
        log_end += batch_records(&frame[4..]) as u64;
        leader.write_all(&log_end.to_be_bytes()).unwrap();
    }
}
