//! The node's canaries (`logjam.canaries`, `src/canary.rs`) through real node processes: each
//! deliberate bug shows its observable effect when switched on, and the same steps with it
//! off behave correctly, so a test fails both when a canary does nothing and when the real code
//! is broken the same way. Also the configuration: no canary by default, an unknown name
//! refuses to start, active ones are announced.
//!
//! The three canaries of the leader's commit path (`hw-before-replication`,
//! `ack-before-replication`, `read-above-high-watermark`) share one scenario, run once per
//! canary and once with none: an RF 3 partition whose two followers are paused (SIGSTOP) while
//! still in the ISR. Each asserts its own effect and the absence of the others'.

mod common;

use std::net::SocketAddr;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::controller_and_brokers::ControllerAndBrokers;
use common::partition::{
    create_topic, fetch, partition_state, produce_batch, produce_records, wait_for_isr,
};
use common::{NodeProcess, connect, exchange, free_port, producer_batch, wait_until};
use kafka_protocol::messages::*;
use kafka_protocol::records::RecordBatchDecoder;
use logjam_storage::{LoadCheckpoints, Log, LogConfig, Offset, TopicPartition};

const REQUEST_TIMED_OUT: i16 = 7;

/// Records as `(offset, value)`.
type Records = Vec<(i64, String)>;

/// One consumer fetch (replica id -1) of partition 0 from `offset`: the high watermark the
/// leader reports and the records returned, as `(offset, value)`.
fn consumer_fetch(address: SocketAddr, topic: &str, offset: i64) -> (i64, Records) {
    let (high_watermark, mut records) = fetch(&mut connect(address), topic, offset, 1 << 20);
    let values = if records.is_empty() {
        Vec::new()
    } else {
        decode(&mut records)
    };
    (high_watermark, values)
}

fn decode(records: &mut bytes::Bytes) -> Records {
    RecordBatchDecoder::decode_all(records)
        .unwrap()
        .into_iter()
        .flat_map(|set| set.records)
        .map(|record| {
            let value = record.value.unwrap_or_default();
            (record.offset, String::from_utf8_lossy(&value).into_owned())
        })
        .collect()
}

/// A controller-only node and three brokers with `canaries` on and a broker session of
/// `session_timeout_ms` (followers never leave the ISR for lagging: `replica.lag.time.max.ms`
/// is 30 s), and `topic`: one partition, RF 3, `min.insync.replicas=1`, its ISR full. Returns
/// the cluster (`brokers[i]` has node id `i + 2`) and the partition leader's node id.
fn cluster_with_topic(
    root: &Path,
    canaries: &str,
    session_timeout_ms: u32,
    topic: &str,
) -> (ControllerAndBrokers, i32) {
    let cluster = ControllerAndBrokers::start(
        root,
        "logjam-canaries",
        3,
        &format!("broker.session.timeout.ms={session_timeout_ms}"),
        &format!("replica.lag.time.max.ms=30000\nlogjam.canaries={canaries}"),
    );
    cluster.wait_until_brokers_unfenced();
    let any = cluster.brokers[0].address;
    create_topic(any, topic, 1, 3, &[("min.insync.replicas", "1")]);
    let leader = wait_for_isr(any, topic, &[2, 3, 4], Duration::from_secs(30));
    (cluster, leader)
}

/// What the paused-followers scenario observed on the leader.
#[derive(Debug)]
struct Observed {
    /// The answer to an acks=all produce (timeout 1.5 s) made while the followers are paused.
    acks_all: Result<i64, i16>,
    /// How long that answer took.
    acks_all_took: Duration,
    /// The high watermark a consumer fetch reports afterwards.
    high_watermark: i64,
    /// What a consumer fetch from offset 1 returns afterwards.
    read_from_1: Records,
    /// The ISR afterwards (the scenario's premise: the paused followers are still in it).
    isr: Vec<i32>,
}

/// RF 3, `min.insync.replicas=1`: one record committed by all three replicas (offset 0); both
/// followers paused while still in the ISR (`replica.lag.time.max.ms` and the broker session
/// are long); then one record with acks=1 (offset 1) and one with acks=all (offset 2). The
/// leader's log end is 3; only offset 0 is replicated.
fn with_followers_paused(canaries: &str) -> Observed {
    let root = tempfile::tempdir().unwrap();
    let topic = "paused";
    let (cluster, leader_id) = cluster_with_topic(root.path(), canaries, 30000, topic);
    let brokers = &cluster.brokers;
    let leader = &brokers[(leader_id - 2) as usize];
    assert_eq!(
        produce_batch(leader.address, topic, &[b"committed"], -1, 5000),
        Ok(0)
    );
    // Both followers have fetched offset 0 once the high watermark covers it.
    wait_until("the high watermark is 1", Duration::from_secs(10), || {
        consumer_fetch(leader.address, topic, 0).0 == 1
    });
    let followers: Vec<&NodeProcess> = brokers
        .iter()
        .filter(|b| b.address != leader.address)
        .collect();
    for follower in &followers {
        follower.pause();
    }
    assert_eq!(
        produce_batch(leader.address, topic, &[b"acks-1"], 1, 5000),
        Ok(1)
    );
    let started = Instant::now();
    let acks_all = produce_batch(leader.address, topic, &[b"acks-all"], -1, 1500);
    let acks_all_took = started.elapsed();
    let (high_watermark, _) = consumer_fetch(leader.address, topic, 0);
    let (_, read_from_1) = consumer_fetch(leader.address, topic, 1);
    let (_, isr) = partition_state(leader.address, topic).expect("metadata from the leader");
    for follower in &followers {
        follower.resume();
    }
    Observed {
        acks_all,
        acks_all_took,
        high_watermark,
        read_from_1,
        isr,
    }
}

fn values(read: &[(i64, String)]) -> Vec<(i64, &str)> {
    read.iter().map(|(o, v)| (*o, v.as_str())).collect()
}

impl Observed {
    /// acks=all was acknowledged (offset 2) at once, without waiting for the paused followers.
    fn assert_acks_all_acknowledged_at_once(&self) {
        assert_eq!(self.acks_all, Ok(2), "{self:?}");
        assert!(self.acks_all_took < Duration::from_millis(1000), "{self:?}");
    }

    /// Consumers see the high watermark at the replicated prefix (1) and nothing above it.
    fn assert_only_the_replicated_record_is_visible(&self) {
        assert_eq!(self.high_watermark, 1, "{self:?}");
        assert!(self.read_from_1.is_empty(), "{self:?}");
    }

    /// A consumer fetch from offset 1 returns both unreplicated records.
    fn assert_unreplicated_records_are_read(&self) {
        assert_eq!(
            values(&self.read_from_1),
            vec![(1, "acks-1"), (2, "acks-all")]
        );
    }
}

/// Without canaries: acks=all waits for the paused ISR members and times out, the high
/// watermark stays at the replicated prefix, and consumers read nothing above it.
#[test]
fn with_followers_paused_and_no_canary_nothing_unreplicated_is_acked_or_visible() {
    let observed = with_followers_paused("");
    assert_eq!(observed.isr, vec![2, 3, 4], "{observed:?}");
    assert_eq!(observed.acks_all, Err(REQUEST_TIMED_OUT), "{observed:?}");
    assert!(
        observed.acks_all_took >= Duration::from_millis(1400),
        "{observed:?}"
    );
    observed.assert_only_the_replicated_record_is_visible();
}

/// `hw-before-replication`: the high watermark is the leader's log end (3) although only
/// offset 0 is replicated, so consumers read the unreplicated records and acks=all is
/// acknowledged at once (it waits for the high watermark).
#[test]
fn canary_hw_before_replication_exposes_unreplicated_records() {
    let observed = with_followers_paused("hw-before-replication");
    assert_eq!(observed.isr, vec![2, 3, 4], "{observed:?}");
    assert_eq!(observed.high_watermark, 3, "{observed:?}");
    observed.assert_unreplicated_records_are_read();
    observed.assert_acks_all_acknowledged_at_once();
}

/// `ack-before-replication`: acks=all is acknowledged at once although no follower has the
/// record; the high watermark does not move, so consumers still see nothing above it.
#[test]
fn canary_ack_before_replication_acknowledges_unreplicated_records() {
    let observed = with_followers_paused("ack-before-replication");
    assert_eq!(observed.isr, vec![2, 3, 4], "{observed:?}");
    observed.assert_acks_all_acknowledged_at_once();
    observed.assert_only_the_replicated_record_is_visible();
}

/// `read-above-high-watermark`: the high watermark stays at 1 and acks=all still times out,
/// but a consumer fetch returns the records above it.
#[test]
fn canary_read_above_high_watermark_serves_uncommitted_records() {
    let observed = with_followers_paused("read-above-high-watermark");
    assert_eq!(observed.isr, vec![2, 3, 4], "{observed:?}");
    assert_eq!(observed.high_watermark, 1, "{observed:?}");
    observed.assert_unreplicated_records_are_read();
    assert_eq!(observed.acks_all, Err(REQUEST_TIMED_OUT), "{observed:?}");
}

/// The records of partition 0 of `topic` in a (killed) broker's data directory, read with the
/// storage crate from a copy, as `(offset, value)`.
fn log_on_disk(node: &NodeProcess, topic: &str) -> Records {
    let source = node.dir.join(format!("data/{topic}-0"));
    let copy = node.dir.join(format!("copy/{topic}-0"));
    std::fs::create_dir_all(&copy).unwrap();
    for entry in std::fs::read_dir(&source).unwrap() {
        let entry = entry.unwrap();
        if entry.file_type().unwrap().is_file() {
            std::fs::copy(entry.path(), copy.join(entry.file_name())).unwrap();
        }
    }
    let (log, _) = Log::open(
        &copy,
        TopicPartition::new(topic, 0),
        LogConfig::default(),
        LoadCheckpoints::NEW,
    )
    .unwrap();
    let read = log
        .read(Offset(0), 1 << 20, log.log_end_offset(), true)
        .unwrap();
    let mut records = read.records;
    decode(&mut records)
}

/// A follower whose log diverges from the new leader's: RF 3, three records replicated
/// everywhere (offsets 0..3); both followers paused while the leader writes five `lonely`
/// records (3..8) with acks=1; the leader killed, the followers resumed, one of them elected
/// (cleanly: they are still in the ISR) and given ten one-record batches `new` (3..13). The old leader
/// restarts as a follower, is told of the divergence at offset 3, and rejoins the ISR. Returns
/// the old leader's log (read from disk after killing it) and the new leader's.
fn diverged_follower(canaries: &str) -> (Records, Records) {
    let root = tempfile::tempdir().unwrap();
    let topic = "diverge";
    let (mut cluster, old_id) = cluster_with_topic(root.path(), canaries, 4000, topic);
    let brokers = &mut cluster.brokers;
    let old = (old_id - 2) as usize;
    assert_eq!(
        produce_batch(
            brokers[old].address,
            topic,
            &[b"common-0", b"common-1", b"common-2"],
            -1,
            5000
        ),
        Ok(0)
    );
    let followers: Vec<usize> = (0..3).filter(|&i| i != old).collect();
    for &i in &followers {
        brokers[i].pause();
    }
    // A fetch the followers sent before the pause is answered within
    // replica.fetch.wait.max.ms (500 ms): let it be answered empty, so that nothing written
    // next sits in a paused follower's socket buffer.
    std::thread::sleep(Duration::from_millis(1000));
    let lonely: Vec<String> = (0..5).map(|i| format!("lonely-{i}")).collect();
    let lonely: Vec<&[u8]> = lonely.iter().map(|v| v.as_bytes()).collect();
    assert_eq!(
        produce_batch(brokers[old].address, topic, &lonely, 1, 5000),
        Ok(3)
    );
    brokers[old].kill();
    for &i in &followers {
        brokers[i].resume();
    }
    let mut new_id = -1;
    wait_until("a follower is elected", Duration::from_secs(20), || {
        partition_state(brokers[followers[0]].address, topic).is_some_and(|(leader, _)| {
            new_id = leader;
            leader >= 2 && leader != old_id
        })
    });
    let new = (new_id - 2) as usize;
    // One record per batch, so that the old leader's log end (8) falls on a batch boundary
    // of the new leader's log; acks=1: a refusal appends nothing, so retrying is exact.
    for i in 0..10 {
        let value = format!("new-{i}");
        let written = loop {
            match produce_batch(brokers[new].address, topic, &[value.as_bytes()], 1, 5000) {
                Ok(offset) => break offset,
                Err(_) => std::thread::sleep(Duration::from_millis(50)),
            }
        };
        assert_eq!(
            written,
            3 + i,
            "the new leader continues after the common records"
        );
    }
    wait_until(
        "the other follower has the new records",
        Duration::from_secs(10),
        || consumer_fetch(brokers[new].address, topic, 0).0 == 13,
    );
    brokers[old].restart();
    wait_until(
        "the old leader rejoins the ISR",
        Duration::from_secs(20),
        || {
            partition_state(brokers[new].address, topic)
                .is_some_and(|(_, isr)| isr.contains(&old_id))
        },
    );
    brokers[old].kill();
    let old_log = log_on_disk(&brokers[old], topic);
    let (_, new_log) = consumer_fetch(brokers[new].address, topic, 0);
    (old_log, new_log)
}

/// Without canaries the old leader truncates its five `lonely` records at the divergence and
/// ends with exactly the new leader's log.
#[test]
fn diverged_follower_without_canary_truncates_and_matches_the_leader() {
    let (old_log, new_log) = diverged_follower("");
    assert_eq!(new_log.len(), 13, "{new_log:?}");
    assert_eq!(old_log, new_log);
    assert!(old_log.iter().all(|(_, v)| !v.starts_with("lonely-")));
}

/// `skip-follower-truncation`: the old leader keeps its `lonely` records at offsets 3..8 where
/// the leader has `new-0..4`, and appends the leader's records after them: same log end,
/// different records at the same offsets, yet it rejoined the ISR.
#[test]
fn canary_skip_follower_truncation_leaves_replicas_disagreeing() {
    let (old_log, new_log) = diverged_follower("skip-follower-truncation");
    assert_eq!(new_log.len(), 13, "{new_log:?}");
    assert_eq!(old_log.len(), 13, "{old_log:?}");
    assert_eq!(old_log[..3], new_log[..3]);
    for offset in 3..8 {
        let (o, old) = &old_log[offset];
        let (_, new) = &new_log[offset];
        assert_eq!(*o, offset as i64);
        assert_eq!(
            old,
            &format!("lonely-{}", offset - 3),
            "old leader at {offset}"
        );
        assert_eq!(
            new,
            &format!("new-{}", offset - 3),
            "new leader at {offset}"
        );
    }
    assert_eq!(old_log[8..], new_log[8..]);
}

/// Produces a retry of an idempotent producer's first batch to a single node; returns the two
/// answers and what a consumer reads.
fn retried_idempotent_batch(canaries: &str) -> ((i64, i64), Records) {
    let dir = tempfile::tempdir().unwrap();
    let node = NodeProcess::start(dir.path(), &format!("logjam.canaries={canaries}"));
    assert_eq!(
        common::create_topics(node.address, &[("dedupe", 1, 1)]),
        vec![0]
    );
    let mut stream = connect(node.address);
    let init: InitProducerIdResponse = exchange(
        &mut stream,
        ApiKey::InitProducerId,
        4,
        &InitProducerIdRequest::default()
            .with_transactional_id(None)
            .with_transaction_timeout_ms(i32::MAX)
            .with_producer_id(ProducerId(-1))
            .with_producer_epoch(-1),
    );
    assert_eq!(init.error_code, 0);
    let pid = init.producer_id.0;
    let send = || {
        let records = producer_batch(&[b"first", b"second"], pid, 0, 0);
        produce_records(node.address, "dedupe", records, -1, 5000).expect("produce succeeds")
    };
    let answers = (send(), send());
    let (_, log) = consumer_fetch(node.address, "dedupe", 0);
    (answers, log)
}

/// Without canaries the retry is answered with the original offset and stored once.
#[test]
fn retried_idempotent_batch_without_canary_is_stored_once() {
    let (answers, log) = retried_idempotent_batch("");
    assert_eq!(answers, (0, 0));
    assert_eq!(values(&log), vec![(0, "first"), (1, "second")]);
}

/// `skip-idempotent-dedupe`: the retry is appended again, after the original.
#[test]
fn canary_skip_idempotent_dedupe_stores_the_retry_twice() {
    let (answers, log) = retried_idempotent_batch("skip-idempotent-dedupe");
    assert_eq!(answers, (0, 2));
    assert_eq!(
        values(&log),
        vec![(0, "first"), (1, "second"), (2, "first"), (3, "second")]
    );
}

/// An unknown canary name stops the node at startup with an error naming the key, the line
/// and the known names.
#[test]
fn unknown_canary_name_refuses_to_start() {
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let config = dir.path().join("server.properties");
    let text = common::config_text(
        &dir.path().join("data"),
        port,
        "logjam.canaries=read-above-high-watermark,skip-dedupe",
    );
    let line = text
        .lines()
        .position(|l| l.starts_with("logjam.canaries"))
        .unwrap()
        + 1;
    std::fs::write(&config, &text).unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_logjam-node"))
        .arg("--config")
        .arg(&config)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("the node started with an unknown canary");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let mut stderr = String::new();
    std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut stderr).unwrap();
    assert!(!status.success());
    for expected in [
        "logjam.canaries",
        &format!("line {line}"),
        "\"skip-dedupe\"",
        "hw-before-replication",
        "ack-before-replication",
        "skip-idempotent-dedupe",
        "skip-follower-truncation",
        "read-above-high-watermark",
    ] {
        assert!(stderr.contains(expected), "{expected:?} not in {stderr}");
    }
}

/// A node without `logjam.canaries` says nothing about canaries; one with canaries warns in
/// its log and on stderr, naming them.
#[test]
fn no_canary_by_default_and_active_ones_are_announced() {
    let quiet_dir = tempfile::tempdir().unwrap();
    let quiet = NodeProcess::start(quiet_dir.path(), "");
    let loud_dir = tempfile::tempdir().unwrap();
    let loud = NodeProcess::start(
        loud_dir.path(),
        "logjam.canaries=skip-idempotent-dedupe, read-above-high-watermark",
    );
    let quiet_log = std::fs::read_to_string(quiet.dir.join("node.log")).unwrap();
    assert!(!quiet_log.contains("CANAR"), "{quiet_log}");
    let loud_log = std::fs::read_to_string(loud.dir.join("node.log")).unwrap();
    let names = "skip-idempotent-dedupe,read-above-high-watermark";
    // The tracing warning and the plain stderr line (both go to node.log).
    assert!(
        loud_log
            .lines()
            .any(|l| l.contains("WARN") && l.contains("CANARIES ON") && l.contains(names)),
        "{loud_log}"
    );
    assert!(
        loud_log
            .lines()
            .any(|l| l.starts_with("WARNING: CANARIES ON") && l.contains(names)),
        "{loud_log}"
    );
}
