//! KIP-966 Eligible Leader Replicas when the leader itself shrinks the ISR (AlterPartition), on
//! real `logjam-node` processes (kafka-semantics.md §1.8, §1.9 C, §5.6): the followers that
//! leave an ISR falling below `min.insync.replicas` become eligible leader replicas, so when the
//! leader, now the last ISR member, loses power, one of them leads and nothing acknowledged is
//! lost. Issue 17 found the partition leaderless for good instead: the ISR shrink through
//! AlterPartition never filled the ELR, and the crashed leader's unclean re-registration then
//! left nobody eligible.
//!
//! One controller-only node and three broker-only nodes; the followers are paused (SIGSTOP) so
//! they stop fetching, for less than the broker session, so the controller never fences them.

mod common;

use std::net::SocketAddr;
use std::path::Path;
use std::time::{Duration, Instant};

use common::controller_and_brokers::ControllerAndBrokers;
use common::partition::{create_topic, partition_state, produce, read_all, wait_for_isr};
use common::{NodeProcess, wait_until};

/// Starts the lab: brokers 2, 3, 4 with a 1 s `replica.lag.time.max.ms` (so the leader shrinks
/// the ISR of paused followers quickly) and an 8 s broker session (so the pause never fences
/// them); ELR as asked, cluster `min.insync.replicas=2`.
fn start_lab(root: &Path, elr: bool) -> ControllerAndBrokers {
    let lab = ControllerAndBrokers::start(
        root,
        "logjam-elr-shrink",
        3,
        &format!(
            "broker.session.timeout.ms=8000\neligible.leader.replicas.enable={elr}\n\
             min.insync.replicas=2"
        ),
        "replica.lag.time.max.ms=1000\nmin.insync.replicas=2",
    );
    lab.wait_until_brokers_unfenced();
    lab
}

/// Cuts `bytes` off the end of partition 0's first segment of `topic` on a stopped broker: the
/// unflushed tail a power loss takes.
fn cut_tail(node: &NodeProcess, topic: &str, bytes: u64) {
    let path = node
        .dir
        .join(format!("data/{topic}-0/00000000000000000000.log"));
    let file = std::fs::OpenOptions::new().write(true).open(&path).unwrap();
    let len = file.metadata().unwrap().len();
    assert!(len > bytes, "{} has only {len} bytes", path.display());
    file.set_len(len - bytes).unwrap();
    file.sync_all().unwrap();
}

/// Produces `count` records with acks=all to `leader`; each must be acknowledged.
fn produce_acked(leader: SocketAddr, topic: &str, count: usize) -> Vec<(i64, Vec<u8>)> {
    (0..count)
        .map(|i| {
            let value = format!("acked-{i:02}-{}", "x".repeat(40)).into_bytes();
            let offset = produce(leader, topic, &value, -1)
                .unwrap_or_else(|code| panic!("record {i} not acknowledged: {code}"));
            (offset, value)
        })
        .collect()
}

/// Goal: with ELR on and min.insync.replicas=2, the leader shrinks the ISR to itself while its
/// followers are stalled and writes go on, then loses power (killed, its segment's tail cut) and restarts. A
/// follower that was in the ISR when it shrank leads again within the session timeout plus a
/// margin, the crashed leader is never elected, and every acknowledged record reads back at
/// its offset. Fails if the shrink does not fill the ELR (the partition stays leaderless, or
/// the crashed leader is elected with its torn log).
#[test]
fn after_an_isr_shrink_to_the_leader_its_power_loss_hands_leadership_to_an_elr_member() {
    let root = tempfile::tempdir().unwrap();
    let mut lab = start_lab(root.path(), true);
    let leader_address = lab.brokers[0].address;
    create_topic(
        leader_address,
        "shrink",
        1,
        3,
        &[("min.insync.replicas", "2")],
    );
    assert_eq!(
        wait_for_isr(
            leader_address,
            "shrink",
            &[2, 3, 4],
            Duration::from_secs(30)
        ),
        2,
        "replicas [2, 3, 4]: broker 2 leads"
    );
    let acked = produce_acked(leader_address, "shrink", 20);

    // The followers stall; the leader shrinks the ISR to itself through AlterPartition.
    lab.brokers[1].pause();
    lab.brokers[2].pause();
    let paused = Instant::now();
    // A follower at the leader's log end counts as caught up however long it is silent, so
    // writes go on (acks=1: acks=all would wait for the stalled followers).
    wait_until(
        "the leader shrinks the ISR to itself",
        Duration::from_secs(6),
        || {
            let _ = produce(leader_address, "shrink", b"acks-1", 1);
            std::thread::sleep(Duration::from_millis(100));
            partition_state(leader_address, "shrink") == Some((2, vec![2]))
        },
    );
    assert_eq!(
        produce(leader_address, "shrink", b"refused", -1),
        Err(19),
        "NOT_ENOUGH_REPLICAS below min.insync.replicas"
    );
    // Power loss of the leader, then the followers come back before their sessions expire.
    lab.brokers[0].kill();
    cut_tail(&lab.brokers[0], "shrink", 200);
    lab.brokers[1].resume();
    lab.brokers[2].resume();
    assert!(
        paused.elapsed() < Duration::from_secs(7),
        "the followers were paused for less than their session"
    );
    lab.brokers[0].respawn();

    // Broker 2's old session expires (8 s) and then it re-registers as unclean: an ELR member
    // (3 or 4) must lead, never broker 2.
    let observer = lab.brokers[1].address;
    let deadline = Instant::now() + Duration::from_secs(30);
    let new_leader = loop {
        assert!(
            Instant::now() < deadline,
            "no ELR member was elected within 30 s: {:?}",
            partition_state(observer, "shrink")
        );
        // Until the controller acts, the metadata still names broker 2 at its old epoch.
        if let Some((leader @ (3 | 4), _)) = partition_state(observer, "shrink") {
            break leader;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    wait_until(
        "broker 2 re-registers after its unclean shutdown",
        Duration::from_secs(20),
        || {
            lab.controller_log()
                .lines()
                .any(|l| l.contains("unclean shutdown") && l.contains("broker_id=broker2 "))
        },
    );
    let new_leader_address = lab.brokers[(new_leader - 2) as usize].address;
    // A leader below min.insync.replicas keeps its high watermark (strict min ISR): it
    // moves, and reads see the records, once a second replica is back in the ISR.
    wait_until(
        "the ISR regains min.insync.replicas",
        Duration::from_secs(30),
        || partition_state(observer, "shrink").is_some_and(|(_, isr)| isr.len() >= 2),
    );
    // Every acks=all record at its offset; after them only acks=1 records the ELR member had
    // fetched before it stalled may follow.
    let mut log = Vec::new();
    wait_until(
        "every acknowledged record reads back at its offset",
        Duration::from_secs(10),
        || {
            log = read_all(new_leader_address, "shrink");
            log.starts_with(&acked)
        },
    );
    assert!(
        log[acked.len()..]
            .iter()
            .all(|(_, value)| value == b"acks-1"),
        "only acks=1 records follow: {:?}",
        &log[acked.len()..]
    );
    let next = produce(new_leader_address, "shrink", b"after", -1).expect("acks=all again");
    assert_eq!(next, log.len() as i64, "no offset is reused");
}
