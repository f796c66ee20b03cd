//! Append throughput of `Log::append_as_leader` for batches of 100 records with 100-byte and
//! 1 KiB values (page-cache writes, no fsync per append: Kafka's default flush policy). Old
//! segments are dropped with `delete_records_before` once the log passes 256 MiB so the
//! benchmark's disk use stays bounded; that cost (a roll with fsync) is included.

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use logjam_storage::{BatchBuilder, LeaderEpoch, LogConfig, LogManager, TopicPartition, lock_log};

const RECORDS_PER_BATCH: usize = 100;
const LOG_BYTES_MAX: u64 = 256 << 20;

fn batch(value_bytes: usize) -> Vec<u8> {
    let value = vec![b'v'; value_bytes];
    let mut builder = BatchBuilder::new(1_700_000_000_000);
    builder.producer(1, 0, 0);
    for index in 0..RECORDS_PER_BATCH {
        builder.record(Some(format!("key-{index:04}").as_bytes()), Some(&value));
    }
    builder.build()
}

fn append(c: &mut Criterion) {
    let mut group = c.benchmark_group("append_as_leader");
    group.sample_size(20);
    for value_bytes in [100usize, 1024] {
        let dir = tempfile::tempdir().expect("tempdir");
        let config = LogConfig {
            segment_bytes: 64 << 20,
            ..LogConfig::default()
        };
        let manager = LogManager::open(dir.path(), config.clone()).expect("open");
        let log = manager
            .create_log(TopicPartition::new("bench", 0), config)
            .expect("create");
        let bytes = batch(value_bytes);
        group.throughput(Throughput::Bytes(bytes.len() as u64));
        group.bench_function(format!("{RECORDS_PER_BATCH}x{value_bytes}B"), |b| {
            b.iter(|| {
                let mut log = lock_log(&log);
                log.append_as_leader(&bytes, LeaderEpoch(0), 1_700_000_000_000)
                    .expect("append");
                if log.size_bytes() > LOG_BYTES_MAX {
                    let log_end = log.log_end_offset();
                    log.set_high_watermark(log_end);
                    log.delete_records_before(log_end).expect("delete");
                }
            });
        });
    }
    group.finish();
}

criterion_group!(benches, append);
criterion_main!(benches);
