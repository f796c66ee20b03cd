//! Group members for the client's group tests: topics filled through a real producer, a
//! consumer polling in its own task that records its assignment, records and rebalance
//! events, and waiting for a condition with a deadline.

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use logjam_client::consumer::group::{RebalanceCause, RebalanceEvent};
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

/// A newcomer to `group`'s `topic` (all `partitions` committed by the members before it)
/// owns everything and reads nothing old: it started at the committed offsets.
pub async fn a_newcomer_reads_nothing_old(consumer: Consumer, topic: &str, partitions: i32) {
    let c = Member::start(consumer, topic);
    wait_for("the newcomer owns everything", 30, || {
        c.assignment() == all(topic, partitions)
    })
    .await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    let (_, seen) = c.stop().await;
    assert!(
        seen.records.is_empty(),
        "re-read {} records",
        seen.records.len()
    );
}

/// Two static members (`group.instance.id` a and b, made by `member`) split the two
/// partitions of `topic`; b is closed and restarted within its session. Asserts b gets its
/// partition back and a sees no assignment change; returns b's last event's generation before
/// and after the restart.
pub async fn static_member_restart(
    member: impl Fn(&'static str) -> Consumer,
    topic: &str,
) -> (i32, i32) {
    let a = Member::start(member("a"), topic);
    let b = Member::start(member("b"), topic);
    wait_for("split", 30, || {
        a.assignment().len() == 1 && b.assignment().len() == 1
    })
    .await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    let owned_b = b.assignment();
    let a_events_before = a.events().len();
    let (consumer_b, seen_b) = b.stop().await;
    let before = seen_b.events.last().expect("b was assigned").generation;
    consumer_b.close().await.unwrap();
    let b = Member::start(member("b"), topic);
    wait_for("b back", 30, || b.assignment() == owned_b).await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(
        a.events().len(),
        a_events_before,
        "a saw its assignment change: {:?}",
        a.events()
    );
    let after = b.events().last().expect("b was assigned again").generation;
    a.stop().await;
    b.stop().await;
    (before, after)
}

/// The poll clock: `slow` (subscribed, `max.poll.interval.ms` short) and `fast` split the two
/// partitions of `topic`; `slow` then sleeps `pause_ms` between two polls, past its poll
/// clock. Asserts the fast member takes both, the slow one comes back, and one of its events
/// gave partitions up with cause `poll-timeout`. Returns what the slow member saw.
pub async fn the_poll_clock_leaves_and_rejoins(
    fast: Consumer,
    slow: Consumer,
    topic: &str,
    pause_ms: u64,
) -> Seen {
    let fast = Member::start(fast, topic);
    let slow = Member::start(slow, topic);
    wait_for("split", 30, || {
        fast.assignment().len() == 1 && slow.assignment().len() == 1
    })
    .await;
    slow.pause_ms.store(pause_ms, Ordering::SeqCst);
    wait_for("fast owns both", 30, || fast.assignment().len() == 2).await;
    wait_for("slow back", 30, || {
        slow.assignment().len() == 1 && fast.assignment().len() == 1
    })
    .await;
    let events = slow.events();
    assert!(
        events
            .iter()
            .any(|e| e.cause == RebalanceCause::PollTimeout && !e.revoked.is_empty()),
        "{events:?}"
    );
    fast.stop().await;
    slow.stop().await.1
}
