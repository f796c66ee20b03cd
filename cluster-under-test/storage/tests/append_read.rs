//! Appending and reading: offsets across many segment rolls, `max_bytes` / `min_one_batch`,
//! the upper bound, out-of-range reads, and append validation rejecting whole appends.

mod common;

use common::*;
use logjam_storage::{
    BatchBuilder, BatchDefect, Error, LeaderEpoch, LogConfig, Offset, TimestampType, batch,
    lock_log,
};

/// Goal: offsets stay dense and every batch stays readable when the log rolls many times.
/// Method: 200 batches of 5 records into 2 KiB segments, then read everything back.
#[test]
fn append_and_read_across_many_segment_rolls() {
    let dir = tempfile::tempdir().unwrap();
    let config = small_config(2048, 256);
    let (_manager, log) = open(dir.path(), &config);
    {
        let mut log = lock_log(&log);
        for tag in 0..200u32 {
            let info = log
                .append_as_leader(&producer_batch(tag, 5, 40), LeaderEpoch(1), 0)
                .unwrap();
            assert_eq!(info.first_offset, Offset(i64::from(tag) * 5));
            assert_eq!(info.last_offset, Offset(i64::from(tag) * 5 + 4));
            assert_eq!(info.record_count, 5);
        }
    }
    let log = lock_log(&log);
    assert_eq!(log.log_end_offset(), Offset(1000));
    let bases = log.segment_base_offsets();
    assert!(
        bases.len() > 20,
        "expected many segments, got {}",
        bases.len()
    );
    // Rolls fsync the old segments, so the recovery point is the active segment's base.
    assert_eq!(log.recovery_point(), *bases.last().unwrap());
    let batches = read_all(&log);
    assert_eq!(batches.len(), 200);
    // Reading from an offset in the middle of a batch returns the batch containing it.
    for start in [0i64, 3, 499, 500, 501, 997] {
        let read = log.read(Offset(start), 1, Offset(1000), true).unwrap();
        let header = batch::validate_batch(&read.records).unwrap();
        assert_eq!(header.base_offset.0, start / 5 * 5, "start {start}");
        assert_eq!(read.batch_count, 1);
    }
}

/// Goal: `max_bytes` limits whole batches; `min_one_batch` (KIP-74) overrides it for the first.
#[test]
fn read_respects_max_bytes_and_min_one_batch() {
    let dir = tempfile::tempdir().unwrap();
    let config = LogConfig::default();
    let (_manager, log) = open(dir.path(), &config);
    append_batches(&log, 0, 10, 4, 100, 0);
    let log = lock_log(&log);
    let batch_size = producer_batch(0, 4, 100).len();
    let read = log
        .read(Offset(0), batch_size * 3 + 10, Offset(40), false)
        .unwrap();
    assert_eq!(read.batch_count, 3);
    assert_eq!(read.records.len(), batch_size * 3);
    assert_eq!(read.next_offset, Offset(12));
    let too_small = log
        .read(Offset(0), batch_size - 1, Offset(40), false)
        .unwrap();
    assert_eq!(too_small.batch_count, 0);
    assert!(too_small.records.is_empty());
    let forced = log.read(Offset(0), 1, Offset(40), true).unwrap();
    assert_eq!(forced.batch_count, 1);
    assert_eq!(forced.records.len(), batch_size);
}

/// Goal: nothing at or past the upper bound (the high watermark) is served, and a batch that
/// straddles the bound is withheld whole.
#[test]
fn read_stops_before_upper_bound() {
    let dir = tempfile::tempdir().unwrap();
    let (_manager, log) = open(dir.path(), &LogConfig::default());
    append_batches(&log, 0, 5, 4, 10, 0);
    let mut log = lock_log(&log);
    assert_eq!(log.set_high_watermark(Offset(10)), Offset(10));
    let read = log
        .read(Offset(0), 1 << 20, log.high_watermark(), true)
        .unwrap();
    // Batches 0..4, 4..8 are below 10; batch 8..12 straddles it.
    assert_eq!(read.batch_count, 2);
    assert_eq!(read.next_offset, Offset(8));
    assert_eq!(read.high_watermark, Offset(10));
    let at_bound = log.read(Offset(8), 1 << 20, Offset(10), true).unwrap();
    assert_eq!(
        at_bound.batch_count, 0,
        "min_one_batch never crosses the bound"
    );
    let past_bound = log.read(Offset(12), 1 << 20, Offset(10), true).unwrap();
    assert_eq!(past_bound.batch_count, 0);
    // The high watermark is clamped to the log end.
    assert_eq!(log.set_high_watermark(Offset(1_000)), Offset(20));
}

/// Goal: offsets outside `[log_start, log_end]` are `OffsetOutOfRange`; the log end is empty.
#[test]
fn read_out_of_range_and_at_log_end() {
    let dir = tempfile::tempdir().unwrap();
    let (_manager, log) = open(dir.path(), &LogConfig::default());
    append_batches(&log, 0, 2, 3, 10, 0);
    let log = lock_log(&log);
    let at_end = log.read(Offset(6), 1 << 20, Offset(6), true).unwrap();
    assert_eq!(at_end.batch_count, 0);
    assert_eq!(at_end.log_end_offset, Offset(6));
    for requested in [7, -1] {
        match log.read(Offset(requested), 1 << 20, Offset(6), true) {
            Err(Error::OffsetOutOfRange {
                requested: r,
                log_start,
                log_end,
            }) => {
                assert_eq!(
                    (r, log_start, log_end),
                    (Offset(requested), Offset(0), Offset(6))
                );
            }
            other => panic!("expected OffsetOutOfRange, got {other:?}"),
        }
    }
}

/// Goal: one bad batch rejects the whole append with a typed error, and nothing is written.
#[test]
fn invalid_append_rejected_whole_and_nothing_written() {
    let dir = tempfile::tempdir().unwrap();
    let config = LogConfig {
        max_message_bytes: 2_000,
        segment_bytes: 10_000,
        ..LogConfig::default()
    };
    let (_manager, log) = open(dir.path(), &config);
    let mut log = lock_log(&log);
    let good = producer_batch(0, 3, 10);
    let mut flipped = producer_batch(1, 3, 10);
    let last = flipped.len() - 1;
    flipped[last] ^= 1;
    let mut bad_magic = producer_batch(2, 1, 10);
    bad_magic[16] = 1;
    let mut count_mismatch = producer_batch(3, 3, 10);
    count_mismatch[60] = 9; // RecordsCount low byte; fix the CRC so only the count is wrong
    let crc = batch::compute_crc(&count_mismatch);
    count_mismatch[17..21].copy_from_slice(&crc.to_be_bytes());
    let cases: Vec<(Vec<u8>, i16)> = vec![
        ([good.clone(), flipped].concat(), 2),
        ([good.clone(), bad_magic].concat(), 87),
        (count_mismatch, 87),
        ([good.clone(), good[..30].to_vec()].concat(), 2),
        (producer_batch(4, 1, 3_000), 10),
        ([&good[..]; 200].concat(), 18),
        (Vec::new(), 87),
    ];
    for (index, (bytes, code)) in cases.into_iter().enumerate() {
        let error = log.append_as_leader(&bytes, LeaderEpoch(0), 0).unwrap_err();
        assert_eq!(error.kafka_error_code(), code, "case {index}: {error}");
        assert_eq!(
            log.log_end_offset(),
            Offset(0),
            "case {index} wrote something"
        );
        assert_eq!(log.size_bytes(), 0);
    }
    match log.append_as_leader(
        &[good.clone(), producer_batch(9, 2, 5)].concat()[..good.len() + 20],
        LeaderEpoch(0),
        0,
    ) {
        Err(Error::InvalidBatch {
            batch_index: 1,
            defect: BatchDefect::Truncated { .. },
        }) => {}
        other => panic!("expected truncated second batch, got {other:?}"),
    }
}

/// Goal: the log rewrites only `BaseOffset` and `PartitionLeaderEpoch`; the CRC stays valid.
#[test]
fn leader_append_assigns_offsets_and_epoch_in_header() {
    let dir = tempfile::tempdir().unwrap();
    let (_manager, log) = open(dir.path(), &LogConfig::default());
    let mut log = lock_log(&log);
    let original = producer_batch(0, 2, 10);
    log.append_as_leader(&original, LeaderEpoch(3), 0).unwrap();
    log.append_as_leader(&original, LeaderEpoch(3), 0).unwrap();
    let read = log.read(Offset(2), 1 << 20, Offset(4), false).unwrap();
    let header = batch::validate_batch(&read.records).unwrap();
    assert_eq!(header.base_offset, Offset(2));
    assert_eq!(header.partition_leader_epoch, LeaderEpoch(3));
    assert_eq!(
        &read.records[16..],
        &original[16..],
        "bytes after the epoch are unchanged"
    );
    assert_eq!(log.latest_epoch(), Some(LeaderEpoch(3)));
}

/// Goal: `LogAppendTime` topics get the broker time stamped in, with a recomputed CRC; a
/// `CreateTime` batch too far in the future is `INVALID_TIMESTAMP`.
#[test]
fn timestamp_type_and_future_timestamps() {
    let dir = tempfile::tempdir().unwrap();
    let config = LogConfig {
        message_timestamp_type: TimestampType::LogAppendTime,
        ..LogConfig::default()
    };
    let (manager, log) = open(dir.path(), &config);
    let info = lock_log(&log)
        .append_as_leader(&producer_batch(0, 2, 5), LeaderEpoch(0), 777_000)
        .unwrap();
    assert_eq!(info.log_append_time_ms, Some(777_000));
    let read = lock_log(&log)
        .read(Offset(0), 1 << 20, Offset(2), true)
        .unwrap();
    let header = batch::validate_batch(&read.records).unwrap();
    assert_eq!(header.timestamp_type(), TimestampType::LogAppendTime);
    assert_eq!(header.max_timestamp_ms, 777_000);

    let create_time = manager
        .create_log(
            logjam_storage::TopicPartition::new("ct", 0),
            LogConfig::default(),
        )
        .unwrap();
    let future = BatchBuilder::new(10_000_000)
        .record(None, Some(b"v"))
        .build();
    let error = lock_log(&create_time)
        .append_as_leader(&future, LeaderEpoch(0), 1_000)
        .unwrap_err();
    assert_eq!(error.kafka_error_code(), 32);
}
