//! What a node pays for running on logjam-lazyfs: 4 KiB appends and 4 KiB append+fsync
//! through the mount against the same on the backing filesystem directly, and the cost of
//! `lose_unsynced` with 64 MiB cached. Needs root and /dev/fuse (as the lab's disk faults
//! do); without them it says so and measures nothing.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::Path;

use criterion::{BatchSize, Criterion, Throughput, criterion_group, criterion_main};
use logjam_lazyfs::LazyFs;

const BLOCK: usize = 4096;
/// Files are cut back to empty once they pass this, so the bench's memory and disk stay
/// bounded (the cut is a metadata operation, a small share of the measured time).
const FILE_MAX: u64 = 64 << 20;

fn appender(dir: &Path, name: &str) -> File {
    OpenOptions::new()
        .create(true)
        .append(true)
        .open(dir.join(name))
        .expect("open for append")
}

/// One append of `block`, then an fsync when `sync`; the file restarts when it grows too big.
fn append(file: &mut File, block: &[u8], sync: bool, written: &mut u64) {
    file.write_all(block).expect("write");
    if sync {
        file.sync_data().expect("fdatasync");
    }
    *written += block.len() as u64;
    if *written > FILE_MAX {
        file.set_len(0).expect("truncate");
        file.sync_all().expect("fsync");
        *written = 0;
    }
}

fn io(c: &mut Criterion) {
    let dir = tempfile::tempdir().expect("tempdir");
    let backing = dir.path().join("backing");
    let mountpoint = dir.path().join("mnt");
    let direct = dir.path().join("direct");
    for path in [&backing, &mountpoint, &direct] {
        std::fs::create_dir(path).expect("create dir");
    }
    let lazy = match LazyFs::mount(&backing, &mountpoint) {
        Ok(lazy) => lazy,
        Err(error) => {
            eprintln!("lazyfs bench skipped: cannot mount ({error}); run it as root");
            return;
        }
    };
    let block = vec![b'x'; BLOCK];

    let mut group = c.benchmark_group("append_4KiB");
    group.throughput(Throughput::Bytes(BLOCK as u64));
    for (sync, label) in [(false, "cached"), (true, "fdatasync")] {
        for (root, fs) in [(&direct, "direct"), (&mountpoint, "lazyfs")] {
            let mut file = appender(root, &format!("{label}.log"));
            let mut written = 0;
            group.bench_function(format!("{fs}/{label}"), |b| {
                b.iter(|| append(&mut file, &block, sync, &mut written));
            });
        }
    }
    group.finish();

    let mut group = c.benchmark_group("lose_unsynced");
    group.sample_size(10);
    let cached: u64 = 64 << 20;
    group.bench_function("64MiB_in_16_files", |b| {
        b.iter_batched(
            || {
                for index in 0..16 {
                    let mut file = appender(&mountpoint, &format!("lost-{index}.log"));
                    for _ in 0..(cached / 16 / BLOCK as u64) {
                        file.write_all(&block).expect("write");
                    }
                }
            },
            |()| lazy.lose_unsynced(),
            BatchSize::PerIteration,
        );
    });
    group.finish();
    drop(lazy);
}

criterion_group!(benches, io);
criterion_main!(benches);
