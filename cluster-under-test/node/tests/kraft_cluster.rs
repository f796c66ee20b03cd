//! Multi-process KRaft: three combined nodes (`process.roles=broker,controller`, every node a
//! voter, controller RPCs on a separate CONTROLLER listener) on 127.0.0.1.
//!
//! - Killing the active controller (SIGKILL) gets a new one elected; every topic created
//!   before is still there; topics created while the old controller is down land in a log
//!   that the new leader snapshots and trims, so the old controller, restarted, catches up
//!   from a snapshot (FetchSnapshot) and then from the log.
//! - A broker killed without a word is fenced once `broker.session.timeout.ms` passes, and
//!   every partition it led gets a new leader from the ISR with a bumped leader epoch; a
//!   partition whose only replica it was stays leaderless with it as the last ISR member.

mod common;

use std::time::{Duration, Instant};

use common::{Cluster, create_topics, metadata, wait_until};

/// Session timeout and heartbeat interval used by these tests (Kafka: 9000 and 2000).
const FAST_SESSIONS: &str = "broker.heartbeat.interval.ms=500\nbroker.session.timeout.ms=3000";

fn topic_names(address: std::net::SocketAddr) -> Vec<String> {
    metadata(address)
        .map(|m| {
            m.topics
                .iter()
                .filter_map(|t| t.name.as_ref().map(|n| n.to_string()))
                .collect()
        })
        .unwrap_or_default()
}

fn broker_count(address: std::net::SocketAddr) -> usize {
    metadata(address).map_or(0, |m| m.brokers.len())
}

/// Kill the active controller: a new one is elected, topics survive, and the restarted old
/// controller catches up through a snapshot.
#[test]
fn controller_failover_keeps_topics_and_restarted_controller_catches_up_from_snapshot() {
    let _ = tracing_subscriber::fmt().with_test_writer().try_init();
    let root = tempfile::tempdir().unwrap();
    let extra = format!("{FAST_SESSIONS}\nmetadata.log.max.record.bytes.between.snapshots=2048");
    let mut cluster = Cluster::start(root.path(), 3, &extra);
    let all = [0, 1, 2];
    let (old, old_epoch) = cluster.wait_for_leader(&all, 0, Duration::from_secs(20));
    wait_until(
        "all three brokers are unfenced",
        Duration::from_secs(20),
        || broker_count(cluster.nodes[0].address) == 3,
    );

    tracing::info!("topics created before the failover");
    let before: Vec<String> = (0..5).map(|i| format!("before-{i}")).collect();
    let specs: Vec<(&str, i32, i16)> = before.iter().map(|n| (n.as_str(), 2, 3)).collect();
    assert!(
        create_topics(cluster.nodes[(old + 1) % 3].address, &specs)
            .iter()
            .all(|c| *c == 0)
    );

    tracing::info!(old, "killing the active controller");
    let killed_at = Instant::now();
    cluster.nodes[old].kill();
    let survivors: Vec<usize> = all.iter().copied().filter(|i| *i != old).collect();
    let (new, new_epoch) = cluster.wait_for_leader(&survivors, old_epoch, Duration::from_secs(20));
    tracing::info!(new, new_epoch, elapsed = ?killed_at.elapsed(), "new active controller");
    assert!(new_epoch > old_epoch);
    for &i in &survivors {
        // Committed before the kill, so every survivor has them (a follower may apply them a
        // moment later: visibility is eventual, durability is not).
        wait_until(
            &format!("node {} shows every topic created before", i + 1),
            Duration::from_secs(10),
            || {
                let names = topic_names(cluster.nodes[i].address);
                before.iter().all(|name| names.contains(name))
            },
        );
    }

    tracing::info!("topics created while the old controller is down, enough for snapshots");
    let during: Vec<String> = (0..40).map(|i| format!("during-failover-{i:03}")).collect();
    for chunk in during.chunks(10) {
        let specs: Vec<(&str, i32, i16)> = chunk.iter().map(|n| (n.as_str(), 1, 2)).collect();
        let codes = create_topics(cluster.nodes[new].address, &specs);
        assert!(codes.iter().all(|c| *c == 0), "{codes:?}");
    }
    let metadata_dir = cluster.nodes[new].dir.join("data/__cluster_metadata-0");
    wait_until(
        "the new leader has a snapshot",
        Duration::from_secs(10),
        || {
            std::fs::read_dir(&metadata_dir)
                .map(|dir| {
                    dir.flatten()
                        .any(|e| e.file_name().to_string_lossy().ends_with(".checkpoint"))
                })
                .unwrap_or(false)
        },
    );

    tracing::info!(old, "restarting the old controller");
    cluster.nodes[old].restart();
    let names = topic_names(cluster.nodes[old].address);
    for name in before.iter().chain(&during) {
        assert!(names.contains(name), "restarted node lacks {name}");
    }
    let log = std::fs::read_to_string(cluster.nodes[old].dir.join("node.log")).unwrap();
    assert!(
        log.contains("installed a metadata snapshot fetched from the leader"),
        "the restarted node caught up without a snapshot"
    );
    wait_until(
        "the restarted broker is unfenced again",
        Duration::from_secs(20),
        || broker_count(cluster.nodes[new].address) == 3,
    );
}

/// A broker that stops heartbeating is fenced after `broker.session.timeout.ms`; the
/// partitions it led move to other ISR members with bumped leader epochs, and it leaves
/// their ISRs, except where it is the last member standing.
#[test]
fn silent_broker_is_fenced_after_session_timeout_and_loses_its_leaderships() {
    let _ = tracing_subscriber::fmt().with_test_writer().try_init();
    let root = tempfile::tempdir().unwrap();
    let mut cluster = Cluster::start(root.path(), 3, FAST_SESSIONS);
    let (controller, _) = cluster.wait_for_leader(&[0, 1, 2], 0, Duration::from_secs(20));
    wait_until(
        "all three brokers are unfenced",
        Duration::from_secs(20),
        || broker_count(cluster.nodes[0].address) == 3,
    );
    let victim = (controller + 1) % 3;
    let victim_id = victim as i32 + 1;
    let observer = cluster.nodes[controller].address;
    let codes = create_topics(observer, &[("replicated", 6, 3), ("solo", 3, 1)]);
    assert_eq!(codes, vec![0, 0]);
    let before = metadata(observer).unwrap();
    let led_before: Vec<(String, i32, i32)> = before
        .topics
        .iter()
        .flat_map(|t| {
            let name = t.name.as_ref().unwrap().to_string();
            t.partitions
                .iter()
                .filter(|p| p.leader_id.0 == victim_id)
                .map(move |p| (name.clone(), p.partition_index, p.leader_epoch))
        })
        .collect();
    assert!(
        led_before.iter().any(|(t, _, _)| t == "replicated")
            && led_before.iter().any(|(t, _, _)| t == "solo"),
        "round-robin placement gives the victim leaderships: {led_before:?}"
    );

    tracing::info!(
        victim_id,
        "killing a broker that is not the active controller"
    );
    let killed_at = Instant::now();
    cluster.nodes[victim].kill();
    wait_until("the victim is fenced", Duration::from_secs(20), || {
        metadata(observer).is_some_and(|m| m.brokers.iter().all(|b| b.node_id.0 != victim_id))
    });
    let fenced_after = killed_at.elapsed();
    // The last heartbeat came at most one interval (500 ms) before the kill.
    assert!(
        fenced_after >= Duration::from_millis(2500),
        "fenced after {fenced_after:?}, before the 3000 ms session could expire"
    );
    let after = metadata(observer).unwrap();
    for (topic, index, epoch) in &led_before {
        let partition = after
            .topics
            .iter()
            .find(|t| t.name.as_ref().is_some_and(|n| n.as_str() == topic))
            .and_then(|t| t.partitions.iter().find(|p| p.partition_index == *index))
            .unwrap();
        assert!(
            partition.leader_epoch > *epoch,
            "{topic}-{index}: epoch not bumped"
        );
        let isr: Vec<i32> = partition.isr_nodes.iter().map(|b| b.0).collect();
        if topic == "replicated" {
            assert!(
                partition.leader_id.0 != victim_id && partition.leader_id.0 >= 1,
                "{topic}-{index} has no new leader: {partition:?}"
            );
            assert!(
                !isr.contains(&victim_id),
                "{topic}-{index}: fenced broker in ISR"
            );
        } else {
            assert_eq!(
                partition.leader_id.0, -1,
                "{topic}-{index}: unclean election is off"
            );
            assert_eq!(
                isr,
                vec![victim_id],
                "{topic}-{index}: last replica standing"
            );
        }
    }
}
