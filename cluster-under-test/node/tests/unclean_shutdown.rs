//! KIP-966 unclean-shutdown detection across real `logjam-node` processes (kafka-semantics.md
//! §5.6, §1.2, §1.8): a clean shutdown leaves its broker epoch in `.kafka_cleanshutdown` and the
//! next incarnation sends it as `PreviousBrokerEpoch`; a crashed broker cannot, and the
//! controller removes it from every ISR (and, with ELR, every ELR) when it re-registers, so a
//! replica that lost its log tail must catch up before it can lead again.
//!
//! What Kafka 4 does, and these tests pin: a SIGKILLed broker restarted at once is refused
//! (`DUPLICATE_BROKER_REGISTRATION`) until its old session expires, so its ISR removal comes
//! from that fencing or from the re-registration, whichever the controller sees first. Without
//! ELR (Kafka 4.0's default) an unclean re-registration is handled as a fencing, which keeps
//! the last ISR member: that "last replica standing" is elected again with whatever its log
//! kept. With `eligible.leader.replicas.enable=true` it is removed from the ISR and ELR instead,
//! and a clean ELR member leads.
//!
//! Every test uses a controller-only node and three broker-only nodes (the brokers can all be
//! down without losing the metadata quorum) and holds a lock: two such clusters at once would
//! starve each other on two cores.

mod common;

use std::net::SocketAddr;
use std::path::Path;
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use common::controller_and_brokers::ControllerAndBrokers;
use common::partition::{create_topic, partitions, produce, read_all, wait_for_isr};
use common::{NodeProcess, wait_until};

static ONE_CLUSTER_AT_A_TIME: Mutex<()> = Mutex::new(());

/// Holds the lock that keeps this binary's tests from running two clusters at once.
fn one_cluster_at_a_time() -> MutexGuard<'static, ()> {
    ONE_CLUSTER_AT_A_TIME
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
}

/// The controller's log line for a re-registration it judged unclean, and for a clean one.
const UNCLEAN_LINE: &str = "re-registered after an unclean shutdown";
const CLEAN_LINE: &str = "re-registered after a clean shutdown";

/// A controller-only node (id 1, `root/node1`) and broker-only nodes 2, 3, 4 (`brokers[i]` has
/// id `i + 2`); the broker session is 3 s, heartbeats every 500 ms. Returns once every broker
/// is unfenced.
fn start_lab(root: &Path, controller_extra: &str) -> ControllerAndBrokers {
    let cluster = ControllerAndBrokers::start(
        root,
        "logjam-unclean",
        3,
        &format!("broker.session.timeout.ms=3000\n{controller_extra}"),
        "",
    );
    cluster.wait_until_brokers_unfenced();
    cluster
}

/// The controller's unclean (or clean) re-registration lines naming broker `id`.
fn reregistrations(lab: &ControllerAndBrokers, id: i32, line: &str) -> Vec<String> {
    let name = format!("broker_id=broker{id} ");
    lab.controller_log()
        .lines()
        .filter(|l| l.contains(line) && l.contains(&name))
        .map(str::to_owned)
        .collect()
}

/// Creates `topic` with three partitions of three replicas and waits until every partition
/// has a leader and a full ISR, as `observer` sees it; returns the leader of partition 0.
fn create_topic_with_full_isrs(observer: SocketAddr, topic: &str) -> i32 {
    create_topic(observer, topic, 3, 3, &[]);
    wait_until("every ISR is full", Duration::from_secs(30), || {
        partitions(observer, topic)
            .is_some_and(|p| p.len() == 3 && p.iter().all(|(l, isr)| *l >= 0 && isr.len() == 3))
    });
    partitions(observer, topic).unwrap()[0].0
}

/// Produces `values` one by one with acks=all to `address`; each must be acknowledged.
/// Returns `(offset, value)` per record.
fn produce_acked(address: SocketAddr, topic: &str, values: &[String]) -> Vec<(i64, Vec<u8>)> {
    values
        .iter()
        .map(|value| {
            let offset = produce(address, topic, value.as_bytes(), -1)
                .unwrap_or_else(|code| panic!("{value} not acknowledged: {code}"));
            (offset, value.as_bytes().to_vec())
        })
        .collect()
}

/// Cuts `bytes` off the end of partition 0's first segment of `topic` on a stopped broker (a
/// torn tail, as the lab's `corrupt` fault does). Returns the new length.
fn cut_tail(node: &NodeProcess, topic: &str, bytes: u64) -> u64 {
    let path = node
        .dir
        .join(format!("data/{topic}-0/00000000000000000000.log"));
    let file = std::fs::OpenOptions::new().write(true).open(&path).unwrap();
    let len = file.metadata().unwrap().len();
    assert!(len > bytes, "{} has only {len} bytes", path.display());
    file.set_len(len - bytes).unwrap();
    file.sync_all().unwrap();
    len - bytes
}

/// How many times a broker's log says it registered (once per incarnation, normally).
fn registrations(node: &NodeProcess) -> usize {
    std::fs::read_to_string(node.dir.join("node.log"))
        .unwrap_or_default()
        .matches("registered with the controller")
        .count()
}

fn values(prefix: &str, count: usize) -> Vec<String> {
    (0..count)
        .map(|i| format!("{prefix}-{i:02}-{}", "x".repeat(24)))
        .collect()
}

/// Goal: a follower killed with SIGKILL and restarted at once is out of every ISR when it
/// re-registers, the controller logs the re-registration as unclean, and the broker rejoins
/// every ISR once it has caught up. Its next incarnation is refused until the old session
/// expires (Kafka's `DUPLICATE_BROKER_REGISTRATION`), so that takes about the session timeout.
/// Method: 3 partitions, RF 3; kill broker 4, restart it at once, watch the ISRs from broker 2.
#[test]
fn crashed_broker_leaves_every_isr_at_reregistration_and_rejoins_after_catching_up() {
    let _one = one_cluster_at_a_time();
    let root = tempfile::tempdir().unwrap();
    let mut lab = start_lab(root.path(), "");
    let observer = lab.brokers[0].address;
    let leader = create_topic_with_full_isrs(observer, "crash");
    assert_ne!(leader, 4, "broker 4 follows partition 0");
    let leader_address = lab.brokers[(leader - 2) as usize].address;
    produce_acked(leader_address, "crash", &values("before", 10));

    let victim = 2; // broker 4: follower of partition 0, leader of partition 2
    let killed = Instant::now();
    lab.brokers[victim].respawn(); // SIGKILL, then start again at once
    let mut out_of_every_isr = None;
    let mut back_in_every_isr = None;
    let deadline = Instant::now() + Duration::from_secs(30);
    while back_in_every_isr.is_none() {
        assert!(
            Instant::now() < deadline,
            "broker 4 did not leave and rejoin every ISR in time (left: {out_of_every_isr:?})"
        );
        if let Some(state) = partitions(observer, "crash") {
            if out_of_every_isr.is_none() && state.iter().all(|(_, isr)| !isr.contains(&4)) {
                out_of_every_isr = Some(killed.elapsed());
                assert!(
                    state.iter().all(|(leader, _)| *leader != 4),
                    "broker 4 led nothing once out of the ISRs: {state:?}"
                );
            }
            if out_of_every_isr.is_some()
                && state
                    .iter()
                    .all(|(leader, isr)| *leader >= 0 && isr.contains(&4))
            {
                back_in_every_isr = Some(killed.elapsed());
            }
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    lab.brokers[victim].wait_ready();
    assert_eq!(
        registrations(&lab.brokers[victim]),
        2,
        "one per incarnation"
    );
    let out = out_of_every_isr.unwrap();
    assert!(
        out >= Duration::from_millis(2500),
        "the ISRs changed only once the old session expired (3 s), not after {out:?}"
    );
    let unclean = reregistrations(&lab, 4, UNCLEAN_LINE);
    assert_eq!(unclean.len(), 1, "the controller saw one unclean restart");
    assert!(
        unclean[0].contains("previous_broker_epoch=-1"),
        "a crash leaves no broker epoch: {}",
        unclean[0]
    );
    assert!(reregistrations(&lab, 4, CLEAN_LINE).is_empty());
    // Nothing acknowledged was lost, and the partition still takes acks=all writes.
    produce_acked(leader_address, "crash", &values("after", 3));
    let log = read_all(leader_address, "crash");
    assert_eq!(log.len(), 13);
}

/// Goal: a clean stop is told apart from a crash. SIGTERM runs the controlled shutdown (the
/// broker leaves every ISR at once, with no session timeout), leaves its broker epoch in
/// `.kafka_cleanshutdown`, and its next incarnation registers with it as
/// `PreviousBrokerEpoch`: the controller logs a clean re-registration and never the unclean
/// path. The marker is consumed at start, so a later SIGKILL of that incarnation is unclean.
#[test]
fn clean_stop_is_not_an_unclean_shutdown_but_a_later_crash_is() {
    let _one = one_cluster_at_a_time();
    let root = tempfile::tempdir().unwrap();
    let mut lab = start_lab(root.path(), "");
    let observer = lab.brokers[0].address;
    let leader = create_topic_with_full_isrs(observer, "clean");
    let leader_address = lab.brokers[(leader - 2) as usize].address;
    produce_acked(leader_address, "clean", &values("before", 10));
    let first_log = std::fs::read_to_string(lab.brokers[2].dir.join("node.log")).unwrap();
    let first_epoch: i64 = first_log
        .lines()
        .find_map(|l| {
            l.split("registered with the controller broker_epoch=")
                .nth(1)
        })
        .and_then(|rest| rest.trim().parse().ok())
        .expect("broker 4 logged its broker epoch");

    let stopped = Instant::now();
    lab.brokers[2].terminate();
    let marker = lab.brokers[2].dir.join("data/.kafka_cleanshutdown");
    assert_eq!(
        std::fs::read_to_string(&marker).unwrap(),
        format!(r#"{{"version":0,"brokerEpoch":{first_epoch}}}"#)
    );
    wait_until(
        "the controlled shutdown took broker 4 out of every ISR",
        Duration::from_secs(10),
        || {
            partitions(observer, "clean")
                .is_some_and(|p| p.iter().all(|(l, isr)| *l != 4 && !isr.contains(&4)))
        },
    );
    assert!(
        stopped.elapsed() < Duration::from_millis(2500),
        "a controlled shutdown does not wait for the session to expire"
    );
    lab.brokers[2].restart();
    assert!(!marker.exists(), "the marker is consumed at start");
    wait_until(
        "broker 4 rejoins every ISR",
        Duration::from_secs(20),
        || {
            partitions(observer, "clean")
                .is_some_and(|p| p.iter().all(|(l, isr)| *l >= 0 && isr.contains(&4)))
        },
    );
    let clean = reregistrations(&lab, 4, CLEAN_LINE);
    assert_eq!(clean.len(), 1, "the controller saw one clean restart");
    assert!(
        clean[0].contains(&format!("previous_broker_epoch={first_epoch} ")),
        "{}",
        clean[0]
    );
    assert!(
        reregistrations(&lab, 4, UNCLEAN_LINE).is_empty(),
        "the unclean path did not fire for a clean stop"
    );

    // The incarnation started from the marker, then crashed: that restart is unclean.
    lab.brokers[2].restart();
    wait_until(
        "the crash of the next incarnation is detected",
        Duration::from_secs(10),
        || reregistrations(&lab, 4, UNCLEAN_LINE).len() == 1,
    );
    assert_eq!(reregistrations(&lab, 4, CLEAN_LINE).len(), 1);
    let log = read_all(leader_address, "clean");
    assert_eq!(log.len(), 10, "nothing acknowledged was lost");
}

/// Goal: the `corrupt` fault's scenario on one follower: RF 3, acks=all,
/// min.insync.replicas=2. A follower is killed, loses the tail of its segment (records it had
/// acknowledged as an ISR member), is restarted, and then the leader is killed. The damaged
/// follower is first in the assignment order after the leader, so it would be elected if it
/// were still in the ISR; it is not, the intact follower leads, and every acknowledged record
/// is read back at its offset once the damaged one has caught up and rejoined.
#[test]
fn follower_that_lost_its_tail_is_not_elected_while_behind() {
    let _one = one_cluster_at_a_time();
    let root = tempfile::tempdir().unwrap();
    let mut lab = start_lab(root.path(), "");
    let any = lab.brokers[0].address;
    create_topic(any, "torn", 1, 3, &[("min.insync.replicas", "2")]);
    let leader = wait_for_isr(any, "torn", &[2, 3, 4], Duration::from_secs(30));
    assert_eq!(leader, 2, "replicas [2, 3, 4]: broker 2 leads");
    let acked = produce_acked(lab.brokers[0].address, "torn", &values("acked", 20));
    // Broker 3 (the first candidate after the leader) crashes and loses its last records.
    lab.brokers[1].kill();
    cut_tail(&lab.brokers[1], "torn", 300);
    lab.brokers[1].respawn();
    std::thread::sleep(Duration::from_millis(1500));
    lab.brokers[0].kill();
    // Broker 4 is the only live broker that answers metadata throughout.
    let observer = lab.brokers[2].address;
    let deadline = Instant::now() + Duration::from_secs(30);
    let new_leader = loop {
        assert!(Instant::now() < deadline, "no new leader in time");
        if let Some(state) = partitions(observer, "torn") {
            let (leader, _) = state[0];
            assert_ne!(leader, 3, "the follower that lost its tail was elected");
            if leader == 4 {
                break leader;
            }
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    assert_eq!(new_leader, 4);
    lab.brokers[1].wait_ready();
    let node3 = std::fs::read_to_string(lab.brokers[1].dir.join("node.log")).unwrap();
    assert!(
        node3.contains("log recovered with truncation"),
        "broker 3 really lost its tail in recovery"
    );
    assert_eq!(reregistrations(&lab, 3, UNCLEAN_LINE).len(), 1);
    // The HW moves again once broker 3 is back in the ISR (min.insync.replicas=2).
    wait_for_isr(observer, "torn", &[3, 4], Duration::from_secs(20));
    let expected = acked.clone();
    wait_until(
        "every acknowledged record reads back at its offset",
        Duration::from_secs(10),
        || read_all(observer, "torn") == expected,
    );
}

/// The "last replica standing" of KIP-966, with RF 3 and min.insync.replicas=2: broker 4
/// crashes (the ISR becomes [2, 3]), records are acknowledged by 2 and 3, broker 3 stops
/// cleanly (ISR [2]; with ELR, 3 becomes an eligible leader replica), then the leader,
/// broker 2, crashes and loses the tail of its segment, and restarts alone. Returns the lab,
/// the acknowledged records and the leader once broker 3 is back and has been restarted
/// cleanly.
fn last_replica_standing(
    root: &Path,
    elr: bool,
) -> (ControllerAndBrokers, Vec<(i64, Vec<u8>)>, i32) {
    let mut lab = start_lab(
        root,
        &format!("eligible.leader.replicas.enable={elr}\nmin.insync.replicas=2"),
    );
    let any = lab.brokers[0].address;
    create_topic(any, "last", 1, 3, &[("min.insync.replicas", "2")]);
    assert_eq!(
        wait_for_isr(any, "last", &[2, 3, 4], Duration::from_secs(30)),
        2
    );
    let leader = lab.brokers[0].address;
    let mut acked = produce_acked(leader, "last", &values("three", 10));
    lab.brokers[2].kill();
    wait_for_isr(leader, "last", &[2, 3], Duration::from_secs(15));
    acked.extend(produce_acked(leader, "last", &values("two", 10)));
    // Let broker 3 learn the high watermark over the last records (one fetch round trip).
    std::thread::sleep(Duration::from_millis(1500));
    lab.brokers[1].terminate();
    wait_for_isr(leader, "last", &[2], Duration::from_secs(10));
    assert_eq!(
        produce(leader, "last", b"refused", -1),
        Err(19),
        "NOT_ENOUGH_REPLICAS below min.insync.replicas"
    );
    lab.brokers[0].kill();
    cut_tail(&lab.brokers[0], "last", 250);
    lab.brokers[0].restart();
    // Broker 2 is registered and unfenced again (it serves); give the controller time to
    // elect it if it were going to.
    let alone = lab.brokers[0].address;
    std::thread::sleep(Duration::from_millis(1500));
    let state = partitions(alone, "last").unwrap()[0].clone();
    if elr {
        assert_eq!(
            state,
            (-1, vec![]),
            "with ELR the crashed last ISR member is not elected"
        );
    } else {
        assert_eq!(
            state,
            (2, vec![2]),
            "without ELR the crashed last ISR member stays and is elected"
        );
    }
    lab.brokers[1].restart();
    let leader = wait_for_isr(alone, "last", &[2, 3], Duration::from_secs(30));
    assert_eq!(reregistrations(&lab, 2, UNCLEAN_LINE).len(), 1);
    assert_eq!(reregistrations(&lab, 3, CLEAN_LINE).len(), 1);
    assert!(reregistrations(&lab, 3, UNCLEAN_LINE).is_empty());
    (lab, acked, leader)
}

/// Goal: with `eligible.leader.replicas.enable=true`, a last ISR member that crashed and lost
/// its log tail is removed from the ISR and the ELR when it re-registers: it is not elected,
/// the clean ELR member (broker 3) is once it returns, and every acknowledged record survives.
#[test]
fn with_elr_a_crashed_last_isr_member_is_not_elected_and_nothing_is_lost() {
    let _one = one_cluster_at_a_time();
    let root = tempfile::tempdir().unwrap();
    let (lab, acked, leader) = last_replica_standing(root.path(), true);
    assert_eq!(leader, 3, "the clean ELR member leads");
    let unclean = reregistrations(&lab, 2, UNCLEAN_LINE);
    assert!(
        unclean[0].contains("partitions=1"),
        "broker 2 left the ELR of the partition: {}",
        unclean[0]
    );
    let address = lab.brokers[1].address;
    wait_until(
        "every acknowledged record reads back at its offset",
        Duration::from_secs(10),
        || read_all(address, "last") == acked,
    );
}

/// Goal: the same scenario with ELR off, Kafka 4.0's default: an unclean re-registration is
/// handled as a fencing, the last ISR member stays in the ISR and is elected with the log it
/// recovered, and the acknowledged records it lost are gone for good (broker 3 truncates to
/// it, and their offsets are handed out again). This is Kafka's behaviour, not a bug.
#[test]
fn without_elr_a_crashed_last_isr_member_is_elected_and_acknowledged_records_are_lost() {
    let _one = one_cluster_at_a_time();
    let root = tempfile::tempdir().unwrap();
    let (lab, acked, leader) = last_replica_standing(root.path(), false);
    assert_eq!(leader, 2, "the crashed last ISR member leads");
    let address = lab.brokers[0].address;
    let log = read_all(address, "last");
    let kept = acked
        .iter()
        .take_while(|record| log.contains(record))
        .count();
    assert!(
        kept < acked.len(),
        "the torn tail held acknowledged records"
    );
    assert_eq!(
        log,
        acked[..kept],
        "what is left is a prefix of what was acknowledged"
    );
    // The metadata already shows ISR [2, 3]; the leader's partition may apply that image a
    // moment later, answering NOT_ENOUGH_REPLICAS (19, nothing written) until it does.
    let mut answer = Err(-1);
    wait_until(
        "acks=all is accepted with ISR [2, 3]",
        Duration::from_secs(10),
        || {
            answer = produce(address, "last", b"new", -1);
            answer != Err(19)
        },
    );
    let reused = answer.expect("acks=all with ISR [2, 3]");
    assert_eq!(
        reused, acked[kept].0,
        "the lost offsets are handed out again"
    );
}
