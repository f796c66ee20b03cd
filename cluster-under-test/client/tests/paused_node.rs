//! The consumer's `poll` against a node that accepts connections and never answers (its
//! process stopped with SIGSTOP, as the harness's `pause` fault does): the call returns at
//! its timeout, not after `request.timeout.ms`, whether the connection was open before the
//! pause or is opened during it; and once the node resumes, the same consumer reads again.

mod common;

use std::time::Duration;

use common::NodeProcess;
use logjam_client::{Admin, Consumer, NewTopic, Producer, ProducerRecord, SeekTo, TopicPartition};
use tokio::time::Instant;

/// What a poll may take beyond its timeout: the response grace, scheduling on a loaded
/// machine. Far below `request.timeout.ms` (30 s, Kafka's default, which the consumers keep).
const BOUND: Duration = Duration::from_millis(1500);

const POLL: Duration = Duration::from_millis(500);

fn consumer(node: &NodeProcess, tp: &TopicPartition) -> Consumer {
    let mut consumer = Consumer::from_properties([
        ("bootstrap.servers", node.bootstrap().as_str()),
        ("auto.offset.reset", "earliest"),
    ])
    .unwrap();
    consumer.assign([tp.clone()]);
    consumer.seek(tp, SeekTo::Earliest).unwrap();
    consumer
}

/// Polls once and asserts it came back within `POLL + BOUND`; returns how many records.
async fn timed_poll(consumer: &mut Consumer, what: &str) -> usize {
    let started = Instant::now();
    let polled = consumer.poll(POLL).await;
    let took = started.elapsed();
    assert!(
        took <= POLL + BOUND,
        "{what}: poll({POLL:?}) took {took:?} against a paused node"
    );
    polled.map(|records| records.len()).unwrap_or(0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn poll_returns_at_its_timeout_while_the_node_is_paused() {
    let dir = tempfile::tempdir().unwrap();
    let node = NodeProcess::start(dir.path(), "");
    let bootstrap = node.bootstrap();
    let admin = Admin::from_properties([("bootstrap.servers", bootstrap.as_str())]).unwrap();
    for (_, outcome) in admin
        .create_topics(&[NewTopic::new("paused", 1, 1)])
        .await
        .unwrap()
    {
        outcome.unwrap();
    }
    let producer =
        Producer::from_properties([("bootstrap.servers", bootstrap.as_str()), ("acks", "all")])
            .unwrap();
    for value in ["a", "b", "c"] {
        let delivery = producer
            .send(ProducerRecord::new("paused", value).with_partition(0))
            .await
            .unwrap();
        delivery.await.unwrap();
    }
    let tp = TopicPartition::new("paused", 0);
    let mut connected = consumer(&node, &tp);
    let mut read = 0;
    let deadline = Instant::now() + Duration::from_secs(30);
    while read < 3 {
        assert!(Instant::now() < deadline, "the records were not read back");
        read += connected.poll(POLL).await.unwrap().len();
    }

    node.pause();
    // Several polls in a row: each one's fetch stays unanswered on the open connection.
    for attempt in 0..4 {
        let got = timed_poll(&mut connected, &format!("open connection, poll {attempt}")).await;
        assert_eq!(got, 0, "a paused node answered");
    }
    // A consumer that connects during the pause: the TCP connect succeeds (the kernel
    // accepts), the ApiVersions and Metadata requests are never answered.
    let mut fresh = consumer(&node, &tp);
    for attempt in 0..2 {
        timed_poll(&mut fresh, &format!("fresh consumer, poll {attempt}")).await;
    }

    node.resume();
    let producer_after = producer
        .send(ProducerRecord::new("paused", "d").with_partition(0))
        .await
        .unwrap();
    producer_after.await.unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut after = 0;
    while after < 1 {
        assert!(
            Instant::now() < deadline,
            "the consumer did not read again after the node resumed"
        );
        after += connected.poll(POLL).await.unwrap_or_default().len();
    }
    let mut fresh_read = 0;
    while fresh_read < 4 {
        assert!(
            Instant::now() < deadline,
            "the fresh consumer did not read after the node resumed"
        );
        fresh_read += fresh.poll(POLL).await.unwrap_or_default().len();
    }
}
