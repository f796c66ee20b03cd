//! Shared helpers for the integration tests: real v2 batches from `BatchBuilder`, small
//! configurations that roll often, and crash simulation on segment files.

#![allow(dead_code, reason = "each test binary uses a different subset")]

use std::fs::OpenOptions;
use std::io::Write;
use std::path::{Path, PathBuf};

use logjam_storage::{
    BatchBuilder, LeaderEpoch, Log, LogConfig, LogManager, Offset, SharedLog, TopicPartition,
    batch, lock_log, segment_file_stem,
};

/// A producer batch of `records` records whose values encode `tag` and the record index, so
/// tests can tell batches apart. Its size depends only on `records` and `value_bytes` (for
/// tags below 10^6 and values of at least 16 bytes).
pub fn producer_batch(tag: u32, records: u32, value_bytes: usize) -> Vec<u8> {
    let mut builder = BatchBuilder::new(1_000 + i64::from(tag));
    for index in 0..records {
        let mut value = format!("{tag}:{index}:").into_bytes();
        value.resize(value_bytes.max(value.len()), b'x');
        builder.record(Some(format!("k{tag:06}").as_bytes()), Some(&value));
    }
    builder.build()
}

/// A config that rolls after `segment_bytes` and indexes every `index_interval_bytes`.
pub fn small_config(segment_bytes: usize, index_interval_bytes: usize) -> LogConfig {
    LogConfig {
        segment_bytes,
        index_interval_bytes,
        ..LogConfig::default()
    }
}

/// The test partition.
pub fn tp() -> TopicPartition {
    TopicPartition::new("test-topic", 0)
}

/// Opens a manager on `dir` and returns it with the test partition's log, creating the log if
/// the directory does not have it yet.
pub fn open(dir: &Path, config: &LogConfig) -> (LogManager, SharedLog) {
    let manager = LogManager::open(dir, config.clone()).expect("open log manager");
    let log = match manager.log(&tp()) {
        Some(log) => log,
        None => manager
            .create_log(tp(), config.clone())
            .expect("create log"),
    };
    (manager, log)
}

/// Appends `count` batches tagged `first_tag..` of `records` records each as leader in `epoch`.
pub fn append_batches(
    log: &SharedLog,
    first_tag: u32,
    count: u32,
    records: u32,
    value_bytes: usize,
    epoch: i32,
) {
    let mut log = lock_log(log);
    for tag in first_tag..first_tag + count {
        log.append_as_leader(
            &producer_batch(tag, records, value_bytes),
            LeaderEpoch(epoch),
            0,
        )
        .expect("append");
    }
}

/// Reads every batch from the log start to the log end; returns `(base offset, last offset)`
/// per batch, asserting that every batch passes its CRC and that offsets are contiguous.
pub fn read_all(log: &Log) -> Vec<(i64, i64)> {
    let mut batches = Vec::new();
    let mut next = log.log_start_offset();
    let log_end = log.log_end_offset();
    while next < log_end {
        let read = log.read(next, 64 * 1024, log_end, true).expect("read");
        assert!(read.batch_count > 0, "no progress reading at {next}");
        for item in batch::batches(&read.records) {
            let (_, header) = item.expect("every served batch passes its CRC");
            if let Some(&(_, last)) = batches.last() {
                assert_eq!(header.base_offset.0, last + 1, "offsets contiguous");
            }
            batches.push((header.base_offset.0, header.last_offset().0));
        }
        next = read.next_offset;
    }
    assert_eq!(next, log_end);
    batches
}

/// Path of the `.log` file of the segment at `base` of the test partition.
pub fn segment_path(dir: &Path, base: Offset) -> PathBuf {
    dir.join(tp().dir_name())
        .join(format!("{}.log", segment_file_stem(base)))
}

/// Appends raw bytes to a file (a torn or garbage write).
pub fn append_to_file(path: &Path, bytes: &[u8]) {
    let mut file = OpenOptions::new()
        .append(true)
        .open(path)
        .expect("open segment");
    file.write_all(bytes).expect("append garbage");
}

/// Flips one byte of a file.
pub fn flip_byte(path: &Path, position: u64) {
    let mut bytes = std::fs::read(path).expect("read segment");
    bytes[position as usize] ^= 0xff;
    std::fs::write(path, bytes).expect("write segment");
}

/// Truncates a file to `len` bytes (page cache lost past the last fsync).
pub fn truncate_file(path: &Path, len: u64) {
    OpenOptions::new()
        .write(true)
        .open(path)
        .expect("open segment")
        .set_len(len)
        .expect("truncate");
}

/// Length of a file.
pub fn file_len(path: &Path) -> u64 {
    std::fs::metadata(path).expect("stat").len()
}
