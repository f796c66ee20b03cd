//! Runs every file of Porcupine's test corpus through the importers and the
//! checker and asserts the verdict in `expected.tsv`, with the partitioned
//! key-value model on every kv file and the unpartitioned one where
//! Porcupine runs it (c01 and c10).
//!
//! The corpus lives at `checkers/linearizable/corpus/porcupine` in the repository
//! (override the corpora root with `LOGJAM_CORPORA`).

use logjam_linearizable::models::cas::CasRegister;
use logjam_linearizable::models::kv::KvModel;
use logjam_linearizable::models::kv_map::KvMapModel;
use logjam_linearizable::porcupine::{self, ExpectedRow};
use logjam_linearizable::{Budget, CheckOptions, CheckResult, UnknownReason, Verdict, check};
use std::time::Duration;

/// Generous enough that nothing in the corpus comes near it, even in a
/// debug build; a budget hit shows up as a wrong (unknown) verdict.
fn options() -> CheckOptions {
    CheckOptions::with_budget(Budget::time(Duration::from_secs(120)))
}

fn expected_rows() -> Vec<ExpectedRow> {
    let dir = porcupine::corpus_dir();
    porcupine::read_expected(&dir.join("expected.tsv")).expect("expected.tsv parses")
}

fn assert_verdict(row: &ExpectedRow, result: &CheckResult, model: &str) {
    let expected = match row.linearizable {
        Some(true) => Verdict::Valid,
        Some(false) => Verdict::Invalid,
        None => Verdict::Unknown,
    };
    assert_eq!(
        result.verdict, expected,
        "{} with {model}: expected {expected}, got {} ({:?})",
        row.file, result.verdict, result.unknown_reason
    );
    if expected == Verdict::Invalid {
        let counterexample = result
            .counterexample()
            .expect("invalid results carry a counterexample");
        assert!(!counterexample.to_string().is_empty());
    }
}

#[test]
fn every_etcd_log_gets_its_expected_verdict() {
    let dir = porcupine::corpus_dir();
    let rows: Vec<ExpectedRow> = expected_rows()
        .into_iter()
        .filter(|row| row.file.starts_with("jepsen/"))
        .collect();
    assert_eq!(rows.len(), 103, "the corpus has 103 etcd logs");
    let model = CasRegister::new(None);
    for row in &rows {
        let history = porcupine::read_etcd_log(&dir.join(&row.file)).expect("etcd log parses");
        let result = check(&model, &history, &options()).expect("history is well formed");
        assert_verdict(row, &result, "CasRegister");
        if row.linearizable.is_none() {
            // etcd_095 is empty: nothing observed, nothing vouched for.
            assert!(history.is_empty(), "{} should be empty", row.file);
            assert_eq!(result.unknown_reason, Some(UnknownReason::EmptyHistory));
        }
    }
}

#[test]
fn every_kv_history_gets_its_expected_verdict_partitioned_by_key() {
    let dir = porcupine::corpus_dir();
    let rows: Vec<ExpectedRow> = expected_rows()
        .into_iter()
        .filter(|row| row.file.starts_with("kv/"))
        .collect();
    assert_eq!(rows.len(), 6);
    for row in &rows {
        let history = porcupine::read_kv_log(&dir.join(&row.file)).expect("kv history parses");
        assert_eq!(history.len() as u64, row.ops_invoked, "{}", row.file);
        let result = check(&KvModel, &history, &options()).expect("history is well formed");
        assert_verdict(row, &result, "KvModel");
        // Every key is decided, even after another key failed.
        assert!(
            result
                .partitions
                .iter()
                .all(|part| part.outcome.verdict() != Verdict::Unknown),
            "{}: a key was left undecided",
            row.file
        );
    }
}

#[test]
fn small_kv_histories_get_the_same_verdict_unpartitioned() {
    let dir = porcupine::corpus_dir();
    let rows: Vec<ExpectedRow> = expected_rows()
        .into_iter()
        .filter(|row| row.file.starts_with("kv/c01") || row.file.starts_with("kv/c10"))
        .collect();
    assert_eq!(rows.len(), 4);
    for row in &rows {
        let history = porcupine::read_kv_log(&dir.join(&row.file)).expect("kv history parses");
        let result = check(&KvMapModel, &history, &options()).expect("history is well formed");
        assert_eq!(result.partitions.len(), 1);
        assert_verdict(row, &result, "KvMapModel");
    }
}
