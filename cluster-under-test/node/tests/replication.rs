//! Partition replication across real `logjam-node` processes: follower fetching, the high
//! watermark across the ISR, acks=all, ISR shrink and expansion through AlterPartition, and the
//! consequences of clean and unclean leader election (kafka-semantics.md §1.2–§1.6, §1.9).
//!
//! Every wait is on a condition with a deadline. Tests that must lose a majority of brokers
//! use a controller-only node plus broker-only nodes, so that the metadata quorum survives.

mod common;

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use common::controller_and_brokers::ControllerAndBrokers;
use common::partition::{
    create_topic, epoch_end, leader_epoch, partition_state, produce, read_all, wait_for_isr,
};
use common::{Cluster, NodeProcess, wait_until};

const NOT_ENOUGH_REPLICAS: i16 = 19;

/// A controller-only node (id 1) and three broker-only nodes (ids 2, 3, 4), so that brokers
/// can be paused or killed without losing the metadata quorum; `brokers[i]` has node id
/// `i + 2`. Returns once every broker is unfenced.
fn controller_and_brokers(
    root: &std::path::Path,
    controller_extra: &str,
    broker_extra: &str,
) -> ControllerAndBrokers {
    let cluster = ControllerAndBrokers::start(
        root,
        "logjam-replication",
        3,
        controller_extra,
        broker_extra,
    );
    cluster.wait_until_brokers_unfenced();
    cluster
}

/// Goal: with RF 3, acks=all and min.insync.replicas=2, killing the partition leader in the
/// middle of a produce stream loses no acknowledged record. Method: produce unique values one
/// by one to whichever broker leads, kill the leader after 30 acknowledgements, keep producing
/// to the new leader until 30 more are acknowledged, then read the new leader's log: every
/// acknowledged value is there, once, in acknowledgement order.
#[test]
fn acknowledged_records_survive_leader_kill_with_acks_all() {
    let root = tempfile::tempdir().unwrap();
    let mut cluster = Cluster::start(
        root.path(),
        3,
        "broker.heartbeat.interval.ms=500\nbroker.session.timeout.ms=3000\nmin.insync.replicas=2",
    );
    let any = cluster.nodes[0].address;
    create_topic(any, "stream", 1, 3, &[]);
    tracing_free_wait(any);
    let leader_of = |cluster: &Cluster, alive: &[usize]| -> Option<usize> {
        alive.iter().find_map(|&i| {
            let (leader, _) = partition_state(cluster.nodes[i].address, "stream")?;
            (leader >= 1 && alive.contains(&((leader - 1) as usize))).then(|| (leader - 1) as usize)
        })
    };
    let mut alive = vec![0, 1, 2];
    let mut acked: Vec<Vec<u8>> = Vec::new();
    let mut attempt = 0u32;
    let mut killed = false;
    let deadline = Instant::now() + Duration::from_secs(90);
    while acked.len() < 60 {
        assert!(
            Instant::now() < deadline,
            "only {} acks in time",
            acked.len()
        );
        if !killed && acked.len() == 30 {
            let victim = leader_of(&cluster, &alive).expect("a leader");
            cluster.nodes[victim].kill();
            alive.retain(|&i| i != victim);
            killed = true;
        }
        let Some(leader) = leader_of(&cluster, &alive) else {
            std::thread::sleep(Duration::from_millis(50));
            continue;
        };
        attempt += 1;
        let value = format!("value-{attempt}").into_bytes();
        match produce(cluster.nodes[leader].address, "stream", &value, -1) {
            Ok(_) => acked.push(value),
            Err(_) => std::thread::sleep(Duration::from_millis(50)),
        }
    }
    let leader = leader_of(&cluster, &alive).expect("a leader");
    let log: Vec<Vec<u8>> = read_all(cluster.nodes[leader].address, "stream")
        .into_iter()
        .map(|(_, value)| value)
        .collect();
    let positions: Vec<usize> = acked
        .iter()
        .map(|value| {
            let found: Vec<usize> = log
                .iter()
                .enumerate()
                .filter(|(_, v)| *v == value)
                .map(|(i, _)| i)
                .collect();
            assert_eq!(
                found.len(),
                1,
                "acknowledged {} appears {} times",
                String::from_utf8_lossy(value),
                found.len()
            );
            found[0]
        })
        .collect();
    assert!(
        positions.windows(2).all(|w| w[0] < w[1]),
        "acknowledged records out of order"
    );
}

/// Waits until the topic `stream` has a leader and a full ISR.
fn tracing_free_wait(address: SocketAddr) {
    wait_for_isr(address, "stream", &[1, 2, 3], Duration::from_secs(30));
}

/// Goal: followers that stop fetching leave the ISR after `replica.lag.time.max.ms`, by the
/// leader's AlterPartition once the leader has records they miss (the broker session is
/// longer, so fencing cannot be the cause);
/// then acks=all succeeds with min.insync.replicas=1 and is refused with NOT_ENOUGH_REPLICAS
/// with min.insync.replicas=2; resumed followers rejoin the ISR.
#[test]
fn isr_shrinks_to_leader_when_followers_stop_and_acks_all_follows_min_isr() {
    let root = tempfile::tempdir().unwrap();
    let cluster = controller_and_brokers(
        root.path(),
        "broker.session.timeout.ms=20000",
        "replica.lag.time.max.ms=2000",
    );
    let brokers = &cluster.brokers;
    let any = brokers[0].address;
    create_topic(any, "one", 1, 3, &[("min.insync.replicas", "1")]);
    create_topic(any, "two", 1, 3, &[("min.insync.replicas", "2")]);
    let leader_one = wait_for_isr(any, "one", &[2, 3, 4], Duration::from_secs(30));
    let leader_two = wait_for_isr(any, "two", &[2, 3, 4], Duration::from_secs(30));
    // Put both topics' leaders on one broker is not guaranteed; pause the followers of each
    // separately would be confusing, so pause every broker but one leader and check that
    // topic, then the other.
    for (topic, leader, min_isr) in [("one", leader_one, 1), ("two", leader_two, 2)] {
        let leader_index = (leader - 2) as usize;
        assert!(produce(brokers[leader_index].address, topic, b"before", -1).is_ok());
        let followers: Vec<usize> = (0..3).filter(|&i| i != leader_index).collect();
        for &i in &followers {
            brokers[i].pause();
        }
        // A follower at the leader's log end is never out of sync (`Replica.isCaughtUp`):
        // the leader needs a write the followers miss.
        let started = Instant::now();
        assert!(produce(brokers[leader_index].address, topic, b"missed", 1).is_ok());
        wait_for_isr(
            brokers[leader_index].address,
            topic,
            &[leader],
            Duration::from_secs(12),
        );
        assert!(
            started.elapsed() >= Duration::from_millis(1500),
            "the ISR shrank before replica.lag.time.max.ms"
        );
        let outcome = produce(brokers[leader_index].address, topic, b"alone", -1);
        if min_isr == 1 {
            assert!(outcome.is_ok(), "acks=all with min ISR 1: {outcome:?}");
        } else {
            assert_eq!(outcome, Err(NOT_ENOUGH_REPLICAS));
        }
        for &i in &followers {
            brokers[i].resume();
        }
        wait_for_isr(
            brokers[leader_index].address,
            topic,
            &[2, 3, 4],
            Duration::from_secs(20),
        );
        assert!(produce(brokers[leader_index].address, topic, b"after", -1).is_ok());
    }
}

/// Sets up `topic` with its ISR shrunk to its leader (followers paused) and `count` records
/// acknowledged by the leader alone. Returns `(leader index, paused follower indices, acked
/// offsets)`.
fn write_to_lonely_leader(
    brokers: &[NodeProcess],
    topic: &str,
    count: usize,
) -> (usize, Vec<usize>, Vec<i64>) {
    let any = brokers[0].address;
    create_topic(any, topic, 1, 3, &[("min.insync.replicas", "1")]);
    let leader = wait_for_isr(any, topic, &[2, 3, 4], Duration::from_secs(30));
    let leader_index = (leader - 2) as usize;
    for i in 0..5 {
        let value = format!("replicated-{i}");
        assert!(produce(brokers[leader_index].address, topic, value.as_bytes(), -1).is_ok());
    }
    // Every follower has the replicated records once the leader's HW covers them (acks=all).
    let followers: Vec<usize> = (0..3).filter(|&i| i != leader_index).collect();
    for &i in &followers {
        brokers[i].pause();
    }
    assert!(produce(brokers[leader_index].address, topic, b"missed", 1).is_ok());
    wait_for_isr(
        brokers[leader_index].address,
        topic,
        &[leader],
        Duration::from_secs(15),
    );
    let acked: Vec<i64> = (0..count)
        .map(|i| {
            let value = format!("lonely-{i}");
            produce(brokers[leader_index].address, topic, value.as_bytes(), -1)
                .expect("acks=all with min ISR 1 and ISR = leader")
        })
        .collect();
    (leader_index, followers, acked)
}

/// Goal: with unclean.leader.election.enable=true, records acknowledged by a lonely leader are
/// lost when it dies and a stale follower is elected, and the old leader truncates them when
/// it comes back (their offsets are reused). Method: pause the followers until the ISR is the
/// leader, write, kill the leader, resume one follower: it is elected uncleanly; restart the old
/// leader and check both logs.
#[test]
fn unclean_election_loses_acknowledged_records_and_old_leader_truncates() {
    let root = tempfile::tempdir().unwrap();
    let mut cluster = controller_and_brokers(
        root.path(),
        "broker.session.timeout.ms=3000\nunclean.leader.election.enable=true",
        "replica.lag.time.max.ms=2000",
    );
    let brokers = &mut cluster.brokers;
    let (old, followers, acked) = write_to_lonely_leader(brokers, "unclean", 5);
    let first_lost = acked[0];
    // A consumer that read the acknowledged records holds a position after them, fetched in
    // the old leader's epoch.
    let old_epoch = leader_epoch(brokers[old].address, "unclean").expect("the old leader's epoch");
    let consumer_position = acked[acked.len() - 1] + 1;
    assert_eq!(
        epoch_end(brokers[old].address, "unclean", old_epoch),
        (0, old_epoch, consumer_position),
        "the current epoch ends at the log end"
    );
    brokers[old].kill();
    let stale = followers[0];
    brokers[stale].resume();
    let stale_id = stale as i32 + 2;
    wait_until(
        "the stale follower is elected uncleanly",
        Duration::from_secs(30),
        || partition_state(brokers[stale].address, "unclean").is_some_and(|(l, _)| l == stale_id),
    );
    // The acknowledged records are gone, and their offsets are handed out again.
    let reused = loop {
        match produce(brokers[stale].address, "unclean", b"new-epoch", 1) {
            Ok(offset) => break offset,
            Err(_) => std::thread::sleep(Duration::from_millis(50)),
        }
    };
    assert_eq!(reused, first_lost, "the lost offsets are reused");
    // KIP-320: the consumer asks the new leader where its epoch ends and learns that the log
    // was truncated under its position, at the first lost offset.
    let (error, epoch, end) = epoch_end(brokers[stale].address, "unclean", old_epoch);
    assert_eq!(error, 0);
    assert!(
        epoch <= old_epoch,
        "the largest epoch at or below the asked one: {epoch}"
    );
    assert_eq!(end, first_lost, "the divergence point");
    assert!(
        end < consumer_position,
        "the consumer can see its position was truncated"
    );
    brokers[old].restart();
    brokers[followers[1]].resume();
    wait_until(
        "the old leader rejoins the ISR",
        Duration::from_secs(30),
        || {
            partition_state(brokers[stale].address, "unclean")
                .is_some_and(|(_, isr)| isr.contains(&(old as i32 + 2)))
        },
    );
    let log = read_all(brokers[stale].address, "unclean");
    assert!(log.iter().all(|(_, v)| !v.starts_with(b"lonely-")));
    assert!(
        log.iter()
            .any(|(o, v)| *o == first_lost && v == b"new-epoch")
    );
    // The old leader truncated its acknowledged records: its log now matches the leader's.
    // Read it as leader after moving nothing: check its log files through a restart-free path
    // by waiting for its log end to match (it has fetched past the divergence point).
    wait_until(
        "the old leader's log has no lonely record",
        Duration::from_secs(20),
        || {
            let dir = brokers[old].dir.join("data/unclean-0");
            let bytes: Vec<u8> = std::fs::read_dir(&dir)
                .map(|entries| {
                    entries
                        .filter_map(Result::ok)
                        .filter(|e| e.path().extension().is_some_and(|x| x == "log"))
                        .flat_map(|e| std::fs::read(e.path()).unwrap_or_default())
                        .collect()
                })
                .unwrap_or_default();
            !bytes.windows(7).any(|w| w == b"lonely-") && !bytes.is_empty()
        },
    );
}

/// Goal: with unclean.leader.election.enable=false the same scenario keeps the partition
/// offline until the ISR member returns, and no acknowledged record is lost.
#[test]
fn clean_election_keeps_partition_offline_until_isr_member_returns() {
    let root = tempfile::tempdir().unwrap();
    let mut cluster = controller_and_brokers(
        root.path(),
        "broker.session.timeout.ms=3000\nunclean.leader.election.enable=false",
        "replica.lag.time.max.ms=2000",
    );
    let brokers = &mut cluster.brokers;
    let (old, followers, acked) = write_to_lonely_leader(brokers, "clean", 5);
    brokers[old].kill();
    for &i in &followers {
        brokers[i].resume();
    }
    wait_until("the partition is offline", Duration::from_secs(20), || {
        partition_state(brokers[followers[0]].address, "clean").is_some_and(|(l, _)| l == -1)
    });
    // It stays offline while only stale followers are alive (a few seconds is enough to see
    // that no election happens: the controller would elect at once).
    let until = Instant::now() + Duration::from_secs(3);
    while Instant::now() < until {
        let state = partition_state(brokers[followers[0]].address, "clean");
        assert!(
            state.as_ref().is_none_or(|(l, _)| *l == -1),
            "elected: {state:?}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    brokers[old].restart();
    let old_id = old as i32 + 2;
    wait_until(
        "the old leader is elected again",
        Duration::from_secs(30),
        || {
            partition_state(brokers[followers[0]].address, "clean")
                .is_some_and(|(l, _)| l == old_id)
        },
    );
    wait_until(
        "every acknowledged record is readable",
        Duration::from_secs(20),
        || {
            let log = std::panic::catch_unwind(|| read_all(brokers[old].address, "clean"))
                .unwrap_or_default();
            acked.iter().all(|offset| {
                log.iter()
                    .any(|(o, v)| o == offset && v.starts_with(b"lonely-"))
            })
        },
    );
}
