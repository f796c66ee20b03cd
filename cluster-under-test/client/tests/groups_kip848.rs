//! KIP-848 consumer groups (`group.protocol=consumer`) of logjam-client against a real
//! `logjam-node` process: members split the partitions and no record is read by two of them
//! (revoked partitions are committed before they are given up), a leaver's partitions move, a newcomer resumes from
//! committed offsets, a member paused past the session timeout is fenced and rejoins at epoch
//! 0, the poll clock makes a member leave and rejoin, a static member comes back without a
//! rebalance, and a classic-only key is refused by name.

mod common;

use std::collections::BTreeSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use bytes::Bytes;
use common::NodeProcess;
use common::members::{
    Member, Seen, a_newcomer_reads_nothing_old, all, setup, static_member_restart,
    the_poll_clock_leaves_and_rejoins, wait_for,
};
use logjam_client::consumer::group::RebalanceCause;
use logjam_client::{Consumer, Producer, ProducerRecord, TopicPartition};

/// One broker, the internal topic at RF 1, and the KIP-848 clocks short: a 4 s session and
/// 200 ms heartbeats (Kafka's bounds moved down to allow them).
const NODE: &str = "offsets.topic.replication.factor=1\noffsets.topic.num.partitions=3\n\
                    group.consumer.session.timeout.ms=4000\n\
                    group.consumer.min.session.timeout.ms=1000\n\
                    group.consumer.heartbeat.interval.ms=200\n\
                    group.consumer.min.heartbeat.interval.ms=100";

fn consumer(node: &NodeProcess, group: &str, extra: &[(&str, &str)]) -> Consumer {
    let bootstrap = node.bootstrap();
    let mut props = vec![
        ("bootstrap.servers", bootstrap.as_str()),
        ("group.id", group),
        ("group.protocol", "consumer"),
        ("auto.offset.reset", "earliest"),
        ("auto.commit.interval.ms", "200"),
    ];
    props.extend_from_slice(extra);
    Consumer::from_properties(props).unwrap()
}

/// No record was returned to two members: a revoked partition is committed before it is
/// given up, and its next owner starts there (the members' assignment snapshots are taken
/// after their polls return, so comparing them could see a handoff half done).
fn assert_read_once(seen: &[&Seen]) {
    let mut reads: BTreeSet<(TopicPartition, i64)> = BTreeSet::new();
    for seen in seen {
        for read in &seen.records {
            assert!(reads.insert(read.clone()), "{read:?} read twice");
        }
    }
}

/// Writes four records every 10 ms round-robin until stopped, so partitions change hands
/// while their members are reading them; `stop` says how many it wrote.
struct Feeder {
    stop: Arc<AtomicBool>,
    task: tokio::task::JoinHandle<usize>,
}

impl Feeder {
    fn start(node: &NodeProcess, topic: &str, partitions: i32) -> Feeder {
        let producer =
            Producer::from_properties([("bootstrap.servers", node.bootstrap().as_str())]).unwrap();
        let stop = Arc::new(AtomicBool::new(false));
        let (flag, topic) = (stop.clone(), topic.to_owned());
        let task = tokio::spawn(async move {
            let mut written = 0;
            while !flag.load(Ordering::SeqCst) {
                let mut sends = Vec::new();
                for p in 0..partitions {
                    let record =
                        ProducerRecord::new(topic.clone(), Bytes::from(format!("f{written}")))
                            .with_partition(p);
                    sends.push(producer.send(record).await.unwrap());
                    written += 1;
                }
                for send in sends {
                    send.await.unwrap();
                }
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
            written
        });
        Feeder { stop, task }
    }

    async fn stop(self) -> usize {
        self.stop.store(true, Ordering::SeqCst);
        self.task.await.unwrap()
    }
}

/// Two members split four partitions; the first keeps two of its four (the uniform assignor
/// is sticky) and never owns a partition the second owns; when the second closes (epoch -1)
/// the first gets all four back; a newcomer resumes from the committed offsets.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn members_split_revoke_before_assign_and_a_newcomer_resumes_from_commits() {
    let dir = tempfile::tempdir().unwrap();
    let node = NodeProcess::start(dir.path(), NODE);
    setup(&node, "split", 4, 400).await;
    // Small polls: a member is always a little ahead of its last auto-commit.
    let slow = [("max.poll.records", "10")];
    let a = Member::start(consumer(&node, "g-split", &slow), "split");
    wait_for("a owns everything", 30, || {
        a.assignment() == all("split", 4)
    })
    .await;
    let first = a.events();
    assert_eq!(first[0].cause, RebalanceCause::Join, "{first:?}");
    assert!(first[0].generation > 0, "a member epoch: {first:?}");
    let feeder = Feeder::start(&node, "split", 4);
    let b = Member::start(consumer(&node, "g-split", &slow), "split");
    wait_for("a split", 30, || {
        let (x, y) = (a.assignment(), b.assignment());
        x.len() == 2 && y.len() == 2
    })
    .await;
    wait_for("b read some", 30, || {
        !b.seen.lock().unwrap().records.is_empty()
    })
    .await;
    // a gave up exactly the two partitions b took, by an event of the coordinator's own.
    let revoked: BTreeSet<TopicPartition> = a
        .events()
        .iter()
        .flat_map(|e| e.revoked.iter().cloned())
        .collect();
    assert_eq!(revoked, b.assignment(), "{:?}", a.events());
    assert!(
        a.events()
            .iter()
            .any(|e| e.cause == RebalanceCause::Assignment),
        "{:?}",
        a.events()
    );
    let (consumer_b, seen_b) = b.stop().await;
    consumer_b.close().await.unwrap();
    wait_for("a owns everything again", 30, || {
        a.assignment() == all("split", 4)
    })
    .await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let written = 400 + feeder.stop().await;
    wait_for("a and b read everything", 60, || {
        let seen = a.seen.lock().unwrap();
        seen.records.len() + seen_b.records.len() >= written
    })
    .await;
    let events = a.events();
    assert!(
        events
            .windows(2)
            .all(|w| w[0].generation <= w[1].generation),
        "member epochs only grow: {events:?}"
    );
    let (mut consumer_a, seen_a) = a.stop().await;
    assert_read_once(&[&seen_a, &seen_b]);
    consumer_a.commit_sync().await.unwrap();
    consumer_a.close().await.unwrap();
    a_newcomer_reads_nothing_old(consumer(&node, "g-split", &[]), "split", 4).await;
}

/// The session clock: a member whose heartbeats stop for longer than the coordinator's
/// session timeout (a GC pause) is removed, its partitions go to the other member, and when
/// it wakes it is fenced, gives its partitions up as lost and rejoins at epoch 0.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_member_paused_past_its_session_is_fenced_and_rejoins() {
    let dir = tempfile::tempdir().unwrap();
    let node = NodeProcess::start(dir.path(), NODE);
    setup(&node, "fence", 2, 10).await;
    let steady = Member::start(consumer(&node, "g-fence", &[]), "fence");
    let mut paused = consumer(&node, "g-fence", &[]);
    paused.subscribe(["fence"]).unwrap();
    // Join first, then pause (heartbeats and polls both stop, as in a paused process).
    for _ in 0..50 {
        paused.poll(Duration::from_millis(200)).await.unwrap();
        if paused.assignment().len() == 1 && steady.assignment().len() == 1 {
            break;
        }
    }
    assert_eq!(paused.assignment().len(), 1, "joined and split");
    let before = paused.take_rebalance_events();
    paused.pause_heartbeats(Duration::from_secs(7));
    wait_for("steady owns both", 30, || steady.assignment().len() == 2).await;
    tokio::time::sleep(Duration::from_secs(7)).await;
    let mut events = Vec::new();
    for _ in 0..100 {
        paused.poll(Duration::from_millis(200)).await.unwrap();
        events.extend(paused.take_rebalance_events());
        if paused.assignment().len() == 1 && steady.assignment().len() == 1 {
            break;
        }
    }
    assert_eq!(
        paused.assignment().len(),
        1,
        "back in the group: {events:?}"
    );
    let lost = events
        .iter()
        .position(|e| e.cause == RebalanceCause::MemberReset && !e.revoked.is_empty())
        .unwrap_or_else(|| panic!("no lost partitions: {events:?}"));
    let back = events
        .iter()
        .position(|e| !e.assigned.is_empty())
        .unwrap_or_else(|| panic!("no new assignment: {events:?}"));
    assert!(lost < back, "lost before taking again: {events:?}");
    // Lost under the last epoch the member held (its assignment's, or a later one with the
    // same partitions), and taken again under a newer one.
    let held = before.last().unwrap().generation;
    assert!(
        events[lost].generation >= held && events[back].generation > events[lost].generation,
        "held at {held}, then {events:?}"
    );
    steady.stop().await;
}

/// The poll clock: a member that sleeps past `max.poll.interval.ms` between polls leaves
/// (epoch -1), the other member takes everything, and at its next poll it rejoins; its
/// event names `poll-timeout`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn poll_interval_expiry_leaves_and_rejoins() {
    let dir = tempfile::tempdir().unwrap();
    let node = NodeProcess::start(dir.path(), NODE);
    setup(&node, "slow", 2, 10).await;
    let fast = consumer(&node, "g-slow", &[]);
    let slow = consumer(&node, "g-slow", &[("max.poll.interval.ms", "1500")]);
    the_poll_clock_leaves_and_rejoins(fast, slow, "slow", 3000).await;
}

/// A static member closed (epoch -2) and restarted within the session timeout gets its
/// partition back with no change to the other member's assignment.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_static_member_restarts_without_a_rebalance() {
    let dir = tempfile::tempdir().unwrap();
    let node = NodeProcess::start(dir.path(), NODE);
    setup(&node, "static", 2, 10).await;
    let member = |id| consumer(&node, "g-static", &[("group.instance.id", id)]);
    let (before, after) = static_member_restart(member, "static").await;
    // The coordinator gives the returning instance the epoch it had.
    assert!(after >= before, "{before} then {after}");
}

/// The coordinator runs the session clock and the assignor under KIP-848: the client refuses
/// the classic keys by name instead of ignoring them.
#[test]
fn classic_only_keys_are_refused_by_name() {
    let error = Consumer::from_properties([
        ("bootstrap.servers", "127.0.0.1:9"),
        ("group.id", "g"),
        ("group.protocol", "consumer"),
        ("session.timeout.ms", "6000"),
    ])
    .unwrap_err();
    assert!(error.to_string().contains("session.timeout.ms"), "{error}");
}
