//! Restart and crash recovery: clean shutdown keeps everything; a torn tail, zero-filled tail or
//! flipped byte is cut exactly at the first bad batch; fsynced batches survive lost page cache;
//! the flush policies move the recovery point; a corrupt batch is never served.

mod common;

use common::*;
use logjam_storage::{Error, LeaderEpoch, LogConfig, LogManager, Offset, StopReason, lock_log};

/// Goal: the clean-shutdown marker carries the broker epoch of the shutdown
/// (`{"version":0,"brokerEpoch":N}`, as Kafka writes it) to the next open, which reads it and
/// removes the marker, so a crash after that open is not mistaken for a clean shutdown; an
/// empty marker (older builds) still means clean, with no epoch.
#[test]
fn clean_shutdown_marker_carries_the_broker_epoch_once() {
    let dir = tempfile::tempdir().unwrap();
    let config = small_config(4096, 512);
    let marker = dir.path().join(".kafka_cleanshutdown");
    {
        let (manager, log) = open(dir.path(), &config);
        append_batches(&log, 0, 10, 1, 30, 1);
        assert_eq!(manager.clean_shutdown_broker_epoch(), None, "first open");
        manager.shutdown_with_broker_epoch(4711).unwrap();
    }
    assert_eq!(
        std::fs::read_to_string(&marker).unwrap(),
        r#"{"version":0,"brokerEpoch":4711}"#
    );
    {
        let (manager, _log) = open(dir.path(), &config);
        assert!(manager.had_clean_shutdown());
        assert_eq!(manager.clean_shutdown_broker_epoch(), Some(4711));
        assert!(!marker.exists(), "marker removed at open");
        // Crash: no shutdown.
    }
    {
        let (manager, _log) = open(dir.path(), &config);
        assert!(!manager.had_clean_shutdown());
        assert_eq!(manager.clean_shutdown_broker_epoch(), None, "after a crash");
        manager.shutdown().unwrap();
    }
    assert_eq!(
        std::fs::read_to_string(&marker).unwrap(),
        r#"{"version":0,"brokerEpoch":-1}"#
    );
    std::fs::write(&marker, b"").unwrap();
    let (manager, _log) = open(dir.path(), &config);
    assert!(
        manager.had_clean_shutdown(),
        "an empty marker is still clean"
    );
    assert_eq!(manager.clean_shutdown_broker_epoch(), None);
}

/// Goal: a clean shutdown and restart keeps every batch, skips full scans, and restores the
/// log start offset, high watermark and recovery point.
#[test]
fn restart_after_clean_shutdown_keeps_everything() {
    let dir = tempfile::tempdir().unwrap();
    let config = small_config(4096, 512);
    let before;
    {
        let (manager, log) = open(dir.path(), &config);
        append_batches(&log, 0, 100, 3, 30, 2);
        let mut guard = lock_log(&log);
        guard.set_high_watermark(Offset(150));
        guard.delete_records_before(Offset(30)).unwrap();
        before = read_all(&guard);
        drop(guard);
        manager.shutdown().unwrap();
    }
    assert!(dir.path().join(".kafka_cleanshutdown").exists());
    let (manager, log) = open(dir.path(), &config);
    assert!(manager.had_clean_shutdown());
    assert!(
        !dir.path().join(".kafka_cleanshutdown").exists(),
        "marker removed at open"
    );
    let report = manager.recovery_report(&tp()).unwrap();
    assert!(report.clean_shutdown);
    assert_eq!(
        report.segments_scanned, 0,
        "clean shutdown skips full scans"
    );
    assert_eq!(report.stop, None);
    let log = lock_log(&log);
    assert_eq!(log.log_end_offset(), Offset(300));
    assert_eq!(log.recovery_point(), Offset(300));
    assert_eq!(log.high_watermark(), Offset(150));
    assert_eq!(log.log_start_offset(), Offset(30));
    assert_eq!(read_all(&log), before);
    assert_eq!(log.latest_epoch(), Some(LeaderEpoch(2)));
}

/// Goal: after kill -9 with a torn last write, recovery truncates exactly the torn bytes.
/// Method: drop the manager without shutdown, append half a batch to the active segment.
#[test]
fn torn_write_truncated_exactly() {
    let dir = tempfile::tempdir().unwrap();
    let config = small_config(1 << 20, 256);
    let active_len;
    {
        let (_manager, log) = open(dir.path(), &config);
        append_batches(&log, 0, 20, 4, 20, 0);
        active_len = file_len(&segment_path(dir.path(), Offset(0)));
    }
    let path = segment_path(dir.path(), Offset(0));
    let partial = producer_batch(99, 4, 20);
    append_to_file(&path, &partial[..partial.len() / 2]);
    let (manager, log) = open(dir.path(), &config);
    let report = manager.recovery_report(&tp()).unwrap().clone();
    assert!(!report.clean_shutdown);
    assert_eq!(report.batches_validated, 20);
    assert_eq!(report.bytes_truncated, (partial.len() / 2) as u64);
    assert!(
        matches!(report.stop, Some(StopReason::TornBatch { .. })),
        "{report:?}"
    );
    assert_eq!(file_len(&path), active_len);
    let mut log = lock_log(&log);
    assert_eq!(log.log_end_offset(), Offset(80));
    assert_eq!(read_all(&log).len(), 20);
    // The log keeps working after recovery.
    let info = log
        .append_as_leader(&producer_batch(20, 1, 5), LeaderEpoch(0), 0)
        .unwrap();
    assert_eq!(info.first_offset, Offset(80));
}

/// Goal: a tail of zeros (file length persisted, data not) is cut like a torn write.
#[test]
fn zero_filled_tail_truncated() {
    let dir = tempfile::tempdir().unwrap();
    let config = LogConfig::default();
    {
        let (_manager, log) = open(dir.path(), &config);
        append_batches(&log, 0, 5, 2, 10, 0);
    }
    append_to_file(&segment_path(dir.path(), Offset(0)), &[0u8; 300]);
    let (manager, log) = open(dir.path(), &config);
    let report = manager.recovery_report(&tp()).unwrap();
    assert!(
        matches!(report.stop, Some(StopReason::CorruptBatch { .. })),
        "{report:?}"
    );
    assert_eq!(report.bytes_truncated, 300);
    assert_eq!(lock_log(&log).log_end_offset(), Offset(10));
}

/// Goal: a flipped byte in the middle batch of a middle segment drops that batch and all after
/// it (later segments deleted), keeping every batch before it.
#[test]
fn flipped_byte_drops_bad_batch_and_everything_after() {
    let dir = tempfile::tempdir().unwrap();
    let batch_len = producer_batch(0, 10, 50).len();
    // Five batches per segment.
    let config = small_config(batch_len * 5, 64);
    {
        let (_manager, log) = open(dir.path(), &config);
        append_batches(&log, 0, 15, 10, 50, 0);
        assert_eq!(
            lock_log(&log).segment_base_offsets(),
            vec![Offset(0), Offset(50), Offset(100)]
        );
    }
    // Corrupt a record byte of the third batch (offsets 70..80) of segment 50.
    let path = segment_path(dir.path(), Offset(50));
    flip_byte(&path, (batch_len * 2 + 70) as u64);
    let (manager, log) = open(dir.path(), &config);
    let report = manager.recovery_report(&tp()).unwrap();
    assert_eq!(
        report.recovery_point,
        Offset(0),
        "no checkpoint was written"
    );
    assert!(
        matches!(report.stop, Some(StopReason::CorruptBatch { position, .. }) if position.as_usize() == batch_len * 2),
        "{report:?}"
    );
    assert_eq!(report.segments_deleted, 1);
    assert_eq!(report.bytes_truncated, (batch_len * 3) as u64);
    let log = lock_log(&log);
    assert_eq!(log.log_end_offset(), Offset(70));
    assert_eq!(log.segment_base_offsets(), vec![Offset(0), Offset(50)]);
    let batches = read_all(&log);
    let expected: Vec<(i64, i64)> = (0..7).map(|b| (b * 10, b * 10 + 9)).collect();
    assert_eq!(batches, expected);
    assert!(!segment_path(dir.path(), Offset(100)).exists());
}

/// Goal: a batch damaged while the node was cleanly stopped, before the last index entry (so
/// the open-time tail check does not see it), is never served: the read stops before it, or
/// fails if it is the first batch asked for.
#[test]
fn corrupt_batch_after_clean_shutdown_is_never_served() {
    let dir = tempfile::tempdir().unwrap();
    let config = small_config(1 << 20, 64);
    let batch_len = producer_batch(0, 2, 10).len();
    {
        let (manager, log) = open(dir.path(), &config);
        append_batches(&log, 0, 6, 2, 10, 0);
        manager.shutdown().unwrap();
    }
    flip_byte(
        &segment_path(dir.path(), Offset(0)),
        (batch_len + 40) as u64,
    );
    let (_manager, log) = open(dir.path(), &config);
    let log = lock_log(&log);
    let read = log.read(Offset(0), 1 << 20, Offset(12), true).unwrap();
    assert_eq!(read.batch_count, 1, "only the batch before the damaged one");
    match log.read(Offset(2), 1 << 20, Offset(12), true) {
        Err(error @ Error::CorruptStoredBatch { .. }) => assert_eq!(error.kafka_error_code(), 56),
        other => panic!("expected CorruptStoredBatch, got {other:?}"),
    }
}

/// Goal: after `flush()`, a crash that loses the page cache (file cut back to its fsynced
/// length) keeps every fsynced batch. Method: remember the file length at flush, append more,
/// checkpoint, drop without shutdown, truncate to the remembered length.
#[test]
fn restart_keeps_every_fsynced_batch_when_page_cache_is_lost() {
    let dir = tempfile::tempdir().unwrap();
    let config = small_config(8192, 512);
    let fsynced_len;
    let fsynced_end;
    let fsynced_batches;
    let active_base;
    {
        let (manager, log) = open(dir.path(), &config);
        append_batches(&log, 0, 40, 3, 40, 0);
        let mut guard = lock_log(&log);
        guard.flush().unwrap();
        fsynced_end = guard.log_end_offset();
        assert_eq!(guard.recovery_point(), fsynced_end);
        active_base = *guard.segment_base_offsets().last().unwrap();
        fsynced_len = file_len(&segment_path(dir.path(), active_base));
        fsynced_batches = read_all(&guard);
        drop(guard);
        append_batches(&log, 40, 5, 3, 40, 0);
        manager.checkpoint().unwrap();
    }
    let path = segment_path(dir.path(), active_base);
    assert!(
        file_len(&path) > fsynced_len,
        "unflushed appends stayed in the same segment"
    );
    truncate_file(&path, fsynced_len);
    let (manager, log) = open(dir.path(), &config);
    let report = manager.recovery_report(&tp()).unwrap();
    assert_eq!(report.recovery_point, fsynced_end);
    assert_eq!(report.scanned_from_segment, Some(active_base));
    let log = lock_log(&log);
    assert_eq!(log.log_end_offset(), fsynced_end);
    assert_eq!(read_all(&log), fsynced_batches);
}

/// Goal: `log.flush.interval.messages=1` fsyncs on every append, moving the recovery point.
#[test]
fn flush_interval_messages_one_advances_recovery_point_on_every_append() {
    let dir = tempfile::tempdir().unwrap();
    let config = LogConfig {
        flush_interval_messages: 1,
        ..LogConfig::default()
    };
    let (_manager, log) = open(dir.path(), &config);
    let mut log = lock_log(&log);
    for tag in 0..5u32 {
        let info = log
            .append_as_leader(&producer_batch(tag, 2, 5), LeaderEpoch(0), 0)
            .unwrap();
        assert!(info.flushed);
        assert_eq!(log.recovery_point(), log.log_end_offset());
    }
}

/// Goal: the default never flushes on append; `log.flush.interval.ms` flushes on the tick once
/// the interval has passed (the first tick starts the clock, like Kafka's load time).
#[test]
fn flush_interval_ms_flushes_on_tick() {
    let dir = tempfile::tempdir().unwrap();
    let config = LogConfig {
        flush_interval_ms: Some(1_000),
        ..LogConfig::default()
    };
    let manager = LogManager::open(dir.path(), config.clone()).unwrap();
    let log = manager.create_log(tp(), config).unwrap();
    assert_eq!(
        manager.flush_due(10_000).unwrap(),
        0,
        "first tick starts the clock"
    );
    let info = lock_log(&log)
        .append_as_leader(&producer_batch(0, 3, 5), LeaderEpoch(0), 10_100)
        .unwrap();
    assert!(!info.flushed);
    assert_eq!(lock_log(&log).recovery_point(), Offset(0));
    assert_eq!(manager.flush_due(10_500).unwrap(), 0);
    assert_eq!(manager.flush_due(11_000).unwrap(), 1);
    assert_eq!(lock_log(&log).recovery_point(), Offset(3));
}

/// Goal: a torn index file (written but not fsynced) is rebuilt, not trusted.
#[test]
fn garbage_index_is_rebuilt_on_restart() {
    let dir = tempfile::tempdir().unwrap();
    let config = small_config(1 << 20, 64);
    let before;
    {
        let (manager, log) = open(dir.path(), &config);
        append_batches(&log, 0, 50, 2, 30, 0);
        before = read_all(&lock_log(&log));
        manager.shutdown().unwrap();
    }
    let index = dir
        .path()
        .join(tp().dir_name())
        .join("00000000000000000000.index");
    append_to_file(&index, &[0xff; 5]);
    let (_manager, log) = open(dir.path(), &config);
    let log = lock_log(&log);
    assert_eq!(read_all(&log), before);
    for start in (0..100).step_by(7) {
        let read = log.read(Offset(start), 1, Offset(100), true).unwrap();
        let header = logjam_storage::batch::validate_batch(&read.records).unwrap();
        assert_eq!(header.base_offset.0, start / 2 * 2);
    }
}
