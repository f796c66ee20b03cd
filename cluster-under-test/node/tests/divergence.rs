//! Follower truncation across several leader epochs (KIP-101, KIP-279, KIP-595), at the
//! storage level: two real `logjam-storage` logs play leader and follower, and the follower
//! fetch loop is the one the node runs (`Partition::read_for_follower` on the leader,
//! `Partition::apply_fetched` on the follower), built from the same pure decisions in
//! `logjam_node::replication`. A multi-process version would need three leader changes with
//! precisely timed pauses; this one pins the exact truncation offsets.

use logjam_node::replica::replication::{diverging_epoch, follower_truncation_offset};
use logjam_storage::{
    BatchBuilder, LeaderEpoch, LoadCheckpoints, Log, LogConfig, Offset, TopicPartition,
};

fn open(dir: &std::path::Path) -> Log {
    Log::open(
        dir,
        TopicPartition::new("t", 0),
        LogConfig::default(),
        LoadCheckpoints::NEW,
    )
    .unwrap()
    .0
}

/// Appends `count` one-record batches in `epoch`, as the leader of that epoch would.
fn write(log: &mut Log, epoch: i32, count: usize, tag: &str) {
    for i in 0..count {
        let value = format!("{tag}-{i}");
        let batch = BatchBuilder::new(1_700_000_000_000)
            .record(None, Some(value.as_bytes()))
            .build();
        log.append_as_leader(&batch, LeaderEpoch(epoch), 1_700_000_000_000)
            .unwrap();
    }
}

/// Runs the replica fetch loop of the follower against the leader until caught up; returns
/// the offsets the follower truncated to, in order.
fn replicate(leader: &Log, follower: &mut Log) -> Vec<i64> {
    let mut truncations = Vec::new();
    for _ in 0..100 {
        let last_fetched = follower.latest_epoch().unwrap_or(LeaderEpoch::UNDEFINED);
        let fetch_offset = follower.log_end_offset();
        let answer = leader.end_offset_for_epoch(last_fetched);
        if let Some(diverging) = diverging_epoch(last_fetched, fetch_offset, answer) {
            let own = follower.end_offset_for_epoch(diverging.leader_epoch);
            let (offset, _complete) = follower_truncation_offset(diverging, own, fetch_offset);
            follower.truncate_to(offset).unwrap();
            truncations.push(offset.0);
            continue;
        }
        let read = leader
            .read(fetch_offset, 1 << 20, leader.log_end_offset(), true)
            .unwrap();
        if read.records.is_empty() {
            return truncations;
        }
        follower.append_as_follower(&read.records, 0).unwrap();
    }
    panic!("the follower did not converge");
}

fn values(log: &Log) -> Vec<Vec<u8>> {
    let read = log
        .read(Offset(0), 1 << 20, log.log_end_offset(), true)
        .unwrap();
    let mut bytes = read.records;
    kafka_protocol::records::RecordBatchDecoder::decode_all(&mut bytes)
        .unwrap()
        .into_iter()
        .flat_map(|set| set.records)
        .map(|record| record.value.unwrap_or_default().to_vec())
        .collect()
}

/// Leader: epoch 0 [0,3), epoch 1 [3,5), epoch 3 [5,8). Follower (the old leader of epoch 2):
/// epoch 0 [0,3), epoch 1 [3,6), epoch 2 [6,9). The follower asks with epoch 2; the leader
/// never had it and answers (1, 5); the follower's epoch 1 ends at 6, so it truncates to
/// exactly 5 and then copies epoch 3.
#[test]
fn follower_diverging_across_two_epochs_truncates_to_the_leaders_epoch_end() {
    let root = tempfile::tempdir().unwrap();
    let mut leader = open(&root.path().join("leader"));
    let mut follower = open(&root.path().join("follower"));
    write(&mut leader, 0, 3, "e0");
    write(&mut follower, 0, 3, "e0");
    write(&mut leader, 1, 2, "e1");
    write(&mut follower, 1, 3, "e1");
    write(&mut follower, 2, 3, "e2");
    write(&mut leader, 3, 3, "e3");

    let truncations = replicate(&leader, &mut follower);

    assert_eq!(truncations, vec![5]);
    assert_eq!(values(&follower), values(&leader));
    assert_eq!(follower.log_end_offset(), Offset(8));
    assert_eq!(
        follower.end_offset_for_epoch(LeaderEpoch(1)).end_offset,
        Offset(5)
    );
}

/// KIP-279's iteration: leader epoch 0 [0,3), epoch 1 [3,4), epoch 3 [4,7); follower epoch 0
/// [0,3), epoch 2 [3,6). The leader answers (1, 4) for epoch 2; the follower never had epoch 1,
/// so it first truncates to the end of its largest smaller epoch (0, ending at 3), asks again
/// with epoch 0 (no divergence) and copies the rest.
#[test]
fn follower_that_never_had_the_leaders_epoch_truncates_in_two_steps() {
    let root = tempfile::tempdir().unwrap();
    let mut leader = open(&root.path().join("leader"));
    let mut follower = open(&root.path().join("follower"));
    write(&mut leader, 0, 3, "e0");
    write(&mut follower, 0, 3, "e0");
    write(&mut leader, 1, 1, "e1");
    write(&mut follower, 2, 3, "e2");
    write(&mut leader, 3, 3, "e3");

    let truncations = replicate(&leader, &mut follower);

    assert_eq!(truncations, vec![3]);
    assert_eq!(values(&follower), values(&leader));
}
