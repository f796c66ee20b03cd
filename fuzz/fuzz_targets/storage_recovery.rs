//! Fuzz target: storage recovery from arbitrary bytes on disk. The input, split at
//! [`SEPARATOR`], becomes one partition's files (segment, offset and time indexes, leader-epoch
//! checkpoint, producer snapshot, a second segment) and the log directory's checkpoints and
//! clean-shutdown marker; `LogManager::open`
//! must refuse them with an error or recover, and a recovered log must serve only batches that
//! pass their CRC, with contiguous offsets, and accept a new append that reads back.

#![no_main]

use libfuzzer_sys::fuzz_target;
use logjam_storage::{
    BatchBuilder, LeaderEpoch, LogConfig, LogManager, Offset, TopicPartition, batch, lock_log,
    segment_file_stem,
};

/// Separates the files in an input (the seeds in fuzz/seeds/storage_recovery are real log
/// directories written this way by `cargo test -p logjam-node --test fuzz_seeds -- --ignored`).
pub const SEPARATOR: &[u8] = b"\n@@logjam-file@@\n";

/// The files of one input, in order; missing parts are absent files.
struct Disk<'a> {
    segment: &'a [u8],
    offset_index: Option<&'a [u8]>,
    time_index: Option<&'a [u8]>,
    epoch_checkpoint: Option<&'a [u8]>,
    recovery_checkpoint: Option<&'a [u8]>,
    log_start_checkpoint: Option<&'a [u8]>,
    producer_snapshot: Option<&'a [u8]>,
    clean_shutdown: Option<&'a [u8]>,
    /// A second segment, at base offset 1000.
    second: Option<&'a [u8]>,
}

fn split(data: &[u8]) -> Disk<'_> {
    let mut parts = Vec::new();
    let mut rest = data;
    while let Some(at) = rest
        .windows(SEPARATOR.len())
        .position(|window| window == SEPARATOR)
    {
        parts.push(&rest[..at]);
        rest = &rest[at + SEPARATOR.len()..];
    }
    parts.push(rest);
    let mut parts = parts.into_iter();
    Disk {
        segment: parts.next().unwrap_or_default(),
        offset_index: parts.next(),
        time_index: parts.next(),
        epoch_checkpoint: parts.next(),
        recovery_checkpoint: parts.next(),
        log_start_checkpoint: parts.next(),
        producer_snapshot: parts.next(),
        clean_shutdown: parts.next(),
        second: parts.next(),
    }
}

fn write(path: &std::path::Path, bytes: Option<&[u8]>) {
    if let Some(bytes) = bytes {
        std::fs::write(path, bytes).expect("the temporary directory is writable");
    }
}

fuzz_target!(|data: &[u8]| {
    let disk = split(data);
    let dir = tempfile::tempdir().expect("a temporary directory");
    let tp = TopicPartition::new("fuzz", 0);
    let partition = dir.path().join(tp.dir_name());
    std::fs::create_dir_all(&partition).expect("the partition directory");
    let stem = segment_file_stem(Offset(0));
    write(&partition.join(format!("{stem}.log")), Some(disk.segment));
    write(&partition.join(format!("{stem}.index")), disk.offset_index);
    write(&partition.join(format!("{stem}.timeindex")), disk.time_index);
    write(&partition.join("leader-epoch-checkpoint"), disk.epoch_checkpoint);
    write(
        &dir.path().join("recovery-point-offset-checkpoint"),
        disk.recovery_checkpoint,
    );
    write(
        &dir.path().join("log-start-offset-checkpoint"),
        disk.log_start_checkpoint,
    );
    write(&partition.join(format!("{stem}.snapshot")), disk.producer_snapshot);
    write(&dir.path().join(".kafka_cleanshutdown"), disk.clean_shutdown);
    let second = segment_file_stem(Offset(1000));
    write(&partition.join(format!("{second}.log")), disk.second);
    let config = LogConfig {
        segment_bytes: 16 * 1024,
        index_interval_bytes: 256,
        ..LogConfig::default()
    };
    let Ok(manager) = LogManager::open(dir.path(), config) else {
        return;
    };
    let Some(log) = manager.log(&tp) else {
        return;
    };
    let mut log = lock_log(&log);
    let start = log.log_start_offset();
    let end = log.log_end_offset();
    assert!(start <= end, "log start {start} past log end {end}");
    let mut next = start;
    while next < end {
        // A corrupt batch that a clean-shutdown marker kept from the scan is refused, not
        // served; past it there is nothing to check.
        let Ok(read) = log.read(next, 1 << 20, end, true) else {
            break;
        };
        if read.batch_count == 0 {
            break;
        }
        let mut expected = None;
        for item in batch::batches(&read.records) {
            let (_, header) =
                item.unwrap_or_else(|defect| panic!("a served batch fails its checks: {defect}"));
            if let Some(expected) = expected {
                assert_eq!(header.base_offset, expected, "offsets not contiguous");
            }
            expected = Some(header.next_offset());
        }
        next = read.next_offset;
    }
    let mut builder = BatchBuilder::new(1_000);
    builder.record(Some(b"k"), Some(b"after recovery"));
    if let Ok(info) = log.append_as_leader(&builder.build(), LeaderEpoch(i32::MAX - 1), 2_000) {
        let read = log
            .read(info.first_offset, 1 << 20, log.log_end_offset(), true)
            .unwrap_or_else(|error| panic!("a fresh append does not read back: {error}"));
        assert!(read.batch_count > 0, "a fresh append reads back nothing");
    }
});
