//! Producer state beside the log (kafka-semantics.md §2, §7.4): `.snapshot` files at roll and
//! clean shutdown, reopen from the latest snapshot plus a tail replay, unusable snapshots
//! ignored, truncation reloading from a snapshot at or below the cut. The state is always
//! compared with what the log's own batches imply (an independent model of Kafka's rules), not
//! with what the code under test computed earlier.

mod common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use logjam_storage::{
    BatchBuilder, BatchHeader, LeaderEpoch, Log, LogConfig, LogManager, Offset, ProducerBatch,
    ProducerEpoch, ProducerId, Sequence, SharedLog, Verdict, batch, lock_log, producer_snapshot,
};
use proptest::prelude::*;

use common::{small_config, tp};

/// An idempotent batch of `records` records from `pid` at `epoch`, starting at `sequence`.
fn idempotent_batch(pid: i64, epoch: i16, sequence: i32, records: u32) -> Vec<u8> {
    let mut builder = BatchBuilder::new(1_700_000_000_000 + i64::from(sequence));
    builder.producer(pid, epoch, sequence);
    for index in 0..records {
        builder.record(
            None,
            Some(format!("{pid}:{epoch}:{sequence}:{index}").as_bytes()),
        );
    }
    builder.build()
}

/// Appends a client's batches, each producer continuing its own sequence.
struct Clients {
    next: BTreeMap<i64, (i16, i32)>,
}

impl Clients {
    fn new() -> Clients {
        Clients {
            next: BTreeMap::new(),
        }
    }

    fn append(&mut self, log: &SharedLog, pid: i64, bump_epoch: bool, records: u32) {
        let (epoch, sequence) = self.next.entry(pid).or_insert((0, 0));
        if bump_epoch {
            *epoch += 1;
            *sequence = 0;
        }
        let bytes = idempotent_batch(pid, *epoch, *sequence, records);
        lock_log(log)
            .append_as_leader(&bytes, LeaderEpoch(0), 1_700_000_000_000)
            .expect("append");
        *sequence += records as i32;
    }
}

fn open(dir: &Path, config: &LogConfig) -> (LogManager, SharedLog) {
    common::open(dir, config)
}

fn partition_dir(dir: &Path) -> PathBuf {
    dir.join(tp().dir_name())
}

/// Every batch header in the log, in order.
fn log_batches(log: &Log) -> Vec<BatchHeader> {
    let mut headers = Vec::new();
    let end = log.log_end_offset();
    let mut next = log.log_start_offset();
    while next < end {
        let read = log.read(next, 1 << 20, end, true).expect("read");
        assert!(read.batch_count > 0, "no progress at {next}");
        for item in batch::batches(&read.records) {
            headers.push(item.expect("valid batch").1);
        }
        next = read.next_offset;
    }
    headers
}

/// One producer's state as Kafka's rules give it: (epoch, retained (first seq, last seq, first
/// offset, last offset)).
type ModelEntry = (i16, Vec<(i32, i32, i64, i64)>);

/// The state a table loaded from a snapshot at `snapshot` (which keeps each producer's last
/// batch below it, §7.4) and then fed every batch at or after it must hold. `snapshot` = the
/// log start is a full replay.
fn model(batches: &[BatchHeader], snapshot: Offset) -> BTreeMap<i64, ModelEntry> {
    let mut fed: BTreeMap<i64, Vec<&BatchHeader>> = BTreeMap::new();
    for header in batches.iter().filter(|h| h.producer_id >= 0) {
        let seen = fed.entry(header.producer_id).or_default();
        if header.base_offset < snapshot {
            // Only the last batch below the snapshot survives it.
            seen.clear();
        }
        seen.push(header);
    }
    fed.into_iter()
        .map(|(pid, headers)| {
            let epoch = headers.last().expect("non-empty").producer_epoch;
            let run: Vec<_> = headers
                .iter()
                .rev()
                .take_while(|h| h.producer_epoch == epoch)
                .take(5)
                .map(|h| {
                    let first = h.base_sequence;
                    (
                        first,
                        Sequence(first).plus(h.last_offset_delta).0,
                        h.base_offset.0,
                        h.last_offset().0,
                    )
                })
                .collect();
            (pid, (epoch, run.into_iter().rev().collect()))
        })
        .collect()
}

/// The log's producer table in the model's shape.
fn state(log: &Log) -> BTreeMap<i64, ModelEntry> {
    log.producer_state()
        .entries()
        .into_iter()
        .map(|(pid, entry)| {
            let batches = entry
                .batches
                .iter()
                .map(|b| {
                    (
                        b.first_sequence.0,
                        b.last_sequence.0,
                        b.first_offset.0,
                        b.last_offset.0,
                    )
                })
                .collect();
            (pid.0, (entry.epoch.0, batches))
        })
        .collect()
}

/// Where the last rebuild started from: the snapshot it loaded, else the log start.
fn rebuilt_from(log: &Log) -> Offset {
    log.producer_state_load().replayed_from
}

fn assert_matches_model(log: &Log, context: &str) {
    let batches = log_batches(log);
    let from = rebuilt_from(log);
    assert_eq!(state(log), model(&batches, from), "{context}: from {from}");
    // Whatever snapshot was used, each producer's epoch and last batch are those of a full
    // replay, so the next batch and a retry of the last one are judged the same way.
    let full = model(&batches, log.log_start_offset());
    let got = state(log);
    assert_eq!(
        got.keys().collect::<Vec<_>>(),
        full.keys().collect::<Vec<_>>(),
        "{context}"
    );
    for (pid, (epoch, retained)) in &full {
        let (got_epoch, got_retained) = &got[pid];
        assert_eq!(got_epoch, epoch, "{context}: epoch of {pid}");
        assert_eq!(
            got_retained.last(),
            retained.last(),
            "{context}: last of {pid}"
        );
    }
}

fn snapshot_files(dir: &Path) -> Vec<Offset> {
    producer_snapshot::list(&partition_dir(dir)).expect("list")
}

#[test]
fn snapshots_are_written_at_roll_and_on_clean_shutdown_and_reopen_replays_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let config = small_config(1024, 256);
    let (manager, log) = open(dir.path(), &config);
    let mut clients = Clients::new();
    for round in 0..40 {
        clients.append(&log, round % 3, false, 2);
    }
    let bases = lock_log(&log).segment_base_offsets();
    assert!(
        bases.len() > 3,
        "the test needs several segments: {bases:?}"
    );
    // One snapshot per roll, named by the new segment's base offset.
    assert_eq!(snapshot_files(dir.path()), bases[1..].to_vec());
    let log_end = lock_log(&log).log_end_offset();
    manager.shutdown().unwrap();
    drop((manager, log));
    assert_eq!(snapshot_files(dir.path()).last(), Some(&log_end));

    let (_manager, log) = open(dir.path(), &config);
    let log = lock_log(&log);
    let load = log.producer_state_load();
    assert_eq!(load.snapshot_offset, Some(log_end));
    assert_eq!(
        load.batches_replayed, 0,
        "nothing to replay after a clean shutdown"
    );
    assert_matches_model(&log, "after a clean shutdown");
    // Kafka's snapshot keeps one batch per producer: the window is that batch until more come.
    for (_, entry) in log.producer_state().entries() {
        assert_eq!(entry.batches.len(), 1);
    }
}

#[test]
fn a_crash_replays_only_the_segments_after_the_latest_snapshot() {
    let dir = tempfile::tempdir().unwrap();
    let config = small_config(1024, 256);
    let (manager, log) = open(dir.path(), &config);
    let mut clients = Clients::new();
    for round in 0..40 {
        clients.append(&log, round % 3, round == 20, 2);
    }
    let (bases, batches_total) = {
        let log = lock_log(&log);
        (log.segment_base_offsets(), log_batches(&log).len() as u64)
    };
    let active_base = *bases.last().unwrap();
    drop((manager, log)); // no shutdown: a crash

    let (_manager, log) = open(dir.path(), &config);
    let log = lock_log(&log);
    let load = log.producer_state_load();
    assert_eq!(load.snapshot_offset, Some(active_base));
    let in_active = log_batches(&log)
        .iter()
        .filter(|h| h.base_offset >= active_base)
        .count() as u64;
    assert_eq!(load.batches_replayed, in_active);
    assert!(in_active < batches_total);
    assert_matches_model(&log, "after a crash");
}

#[test]
fn an_unusable_snapshot_is_ignored_for_an_older_one() {
    for damage in ["flip", "torn", "empty"] {
        let dir = tempfile::tempdir().unwrap();
        let config = small_config(1024, 256);
        let (manager, log) = open(dir.path(), &config);
        let mut clients = Clients::new();
        for round in 0..40 {
            clients.append(&log, round % 3, false, 2);
        }
        let before = snapshot_files(dir.path());
        let latest = *before.last().unwrap();
        drop((manager, log));
        let path = partition_dir(dir.path()).join(producer_snapshot::file_name(latest));
        match damage {
            "flip" => common::flip_byte(&path, 20),
            "torn" => common::truncate_file(&path, common::file_len(&path) - 7),
            _ => common::truncate_file(&path, 0),
        }

        let (_manager, log) = open(dir.path(), &config);
        let log = lock_log(&log);
        let load = log.producer_state_load();
        let older = before[before.len() - 2];
        assert_eq!(load.snapshot_offset, Some(older), "{damage}");
        assert_matches_model(&log, damage);
        // The bad file is gone; a fresh snapshot at the log end replaced it.
        let after = snapshot_files(dir.path());
        assert!(after.contains(&older), "{damage}: {after:?}");
        let reread = producer_snapshot::read(&partition_dir(dir.path()), log.log_end_offset());
        assert!(
            reread.unwrap().is_ok(),
            "{damage}: new snapshot at the log end"
        );
    }
}

#[test]
fn truncation_below_a_snapshot_reloads_from_one_at_or_below_the_cut() {
    let dir = tempfile::tempdir().unwrap();
    let config = small_config(1024, 256);
    let (_manager, log) = open(dir.path(), &config);
    let mut clients = Clients::new();
    for round in 0..40 {
        clients.append(&log, round % 2, false, 2);
    }
    let mut log = lock_log(&log);
    let bases = log.segment_base_offsets();
    // Cut in the middle of the third segment: every later snapshot describes removed batches.
    let cut = bases[2].plus(3);
    let removed: Vec<BatchHeader> = log_batches(&log)
        .into_iter()
        .filter(|h| h.last_offset() >= cut)
        .collect();
    log.truncate_to(cut).unwrap();
    let log_end = log.log_end_offset();
    assert!(
        snapshot_files(dir.path()).iter().all(|s| *s <= log_end),
        "no snapshot above the cut"
    );
    assert_eq!(log.producer_state_load().snapshot_offset, Some(bases[2]));
    assert_matches_model(&log, "after truncation");
    // A truncated batch is no longer a duplicate: its retry goes in again (it is next in line).
    let first_removed = removed
        .iter()
        .find(|h| h.producer_id == removed[0].producer_id)
        .unwrap();
    let retry = ProducerBatch::from_header(first_removed).unwrap();
    assert_eq!(log.producer_state().check(&retry), Ok(Verdict::Append));
    // Reopening after a crash agrees with the state the truncation left.
    let expected = state(&log);
    drop(log);
    drop(_manager);
    let (_manager, log) = open(dir.path(), &config);
    let log = lock_log(&log);
    assert_eq!(
        state(&log).keys().collect::<Vec<_>>(),
        expected.keys().collect::<Vec<_>>()
    );
    assert_matches_model(&log, "reopened after truncation");
}

#[test]
fn full_truncation_forgets_every_producer_and_snapshot() {
    let dir = tempfile::tempdir().unwrap();
    let config = small_config(1024, 256);
    let (_manager, log) = open(dir.path(), &config);
    let mut clients = Clients::new();
    for round in 0..30 {
        clients.append(&log, round % 2, false, 2);
    }
    let mut log = lock_log(&log);
    log.truncate_fully_and_start_at(Offset(500)).unwrap();
    assert!(log.producer_state().is_empty());
    assert!(snapshot_files(dir.path()).iter().all(|s| *s >= Offset(500)));
    let retry = ProducerBatch {
        producer_id: ProducerId(0),
        producer_epoch: ProducerEpoch(0),
        first_sequence: Sequence(0),
        last_sequence: Sequence(1),
        max_timestamp_ms: 0,
        is_transactional: false,
    };
    assert_eq!(log.producer_state().check(&retry), Ok(Verdict::Append));
}

#[derive(Debug, Clone)]
enum Op {
    Append { pid: i64, bump: bool, records: u32 },
    CleanRestart,
    Crash,
    Truncate { per_mille: u32 },
    DamageLatestSnapshotAndCrash,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        12 => (0i64..3, prop::bool::weighted(0.1), 1u32..4)
            .prop_map(|(pid, bump, records)| Op::Append { pid, bump, records }),
        1 => Just(Op::CleanRestart),
        1 => Just(Op::Crash),
        1 => (0u32..1000).prop_map(|per_mille| Op::Truncate { per_mille }),
        1 => Just(Op::DamageLatestSnapshotAndCrash),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    /// Whatever mix of appends, restarts (clean or not), truncations and damaged snapshots,
    /// the producer state always equals what the log's batches give under Kafka's rules from
    /// the snapshot the log says it loaded, and each producer's epoch and last batch always
    /// equal a full replay's.
    #[test]
    fn snapshot_plus_tail_replay_agrees_with_the_log(ops in proptest::collection::vec(op(), 1..60)) {
        let dir = tempfile::tempdir().unwrap();
        let config = small_config(700, 256);
        let (mut manager, mut log) = open(dir.path(), &config);
        let mut clients = Clients::new();
        for (step, op) in ops.iter().enumerate() {
            match op {
                Op::Append { pid, bump, records } => clients.append(&log, *pid, *bump, *records),
                Op::CleanRestart => {
                    manager.shutdown().unwrap();
                    drop((manager, log));
                    (manager, log) = open(dir.path(), &config);
                    let log = lock_log(&log);
                    prop_assert_eq!(log.producer_state_load().batches_replayed, 0);
                }
                Op::Crash => {
                    drop((manager, log));
                    (manager, log) = open(dir.path(), &config);
                }
                Op::Truncate { per_mille } => {
                    let mut log = lock_log(&log);
                    let end = log.log_end_offset().0;
                    log.truncate_to(Offset(end * i64::from(*per_mille) / 1000)).unwrap();
                    // The client's sequences are no longer what the log holds: start over.
                    clients = Clients::new();
                    for (pid, (epoch, _)) in model(&log_batches(&log), log.log_start_offset()) {
                        clients.next.insert(pid, (epoch + 1, 0));
                    }
                }
                Op::DamageLatestSnapshotAndCrash => {
                    drop((manager, log));
                    if let Some(latest) = snapshot_files(dir.path()).last() {
                        let path = partition_dir(dir.path()).join(producer_snapshot::file_name(*latest));
                        common::truncate_file(&path, common::file_len(&path) / 2);
                    }
                    (manager, log) = open(dir.path(), &config);
                }
            }
            assert_matches_model(&lock_log(&log), &format!("step {step} {op:?}"));
        }
    }
}
