//! The coordinator runtime over a real `ReplicaManager` and real logs on disk, in one process:
//! a toy key→value shard on an internal topic is loaded when this node becomes leader,
//! refused while loading (`COORDINATOR_LOAD_IN_PROGRESS`) and when not leader
//! (`NOT_COORDINATOR`), answers writes only once the high watermark passes them, keeps its
//! latest state unchanged by a refused append, and serves the same state after a leadership
//! change, on another node that becomes leader, and after a restart of the logs (all reload
//! it from the log, not from memory); a log it cannot replay is not served.
//!
//! Leadership and ISR come from metadata images the test publishes, as the controller's would
//! be; the follower's progress is recorded through the leader's real follower-fetch path.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use kafka_protocol::ResponseError;
use logjam_node::config::Config;
use logjam_node::coordinator::{CoordinatorRecord, CoordinatorRuntime, CoordinatorShard};
use logjam_node::metadata::{
    BrokerId, LeaderRecoveryState, MetadataImage, MetadataRecord, PartitionRecord,
};
use logjam_node::replica::manager::broker_log_config;
use logjam_node::replica::{Fetched, Partition, ReplicaManager};
use logjam_storage::LogManager;
use tokio::sync::watch;
use uuid::Uuid;

const TOPIC: &str = "__toy_state";
const TIMEOUT: Duration = Duration::from_secs(10);

/// The toy coordinator: a key→value map; a record with no value deletes its key.
#[derive(Clone, Debug, Default)]
struct KvShard {
    values: BTreeMap<String, String>,
}

impl CoordinatorShard for KvShard {
    fn replay(&mut self, record: &CoordinatorRecord) -> Result<(), String> {
        let key = record.key.as_ref().ok_or("a record without a key")?;
        let key = String::from_utf8(key.to_vec()).map_err(|error| error.to_string())?;
        match &record.value {
            Some(value) => {
                let value = String::from_utf8(value.to_vec()).map_err(|error| error.to_string())?;
                self.values.insert(key, value);
            }
            None => {
                self.values.remove(&key);
            }
        }
        Ok(())
    }
}

fn put(key: &str, value: &str) -> CoordinatorRecord {
    CoordinatorRecord {
        key: Some(Bytes::from(key.to_owned())),
        value: Some(Bytes::from(value.to_owned())),
    }
}

/// The image of one partition of [`TOPIC`] on brokers 1 and 2.
fn image(leader: i32, leader_epoch: i32, isr: &[i32], min_isr: i32) -> Arc<MetadataImage> {
    let topic_id = Uuid::from_u128(7);
    let mut image = MetadataImage::new();
    image.apply(&MetadataRecord::Topic {
        name: TOPIC.to_owned(),
        topic_id,
        configs: BTreeMap::from([("min.insync.replicas".to_owned(), min_isr.to_string())]),
    });
    image.apply(&MetadataRecord::Partition(PartitionRecord {
        topic_id,
        partition: 0,
        replicas: vec![BrokerId(1), BrokerId(2)],
        isr: isr.iter().copied().map(BrokerId).collect(),
        elr: Vec::new(),
        last_known_elr: Vec::new(),
        leader: BrokerId(leader),
        leader_epoch,
        partition_epoch: leader_epoch,
        leader_recovery_state: LeaderRecoveryState::Recovered,
    }));
    Arc::new(image)
}

/// Node 1's replica layer over the logs in `dir`, with the image from `images`.
fn open_replicas(
    dir: &Path,
    images: &watch::Sender<Arc<MetadataImage>>,
) -> (Arc<ReplicaManager>, Config) {
    open_node(1, dir, images)
}

/// Node `id`'s replica layer over the logs in `dir`, with the image from `images`.
fn open_node(
    id: i32,
    dir: &Path,
    images: &watch::Sender<Arc<MetadataImage>>,
) -> (Arc<ReplicaManager>, Config) {
    let config = Config::parse(
        &format!(
            "node.id={id}\nprocess.roles=broker,controller\nlog.dirs={}\n",
            dir.display()
        ),
        &[],
    )
    .unwrap();
    let logs = LogManager::open(
        config.data_dir(),
        broker_log_config(&config, &BTreeMap::new()),
    )
    .unwrap();
    let replicas = Arc::new(ReplicaManager::new(
        config.clone(),
        logs,
        images.subscribe(),
    ));
    replicas.apply_image();
    (replicas, config)
}

fn new_runtime(replicas: &Arc<ReplicaManager>) -> Arc<CoordinatorRuntime<KvShard>> {
    Arc::new(CoordinatorRuntime::new(Arc::clone(replicas), TOPIC, |_| {
        KvShard::default()
    }))
}

async fn write_put(
    runtime: &CoordinatorRuntime<KvShard>,
    key: &str,
    value: &str,
) -> Result<(), ResponseError> {
    runtime
        .write(0, TIMEOUT, |_| Ok((vec![put(key, value)], ())))
        .await
}

fn get(runtime: &CoordinatorRuntime<KvShard>, key: &str) -> Result<Option<String>, ResponseError> {
    runtime.read(0, |shard| shard.values.get(key).cloned())
}

/// Runs the loads `reconcile` asks for, as the shell would, checking that requests are
/// refused with `COORDINATOR_LOAD_IN_PROGRESS` until each completes.
async fn load(runtime: &CoordinatorRuntime<KvShard>) {
    let loads = runtime.reconcile();
    assert_eq!(loads.len(), 1, "one partition to load");
    assert_eq!(
        get(runtime, "a"),
        Err(ResponseError::CoordinatorLoadInProgress)
    );
    assert_eq!(
        write_put(runtime, "x", "1").await,
        Err(ResponseError::CoordinatorLoadInProgress)
    );
    for load in loads {
        runtime.complete_load(load.run());
    }
}

#[tokio::test]
async fn state_is_loaded_on_leadership_refused_elsewhere_and_reloaded_from_the_log() {
    let dir = tempfile::tempdir().unwrap();
    let images = watch::Sender::new(image(2, 0, &[1, 2], 1));
    let (replicas, _) = open_replicas(dir.path(), &images);
    let runtime = new_runtime(&replicas);

    // A follower is not the coordinator.
    assert!(runtime.reconcile().is_empty());
    assert_eq!(get(&runtime, "a"), Err(ResponseError::NotCoordinator));
    assert_eq!(
        write_put(&runtime, "a", "1").await,
        Err(ResponseError::NotCoordinator)
    );

    // Becoming the only in-sync replica's leader: load (empty log), then write.
    images.send_replace(image(1, 1, &[1], 1));
    replicas.apply_image();
    load(&runtime).await;
    assert_eq!(get(&runtime, "a"), Ok(None));
    write_put(&runtime, "a", "1").await.unwrap();
    write_put(&runtime, "b", "2").await.unwrap();
    write_put(&runtime, "a", "3").await.unwrap();
    assert_eq!(get(&runtime, "a"), Ok(Some("3".to_owned())));
    let partition = replicas.partition(TOPIC, 0).unwrap();
    assert_eq!(
        partition.offsets().high_watermark,
        3,
        "three records, committed"
    );
    // Several records of one write are one batch: appended and committed together.
    runtime
        .write(0, TIMEOUT, |_| Ok((vec![put("d", "5"), put("e", "6")], ())))
        .await
        .unwrap();
    assert_eq!(partition.offsets().high_watermark, 5);
    let read = partition.read_to_log_end(3, 1 << 20).unwrap();
    let batches = logjam_storage::batch::batches(&read.records).count();
    assert_eq!(batches, 1, "one write, one batch");

    // Leadership moves away: unloaded.
    images.send_replace(image(2, 2, &[1, 2], 1));
    replicas.apply_image();
    assert!(runtime.reconcile().is_empty());
    assert_eq!(get(&runtime, "a"), Err(ResponseError::NotCoordinator));
    assert_eq!(
        write_put(&runtime, "c", "1").await,
        Err(ResponseError::NotCoordinator)
    );

    // And back: a fresh shard replays the log into the same state.
    images.send_replace(image(1, 3, &[1], 1));
    replicas.apply_image();
    load(&runtime).await;
    assert_eq!(get(&runtime, "a"), Ok(Some("3".to_owned())));
    assert_eq!(get(&runtime, "b"), Ok(Some("2".to_owned())));
    assert_eq!(get(&runtime, "e"), Ok(Some("6".to_owned())));
    assert_eq!(get(&runtime, "c"), Ok(None));

    // A restart: new logs, replica manager and runtime over the same directory.
    drop(runtime);
    replicas.shutdown(1).unwrap();
    drop(partition);
    drop(replicas);
    let (replicas, _) = open_replicas(dir.path(), &images);
    let runtime = new_runtime(&replicas);
    load(&runtime).await;
    assert_eq!(get(&runtime, "a"), Ok(Some("3".to_owned())));
    assert_eq!(get(&runtime, "b"), Ok(Some("2".to_owned())));
    write_put(&runtime, "c", "4").await.unwrap();
    assert_eq!(get(&runtime, "c"), Ok(Some("4".to_owned())));
}

#[tokio::test]
async fn writes_complete_only_when_the_high_watermark_passes_them() {
    let dir = tempfile::tempdir().unwrap();
    let images = watch::Sender::new(image(1, 1, &[1, 2], 2));
    let (replicas, _) = open_replicas(dir.path(), &images);
    let runtime = new_runtime(&replicas);
    let shell = tokio::spawn(Arc::clone(&runtime).run());
    let partition = replicas.partition(TOPIC, 0).unwrap();
    wait_until(|| get(&runtime, "k") == Ok(None)).await;

    let writer = {
        let runtime = Arc::clone(&runtime);
        tokio::spawn(async move { write_put(&runtime, "k", "v").await })
    };
    wait_until(|| partition.offsets().log_end_offset == 1).await;
    // Appended on the leader, but follower 2 (in the ISR, min.insync.replicas=2) has not
    // fetched it: not committed, not answered, not visible to reads.
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(partition.offsets().high_watermark, 0);
    assert!(
        !writer.is_finished(),
        "answered before the high watermark passed it"
    );
    assert_eq!(get(&runtime, "k"), Ok(None));

    // A second write builds on the latest state, which includes the uncommitted record.
    let seen = Arc::new(Mutex::new(None));
    let second = {
        let runtime = Arc::clone(&runtime);
        let seen = Arc::clone(&seen);
        tokio::spawn(async move {
            runtime
                .write(0, TIMEOUT, move |shard| {
                    *seen.lock().unwrap() = Some(shard.values.get("k").cloned());
                    Ok((vec![put("k2", "v2")], ()))
                })
                .await
        })
    };
    wait_until(|| partition.offsets().log_end_offset == 2).await;
    assert_eq!(*seen.lock().unwrap(), Some(Some("v".to_owned())));

    // The follower fetches up to offset 1: the first write commits, the second does not.
    let _ = partition.record_follower_fetch(BrokerId(2), 1, true);
    assert_eq!(writer.await.unwrap(), Ok(()));
    assert_eq!(get(&runtime, "k"), Ok(Some("v".to_owned())));
    assert_eq!(get(&runtime, "k2"), Ok(None));
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(
        !second.is_finished(),
        "the second write is not committed yet"
    );

    let _ = partition.record_follower_fetch(BrokerId(2), 2, true);
    assert_eq!(second.await.unwrap(), Ok(()));
    assert_eq!(get(&runtime, "k2"), Ok(Some("v2".to_owned())));
    shell.abort();
}

#[tokio::test]
async fn a_refused_append_leaves_the_state_as_committed_and_a_lost_leadership_fails_waiters() {
    let dir = tempfile::tempdir().unwrap();
    // The ISR has shrunk below min.insync.replicas=2.
    let images = watch::Sender::new(image(1, 1, &[1], 2));
    let (replicas, _) = open_replicas(dir.path(), &images);
    let runtime = new_runtime(&replicas);
    let shell = tokio::spawn(Arc::clone(&runtime).run());
    let partition = replicas.partition(TOPIC, 0).unwrap();
    wait_until(|| get(&runtime, "k") == Ok(None)).await;

    assert_eq!(
        write_put(&runtime, "k", "refused").await,
        Err(ResponseError::NotEnoughReplicas)
    );
    assert_eq!(partition.offsets().log_end_offset, 0, "nothing appended");
    let seen = Arc::new(Mutex::new(None));
    let observe = |seen: Arc<Mutex<Option<Option<String>>>>| {
        move |shard: &KvShard| {
            *seen.lock().unwrap() = Some(shard.values.get("k").cloned());
            Ok((vec![put("k", "second")], ()))
        }
    };
    assert_eq!(
        runtime.write(0, TIMEOUT, observe(Arc::clone(&seen))).await,
        Err(ResponseError::NotEnoughReplicas)
    );
    assert_eq!(
        *seen.lock().unwrap(),
        Some(None),
        "the refused record was rolled back"
    );

    // The ISR grows back (same leader epoch): a write appends and waits for follower 2.
    images.send_replace(image(1, 1, &[1, 2], 2));
    replicas.apply_image();
    let writer = {
        let runtime = Arc::clone(&runtime);
        tokio::spawn(async move { write_put(&runtime, "k", "pending").await })
    };
    wait_until(|| partition.offsets().log_end_offset == 1).await;
    // Leadership moves before it commits: the waiting write is told NOT_COORDINATOR.
    images.send_replace(image(2, 2, &[1, 2], 2));
    replicas.apply_image();
    assert_eq!(writer.await.unwrap(), Err(ResponseError::NotCoordinator));
    wait_until(|| get(&runtime, "k") == Err(ResponseError::NotCoordinator)).await;
    shell.abort();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_shell_loads_a_partition_opened_after_it_started() {
    let dir = tempfile::tempdir().unwrap();
    let images = watch::Sender::new(Arc::new(MetadataImage::new()));
    let (replicas, _) = open_replicas(dir.path(), &images);
    let runtime = new_runtime(&replicas);
    let shell = tokio::spawn(Arc::clone(&runtime).run());
    // The topic appears; the shell sees the image before the replica layer applies it (as
    // with the replication task), and must still learn of the partition once it is open.
    images.send_replace(image(1, 1, &[1], 1));
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(get(&runtime, "a"), Err(ResponseError::NotCoordinator));
    replicas.apply_image();
    wait_until(|| get(&runtime, "a") == Ok(None)).await;
    write_put(&runtime, "a", "1").await.unwrap();
    assert_eq!(get(&runtime, "a"), Ok(Some("1".to_owned())));
    shell.abort();
}

#[tokio::test]
async fn a_log_the_shard_cannot_replay_is_not_served_and_harms_nothing_else() {
    let dir = tempfile::tempdir().unwrap();
    let images = watch::Sender::new(image(1, 1, &[1], 1));
    let (replicas, _) = open_replicas(dir.path(), &images);
    let partition = replicas.partition(TOPIC, 0).unwrap();
    // Written around the runtime, as a client's produce to the topic would be: no key.
    let keyless = CoordinatorRecord {
        key: None,
        value: Some(Bytes::from_static(b"v")),
    };
    Arc::clone(&partition)
        .append(
            logjam_node::coordinator::shard::encode_records(&[keyless], 0),
            logjam_node::replica::Acks::All,
        )
        .await
        .unwrap();
    let runtime = new_runtime(&replicas);
    load(&runtime).await;
    assert_eq!(get(&runtime, "a"), Err(ResponseError::NotCoordinator));
    assert_eq!(
        write_put(&runtime, "a", "1").await,
        Err(ResponseError::NotCoordinator)
    );
    // Not retried in the same epoch; nothing was appended by the failed load.
    assert!(runtime.reconcile().is_empty());
    assert_eq!(partition.offsets().log_end_offset, 1);
}

/// One follower fetch of partition 0 from `leader` into `follower` (node `follower_id`),
/// through the real follower read, append and leader bookkeeping, as the replica fetcher
/// does over the network.
fn replicate(leader: &Partition, follower: &Partition, follower_id: i32) {
    let (fetch_offset, last_fetched_epoch, _) = follower.follower_fetch_position();
    let read = leader
        .read_for_follower(fetch_offset, last_fetched_epoch, 1 << 20, true)
        .unwrap();
    follower
        .apply_fetched(&Fetched {
            leader_epoch: leader.leader_epoch(),
            fetch_offset,
            diverging: read.diverging,
            records: read.records,
            high_watermark: read.high_watermark,
        })
        .unwrap();
    let (fetched_to, _, _) = follower.follower_fetch_position();
    let _ = leader.record_follower_fetch(BrokerId(follower_id), fetched_to, true);
}

/// Replicates from `leader` to `follower` until `writer` is answered.
async fn replicate_until_answered(
    leader: &Partition,
    follower: &Partition,
    follower_id: i32,
    writer: tokio::task::JoinHandle<Result<(), ResponseError>>,
) -> Result<(), ResponseError> {
    let deadline = tokio::time::Instant::now() + TIMEOUT;
    while !writer.is_finished() {
        assert!(tokio::time::Instant::now() < deadline, "write not answered");
        replicate(leader, follower, follower_id);
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    writer.await.unwrap()
}

#[tokio::test]
async fn a_new_leader_on_another_node_serves_the_state_replicated_to_it() {
    let (dir1, dir2) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let images = watch::Sender::new(image(1, 1, &[1, 2], 2));
    let (node1, _) = open_node(1, dir1.path(), &images);
    let (node2, _) = open_node(2, dir2.path(), &images);
    let (runtime1, runtime2) = (new_runtime(&node1), new_runtime(&node2));
    let shells = [
        tokio::spawn(Arc::clone(&runtime1).run()),
        tokio::spawn(Arc::clone(&runtime2).run()),
    ];
    let p1 = node1.partition(TOPIC, 0).unwrap();
    let p2 = node2.partition(TOPIC, 0).unwrap();
    wait_until(|| get(&runtime1, "a") == Ok(None)).await;
    assert_eq!(get(&runtime2, "a"), Err(ResponseError::NotCoordinator));

    for (key, value) in [("a", "1"), ("b", "2"), ("a", "3")] {
        let writer = {
            let runtime = Arc::clone(&runtime1);
            tokio::spawn(async move { write_put(&runtime, key, value).await })
        };
        assert_eq!(replicate_until_answered(&p1, &p2, 2, writer).await, Ok(()));
    }
    assert_eq!(get(&runtime1, "a"), Ok(Some("3".to_owned())));
    assert_eq!(
        write_put(&runtime2, "c", "1").await,
        Err(ResponseError::NotCoordinator)
    );

    // Node 2 becomes leader: node 1 unloads, node 2 loads its own copy of the log.
    images.send_replace(image(2, 2, &[1, 2], 2));
    node1.apply_image();
    node2.apply_image();
    wait_until(|| get(&runtime1, "a") == Err(ResponseError::NotCoordinator)).await;
    // Node 2's high watermark may lag node 1's by the last record until node 1 fetches from
    // it (a new leader's high watermark waits for its ISR): until then it serves the committed
    // prefix, never anything else.
    let deadline = tokio::time::Instant::now() + TIMEOUT;
    loop {
        let a = get(&runtime2, "a");
        if a == Ok(Some("3".to_owned())) {
            break;
        }
        assert!(
            a == Err(ResponseError::CoordinatorLoadInProgress)
                || a == Err(ResponseError::NotCoordinator)
                || a == Ok(Some("1".to_owned())),
            "node 2 served {a:?}"
        );
        assert!(
            tokio::time::Instant::now() < deadline,
            "node 2 never served a=3"
        );
        if p2.is_leader() {
            replicate(&p2, &p1, 1);
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(get(&runtime2, "b"), Ok(Some("2".to_owned())));

    // And it writes, replicated back to node 1 for min.insync.replicas=2.
    let writer = {
        let runtime = Arc::clone(&runtime2);
        tokio::spawn(async move { write_put(&runtime, "c", "4").await })
    };
    assert_eq!(replicate_until_answered(&p2, &p1, 1, writer).await, Ok(()));
    assert_eq!(get(&runtime2, "c"), Ok(Some("4".to_owned())));
    assert_eq!(
        p1.offsets().log_end_offset,
        4,
        "node 1 holds the new record too"
    );
    for shell in shells {
        shell.abort();
    }
}

/// Polls `condition` every 10 ms for up to [`TIMEOUT`].
async fn wait_until(mut condition: impl FnMut() -> bool) {
    let deadline = tokio::time::Instant::now() + TIMEOUT;
    while !condition() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "condition not met in time"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}
