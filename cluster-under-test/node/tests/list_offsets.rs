//! ListOffsets by timestamp against a node process (kafka-semantics.md: `offsetsForTimes`):
//! a timestamp finds the first record whose timestamp reaches it, record by record inside a
//! batch and inside a compressed one; `MAX_TIMESTAMP` (-3) the first record holding the largest
//! timestamp; `LATEST_TIERED` (-5) offset -1; a timestamp past every record no offset and no
//! error; a `LogAppendTime` topic answers with the broker's append time; a partition named twice
//! is `INVALID_REQUEST`. Old and new versions of the API answer alike.

mod common;

use std::net::SocketAddr;

use bytes::Bytes;
use common::partition::{create_topic, list_offsets_request, topic_name};
use common::{NodeProcess, connect, exchange, timed_batch};
use kafka_protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::*;
use kafka_protocol::records::Compression;

/// A time in the past every timestamp here is relative to.
const T0: i64 = 1_700_000_000_000;

/// One batch of records with these timestamps (relative to [`T0`]).
fn batch_at(timestamps: &[i64], compression: Compression) -> Bytes {
    let absolute: Vec<i64> = timestamps.iter().map(|t| T0 + t).collect();
    timed_batch(&absolute, b"v", compression)
}

/// Produces `records` to partition 0; its base offset and log append time.
fn produce(address: SocketAddr, topic: &str, records: Bytes) -> (i64, i64) {
    let request = ProduceRequest::default()
        .with_acks(1)
        .with_timeout_ms(5_000)
        .with_topic_data(vec![
            TopicProduceData::default()
                .with_name(topic_name(topic))
                .with_partition_data(vec![
                    PartitionProduceData::default()
                        .with_index(0)
                        .with_records(Some(records)),
                ]),
        ]);
    let response: ProduceResponse = exchange(&mut connect(address), ApiKey::Produce, 9, &request);
    let answer = &response.responses[0].partition_responses[0];
    assert_eq!(answer.error_code, 0, "{answer:?}");
    (answer.base_offset, answer.log_append_time_ms)
}

/// (error code, timestamp, offset, leader epoch) of each asked timestamp of partition 0, one
/// request each (a partition named twice in one request is refused).
fn list(
    address: SocketAddr,
    topic: &str,
    version: i16,
    asked: &[i64],
) -> Vec<(i16, i64, i64, i32)> {
    let mut stream = connect(address);
    asked
        .iter()
        .map(|&timestamp| {
            let request = list_offsets_request(topic, 0, timestamp);
            let response: ListOffsetsResponse =
                exchange(&mut stream, ApiKey::ListOffsets, version, &request);
            let p = &response.topics[0].partitions[0];
            (p.error_code, p.timestamp, p.offset, p.leader_epoch)
        })
        .collect()
}

/// (timestamp relative to T0, offset) a lookup of `target` answers, asked alone.
fn lookup(address: SocketAddr, topic: &str, version: i16, target: i64) -> (i64, i64) {
    let [(error, timestamp, offset, _)] = list(address, topic, version, &[target])[..] else {
        panic!("one answer");
    };
    assert_eq!(error, 0, "lookup of {target} at v{version}");
    if offset < 0 {
        (timestamp, offset)
    } else {
        (timestamp - T0, offset)
    }
}

#[test]
fn a_timestamp_finds_the_first_record_reaching_it_inside_plain_and_compressed_batches() {
    let dir = tempfile::tempdir().unwrap();
    let node = NodeProcess::start(dir.path(), "");
    create_topic(node.address, "times", 1, 1, &[]);
    // Offsets 0-1 at 10, 15; 2-3 at 30, 20 (out of order, as producers' clocks allow); 4-6 at
    // 40, 50, 45 compressed (the largest inside the batch, not its last); 7 at 25.
    let (_, append_time) = produce(
        node.address,
        "times",
        batch_at(&[10, 15], Compression::None),
    );
    assert_eq!(append_time, -1, "a CreateTime topic answers no append time");
    produce(
        node.address,
        "times",
        batch_at(&[30, 20], Compression::None),
    );
    produce(
        node.address,
        "times",
        batch_at(&[40, 50, 45], Compression::Gzip),
    );
    produce(node.address, "times", batch_at(&[25], Compression::None));
    for version in [1, 4, 7, 10] {
        let at = |target| lookup(node.address, "times", version, T0 + target);
        assert_eq!(at(0), (10, 0), "v{version}");
        assert_eq!(
            at(12),
            (15, 1),
            "v{version}: the second record of the first batch"
        );
        assert_eq!(
            at(16),
            (30, 2),
            "v{version}: the first record at or after it in offset order"
        );
        assert_eq!(at(21), (30, 2), "v{version}");
        assert_eq!(at(31), (40, 4), "v{version}");
        assert_eq!(at(42), (50, 5), "v{version}: inside the gzip batch");
        assert_eq!(at(46), (50, 5), "v{version}");
        assert_eq!(
            at(51),
            (-1, -1),
            "v{version}: past every record: no offset, no error"
        );
    }
    let answers = list(node.address, "times", 7, &[-3, -5, -2, -1]);
    assert_eq!(
        answers.iter().map(|a| (a.0, a.2)).collect::<Vec<_>>(),
        [(0, 5), (0, -1), (0, 0), (0, 8)],
        "max timestamp at 5, latest tiered -1, earliest 0, latest 8"
    );
    assert_eq!(answers[0].1, T0 + 50, "max timestamp's own timestamp");
    assert_eq!(answers[1].3, -1, "latest tiered has no epoch");
    assert!(
        answers[0].3 >= 0,
        "the record's batch has its leader's epoch"
    );
    assert_eq!(
        answers[2].3, answers[3].3,
        "the log start lies in the current (first) epoch"
    );
    assert!(answers[2].3 >= 0);

    // A partition named twice: both answered INVALID_REQUEST (42), others unaffected.
    let request = ListOffsetsRequest::default()
        .with_replica_id(BrokerId(-1))
        .with_topics(vec![
            ListOffsetsTopic::default()
                .with_name(topic_name("times"))
                .with_partitions(
                    [T0, -1]
                        .map(|timestamp| {
                            ListOffsetsPartition::default()
                                .with_partition_index(0)
                                .with_timestamp(timestamp)
                        })
                        .to_vec(),
                ),
        ]);
    let response: ListOffsetsResponse =
        exchange(&mut connect(node.address), ApiKey::ListOffsets, 7, &request);
    let codes: Vec<i16> = response.topics[0]
        .partitions
        .iter()
        .map(|p| p.error_code)
        .collect();
    assert_eq!(codes, [42, 42]);
}

#[test]
fn a_log_append_time_topic_answers_with_the_brokers_append_time() {
    let dir = tempfile::tempdir().unwrap();
    let node = NodeProcess::start(dir.path(), "");
    create_topic(
        node.address,
        "appended",
        1,
        1,
        &[("message.timestamp.type", "LogAppendTime")],
    );
    let before = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64;
    // The producer's own timestamps (T0 + ...) are years old; the broker replaces them.
    let (_, append_time) = produce(
        node.address,
        "appended",
        batch_at(&[10, 20], Compression::None),
    );
    assert!(
        append_time >= before,
        "the produce answer carries the append time"
    );
    std::thread::sleep(std::time::Duration::from_millis(20));
    produce(node.address, "appended", batch_at(&[5], Compression::None));
    let answers = list(node.address, "appended", 7, &[T0 + 1_000, before, -3]);
    let (error, first_time, first_offset, _) = answers[0];
    assert_eq!(
        (error, first_offset),
        (0, 0),
        "a create time of T0 finds nothing older"
    );
    assert_eq!(
        first_time, append_time,
        "the record carries its append time, not T0 + 10"
    );
    assert_eq!(
        answers[1].2, 0,
        "the append time of the first batch reaches `before`"
    );
    let (_, max_time, max_offset, _) = answers[2];
    assert_eq!(
        max_offset, 2,
        "the later batch holds the largest append time"
    );
    assert!(max_time > first_time);
}
