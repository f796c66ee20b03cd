//! Reopen time of one partition with a large log of idempotent batches (default 5 M records,
//! ~1 GB in 128 MiB segments, 1,000 producers; `LOGJAM_REOPEN_RECORDS` changes the record
//! count), by which producer snapshots are on disk. The log-level recovery is the same in
//! every case (the clean-shutdown marker is present); only the producer-state rebuild differs:
//!
//! - `all_snapshots`: after a clean shutdown (a snapshot at the log end): nothing replayed;
//! - `roll_snapshots_only`: what a crash leaves (snapshots at each roll): the active segment
//!   is replayed;
//! - `no_snapshots`: the whole log is replayed, which is what the node did on every open
//!   before producer state moved into storage (same reads, same per-batch work).

use std::path::Path;
use std::time::{Duration, Instant};

use criterion::{Criterion, criterion_group, criterion_main};
use logjam_storage::{
    BatchBuilder, LeaderEpoch, LogConfig, LogManager, Offset, TopicPartition, lock_log,
    producer_snapshot,
};

const RECORDS_PER_BATCH: u64 = 100;
const VALUE_BYTES: usize = 200;
const PRODUCERS: u64 = 1_000;

fn config() -> LogConfig {
    LogConfig {
        segment_bytes: 128 << 20,
        ..LogConfig::default()
    }
}

fn tp() -> TopicPartition {
    TopicPartition::new("bench", 0)
}

/// Writes the log: round-robin producers, each continuing its sequence, then a clean shutdown.
fn build(dir: &Path, records: u64) {
    let manager = LogManager::open(dir, config()).expect("open");
    let log = manager.create_log(tp(), config()).expect("create");
    let value = vec![b'v'; VALUE_BYTES];
    let batches = records / RECORDS_PER_BATCH;
    let mut sequences = vec![0i32; PRODUCERS as usize];
    let mut log = lock_log(&log);
    for index in 0..batches {
        let producer = index % PRODUCERS;
        let sequence = &mut sequences[producer as usize];
        let mut builder = BatchBuilder::new(1_700_000_000_000);
        builder.producer(10_000 + producer as i64, 0, *sequence);
        for _ in 0..RECORDS_PER_BATCH {
            builder.record(None, Some(&value));
        }
        log.append_as_leader(&builder.build(), LeaderEpoch(0), 1_700_000_000_000)
            .expect("append");
        *sequence += RECORDS_PER_BATCH as i32;
    }
    eprintln!(
        "reopen bench: {records} records, {} bytes, {} segments",
        log.size_bytes(),
        log.segment_base_offsets().len()
    );
    drop(log);
    manager.shutdown().expect("shutdown");
}

/// Deletes the snapshots the case must not have. The log was shut down cleanly just before.
fn keep_snapshots(dir: &Path, case: &str, segment_bases: &[Offset]) {
    let partition = dir.join(tp().dir_name());
    for offset in producer_snapshot::list(&partition).expect("list") {
        let keep = match case {
            "all_snapshots" => true,
            "roll_snapshots_only" => segment_bases.contains(&offset),
            _ => false,
        };
        if !keep {
            producer_snapshot::delete(&partition, offset).expect("delete");
        }
    }
}

fn reopen(c: &mut Criterion) {
    let records = std::env::var("LOGJAM_REOPEN_RECORDS")
        .ok()
        .and_then(|value| value.parse().ok())
        .unwrap_or(5_000_000u64);
    let dir = tempfile::tempdir().expect("tempdir");
    build(dir.path(), records);
    let segment_bases = {
        let manager = LogManager::open(dir.path(), config()).expect("open");
        let bases = lock_log(&manager.log(&tp()).expect("log")).segment_base_offsets();
        manager.shutdown().expect("shutdown");
        bases
    };
    let mut group = c.benchmark_group("reopen_partition");
    group.sample_size(10);
    group.measurement_time(Duration::from_secs(30));
    for case in ["all_snapshots", "roll_snapshots_only", "no_snapshots"] {
        group.bench_function(format!("{records}_records/{case}"), |b| {
            b.iter_custom(|iters| {
                let mut total = Duration::ZERO;
                for _ in 0..iters {
                    keep_snapshots(dir.path(), case, &segment_bases);
                    let start = Instant::now();
                    let manager = LogManager::open(dir.path(), config()).expect("open");
                    total += start.elapsed();
                    let load = lock_log(&manager.log(&tp()).expect("log")).producer_state_load();
                    assert!(
                        case != "all_snapshots" || load.batches_replayed == 0,
                        "{load:?}"
                    );
                    manager.shutdown().expect("shutdown");
                    if iters == 1 {
                        eprintln!("{case}: {load:?}");
                    }
                }
                total
            });
        });
    }
    group.finish();
}

criterion_group!(benches, reopen);
criterion_main!(benches);
