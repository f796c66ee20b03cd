//! A node process keeps what it acknowledged across restarts: after SIGKILL (the page cache
//! survives a process crash, so nothing acknowledged may be lost) and after a clean shutdown,
//! topics, offsets and record bytes read back exactly as produced. Power loss, which does lose
//! unflushed data, is the lab's disk fault, not this test's.

mod common;

use common::partition::{produce_batch, read_all, topic_name};
use common::{NodeProcess, connect, exchange};
use kafka_protocol::messages::create_topics_request::CreatableTopic;
use kafka_protocol::messages::*;

const TOPIC: &str = "restart";

/// Produces `values` as one batch with acks=1, which must succeed; returns its base offset.
fn produce(node: &NodeProcess, values: &[Vec<u8>]) -> i64 {
    let slices: Vec<&[u8]> = values.iter().map(Vec::as_slice).collect();
    produce_batch(node.address, TOPIC, &slices, 1, 5000)
        .unwrap_or_else(|code| panic!("produce failed with error code {code}"))
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
                    .with_name(topic_name(TOPIC))
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
            expected.extend(values);
        }
        if round == 1 {
            node.terminate(); // Clean stop: SIGTERM, then wait for the process to exit.
            node.restart();
        } else {
            node.restart(); // SIGKILL, then start again.
        }
        let read = read_all(node.address, TOPIC);
        let offsets: Vec<i64> = read.iter().map(|(offset, _)| *offset).collect();
        assert_eq!(
            offsets,
            (0..expected.len() as i64).collect::<Vec<_>>(),
            "round {round}"
        );
        let values: Vec<Vec<u8>> = read.into_iter().map(|(_, value)| value).collect();
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
