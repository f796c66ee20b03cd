//! Pure checkers over logjam histories: the queue/log anomaly checker, the durability report,
//! and the per-workload policy that turns findings into a verdict. No tokio, no cluster crates,
//! no randomness: any `history.jsonl` can be re-checked offline (`logjam check`).
//!
//! # Layout
//!
//! - [`check_file`], [`check_reader`], [`check_ops`]: entry points (this file): read, pair,
//!   feed the workload's [`Checker`], apply its [`Policy`].
//! - [`checker`]: the [`Checker`] trait (history in, [`Findings`] with witnesses out).
//! - [`findings`]: what checkers find, a leaf that imports no checker: [`Findings`], the
//!   history's [`Stats`] and each workload's own statistics as one enum ([`WorkloadStats`]).
//! - [`registry`]: workload name → its op schema, checker and policy ([`Registry`]).
//! - [`eos`]: the exactly-once checker of the eos (consume-transform-produce) workload.
//! - [`producer`]: the producer workload's checker (`reordered-send`, `duplicate`, send latency).
//! - [`queue`]: the queue checker; one module per anomaly family (table below) over a compact
//!   index of the history (`queue::index`, private).
//! - [`read_committed`]: what a read_committed consumer promises, from the fetch ranges its
//!   polls record (LSO, leader epoch, positions); run for `txn` beside the queue checker.
//! - [`graph`]: the dependency graph any checker can use (analyzer → graph → explainer, as
//!   Elle is built): cycle search and classification over edges an analyzer inferred, and
//!   `graph::explain`, which turns a cycle into a witness in words.
//! - [`durability`]: acknowledged writes lost per partition, with ack times and the faults
//!   between acknowledgement and the final read.
//! - [`policy`]: which anomaly kinds fail a run, per workload.
//! - [`anomaly`]: the anomaly vocabulary and witnesses.
//! - [`report`]: [`Report`], [`Verdict`], the console summary.
//! - [`error`]: [`HarnessError`]: the history itself is unreadable or malformed.
//!
//! ```text
//! history.jsonl ─▶ HistoryReader ─▶ Pairer ─▶ Checker::push (Registry: workload → checker) ─▶ QueueIndex
//!                   (torn tail ⇒ warning)      (malformed ⇒ HarnessError)       │
//!        ┌──────────────┬──────────────┬──────────────┬─────────────┬──────────┘
//!     offsets        aborted          loss         ordering   cycles ─▶ graph   durability
//!        └──────────────┴─────── Findings ────────┴─────────────┴─▶ Registry's Policy ─▶ Report
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
//! | `aborted-read` (G1a) | an op (whatever its own outcome: a failed transaction's polls still returned what they returned) read a value only a failed op sent | [`queue::aborted`] | bad |
//! | `precommitted-read` | an op read a value it sent itself (a failed op doing so is reported only here) | [`queue::aborted`] | bad |
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
//! | `partial-read` | an ok read returned some of one op's records and stopped right before another (intermediate/fractured read of one write; never counted as G-single) | [`queue::cycles`] | allowed unless polls are snapshot reads (not even read_committed polls are atomic) |
//! | `nonlinearizable-log` | no real-time order of a partition's sends and reads explains them: a send acknowledged before another was invoked sits after it, or a record was read before its send could take effect | [`queue::realtime`] | bad |
//! | `read-above-lso` | a read_committed poll returned a record at or above the last stable offset of the same process's next fetch answer for the partition in the same leader epoch (the answer's own LSO is captured before the leader reads, so it alone proves nothing) | [`read_committed::lso`] | bad |
//! | `lso-regression` | one process's read_committed answers for a partition in one leader epoch: a later one with a lower LSO (across epochs only counted: `lso_drops_across_epochs`) | [`read_committed::lso`] | bad |
//! | `fractured-read` | a read_committed poll returned some of a (not failed) transaction's records on a partition and skipped another inside the range it read there (visible on one partition, not yet stable on another: only counted, `cross_partition_partial`) | [`read_committed::fractured`] | bad |
//! | `intermediate-read` (G1b) | a read_committed poll returned a record of a transaction whose op was invoked only after the poll completed (its commit cannot have happened) | [`read_committed::intermediate`] | bad |
//! | `hanging-transaction` | a read_committed answer's LSO held at an acknowledged record (so the high watermark was past it) after the writing op's completion + `transaction.timeout.ms` + the coordinator's timeout sweep + a marker grace, counted from the last fault when later; shorter holds are only listed (`lso_stalls`) | [`read_committed::stall`] | bad |
//! | `eos-duplicate` | eos workload: an input record reflected by ≥ 2 records of the committed (read_committed final read) output | [`eos`] | eos policy: bad |
//! | `eos-lost` | eos: an input below the group's final committed offset never reflected in the committed output, whose final read reached every partition's high watermark | [`eos`] | bad |
//! | `eos-unseen` | eos: as `eos-lost`, but the output read did not provably reach the log end | [`eos`] | bad |
//! | `offsets-not-atomic` | eos: an input reflected in committed output at or above the group's final committed offset (output committed without its offsets) | [`eos`] | bad |
//! | `aborted-output-visible` | eos: committed output written by a transaction that aborted or whose producer was fenced (its op ended `fail`) | [`eos`] | bad |
//! | `double-assign` | group workload: two members (different member ids) owned the same key in the same generation, by their own recorded `rebalance` ops | [`group`] | bad |
//! | `reordered-send` | producer workload: within one producer and key, a later-submitted send acknowledged at a lower offset (a retried batch landed after a later one); `duplicate` there: one sent value read at ≥ 2 offsets | [`producer`] | producer policy: bad |
//!
//! Verdict: `invalid` when any kind found is bad under the policy; otherwise `unknown` when
//! no ok read returned a record (nothing was checked); otherwise `valid`.
//!
//! The read-committed kinds need histories whose polls record their fetch ranges (the txn
//! workload's read_committed consumers do); older histories give them nothing to check
//! (`read_committed.polls_checked` 0).
//!
//! Not yet covered: process/realtime edges in the dependency graph (`G0-realtime` etc.; the
//! per-partition real-time order is checked by `nonlinearizable-log`).

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
pub mod attribution;
pub mod availability;
pub mod checker;
pub mod durability;
pub mod eos;
pub mod error;
pub mod findings;
mod fxhash;
pub mod graph;
pub mod group;
mod intmap;
pub mod policy;
pub mod producer;
pub mod queue;
pub mod read_committed;
pub mod registry;
pub mod report;

use std::collections::BTreeMap;
use std::fs::File;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};

use logjam_history::{Function, Header, HistoryReader, Op, Pairer, Process, ReadError};

pub use anomaly::{Anomaly, AnomalyGroup, AnomalyKind, CycleStep, OpRef, Relation};
pub use checker::Checker;
pub use durability::DurabilityReport;
pub use error::HarnessError;
pub use findings::{Findings, WorkloadStats};
pub use policy::{Policy, QueueOptions};
pub use producer::{ProducerChecker, ProducerStats};
pub use queue::QueueChecker;
pub use read_committed::{ReadCommittedChecker, ReadCommittedStats, TxnChecker};
pub use registry::{Registry, WorkloadSpec};
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
    let mut reader = HistoryReader::new(reader).map_err(read_error)?;
    let header = reader.header().clone();
    let mut run = Run::start(&Registry::builtin(), &header, path)?;
    while let Some(item) = reader.next() {
        match item {
            Ok(op) => run.push(op, Place::Line(reader.lines_read()))?,
            Err(e) if e.is_torn_tail() => run.warnings.push(e.to_string()),
            Err(e) => return Err(read_error(e)),
        }
    }
    Ok(run.finish(&header, None))
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

/// Checks an in-memory history under an explicit policy (`None`: the workload's own).
///
/// # Errors
/// As [`check_ops`].
pub fn check_ops_with(
    header: &Header,
    ops: impl IntoIterator<Item = Op>,
    policy: Option<Policy>,
) -> Result<Report, HarnessError> {
    check_ops_in(&Registry::builtin(), header, ops, policy)
}

/// Checks an in-memory history with the workloads of `registry`.
///
/// # Errors
/// As [`check_ops`].
pub fn check_ops_in(
    registry: &Registry,
    header: &Header,
    ops: impl IntoIterator<Item = Op>,
    policy: Option<Policy>,
) -> Result<Report, HarnessError> {
    let mut run = Run::start(registry, header, Path::new("<memory>"))?;
    for op in ops {
        let place = Place::Index(op.index.0);
        run.push(op, place)?;
    }
    Ok(run.finish(header, policy))
}

/// Where an op came from, for warnings.
#[derive(Clone, Copy)]
enum Place {
    /// A line of a history file.
    Line(u64),
    /// An in-memory op, by its index.
    Index(u64),
}

impl std::fmt::Display for Place {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Place::Line(line) => write!(f, "line {line}"),
            Place::Index(index) => write!(f, "op index {index}"),
        }
    }
}

/// One check in progress: pairing, the workload's schema and its checker.
struct Run {
    spec: WorkloadSpec,
    checker: Box<dyn Checker>,
    pairer: Pairer,
    path: PathBuf,
    op_lines: u64,
    /// Client functions outside the workload's schema: name → (first place seen, ops).
    unknown: BTreeMap<String, (String, u64)>,
    warnings: Vec<String>,
}

impl Run {
    fn start(registry: &Registry, header: &Header, path: &Path) -> Result<Run, HarnessError> {
        let spec =
            *registry
                .get(&header.workload)
                .ok_or_else(|| HarnessError::UnsupportedWorkload {
                    workload: header.workload.clone(),
                    known: registry.names(),
                })?;
        Ok(Run {
            checker: (spec.checker)(header),
            spec,
            pairer: Pairer::new(),
            path: path.to_owned(),
            op_lines: 0,
            unknown: BTreeMap::new(),
            warnings: Vec::new(),
        })
    }

    /// Feeds one op line; `place` names it in warnings.
    fn push(&mut self, op: Op, place: Place) -> Result<(), HarnessError> {
        self.op_lines += 1;
        if matches!(op.process, Process::Client(_)) && !self.spec.functions.contains(&op.f) {
            self.unknown
                .entry(op.f.to_string())
                .or_insert_with(|| (place.to_string(), 0))
                .1 += 1;
        }
        let paired = self
            .pairer
            .push(op)
            .map_err(|source| HarnessError::Pairing {
                path: self.path.clone(),
                source,
            })?;
        if let Some(paired) = paired {
            self.checker.push(paired);
        }
        Ok(())
    }

    fn finish(mut self, header: &Header, policy: Option<Policy>) -> Report {
        let (open, nemesis) = self.pairer.finish();
        for op in open {
            self.checker.push(logjam_history::Paired::Client(op));
        }
        for event in nemesis {
            self.checker.push(logjam_history::Paired::Nemesis(event));
        }
        let mut findings = self.checker.finish();
        findings.stats.op_lines = self.op_lines;
        let known: Vec<&str> = self.spec.functions.iter().map(Function::as_str).collect();
        for (f, (place, count)) in &self.unknown {
            self.warnings.push(format!(
                "{place}: client op with unknown f {f:?} ({count} op line(s) in all); the {} \
                 workload records only {}, so no checker read it",
                self.spec.name,
                known.join(", ")
            ));
        }
        findings.warnings.append(&mut self.warnings);
        let policy = policy.unwrap_or_else(|| (self.spec.policy)(header, &findings));
        Report::assemble(header, findings, policy)
    }
}
