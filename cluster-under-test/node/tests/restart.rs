//! A node process keeps what it acknowledged across restarts: after SIGKILL (the page cache
//! survives a process crash, so nothing acknowledged may be lost) and after a clean shutdown,
//! topics, offsets and record bytes read back exactly as produced. Power loss, which does lose
//! unflushed data, is the lab's disk fault, not this test's.

mod common;

use bytes::Bytes;
use common::{NodeProcess, batch, connect, exchange};
use kafka_protocol::messages::create_topics_request::CreatableTopic;
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::records::RecordBatchDecoder;

const TOPIC: &str = "restart";

fn topic() -> TopicName {
    TopicName(StrBytes::from_static_str(TOPIC))
}

fn produce(node: &NodeProcess, values: &[Vec<u8>]) -> i64 {
    let mut stream = connect(node.address);
    let slices: Vec<&[u8]> = values.iter().map(Vec::as_slice).collect();
    let request = ProduceRequest::default()
        .with_acks(1)
        .with_timeout_ms(5000)
        .with_topic_data(vec![
            TopicProduceData::default()
                .with_name(topic())
                .with_partition_data(vec![
                    PartitionProduceData::default()
                        .with_index(0)
                        .with_records(Some(batch(&slices))),
                ]),
        ]);
    let response: ProduceResponse = exchange(&mut stream, ApiKey::Produce, 9, &request);
    let partition = &response.responses[0].partition_responses[0];
    assert_eq!(partition.error_code, 0);
    partition.base_offset
}

/// Every record of partition 0 from offset 0, as (offset, value).
fn read_all(node: &NodeProcess) -> Vec<(i64, Bytes)> {
    let mut stream = connect(node.address);
    let mut out = Vec::new();
    loop {
        let next = out.last().map_or(0, |(offset, _)| offset + 1);
        let request = FetchRequest::default()
            .with_max_wait_ms(0)
            .with_max_bytes(1 << 20)
            .with_topics(vec![
                FetchTopic::default()
                    .with_topic(topic())
                    .with_partitions(vec![
                        FetchPartition::default()
                            .with_partition(0)
                            .with_fetch_offset(next)
                            .with_partition_max_bytes(1 << 16),
                    ]),
            ]);
        let response: FetchResponse = exchange(&mut stream, ApiKey::Fetch, 12, &request);
        let data = &response.responses[0].partitions[0];
        assert_eq!(data.error_code, 0);
        let mut records = data.records.clone().unwrap_or_default();
        if records.is_empty() {
            return out;
        }
        for set in RecordBatchDecoder::decode_all(&mut records).unwrap() {
            for record in set.records {
                if record.offset >= next {
                    out.push((record.offset, record.value.unwrap_or_default()));
                }
            }
        }
    }
}

#[test]
fn acknowledged_records_survive_kill_and_clean_restart() {
    let dir = tempfile::tempdir().unwrap();
    let mut node = NodeProcess::start(dir.path(), "log.segment.bytes=16384");
    let mut admin = connect(node.address);
    let created: CreateTopicsResponse = exchange(
        &mut admin,
        ApiKey::CreateTopics,
        7,
        &CreateTopicsRequest::default()
            .with_timeout_ms(5000)
            .with_topics(vec![
                CreatableTopic::default()
                    .with_name(topic())
                    .with_num_partitions(1)
                    .with_replication_factor(1),
            ]),
    );
    assert_eq!(created.topics[0].error_code, 0);

    let mut expected = Vec::new();
    for round in 0..3 {
        // Several segments per round (16 KiB segments, ~40 KiB per round).
        for batch_index in 0..40 {
            let values: Vec<Vec<u8>> = (0..10)
                .map(|i| format!("r{round}-b{batch_index}-v{i}-{}", "x".repeat(80)).into_bytes())
                .collect();
            let base = produce(&node, &values);
            assert_eq!(
                base,
                expected.len() as i64,
                "offsets continue where the log ended"
            );
            expected.extend(values.into_iter().map(Bytes::from));
        }
        if round == 1 {
            let pid = node.child.id();
            // Clean stop: SIGTERM, then wait for the process to exit.
            nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(pid as i32),
                nix::sys::signal::Signal::SIGTERM,
            )
            .unwrap();
            let status = node.child.wait().unwrap();
            assert!(status.success(), "clean shutdown exits 0, got {status}");
            node.restart();
        } else {
            node.restart(); // SIGKILL, then start again.
        }
        let read = read_all(&node);
        let offsets: Vec<i64> = read.iter().map(|(offset, _)| *offset).collect();
        assert_eq!(
            offsets,
            (0..expected.len() as i64).collect::<Vec<_>>(),
            "round {round}"
        );
        let values: Vec<Bytes> = read.into_iter().map(|(_, value)| value).collect();
        assert!(
            values == expected,
            "round {round}: values differ after restart"
        );
    }
    let log = std::fs::read_to_string(dir.path().join("node.log")).unwrap();
    assert!(
        log.contains("shut down cleanly"),
        "the clean stop was logged as clean"
    );
}
