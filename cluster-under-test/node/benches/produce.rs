//! Single-node produce throughput: a `logjam-node` process (the real binary, default
//! settings, so no fsync per message) and 4 client connections each pipelining Produce
//! requests (acks=1, 100 records per batch, 8 requests in flight) for a fixed time, for
//! 100-byte and 1 KB values. Prints messages/s and MB/s of values.
//!
//! Run with `cargo bench -p logjam-node --bench produce`. `LOGJAM_BENCH_SECONDS` changes the
//! measuring time (default 5 s per size).

#[path = "../tests/common/mod.rs"]
mod common;

use std::io::Write;
use std::time::{Duration, Instant};

use common::{NodeProcess, batch, connect, exchange, read_frame, request_frame};
use kafka_protocol::messages::create_topics_request::CreatableTopic;
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::*;
use kafka_protocol::protocol::{Decodable, StrBytes};

const CONNECTIONS: i32 = 4;
const RECORDS_PER_BATCH: usize = 100;
const IN_FLIGHT: usize = 8;

fn main() {
    if std::env::args().any(|arg| arg == "--list") {
        return;
    }
    let seconds: u64 = std::env::var("LOGJAM_BENCH_SECONDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(5);
    println!("| value size | messages/s | MB/s (values) | batches acked |");
    println!("|---|---|---|---|");
    for value_size in [100usize, 1024] {
        let dir = tempfile::tempdir().unwrap();
        let node = NodeProcess::start(dir.path(), "");
        let topic = TopicName(StrBytes::from_static_str("bench"));
        let mut admin = connect(node.address);
        let created: CreateTopicsResponse = exchange(
            &mut admin,
            ApiKey::CreateTopics,
            7,
            &CreateTopicsRequest::default()
                .with_timeout_ms(10_000)
                .with_topics(vec![
                    CreatableTopic::default()
                        .with_name(topic.clone())
                        .with_num_partitions(CONNECTIONS)
                        .with_replication_factor(1),
                ]),
        );
        assert_eq!(created.topics[0].error_code, 0);
        let value = vec![b'x'; value_size];
        let values: Vec<&[u8]> = (0..RECORDS_PER_BATCH).map(|_| value.as_slice()).collect();
        let records = batch(&values);
        let deadline = Instant::now() + Duration::from_secs(seconds);
        let started = Instant::now();
        let acked: usize = std::thread::scope(|scope| {
            let handles: Vec<_> = (0..CONNECTIONS)
                .map(|partition| {
                    let request = ProduceRequest::default()
                        .with_acks(1)
                        .with_timeout_ms(30_000)
                        .with_topic_data(vec![
                            TopicProduceData::default()
                                .with_name(topic.clone())
                                .with_partition_data(vec![
                                    PartitionProduceData::default()
                                        .with_index(partition)
                                        .with_records(Some(records.clone())),
                                ]),
                        ]);
                    let frame = request_frame(ApiKey::Produce, 9, 1, &request);
                    let address = node.address;
                    scope.spawn(move || {
                        let mut stream = connect(address);
                        let mut outstanding = 0;
                        let mut acked = 0;
                        loop {
                            while outstanding < IN_FLIGHT && Instant::now() < deadline {
                                stream.write_all(&frame).unwrap();
                                outstanding += 1;
                            }
                            if outstanding == 0 {
                                return acked;
                            }
                            let mut response = read_frame(&mut stream).expect("node answered");
                            ResponseHeader::decode(
                                &mut response,
                                ApiKey::Produce.response_header_version(9),
                            )
                            .unwrap();
                            let body = ProduceResponse::decode(&mut response, 9).unwrap();
                            assert_eq!(body.responses[0].partition_responses[0].error_code, 0);
                            outstanding -= 1;
                            acked += 1;
                        }
                    })
                })
                .collect();
            handles
                .into_iter()
                .map(|handle| handle.join().unwrap())
                .sum()
        });
        let elapsed = started.elapsed().as_secs_f64();
        let messages = (acked * RECORDS_PER_BATCH) as f64 / elapsed;
        let megabytes = messages * value_size as f64 / 1e6;
        println!("| {value_size} B | {messages:.0} | {megabytes:.1} | {acked} |");
        drop(node);
    }
}
