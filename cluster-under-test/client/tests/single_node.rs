//! The client against a real `logjam-node` process: produce/consume round trips, Kafka 4's
//! default idempotence, buffer exhaustion, admin, and interop with librdkafka both ways.

mod common;

use std::collections::BTreeMap;
use std::process::Command;
use std::time::Duration;

use bytes::Bytes;
use common::{NodeProcess, python};
use logjam_client::{
    Admin, Certainty, Consumer, Error, NewTopic, Offset, Producer, ProducerRecord, SeekTo,
    TopicPartition,
};

fn admin(node: &NodeProcess) -> Admin {
    Admin::from_properties([("bootstrap.servers", node.bootstrap().as_str())]).unwrap()
}

async fn create(node: &NodeProcess, topic: &str, partitions: i32) {
    for (name, outcome) in admin(node)
        .create_topics(&[NewTopic::new(topic, partitions, 1)])
        .await
        .unwrap()
    {
        outcome.unwrap_or_else(|e| panic!("creating {name}: {e}"));
    }
}

fn producer(node: &NodeProcess, extra: &[(&str, &str)]) -> Producer {
    let bootstrap = node.bootstrap();
    let mut props = vec![
        ("bootstrap.servers", bootstrap.as_str()),
        ("enable.idempotence", "false"),
    ];
    props.extend_from_slice(extra);
    Producer::from_properties(props).unwrap()
}

fn consumer(node: &NodeProcess) -> Consumer {
    Consumer::from_properties([
        ("bootstrap.servers", node.bootstrap().as_str()),
        ("auto.offset.reset", "earliest"),
    ])
    .unwrap()
}

/// Reads every partition from the beginning until `count` records arrived (or 30 s passed).
async fn consume_all(
    consumer: &mut Consumer,
    topic: &str,
    partitions: i32,
    count: usize,
) -> Vec<logjam_client::ConsumerRecord> {
    let assignment: Vec<_> = (0..partitions)
        .map(|p| TopicPartition::new(topic, p))
        .collect();
    consumer.assign(assignment.clone());
    for tp in &assignment {
        consumer.seek(tp, SeekTo::Earliest).unwrap();
    }
    let mut records = Vec::new();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    while records.len() < count && tokio::time::Instant::now() < deadline {
        records.extend(consumer.poll(Duration::from_millis(500)).await.unwrap());
    }
    records
}

/// Goal: every acknowledged record is read back at its acknowledged offset with its key and
/// value, offsets are dense per partition, and keyed records stay on murmur2's partition.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn produce_and_consume_round_trip_with_acks_all() {
    let dir = tempfile::tempdir().unwrap();
    let node = NodeProcess::start(dir.path(), "");
    create(&node, "round-trip", 3).await;
    let producer = producer(&node, &[("acks", "all"), ("linger.ms", "5")]);
    let mut futures = Vec::new();
    for i in 0..3000u32 {
        let mut record = ProducerRecord::new("round-trip", Bytes::from(format!("value-{i}")));
        if i % 3 != 0 {
            record = record.with_key(Bytes::from(format!("key-{}", i % 17)));
        }
        futures.push((
            record.key.clone(),
            record.value.clone(),
            producer.send(record).await.unwrap(),
        ));
    }
    let mut acked = BTreeMap::new();
    for (key, value, future) in futures {
        let metadata = future.await.unwrap();
        if let Some(key) = &key {
            let expected = logjam_client::producer::partitioner::partition_for_key(key, 3);
            assert_eq!(
                metadata.partition.partition.0, expected,
                "keyed record on murmur2's partition"
            );
        }
        let offset = metadata.offset.expect("acks=all reports an offset");
        assert!(
            acked
                .insert((metadata.partition.partition.0, offset.0), (key, value))
                .is_none()
        );
    }
    producer.close().await;
    for p in 0..3 {
        let offsets: Vec<i64> = acked
            .keys()
            .filter(|(q, _)| *q == p)
            .map(|(_, o)| *o)
            .collect();
        assert_eq!(
            offsets,
            (0..offsets.len() as i64).collect::<Vec<_>>(),
            "partition {p} dense"
        );
    }
    let mut consumer = consumer(&node);
    let records = consume_all(&mut consumer, "round-trip", 3, 3000).await;
    assert_eq!(records.len(), 3000);
    for record in &records {
        let expected = &acked[&(record.partition.partition.0, record.offset.0)];
        assert_eq!((&record.key, &record.value), (&expected.0, &expected.1));
    }
    for p in 0..3 {
        let tp = TopicPartition::new("round-trip", p);
        let count = acked.keys().filter(|(q, _)| *q == p).count() as i64;
        assert_eq!(consumer.position(&tp), Some(Offset(count)));
    }
}

/// Goal: as Kafka's consumer, a poll capped by `max.poll.records` keeps the rest of its fetch
/// answer and serves the next polls from it without fetching again: with the broker killed
/// after the first poll, the next polls still return every remaining record, in order, once.
/// A seek elsewhere drops what was kept: a consumer sought back returns nothing from the dead
/// broker rather than the kept records after its old position.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn polls_are_served_from_the_rest_of_a_fetch_until_a_seek() {
    let dir = tempfile::tempdir().unwrap();
    let mut node = NodeProcess::start(dir.path(), "");
    create(&node, "kept", 1).await;
    let producer = producer(&node, &[("acks", "all"), ("linger.ms", "5")]);
    let mut futures = Vec::new();
    for i in 0..1000u32 {
        let record = ProducerRecord::new("kept", Bytes::from(format!("value-{i}")));
        futures.push(producer.send(record).await.unwrap());
    }
    for future in futures {
        future.await.unwrap();
    }
    producer.close().await;
    let tp = TopicPartition::new("kept", 0);
    let capped = || {
        let mut consumer = Consumer::from_properties([
            ("bootstrap.servers", node.bootstrap().as_str()),
            ("max.poll.records", "100"),
        ])
        .unwrap();
        consumer.assign([tp.clone()]);
        consumer.seek(&tp, SeekTo::Offset(Offset(0))).unwrap();
        consumer
    };
    let (mut kept, mut sought) = (capped(), capped());
    let first = kept.poll(Duration::from_secs(10)).await.unwrap();
    assert_eq!(first.len(), 100, "the first poll returns max.poll.records");
    assert_eq!(
        sought.poll(Duration::from_secs(10)).await.unwrap().len(),
        100
    );
    sought.seek(&tp, SeekTo::Offset(Offset(50))).unwrap();
    node.kill();
    let mut offsets: Vec<i64> = first.iter().map(|r| r.offset.0).collect();
    for _ in 0..9 {
        let records = kept.poll(Duration::from_millis(500)).await.unwrap();
        assert_eq!(records.len(), 100, "served from the kept answer");
        offsets.extend(records.iter().map(|r| r.offset.0));
    }
    assert_eq!(offsets, (0..1000).collect::<Vec<i64>>());
    assert_eq!(kept.position(&tp), Some(Offset(1000)));
    let after_seek = sought
        .poll(Duration::from_millis(500))
        .await
        .unwrap_or_default();
    assert!(
        after_seek.is_empty(),
        "kept records served after a seek: {:?}",
        after_seek.iter().map(|r| r.offset.0).collect::<Vec<_>>()
    );
    assert_eq!(sought.position(&tp), Some(Offset(50)));
}

/// acks=0 and acks=1 also deliver; acks=0 reports no offset (only written to the socket).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acks_zero_has_no_offsets_and_acks_one_does() {
    let dir = tempfile::tempdir().unwrap();
    let node = NodeProcess::start(dir.path(), "");
    create(&node, "acks", 1).await;
    for (acks, offsets) in [("0", false), ("1", true)] {
        let producer = producer(&node, &[("acks", acks)]);
        let future = producer
            .send(ProducerRecord::new("acks", Bytes::from_static(b"v")))
            .await
            .unwrap();
        assert_eq!(
            future.await.unwrap().offset.is_some(),
            offsets,
            "acks={acks}"
        );
        producer.close().await;
    }
    let mut consumer = consumer(&node);
    assert_eq!(consume_all(&mut consumer, "acks", 1, 2).await.len(), 2);
}

/// Kafka 4: the idempotent producer is on by default and needs InitProducerId, which the node
/// serves (issue 4 item 6): with the default and with explicit `enable.idempotence=true`, sends
/// are acknowledged at dense offsets and read back once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn default_idempotence_gets_a_producer_id_and_round_trips() {
    let dir = tempfile::tempdir().unwrap();
    let node = NodeProcess::start(dir.path(), "");
    create(&node, "idem", 1).await;
    let mut expected_offset = 0;
    for explicit in [false, true] {
        let bootstrap = node.bootstrap();
        let mut props = vec![("bootstrap.servers", bootstrap.as_str())];
        if explicit {
            props.push(("enable.idempotence", "true"));
        }
        let producer = Producer::from_properties(props).unwrap();
        assert!(producer.config().enable_idempotence);
        for _ in 0..2 {
            let acknowledged = producer
                .send(ProducerRecord::new("idem", Bytes::from_static(b"v")))
                .await
                .unwrap()
                .await
                .unwrap();
            assert_eq!(acknowledged.offset, Some(Offset(expected_offset)));
            expected_offset += 1;
        }
        producer.close().await;
    }
    let mut consumer = consumer(&node);
    assert_eq!(consume_all(&mut consumer, "idem", 1, 4).await.len(), 4);
}

/// Goal: `send()` blocks at most `max.block.ms` waiting for buffer memory, then fails with
/// BufferExhausted (definite: the record was never queued). Method: fill a 2-batch buffer
/// while the only broker is dead, so nothing drains.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn send_fails_with_buffer_exhausted_after_max_block_ms() {
    let dir = tempfile::tempdir().unwrap();
    let mut node = NodeProcess::start(dir.path(), "");
    create(&node, "full", 1).await;
    let producer = producer(
        &node,
        &[
            ("batch.size", "16384"),
            ("buffer.memory", "32768"),
            ("max.block.ms", "300"),
            ("linger.ms", "0"),
        ],
    );
    producer
        .send(ProducerRecord::new("full", Bytes::from_static(b"warm")))
        .await
        .unwrap()
        .await
        .unwrap();
    node.kill();
    let value = Bytes::from(vec![7u8; 1000]);
    let mut pending = Vec::new();
    let mut exhausted = None;
    for _ in 0..100 {
        let started = std::time::Instant::now();
        match producer
            .send(ProducerRecord::new("full", value.clone()).with_partition(0))
            .await
        {
            Ok(future) => pending.push(future),
            Err(error) => {
                exhausted = Some((error, started.elapsed()));
                break;
            }
        }
    }
    let (error, waited) = exhausted.expect("the buffer filled up");
    assert!(
        matches!(
            error,
            Error::BufferExhausted {
                buffer_memory: 32768,
                ..
            }
        ),
        "{error}"
    );
    assert_eq!(error.certainty(), Certainty::Definite);
    assert!(
        waited >= Duration::from_millis(250) && waited < Duration::from_secs(5),
        "{waited:?}"
    );
    assert!(!pending.is_empty());
}

/// Admin: create with configs, duplicate creation is a per-topic error, describe shows leader,
/// epoch and ISR; DescribeQuorum is refused clearly until the node serves it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn admin_creates_and_describes_topics() {
    let dir = tempfile::tempdir().unwrap();
    let node = NodeProcess::start(dir.path(), "");
    let admin = admin(&node);
    let topic = NewTopic::new("described", 2, 1).with_config("min.insync.replicas", "1");
    let results = admin
        .create_topics(std::slice::from_ref(&topic))
        .await
        .unwrap();
    assert!(results[0].1.is_ok(), "{results:?}");
    let again = admin.create_topics(&[topic]).await.unwrap();
    assert!(
        matches!(&again[0].1, Err(Error::Broker { code: 36, .. })),
        "{again:?}"
    );
    let described = admin.describe_topics(&["described"]).await.unwrap();
    assert_eq!(described[0].partitions.len(), 2);
    for partition in &described[0].partitions {
        assert_eq!(partition.leader, Some(logjam_client::BrokerId(1)));
        assert_eq!(partition.isr, vec![logjam_client::BrokerId(1)]);
        assert!(partition.leader_epoch.0 >= 0);
    }
    let missing = admin.describe_topics(&["nope"]).await.unwrap_err();
    assert!(
        matches!(missing, Error::Broker { code: 3, .. }),
        "{missing}"
    );
    match admin.describe_quorum().await {
        Err(Error::UnsupportedApi { api, .. }) => assert_eq!(api, "DescribeQuorum"),
        Ok(quorum) => assert!(!quorum.voters.is_empty()),
        Err(other) => panic!("{other}"),
    }
}

fn run_python(args: &[&str]) -> serde_json::Value {
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/python/interop.py");
    let output = Command::new(python())
        .arg(script)
        .args(args)
        .output()
        .expect("python runs");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_str(stdout.trim()).unwrap()
}

fn hex(bytes: &Option<Bytes>) -> serde_json::Value {
    match bytes {
        None => serde_json::Value::Null,
        Some(b) => serde_json::Value::String(b.iter().map(|x| format!("{x:02x}")).collect()),
    }
}

/// Our producer writes; librdkafka reads the same bytes (keys, values, offsets).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn confluent_kafka_consumes_what_we_produce() {
    let dir = tempfile::tempdir().unwrap();
    let node = NodeProcess::start(dir.path(), "");
    create(&node, "ours-to-them", 2).await;
    let producer = producer(&node, &[]);
    let mut expected = Vec::new();
    for i in 0..500u32 {
        let mut record = ProducerRecord::new(
            "ours-to-them",
            Bytes::from(vec![(i % 251) as u8; (i % 40) as usize]),
        );
        if i % 4 != 0 {
            record = record.with_key(Bytes::from(format!("k{i}")));
        }
        let key = record.key.clone();
        let value = record.value.clone();
        let metadata = producer.send(record).await.unwrap().await.unwrap();
        expected.push(serde_json::json!([
            metadata.partition.partition.0,
            metadata.offset.unwrap().0,
            hex(&key),
            hex(&value)
        ]));
    }
    producer.close().await;
    let read = run_python(&["consume", &node.bootstrap(), "ours-to-them", "2", "500"]);
    let mut read: Vec<serde_json::Value> = read.as_array().unwrap().clone();
    let key = |v: &serde_json::Value| (v[0].as_i64().unwrap(), v[1].as_i64().unwrap());
    read.sort_by_key(key);
    expected.sort_by_key(key);
    assert_eq!(read, expected);
}

/// librdkafka writes; our consumer reads the same bytes at the same offsets.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn we_consume_what_confluent_kafka_produces() {
    let dir = tempfile::tempdir().unwrap();
    let node = NodeProcess::start(dir.path(), "");
    create(&node, "them-to-ours", 2).await;
    let acked = tokio::task::spawn_blocking({
        let bootstrap = node.bootstrap();
        move || run_python(&["produce", &bootstrap, "them-to-ours", "2", "500"])
    })
    .await
    .unwrap();
    let mut acked: Vec<serde_json::Value> = acked.as_array().unwrap().clone();
    let mut consumer = consumer(&node);
    let records = consume_all(&mut consumer, "them-to-ours", 2, 500).await;
    let mut read: Vec<serde_json::Value> = records
        .iter()
        .map(|r| {
            serde_json::json!([
                r.partition.partition.0,
                r.offset.0,
                hex(&r.key),
                hex(&r.value)
            ])
        })
        .collect();
    let key = |v: &serde_json::Value| (v[0].as_i64().unwrap(), v[1].as_i64().unwrap());
    read.sort_by_key(key);
    acked.sort_by_key(key);
    assert_eq!(read, acked);
}
