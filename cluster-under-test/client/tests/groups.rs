//! Classic consumer groups of logjam-client against a real `logjam-node` process: two members
//! split the partitions, a leaver's partitions move, a newcomer resumes from committed
//! offsets, the poll clock makes a member leave and rejoin, a static member restarts without a
//! rebalance, cooperative-sticky keeps the partitions that did not move, and a newcomer
//! waits for a pending transactional offset commit instead of resetting.

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::NodeProcess;
use common::members::{
    Member, a_newcomer_reads_nothing_old, all, setup, static_member_restart,
    the_poll_clock_leaves_and_rejoins, wait_for,
};
use logjam_client::{Consumer, ConsumerGroupMetadata, Offset, Producer, TopicPartition};

const NODE: &str = "group.initial.rebalance.delay.ms=0\noffsets.topic.replication.factor=1\n\
                    offsets.topic.num.partitions=3\ngroup.min.session.timeout.ms=1000";

fn consumer(node: &NodeProcess, group: &str, extra: &[(&str, &str)]) -> Consumer {
    let bootstrap = node.bootstrap();
    let mut props = vec![
        ("bootstrap.servers", bootstrap.as_str()),
        ("group.id", group),
        ("auto.offset.reset", "earliest"),
        ("session.timeout.ms", "6000"),
        ("heartbeat.interval.ms", "200"),
        ("auto.commit.interval.ms", "200"),
    ];
    props.extend_from_slice(extra);
    Consumer::from_properties(props).unwrap()
}

/// Two members split four partitions with nothing shared; when one closes (LeaveGroup), the
/// other gets all four; a third member of the group later resumes from the committed offsets
/// instead of re-reading from the beginning.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn members_split_a_leaver_moves_and_a_newcomer_resumes_from_commits() {
    let dir = tempfile::tempdir().unwrap();
    let node = NodeProcess::start(dir.path(), NODE);
    setup(&node, "split", 4, 400).await;
    let a = Member::start(consumer(&node, "g-split", &[]), "split");
    wait_for("a owns everything", 30, || {
        a.assignment() == all("split", 4)
    })
    .await;
    let b = Member::start(consumer(&node, "g-split", &[]), "split");
    wait_for("a split", 30, || {
        let (x, y) = (a.assignment(), b.assignment());
        x.len() == 2 && y.len() == 2 && x.is_disjoint(&y)
    })
    .await;
    let (consumer_b, _) = b.stop().await;
    consumer_b.close().await.unwrap();
    wait_for("a owns everything again", 30, || {
        a.assignment() == all("split", 4)
    })
    .await;
    wait_for("a read everything", 30, || {
        a.seen
            .lock()
            .unwrap()
            .records
            .iter()
            .cloned()
            .collect::<BTreeSet<_>>()
            .len()
            >= 400
    })
    .await;
    let events = a.events();
    assert!(events.iter().any(|e| !e.revoked.is_empty()), "{events:?}");
    assert!(
        events
            .windows(2)
            .all(|w| w[0].generation <= w[1].generation),
        "{events:?}"
    );
    let (mut consumer_a, _) = a.stop().await;
    consumer_a.commit_sync().await.unwrap();
    consumer_a.close().await.unwrap();
    // The newcomer starts at the committed offsets: it reads nothing old.
    a_newcomer_reads_nothing_old(consumer(&node, "g-split", &[]), "split", 4).await;
}

/// The poll clock: a member that sleeps past `max.poll.interval.ms` between polls leaves the
/// group (the other member takes everything) and rejoins at its next poll; its event names
/// `poll-timeout`, not the session.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn poll_interval_expiry_leaves_and_rejoins() {
    let dir = tempfile::tempdir().unwrap();
    let node = NodeProcess::start(dir.path(), NODE);
    setup(&node, "slow", 2, 10).await;
    let mut slow = consumer(&node, "g-slow", &[("max.poll.interval.ms", "1500")]);
    slow.subscribe(["slow"]).unwrap();
    let heard = Arc::new(Mutex::new(Vec::new()));
    let listener_log = heard.clone();
    slow.set_rebalance_listener(move |event| listener_log.lock().unwrap().push(event.clone()));
    let fast = consumer(&node, "g-slow", &[]);
    let seen = the_poll_clock_leaves_and_rejoins(fast, slow, "slow", 4000).await;
    // The listener heard every change the drained queue holds, in the same order.
    assert_eq!(*heard.lock().unwrap(), seen.events);
}

/// A static member (`group.instance.id`) closed and restarted within its session timeout sends
/// no LeaveGroup, so the other member sees no rebalance and the restarted one gets its old
/// partition back in the same generation.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_static_member_restarts_without_a_rebalance() {
    let dir = tempfile::tempdir().unwrap();
    let node = NodeProcess::start(dir.path(), NODE);
    setup(&node, "static", 2, 10).await;
    let member = |id| consumer(&node, "g-static", &[("group.instance.id", id)]);
    let (before, after) = static_member_restart(member, "static").await;
    assert_eq!(after, before, "the same generation");
}

/// cooperative-sticky: when a second member joins, the first never loses the partitions that
/// stay with it (no event revokes them), and no partition is owned by both in any generation:
/// each partition the second member is assigned was revoked by the first in an earlier
/// generation (the protocol's two rounds). Generations, not snapshots: each member's
/// assignment is sampled after its own poll returns, so two snapshots taken at once may be
/// of different moments.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cooperative_sticky_keeps_partitions_that_do_not_move() {
    let dir = tempfile::tempdir().unwrap();
    let node = NodeProcess::start(dir.path(), NODE);
    setup(&node, "coop", 4, 10).await;
    let coop = [("partition.assignment.strategy", "cooperative-sticky")];
    let a = Member::start(consumer(&node, "g-coop", &coop), "coop");
    wait_for("a owns everything", 30, || a.assignment() == all("coop", 4)).await;
    let b = Member::start(consumer(&node, "g-coop", &coop), "coop");
    wait_for("split", 30, || {
        let (x, y) = (a.assignment(), b.assignment());
        x.len() == 2 && y.len() == 2 && x.is_disjoint(&y)
    })
    .await;
    let revoked_in: BTreeMap<TopicPartition, i32> = a
        .events()
        .iter()
        .flat_map(|e| e.revoked.iter().map(|p| (p.clone(), e.generation)))
        .collect();
    for event in b.events() {
        for partition in &event.assigned {
            let revoked = revoked_in.get(partition);
            assert!(
                revoked.is_some_and(|g| *g < event.generation),
                "b was assigned {partition:?} in generation {} while a held it (a revoked it \
                 in {revoked:?}): a {:?}, b {:?}",
                event.generation,
                a.events(),
                b.events()
            );
        }
    }
    let kept = a.assignment();
    let revoked: BTreeSet<TopicPartition> = a
        .events()
        .iter()
        .flat_map(|e| e.revoked.iter().cloned())
        .collect();
    assert!(
        revoked.is_disjoint(&kept),
        "kept partitions were revoked: {:?}",
        a.events()
    );
    assert_eq!(revoked.len(), 2, "{:?}", a.events());
    a.stop().await;
    b.stop().await;
}

/// `committed` reads the group's offsets through OffsetFetch without joining the group:
/// nothing before any commit, then exactly the positions a member committed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn committed_reads_the_groups_offsets_without_joining() {
    let dir = tempfile::tempdir().unwrap();
    let node = NodeProcess::start(dir.path(), NODE);
    setup(&node, "fetched", 2, 40).await;
    let partitions: Vec<TopicPartition> = all("fetched", 2).into_iter().collect();
    let mut reader = consumer(&node, "g-fetched", &[("enable.auto.commit", "false")]);
    reader.subscribe(["fetched"]).unwrap();
    assert!(reader.committed(&partitions).await.unwrap().is_empty());
    let member = Member::start(
        consumer(&node, "g-fetched", &[("enable.auto.commit", "false")]),
        "fetched",
    );
    wait_for("the member read everything", 30, || {
        member.seen.lock().unwrap().records.len() >= 40
    })
    .await;
    let (mut consumer, _) = member.stop().await;
    consumer.commit_sync().await.unwrap();
    let committed = reader.committed(&partitions).await.unwrap();
    let offsets: Vec<i64> = partitions.iter().map(|tp| committed[tp].0).collect();
    assert_eq!(offsets, vec![20, 20], "{committed:?}");
    assert!(
        reader.group_generation().is_none(),
        "the reader never joined"
    );
    consumer.close().await.unwrap();
}

/// A new member whose partition has a transactional offset commit pending (its marker not yet
/// written: OffsetFetch with `require_stable` answers UNSTABLE_OFFSET_COMMIT) waits for it,
/// poll after poll, instead of falling back to `auto.offset.reset`; once the transaction
/// commits it starts exactly at the committed offset (issue 16: the eos workload's new owner
/// started at 0 after its predecessor had committed 500).
/// Two ways the one OffsetFetch after SyncGroup used to be lost: cut off by a short poll's
/// deadline, or given up on after `request.timeout.ms` of UNSTABLE_OFFSET_COMMIT answers.
async fn waits_for_a_pending_commit(group: &str, poll_ms: u64, request_timeout_ms: &str) {
    let dir = tempfile::tempdir().unwrap();
    let config =
        format!("{NODE}\ntransaction.state.log.min.isr=1\ntransaction.state.log.num.partitions=3");
    let node = NodeProcess::start(dir.path(), &config);
    setup(&node, "pending", 1, 20).await;
    let tp = TopicPartition::new("pending", 0);
    let producer = Producer::from_properties([
        ("bootstrap.servers", node.bootstrap().as_str()),
        ("transactional.id", group),
    ])
    .unwrap();
    producer.init_transactions().await.unwrap();
    producer.begin_transaction().unwrap();
    let offsets = BTreeMap::from([(tp.clone(), Offset(12))]);
    producer
        .send_offsets_to_transaction(&offsets, &ConsumerGroupMetadata::new(group))
        .await
        .unwrap();
    let mut member = consumer(
        &node,
        group,
        &[
            ("enable.auto.commit", "false"),
            ("request.timeout.ms", request_timeout_ms),
        ],
    );
    member.subscribe(["pending"]).unwrap();
    let until = tokio::time::Instant::now() + Duration::from_secs(3);
    while tokio::time::Instant::now() < until {
        let records = member
            .poll(Duration::from_millis(poll_ms))
            .await
            .unwrap_or_else(|e| panic!("poll failed while the committed offset was pending: {e}"));
        let offsets: Vec<i64> = records.iter().map(|r| r.offset.0).collect();
        assert!(
            offsets.is_empty(),
            "read {offsets:?} while the committed offset was pending"
        );
    }
    assert_eq!(member.assignment(), vec![tp.clone()], "the member joined");
    assert_eq!(
        member.position(&tp),
        None,
        "no position before the group answers"
    );
    producer.commit_transaction().await.unwrap();
    let mut read = Vec::new();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    while read.len() < 8 && tokio::time::Instant::now() < deadline {
        let records = member.poll(Duration::from_millis(poll_ms)).await.unwrap();
        read.extend(records.iter().map(|r| r.offset.0));
    }
    assert_eq!(read, (12..20).collect::<Vec<i64>>());
    producer.close().await;
    member.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_member_waits_for_a_pending_transactional_commit_across_short_polls() {
    waits_for_a_pending_commit("g-pending-short-polls", 300, "30000").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_member_waits_for_a_pending_transactional_commit_past_the_request_timeout() {
    waits_for_a_pending_commit("g-pending-request-timeout", 1500, "500").await;
}
