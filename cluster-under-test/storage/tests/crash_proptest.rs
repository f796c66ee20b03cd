//! Property: whatever sequence of appends, flushes, checkpoints, clean restarts and crashes
//! (lost page cache, a flipped unflushed byte, garbage appended) happens, every read returns
//! batches that pass their CRC, offsets are contiguous, the log is a prefix of what was
//! appended, and nothing that was fsynced before a crash is lost.

mod common;

use std::path::Path;

use common::*;
use logjam_storage::{LeaderEpoch, LogConfig, LogManager, Offset, SharedLog, batch, lock_log};
use proptest::prelude::*;

/// One step of a random history.
#[derive(Debug, Clone)]
enum Step {
    /// Append `batches` batches of `records` records with `value_bytes`-byte values.
    Append {
        batches: u32,
        records: u32,
        value_bytes: usize,
    },
    /// `Log::flush`.
    Flush,
    /// `LogManager::checkpoint`.
    Checkpoint,
    /// `LogManager::shutdown`, then reopen.
    CleanRestart,
    /// Kill -9, then damage the unflushed tail of the active segment, then reopen.
    Crash(Damage),
}

/// How a crash damages the active segment's unflushed bytes.
#[derive(Debug, Clone)]
enum Damage {
    /// Nothing: the page cache survived (process crash only).
    None,
    /// Cut the file back to a point between its fsynced length and its end (per mille).
    LosePageCache(u32),
    /// Flip a byte between its fsynced length and its end (per mille).
    FlipByte(u32),
    /// Append garbage after the end.
    Garbage(Vec<u8>),
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        6 => (1u32..4, 1u32..6, 16usize..120)
            .prop_map(|(batches, records, value_bytes)| Step::Append { batches, records, value_bytes }),
        1 => Just(Step::Flush),
        1 => Just(Step::Checkpoint),
        1 => Just(Step::CleanRestart),
        3 => prop_oneof![
            Just(Damage::None),
            (0u32..=1000).prop_map(Damage::LosePageCache),
            (0u32..1000).prop_map(Damage::FlipByte),
            proptest::collection::vec(any::<u8>(), 1..80).prop_map(Damage::Garbage),
        ]
        .prop_map(Step::Crash),
    ]
}

/// What the test knows was appended: per batch its base offset, size and the bytes from
/// `Magic` on (the part a leader never rewrites; `PartitionLeaderEpoch` is outside the CRC so
/// a flipped epoch byte is undetectable by design and not compared).
struct Model {
    batches: Vec<(Offset, usize, Vec<u8>)>,
    /// Offset after the last appended record still in the model.
    appended_end: Offset,
}

impl Model {
    fn truncate_to(&mut self, log_end: Offset) {
        self.batches.retain(|(base, _, _)| *base < log_end);
        self.appended_end = log_end;
    }

    /// Bytes of the active segment (starting at `active_base`) below the recovery point.
    fn fsynced_len(&self, active_base: Offset, recovery_point: Offset) -> u64 {
        self.batches
            .iter()
            .filter(|(base, _, _)| *base >= active_base && *base < recovery_point)
            .map(|(_, size, _)| *size as u64)
            .sum()
    }
}

fn config() -> LogConfig {
    small_config(1024, 100)
}

fn reopen(dir: &Path) -> (LogManager, SharedLog) {
    open(dir, &config())
}

/// Checks the log against the model: CRCs, contiguity, prefix, durability.
fn verify(log: &SharedLog, model: &mut Model, durable_end: Offset) -> Result<(), TestCaseError> {
    let log = lock_log(log);
    let log_end = log.log_end_offset();
    prop_assert!(
        log_end >= durable_end,
        "lost fsynced data: log end {log_end} < {durable_end}"
    );
    let appended_end = model.appended_end;
    prop_assert!(
        log_end <= appended_end,
        "log end {log_end} beyond appended {appended_end}"
    );
    model.truncate_to(log_end);
    let mut next = log.log_start_offset();
    let mut index = 0;
    while next < log_end {
        let read = log.read(next, 700, log_end, true).expect("read");
        prop_assert!(read.batch_count > 0);
        for item in batch::batches(&read.records) {
            let (position, header) = item
                .map_err(|defect| TestCaseError::fail(format!("served a bad batch: {defect}")))?;
            let (base, size, bytes) = &model.batches[index];
            prop_assert_eq!(
                header.base_offset,
                *base,
                "offsets contiguous and as appended"
            );
            prop_assert_eq!(header.size_bytes(), *size);
            prop_assert_eq!(&read.records[position + 16..position + size], &bytes[..]);
            index += 1;
        }
        next = read.next_offset;
    }
    prop_assert_eq!(next, log_end);
    prop_assert_eq!(index, model.batches.len());
    Ok(())
}

fn run(steps: Vec<Step>) -> Result<(), TestCaseError> {
    let dir = tempfile::tempdir().unwrap();
    let mut model = Model {
        batches: Vec::new(),
        appended_end: Offset(0),
    };
    let mut durable_end = Offset(0);
    let mut tag = 0u32;
    let (mut manager, mut log) = reopen(dir.path());
    for step in steps {
        match step {
            Step::Append {
                batches,
                records,
                value_bytes,
            } => {
                let mut guard = lock_log(&log);
                for _ in 0..batches {
                    let bytes = producer_batch(tag, records, value_bytes);
                    tag += 1;
                    let info = guard
                        .append_as_leader(&bytes, LeaderEpoch(0), 0)
                        .expect("append");
                    model
                        .batches
                        .push((info.first_offset, bytes.len(), bytes[16..].to_vec()));
                    model.appended_end = info.last_offset.next();
                }
            }
            Step::Flush => lock_log(&log).flush().expect("flush"),
            Step::Checkpoint => manager.checkpoint().expect("checkpoint"),
            Step::CleanRestart => {
                manager.shutdown().expect("shutdown");
                durable_end = lock_log(&log).log_end_offset();
                drop((manager, log));
                (manager, log) = reopen(dir.path());
                verify(&log, &mut model, durable_end)?;
            }
            Step::Crash(damage) => {
                let (active_base, recovery_point, log_end) = {
                    let guard = lock_log(&log);
                    let bases = guard.segment_base_offsets();
                    (
                        *bases.last().unwrap(),
                        guard.recovery_point(),
                        guard.log_end_offset(),
                    )
                };
                durable_end = durable_end.max(recovery_point).min(log_end);
                drop((manager, log));
                let path = segment_path(dir.path(), active_base);
                let fsynced = model.fsynced_len(active_base, recovery_point);
                let len = file_len(&path);
                assert!(fsynced <= len);
                match damage {
                    Damage::None => {}
                    Damage::LosePageCache(per_mille) => {
                        truncate_file(
                            &path,
                            fsynced + (len - fsynced) * u64::from(per_mille) / 1000,
                        );
                    }
                    Damage::FlipByte(per_mille) if len > fsynced => {
                        flip_byte(
                            &path,
                            fsynced + (len - fsynced) * u64::from(per_mille) / 1000,
                        );
                    }
                    Damage::FlipByte(_) => {}
                    Damage::Garbage(bytes) => append_to_file(&path, &bytes),
                }
                (manager, log) = reopen(dir.path());
                verify(&log, &mut model, durable_end)?;
                // Data validated by recovery is not fsynced yet: only the recovery point is durable.
                durable_end = lock_log(&log).recovery_point();
            }
        }
    }
    verify(&log, &mut model, durable_end)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    /// Goal: crash recovery never serves a batch failing its CRC, keeps offsets contiguous, and
    /// keeps everything fsynced. Method: random histories against a model of appended batches.
    #[test]
    fn crashes_never_serve_bad_batches_or_lose_fsynced_data(steps in proptest::collection::vec(step(), 1..30)) {
        run(steps)?;
    }
}
