//! Transactions in the log (kafka-semantics.md §3): transactional batches open a transaction
//! in the producer state, markers close it, the last stable offset stops at the first open
//! transaction, aborted transactions land in `.txnindex` files (34-byte entries) and are read
//! back for a fetch range; a reopen (clean or crash) and a truncation keep all of it in step
//! with the log's own batches.

mod common;

use std::path::Path;

use logjam_storage::{
    AbortedTxn, BatchBuilder, ControlType, EndTxnMarker, LeaderEpoch, LogConfig, Offset,
    ProducerId, SharedLog, lock_log, segment_file_stem,
};

use common::{open, small_config, tp};

const NOW: i64 = 1_700_000_000_000;

fn txn_batch(pid: i64, sequence: i32, records: u32) -> Vec<u8> {
    let mut builder = BatchBuilder::new(NOW);
    builder.producer(pid, 0, sequence).transactional(true);
    for index in 0..records {
        builder.record(
            None,
            Some(format!("{pid}:{sequence}:{index}:padding-padding").as_bytes()),
        );
    }
    builder.build()
}

fn append(log: &SharedLog, bytes: &[u8]) -> Offset {
    lock_log(log)
        .append_as_leader(bytes, LeaderEpoch(0), NOW)
        .expect("append")
        .first_offset
}

fn marker(log: &SharedLog, pid: i64, control_type: ControlType, coordinator_epoch: i32) -> Offset {
    lock_log(log)
        .append_marker_as_leader(
            pid,
            0,
            EndTxnMarker {
                control_type,
                coordinator_epoch,
            },
            LeaderEpoch(0),
            NOW,
        )
        .expect("marker")
        .first_offset
}

fn commit_all(log: &SharedLog) {
    let mut log = lock_log(log);
    let end = log.log_end_offset();
    log.set_high_watermark(end);
}

fn txn_index_lens(dir: &Path) -> Vec<(Offset, u64)> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir(dir.join(tp().dir_name())).unwrap() {
        let name = entry.unwrap().file_name().into_string().unwrap();
        if let Some(stem) = name.strip_suffix(".txnindex") {
            let len = std::fs::metadata(dir.join(tp().dir_name()).join(&name))
                .unwrap()
                .len();
            found.push((Offset(stem.parse().unwrap()), len));
        }
    }
    found.sort();
    found
}

#[test]
fn the_lso_waits_for_the_first_open_transaction_and_the_high_watermark() {
    let dir = tempfile::tempdir().unwrap();
    let (_manager, log) = open(dir.path(), &LogConfig::default());
    let a_first = append(&log, &txn_batch(1, 0, 2)); // 0..=1
    let b_first = append(&log, &txn_batch(2, 0, 2)); // 2..=3
    commit_all(&log);
    assert_eq!(lock_log(&log).last_stable_offset(), a_first);
    let a_abort = marker(&log, 1, ControlType::Abort, 0); // 4
    // The marker is above the high watermark: A's transaction is not stable yet.
    assert_eq!(lock_log(&log).last_stable_offset(), a_first);
    commit_all(&log);
    assert_eq!(lock_log(&log).last_stable_offset(), b_first);
    let b_commit = marker(&log, 2, ControlType::Commit, 0); // 5
    assert_eq!(
        lock_log(&log).last_stable_offset(),
        b_first,
        "HW below B's marker"
    );
    commit_all(&log);
    let log = lock_log(&log);
    assert_eq!(log.last_stable_offset(), b_commit.next());
    assert_eq!(log.first_unstable_offset(), None);
    // Only the abort is indexed; its LSO at completion is B's open transaction.
    let aborted = AbortedTxn {
        producer_id: ProducerId(1),
        first_offset: a_first,
        last_offset: a_abort,
        last_stable_offset: b_first,
    };
    assert_eq!(
        log.aborted_transactions(Offset(0), log.log_end_offset()),
        vec![aborted]
    );
    assert_eq!(
        log.aborted_transactions(a_abort.next(), log.log_end_offset()),
        vec![]
    );
    assert_eq!(
        log.aborted_transactions(Offset(0), a_first),
        vec![],
        "range ends before it"
    );
    assert_eq!(txn_index_lens(dir.path()), vec![(Offset(0), 34)]);
}

#[test]
fn clients_may_not_write_control_batches_and_stale_markers_are_fenced() {
    let dir = tempfile::tempdir().unwrap();
    let (_manager, log) = open(dir.path(), &LogConfig::default());
    append(&log, &txn_batch(1, 0, 1));
    marker(&log, 1, ControlType::Commit, 5);
    let end = lock_log(&log).log_end_offset();
    let forged = logjam_storage::control::marker_batch(
        1,
        0,
        EndTxnMarker {
            control_type: ControlType::Abort,
            coordinator_epoch: 9,
        },
        NOW,
    );
    let refused = lock_log(&log)
        .append_as_leader(&forged, LeaderEpoch(0), NOW)
        .unwrap_err();
    assert_eq!(refused.kafka_error_code(), 87, "{refused}");
    let stale = lock_log(&log)
        .append_marker_as_leader(
            1,
            0,
            EndTxnMarker {
                control_type: ControlType::Abort,
                coordinator_epoch: 4,
            },
            LeaderEpoch(0),
            NOW,
        )
        .unwrap_err();
    assert_eq!(stale.kafka_error_code(), 52, "{stale}");
    let zombie = lock_log(&log)
        .append_marker_as_leader(
            1,
            -1,
            EndTxnMarker {
                control_type: ControlType::Abort,
                coordinator_epoch: 5,
            },
            LeaderEpoch(0),
            NOW,
        )
        .unwrap_err();
    assert_eq!(zombie.kafka_error_code(), 47, "{zombie}");
    assert_eq!(lock_log(&log).log_end_offset(), end, "nothing written");
}

/// Many aborted and committed transactions over small segments; returns the aborted ones.
fn fill(log: &SharedLog) -> Vec<AbortedTxn> {
    let mut aborted = Vec::new();
    for round in 0..30i32 {
        let pid = i64::from(round % 3) + 10;
        let first = append(log, &txn_batch(pid, round / 3, 1));
        let kind = if round % 2 == 0 {
            ControlType::Abort
        } else {
            ControlType::Commit
        };
        let last = marker(log, pid, kind, 0);
        if kind == ControlType::Abort {
            aborted.push(AbortedTxn {
                producer_id: ProducerId(pid),
                first_offset: first,
                last_offset: last,
                last_stable_offset: last.next(),
            });
        }
    }
    commit_all(log);
    aborted
}

/// Issue #13: the replay after a crash writes the `.txnindex` entries again and then a
/// durable producer snapshot above them. A second crash that drops every write not fsynced
/// (cut each `.txnindex` to what the index knows durable, as lazyfs would) must not leave a
/// snapshot no replay reaches below while the entries are gone.
#[test]
fn entries_the_replay_rewrites_are_durable_before_the_snapshot_above_them() {
    let dir = tempfile::tempdir().unwrap();
    let config = small_config(1024, 256);
    let (manager, log) = open(dir.path(), &config);
    let aborted = fill(&log);
    let end = lock_log(&log).log_end_offset();
    drop((manager, log)); // crash 1
    let pdir = dir.path().join(tp().dir_name());
    for (base, _) in txn_index_lens(dir.path()) {
        std::fs::remove_file(pdir.join(format!("{}.txnindex", segment_file_stem(base)))).unwrap();
    }
    for entry in std::fs::read_dir(&pdir).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|ext| ext == "snapshot") {
            std::fs::remove_file(path).unwrap();
        }
    }
    let (manager, log) = open(dir.path(), &config);
    let synced = lock_log(&log).txn_index_synced_lens();
    assert_eq!(lock_log(&log).aborted_transactions(Offset(0), end), aborted);
    drop((manager, log)); // crash 2: the unsynced index writes are lost
    for (base, len) in synced {
        let path = pdir.join(format!("{}.txnindex", segment_file_stem(base)));
        if path.exists() {
            std::fs::OpenOptions::new()
                .write(true)
                .open(&path)
                .unwrap()
                .set_len(len)
                .unwrap();
        }
    }
    let (_manager, log) = open(dir.path(), &config);
    assert_eq!(
        lock_log(&log).aborted_transactions(Offset(0), end),
        aborted,
        "every aborted transaction survives the second crash"
    );
}

#[test]
fn txn_indexes_survive_a_clean_reopen_and_are_rebuilt_after_a_crash() {
    let dir = tempfile::tempdir().unwrap();
    let config = small_config(1024, 256);
    let (manager, log) = open(dir.path(), &config);
    let aborted = fill(&log);
    // An open transaction at the end, kept through the reopens by the snapshot.
    let open_first = append(&log, &txn_batch(99, 0, 1));
    commit_all(&log);
    let bases = lock_log(&log).segment_base_offsets();
    assert!(bases.len() > 3, "several segments: {bases:?}");
    let end = lock_log(&log).log_end_offset();
    assert_eq!(lock_log(&log).aborted_transactions(Offset(0), end), aborted);
    let on_disk: u64 = txn_index_lens(dir.path()).iter().map(|(_, len)| len).sum();
    assert_eq!(on_disk, 34 * aborted.len() as u64);
    manager.shutdown().unwrap();
    drop((manager, log));

    let (manager, log) = open(dir.path(), &config);
    {
        let log = lock_log(&log);
        assert_eq!(
            log.aborted_transactions(Offset(0), end),
            aborted,
            "clean reopen"
        );
        assert_eq!(log.first_unstable_offset(), Some(open_first));
        assert_eq!(log.last_stable_offset(), open_first);
    }
    drop((manager, log)); // a crash: no clean-shutdown marker

    // Lose every .txnindex and every snapshot but the oldest segment's: the replay rebuilds.
    let pdir = dir.path().join(tp().dir_name());
    for (base, _) in txn_index_lens(dir.path()) {
        std::fs::remove_file(pdir.join(format!("{}.txnindex", segment_file_stem(base)))).unwrap();
    }
    for entry in std::fs::read_dir(&pdir).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|ext| ext == "snapshot") {
            std::fs::remove_file(path).unwrap();
        }
    }
    let (_manager, log) = open(dir.path(), &config);
    let log = lock_log(&log);
    assert_eq!(
        log.aborted_transactions(Offset(0), end),
        aborted,
        "rebuilt by the replay"
    );
    assert_eq!(log.first_unstable_offset(), Some(open_first));
    let on_disk: u64 = txn_index_lens(dir.path()).iter().map(|(_, len)| len).sum();
    assert_eq!(on_disk, 34 * aborted.len() as u64);
}

#[test]
fn truncation_drops_the_entries_above_the_cut_and_reopens_the_transaction() {
    let dir = tempfile::tempdir().unwrap();
    let config = small_config(1024, 256);
    let (_manager, log) = open(dir.path(), &config);
    let aborted = fill(&log);
    let cut_txn = aborted[aborted.len() / 2];
    let mut log = lock_log(&log);
    // Cut at the marker: the transaction is open again, later entries are gone.
    log.truncate_to(cut_txn.last_offset).unwrap();
    let kept: Vec<_> = aborted
        .iter()
        .copied()
        .filter(|txn| txn.last_offset < cut_txn.last_offset)
        .collect();
    assert_eq!(
        log.aborted_transactions(Offset(0), log.log_end_offset()),
        kept
    );
    assert_eq!(log.first_unstable_offset(), Some(cut_txn.first_offset));
    let on_disk: u64 = txn_index_lens(dir.path()).iter().map(|(_, len)| len).sum();
    assert_eq!(on_disk, 34 * kept.len() as u64);
}

/// Issue #13 (KIP-890's verification guard): a guard taken before the coordinator is asked
/// holds until a marker for the producer (or the append that opens its transaction): an ABORT
/// written between the coordinator's answer and the append must be seen by the append.
#[test]
fn a_marker_between_verification_and_append_voids_the_guard() {
    let dir = tempfile::tempdir().unwrap();
    let (_manager, log) = open(dir.path(), &small_config(1024, 256));
    let pid = ProducerId(5);
    // A marker in between: the guard no longer holds.
    let guard = lock_log(&log).start_transaction_verification(pid);
    assert!(lock_log(&log).transaction_verification_holds(pid, guard));
    marker(&log, 5, ControlType::Abort, 0);
    assert!(!lock_log(&log).transaction_verification_holds(pid, guard));
    // Nothing in between: it holds until the append that opens the transaction.
    let guard = lock_log(&log).start_transaction_verification(pid);
    assert!(lock_log(&log).transaction_verification_holds(pid, guard));
    append(&log, &txn_batch(5, 0, 1));
    assert!(!lock_log(&log).transaction_verification_holds(pid, guard));
}
