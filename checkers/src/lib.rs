//! Pure checkers over logjam histories: the queue/log anomaly checker, the durability report,
//! and the per-workload policy that turns findings into a verdict. No tokio, no cluster crates,
//! no randomness: any `history.jsonl` can be re-checked offline (`logjam check`).
//!
//! # Layout
//!
//! - [`check_file`], [`check_reader`], [`check_ops`]: entry points (this file).
//! - [`queue`]: the queue checker; one module per anomaly family (table below) over a compact
//!   index of the history (`queue::index`, private).
//! - [`durability`]: acknowledged writes lost per partition, with ack times and the faults
//!   between acknowledgement and the final read.
//! - [`policy`]: which anomaly kinds fail a run, per workload.
//! - [`anomaly`]: the anomaly vocabulary and witnesses.
//! - [`report`]: [`Report`], [`Verdict`], the console summary.
//! - [`error`]: [`HarnessError`]: the history itself is unreadable or malformed.
//!
//! ```text
//! history.jsonl ─▶ HistoryReader ─▶ Pairer ─▶ QueueChecker::push ─▶ QueueIndex (version orders)
//!                   (torn tail ⇒ warning)      (malformed ⇒ HarnessError)       │
//!        ┌──────────────┬──────────────┬──────────────┬─────────────┬──────────┘
//!     offsets        aborted          loss         ordering       cycles      durability
//!        └──────────────┴──────── Anomalies ──────┴─────────────┴─────▶ Policy ─▶ Report
//! ```
//!
//! # Anomalies
//!
//! "Index" is a position in a key's version order: offsets observed, sorted, numbered densely
//! (offsets may be sparse). "Committed": `ok`, or `info` with one of its sent values read by an
//! ok op. Queue policy: the default [`Policy::queue`].
//!
//! | kind | definition | module | queue policy |
//! |---|---|---|---|
//! | `inconsistent-offsets` | one offset of a key holds ≥ 2 distinct values | [`queue::offsets`] | bad |
//! | `duplicate` | one value of a key at ≥ 2 offsets | [`queue::offsets`] | bad |
//! | `aborted-read` (G1a) | an ok op read a value only a failed op sent | [`queue::aborted`] | bad |
//! | `precommitted-read` | an op read a value it sent itself | [`queue::aborted`] | bad |
//! | `lost-write` | a committed value never read although ok reads returned a later index | [`queue::loss`] | bad |
//! | `unseen-lost` | a committed value never read; the final reads reached it: they read past its known offset, or the `log-end` op says they read the whole log, or (offset unknown) they read a linearizable log from offset 0 to a value sent after it was acknowledged | [`queue::loss`] | bad |
//! | `unseen` | a committed value never read and nothing read far enough: late or lost, unknown | [`queue::loss`] | bad |
//! | `nonmonotonic-send` | a process's send landed at or before its previous acknowledged send | [`queue::ordering`] | bad |
//! | `nonmonotonic-poll` | a process's poll started at or before where its previous ok poll ended (positions survive assignments that keep the key) | [`queue::ordering`] | bad; allowed with subscribe |
//! | `poll-skip` | a process's poll started past the record after its previous ok poll's last | [`queue::ordering`] | bad; allowed with subscribe |
//! | `int-poll-skip` | inside one op, consecutive reads of a key skip records | [`queue::ordering`] | bad |
//! | `int-nonmonotonic-poll` | inside one op, consecutive reads of a key go back or repeat | [`queue::ordering`] | bad |
//! | `int-send-skip` | inside one op, consecutive sends to a key are not adjacent | [`queue::ordering`] | allowed |
//! | `int-nonmonotonic-send` | inside one op, consecutive sends to a key land out of order | [`queue::ordering`] | bad |
//! | `G0` | cycle of ww edges | [`queue::cycles`] | allowed |
//! | `G1c` | cycle of ww/wr edges, ≥ 1 wr | [`queue::cycles`] | allowed with ww edges, else bad |
//! | `G-single` | cycle with exactly one rw edge | [`queue::cycles`] | allowed unless `snapshot_reads` |
//! | `G2` | cycle with ≥ 2 rw edges | [`queue::cycles`] | allowed unless `snapshot_reads` |
//! | `partial-read` | an ok read returned some of one op's records and stopped right before another (intermediate/fractured read of one write; never counted as G-single) | [`queue::cycles`] | allowed unless `read_committed` |
//! | `nonlinearizable-log` | no real-time order of a partition's sends and reads explains them: a send acknowledged before another was invoked sits after it, or a record was read before its send could take effect | [`queue::realtime`] | bad |
//!
//! Verdict: `invalid` when any kind found is bad under the policy; otherwise `unknown` when
//! no ok read returned a record (nothing was checked); otherwise `valid`.
//!
//! Not yet covered: process/realtime edges in the dependency graph (`G0-realtime` etc.; the
//! per-partition real-time order is checked by `nonlinearizable-log`), exactly-once and
//! read-committed workloads.

//! # Example
//!
//! ```
//! use logjam_checkers::{AnomalyKind, Verdict, check_ops};
//! use logjam_history::HistoryBuilder;
//!
//! let mut b = HistoryBuilder::new("queue");
//! b.send_ok(0, 1, 10, 0);
//! b.send_ok(0, 1, 11, 1);
//! b.poll_ok(1, &[(1, &[(1, 11)])]); // offset 0 was never returned
//! let (header, ops) = b.build();
//! let report = check_ops(&header, ops)?;
//! assert_eq!(report.verdict, Verdict::Invalid);
//! assert_eq!(report.verdict.exit_code(), 1);
//! assert!(report.anomalies.contains_key(&AnomalyKind::LostWrite));
//! println!("{}", report.summary());
//! # Ok::<(), logjam_checkers::HarnessError>(())
//! ```

pub mod anomaly;
pub mod durability;
pub mod error;
mod fxhash;
mod intmap;
pub mod policy;
pub mod queue;
pub mod report;

use std::fs::File;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};

use logjam_history::{Header, HistoryReader, Op, Pairer, ReadError};

pub use anomaly::{Anomaly, AnomalyGroup, AnomalyKind, CycleStep, OpRef, Relation};
pub use durability::DurabilityReport;
pub use error::HarnessError;
pub use policy::{Policy, QueueOptions};
pub use queue::QueueChecker;
pub use report::{Report, Stats, Verdict};

/// The history file inside a run directory.
pub const HISTORY_FILE: &str = "history.jsonl";
/// The report file written next to the history.
pub const REPORT_FILE: &str = "report.json";

/// The history file for `path`: `path/history.jsonl` for a run directory, else `path`.
pub fn history_path(path: &Path) -> PathBuf {
    if path.is_dir() {
        path.join(HISTORY_FILE)
    } else {
        path.to_owned()
    }
}

/// Where `report.json` goes for `path`: inside the run directory, or next to the history file.
pub fn report_path(path: &Path) -> PathBuf {
    if path.is_dir() {
        path.join(REPORT_FILE)
    } else {
        path.parent()
            .unwrap_or_else(|| Path::new("."))
            .join(REPORT_FILE)
    }
}

/// Checks a history file, or the `history.jsonl` of a run directory.
///
/// # Errors
/// [`HarnessError`] when the file is missing, unreadable, malformed, or its workload has no
/// checker. A torn last line is not an error: it becomes a warning in the report.
pub fn check_file(path: impl AsRef<Path>) -> Result<Report, HarnessError> {
    let path = path.as_ref();
    let history = history_path(path);
    if path.is_dir() && !history.is_file() {
        return Err(HarnessError::NoHistory {
            path: path.to_owned(),
        });
    }
    let file = File::open(&history).map_err(|source| HarnessError::Read {
        path: history.clone(),
        source: ReadError::Open {
            path: history.clone(),
            source,
        },
    })?;
    check_reader_at(BufReader::with_capacity(1 << 16, file), &history)
}

/// Checks a history from any buffered reader.
///
/// # Errors
/// As [`check_file`].
pub fn check_reader(reader: impl BufRead) -> Result<Report, HarnessError> {
    check_reader_at(reader, Path::new("<reader>"))
}

fn check_reader_at(reader: impl BufRead, path: &Path) -> Result<Report, HarnessError> {
    let read_error = |source| HarnessError::Read {
        path: path.to_owned(),
        source,
    };
    let reader = HistoryReader::new(reader).map_err(read_error)?;
    let mut checker = checker_for(reader.header())?;
    let mut pairer = Pairer::new();
    for item in reader {
        match item {
            Ok(op) => {
                checker.count_line();
                if let Some(paired) = pairer.push(op).map_err(|source| HarnessError::Pairing {
                    path: path.to_owned(),
                    source,
                })? {
                    checker.push(paired);
                }
            }
            Err(e) if e.is_torn_tail() => checker.warn(e.to_string()),
            Err(e) => return Err(read_error(e)),
        }
    }
    finish(checker, pairer)
}

/// Checks an in-memory history.
///
/// # Errors
/// [`HarnessError::Pairing`] for malformed histories, [`HarnessError::UnsupportedWorkload`].
pub fn check_ops(
    header: &Header,
    ops: impl IntoIterator<Item = Op>,
) -> Result<Report, HarnessError> {
    check_ops_with(header, ops, None)
}

/// Checks an in-memory history under an explicit policy.
///
/// # Errors
/// As [`check_ops`].
pub fn check_ops_with(
    header: &Header,
    ops: impl IntoIterator<Item = Op>,
    policy: Option<Policy>,
) -> Result<Report, HarnessError> {
    let mut checker = checker_for(header)?;
    if let Some(policy) = policy {
        checker = checker.with_policy(policy);
    }
    let mut pairer = Pairer::new();
    for op in ops {
        checker.count_line();
        if let Some(paired) = pairer.push(op).map_err(|source| HarnessError::Pairing {
            path: PathBuf::from("<memory>"),
            source,
        })? {
            checker.push(paired);
        }
    }
    finish(checker, pairer)
}

fn checker_for(header: &Header) -> Result<QueueChecker, HarnessError> {
    match header.workload.as_str() {
        "queue" => Ok(QueueChecker::new(header.clone())),
        other => Err(HarnessError::UnsupportedWorkload {
            workload: other.to_owned(),
        }),
    }
}

fn finish(mut checker: QueueChecker, pairer: Pairer) -> Result<Report, HarnessError> {
    let (open, nemesis) = pairer.finish();
    for op in open {
        checker.push_op(op);
    }
    for event in nemesis {
        checker.push_nemesis(event);
    }
    Ok(checker.finish())
}
