//! Group members for the client's group tests: topics filled through a real producer, a
//! consumer polling in its own task that records its assignment, records and rebalance
//! events, and waiting for a condition with a deadline.

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use logjam_client::consumer::group::RebalanceEvent;
use logjam_client::{Admin, Consumer, NewTopic, Producer, ProducerRecord, TopicPartition};

use super::NodeProcess;

/// Creates `topic` with `partitions` partitions and writes `records` records round-robin.
pub async fn setup(node: &NodeProcess, topic: &str, partitions: i32, records: usize) {
    let admin = Admin::from_properties([("bootstrap.servers", node.bootstrap().as_str())]).unwrap();
    for (_, outcome) in admin
        .create_topics(&[NewTopic::new(topic, partitions, 1)])
        .await
        .unwrap()
    {
        outcome.unwrap();
    }
    produce(node, topic, partitions, records).await;
}

/// Writes `records` more records to `topic` round-robin over its `partitions`.
pub async fn produce(node: &NodeProcess, topic: &str, partitions: i32, records: usize) {
    let producer =
        Producer::from_properties([("bootstrap.servers", node.bootstrap().as_str())]).unwrap();
    let mut futures = Vec::new();
    for i in 0..records {
        let record = ProducerRecord::new(topic, Bytes::from(format!("v{i}")))
            .with_partition((i % partitions as usize) as i32);
        futures.push(producer.send(record).await.unwrap());
    }
    for future in futures {
        future.await.unwrap();
    }
}

#[derive(Default)]
pub struct Seen {
    pub assignment: BTreeSet<TopicPartition>,
    pub records: Vec<(TopicPartition, i64)>,
    pub events: Vec<RebalanceEvent>,
}

/// A consumer polling in its own task until stopped; `pause_ms` makes it sleep once between
/// polls (a slow processing step).
pub struct Member {
    pub seen: Arc<Mutex<Seen>>,
    stop: Arc<AtomicBool>,
    pub pause_ms: Arc<AtomicU64>,
    task: tokio::task::JoinHandle<Consumer>,
}

impl Member {
    pub fn start(mut consumer: Consumer, topic: &str) -> Member {
        consumer.subscribe([topic]).unwrap();
        let seen = Arc::new(Mutex::new(Seen::default()));
        let stop = Arc::new(AtomicBool::new(false));
        let pause_ms = Arc::new(AtomicU64::new(0));
        let (s, st, p) = (seen.clone(), stop.clone(), pause_ms.clone());
        let task = tokio::spawn(async move {
            while !st.load(Ordering::SeqCst) {
                let records = consumer.poll(Duration::from_millis(200)).await.unwrap();
                {
                    let mut seen = s.lock().unwrap();
                    seen.records
                        .extend(records.into_iter().map(|r| (r.partition, r.offset.0)));
                    seen.assignment = consumer.assignment().into_iter().collect();
                    seen.events.extend(consumer.take_rebalance_events());
                }
                let pause = p.swap(0, Ordering::SeqCst);
                if pause > 0 {
                    tokio::time::sleep(Duration::from_millis(pause)).await;
                }
            }
            consumer
        });
        Member {
            seen,
            stop,
            pause_ms,
            task,
        }
    }

    pub fn assignment(&self) -> BTreeSet<TopicPartition> {
        self.seen.lock().unwrap().assignment.clone()
    }

    pub fn events(&self) -> Vec<RebalanceEvent> {
        self.seen.lock().unwrap().events.clone()
    }

    pub async fn stop(self) -> (Consumer, Seen) {
        self.stop.store(true, Ordering::SeqCst);
        let consumer = self.task.await.unwrap();
        let seen = std::mem::take(&mut *self.seen.lock().unwrap());
        (consumer, seen)
    }
}

pub async fn wait_for(what: &str, secs: u64, mut ok: impl FnMut() -> bool) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(secs);
    while !ok() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

pub fn all(topic: &str, n: i32) -> BTreeSet<TopicPartition> {
    (0..n).map(|p| TopicPartition::new(topic, p)).collect()
}
