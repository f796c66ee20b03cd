//! The pieces replication needs: leader-epoch cache through the log (assign, lookup, truncate,
//! checkpoint round trip), follower appends, divergence truncation, log start offset movement,
//! and the high-watermark checkpoint.

mod common;

use common::*;
use logjam_storage::{
    BatchBuilder, EpochEndOffset, Error, LeaderEpoch, LogConfig, Offset, lock_log,
};

fn follower_batch(base: i64, records: u32, epoch: i32) -> Vec<u8> {
    let mut builder = BatchBuilder::new(5);
    builder
        .base_offset(Offset(base))
        .leader_epoch(LeaderEpoch(epoch));
    for index in 0..records {
        builder.record(None, Some(format!("{base}:{index}").as_bytes()));
    }
    builder.build()
}

/// Goal: epochs stamped by appends land in the cache, answer OffsetsForLeaderEpoch, survive a
/// crash (rebuilt from batches and the checkpoint), and truncate with the log.
#[test]
fn leader_epoch_cache_through_the_log() {
    let dir = tempfile::tempdir().unwrap();
    let config = small_config(2048, 128);
    {
        let (_manager, log) = open(dir.path(), &config);
        append_batches(&log, 0, 5, 2, 10, 1); // 0..10 in epoch 1
        let mut guard = lock_log(&log);
        guard.assign_epoch_start_offset(LeaderEpoch(3)).unwrap(); // new leader at 10
        drop(guard);
        append_batches(&log, 5, 5, 2, 10, 3); // 10..20 in epoch 3
        let guard = lock_log(&log);
        assert_eq!(
            guard.end_offset_for_epoch(LeaderEpoch(1)),
            EpochEndOffset {
                leader_epoch: LeaderEpoch(1),
                end_offset: Offset(10)
            }
        );
        assert_eq!(
            guard.end_offset_for_epoch(LeaderEpoch(2)),
            EpochEndOffset {
                leader_epoch: LeaderEpoch(1),
                end_offset: Offset(10)
            }
        );
        assert_eq!(
            guard.end_offset_for_epoch(LeaderEpoch(3)),
            EpochEndOffset {
                leader_epoch: LeaderEpoch(3),
                end_offset: Offset(20)
            }
        );
        assert!(guard.end_offset_for_epoch(LeaderEpoch(4)).is_undefined());
    }
    // Crash, then delete the epoch checkpoint: recovery rebuilds it from the batches.
    std::fs::remove_file(
        dir.path()
            .join(tp().dir_name())
            .join("leader-epoch-checkpoint"),
    )
    .unwrap();
    let (_manager, log) = open(dir.path(), &config);
    let mut log = lock_log(&log);
    let epochs: Vec<(i32, i64)> = log
        .leader_epoch_cache()
        .entries()
        .iter()
        .map(|entry| (entry.epoch.0, entry.start_offset.0))
        .collect();
    assert_eq!(epochs, vec![(1, 0), (3, 10)]);
    log.truncate_to(Offset(10)).unwrap();
    assert_eq!(log.latest_epoch(), Some(LeaderEpoch(1)));
    assert_eq!(
        log.end_offset_for_epoch(LeaderEpoch(1)).end_offset,
        Offset(10)
    );
    let text = std::fs::read_to_string(
        dir.path()
            .join(tp().dir_name())
            .join("leader-epoch-checkpoint"),
    )
    .unwrap();
    assert_eq!(text, "0\n1\n1 0\n");
}

/// Goal: a follower appends the leader's batches with their offsets and epochs; offsets must
/// continue the log; `truncate_to` removes a divergent suffix, after which the follower
/// re-appends the leader's version.
#[test]
fn follower_append_and_divergence_truncation() {
    let dir = tempfile::tempdir().unwrap();
    let (_manager, log) = open(dir.path(), &small_config(1024, 64));
    let mut log = lock_log(&log);
    let fetched = [
        follower_batch(0, 3, 1),
        follower_batch(3, 3, 1),
        follower_batch(6, 4, 2),
    ]
    .concat();
    let info = log.append_as_follower(&fetched, 0).unwrap();
    assert_eq!(
        (info.first_offset, info.last_offset),
        (Offset(0), Offset(9))
    );
    assert_eq!(log.log_end_offset(), Offset(10));
    assert_eq!(log.latest_epoch(), Some(LeaderEpoch(2)));
    // Offsets that do not continue the log are refused.
    let error = log
        .append_as_follower(&follower_batch(8, 1, 2), 0)
        .unwrap_err();
    assert!(
        matches!(error, Error::UnexpectedBaseOffset { batch_index: 0, .. }),
        "{error:?}"
    );
    let gap = [follower_batch(10, 1, 2), follower_batch(12, 1, 2)].concat();
    let error = log.append_as_follower(&gap, 0).unwrap_err();
    assert!(
        matches!(error, Error::UnexpectedBaseOffset { batch_index: 1, .. }),
        "{error:?}"
    );
    // Divergence: the leader says epoch 2 ended at 6 for it; truncate and take its batches.
    log.set_high_watermark(Offset(10));
    assert!(log.truncate_to(Offset(6)).unwrap());
    assert_eq!(log.log_end_offset(), Offset(6));
    assert_eq!(log.high_watermark(), Offset(6));
    assert_eq!(log.latest_epoch(), Some(LeaderEpoch(1)));
    log.append_as_follower(&follower_batch(6, 2, 3), 0).unwrap();
    assert_eq!(log.log_end_offset(), Offset(8));
    assert_eq!(read_all(&log), vec![(0, 2), (3, 5), (6, 7)]);
    // Truncating to the middle of a batch removes the whole batch.
    log.truncate_to(Offset(4)).unwrap();
    assert_eq!(log.log_end_offset(), Offset(3));
    assert!(
        !log.truncate_to(Offset(100)).unwrap(),
        "beyond the log end is a no-op"
    );
    // A partial trailing batch from a fetch is trimmed before appending.
    let mut partial = follower_batch(3, 2, 3);
    partial.extend_from_slice(&follower_batch(5, 2, 3)[..20]);
    let complete = logjam_storage::batch::complete_batches_len(&partial);
    log.append_as_follower(&partial[..complete], 0).unwrap();
    assert_eq!(log.log_end_offset(), Offset(5));
}

/// Goal: a follower whose fetch jumps ahead of its log end starts a new segment there, and the
/// result survives recovery (every segment holds contiguous batches from its base).
#[test]
fn follower_jump_ahead_starts_new_segment_and_recovers() {
    let dir = tempfile::tempdir().unwrap();
    let config = small_config(1 << 20, 64);
    {
        let (_manager, log) = open(dir.path(), &config);
        let mut log = lock_log(&log);
        log.append_as_follower(&follower_batch(0, 2, 0), 0).unwrap();
        log.append_as_follower(&follower_batch(50, 2, 0), 0)
            .unwrap();
        assert_eq!(log.segment_base_offsets(), vec![Offset(0), Offset(50)]);
    }
    let (manager, log) = open(dir.path(), &config);
    assert_eq!(manager.recovery_report(&tp()).unwrap().stop, None);
    let log = lock_log(&log);
    assert_eq!(log.log_end_offset(), Offset(52));
    assert_eq!(
        log.read(Offset(50), 1 << 20, Offset(52), true)
            .unwrap()
            .batch_count,
        1
    );
}

/// Goal: `truncate_fully_and_start_at` wipes the log and restarts it at the given offset.
#[test]
fn truncate_fully_and_start_at_restarts_log() {
    let dir = tempfile::tempdir().unwrap();
    let (_manager, log) = open(dir.path(), &small_config(1024, 64));
    append_batches(&log, 0, 30, 2, 20, 4);
    let mut log = lock_log(&log);
    log.truncate_fully_and_start_at(Offset(1_000)).unwrap();
    assert_eq!(log.segment_base_offsets(), vec![Offset(1_000)]);
    assert_eq!(log.log_start_offset(), Offset(1_000));
    assert_eq!(log.log_end_offset(), Offset(1_000));
    assert_eq!(log.latest_epoch(), None);
    log.append_as_follower(&follower_batch(1_000, 2, 5), 0)
        .unwrap();
    assert_eq!(read_all(&log), vec![(1_000, 1_001)]);
}

/// Goal: `delete_records_before` moves the log start offset and deletes only whole segments
/// below it; reads below it are out of range; offsets above the log end are refused.
#[test]
fn delete_records_before_moves_log_start_and_deletes_segments() {
    let dir = tempfile::tempdir().unwrap();
    let batch_len = producer_batch(0, 5, 20).len();
    let config = small_config(batch_len * 4, 64);
    let (_manager, log) = open(dir.path(), &config);
    append_batches(&log, 0, 12, 5, 20, 0); // segments at 0, 20, 40
    let mut log = lock_log(&log);
    assert_eq!(
        log.segment_base_offsets(),
        vec![Offset(0), Offset(20), Offset(40)]
    );
    assert_eq!(log.delete_records_before(Offset(25)).unwrap(), Offset(25));
    assert_eq!(log.segment_base_offsets(), vec![Offset(20), Offset(40)]);
    assert!(matches!(
        log.read(Offset(24), 100, Offset(60), true),
        Err(Error::OffsetOutOfRange { .. })
    ));
    // The batch containing the new start is served whole (the client skips earlier records).
    let read = log.read(Offset(25), 1, Offset(60), true).unwrap();
    assert_eq!(
        logjam_storage::batch::validate_batch(&read.records)
            .unwrap()
            .base_offset,
        Offset(25)
    );
    assert!(log.delete_records_before(Offset(61)).is_err());
    assert_eq!(log.delete_records_before(Offset(60)).unwrap(), Offset(60));
    assert_eq!(log.segment_base_offsets(), vec![Offset(60)]);
    assert_eq!(log.log_end_offset(), Offset(60));
}

/// Goal: high watermark, log start and recovery point round-trip through the log dir's
/// checkpoint files across an unclean restart.
#[test]
fn offsets_round_trip_through_checkpoints() {
    let dir = tempfile::tempdir().unwrap();
    let config = LogConfig::default();
    {
        let (manager, log) = open(dir.path(), &config);
        append_batches(&log, 0, 10, 2, 10, 0);
        let mut guard = lock_log(&log);
        guard.set_high_watermark(Offset(14));
        guard.delete_records_before(Offset(4)).unwrap();
        guard.flush().unwrap();
        drop(guard);
        manager.checkpoint().unwrap();
    }
    let text = std::fs::read_to_string(dir.path().join("replication-offset-checkpoint")).unwrap();
    assert_eq!(text, "0\n1\ntest-topic 0 14\n");
    let (manager, log) = open(dir.path(), &config);
    assert!(!manager.had_clean_shutdown());
    let log = lock_log(&log);
    assert_eq!(log.high_watermark(), Offset(14));
    assert_eq!(log.log_start_offset(), Offset(4));
    assert_eq!(log.recovery_point(), Offset(20));
    assert_eq!(
        manager.recovery_report(&tp()).unwrap().recovery_point,
        Offset(20)
    );
}

/// Goal: a malformed checkpoint in the log dir fails `LogManager::open` with an error naming
/// the file and the line.
#[test]
fn malformed_checkpoint_fails_open_naming_file_and_line() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("recovery-point-offset-checkpoint");
    std::fs::write(&path, "0\n2\ntopic 0 5\ntopic one 7\n").unwrap();
    match logjam_storage::LogManager::open(dir.path(), LogConfig::default()) {
        Err(error @ Error::MalformedCheckpoint { .. }) => {
            let Error::MalformedCheckpoint { path: p, line, .. } = &error else {
                unreachable!()
            };
            assert_eq!((p, *line), (&path, 4));
            let message = error.to_string();
            assert!(
                message.contains("recovery-point-offset-checkpoint") && message.contains("line 4"),
                "{message}"
            );
        }
        other => panic!("expected MalformedCheckpoint, got {other:?}"),
    }
}

/// Goal: `create_log` refuses a partition that already has a log.
#[test]
fn create_log_twice_is_an_error() {
    let dir = tempfile::tempdir().unwrap();
    let (manager, _log) = open(dir.path(), &LogConfig::default());
    assert!(matches!(
        manager.create_log(tp(), LogConfig::default()),
        Err(Error::LogAlreadyExists { .. })
    ));
    assert!(manager.delete_log(&tp()).unwrap());
    assert!(manager.log(&tp()).is_none());
    manager.create_log(tp(), LogConfig::default()).unwrap();
}
