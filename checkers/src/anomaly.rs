//! The anomaly vocabulary every checker reports in: [`AnomalyKind`] (a closed set, named as the
//! literature names them), [`Anomaly`] (one witnessed case: ops, key, offsets, values and a
//! plain explanation) and [`Anomalies`], the per-kind collector with bounded witness lists.
//! Which kinds fail a run is not decided here but in `policy`.

use std::collections::BTreeMap;
use std::fmt;

use logjam_history::{CompletedOp, Key, Offset, OpIndex, Outcome, ProcessId, Value};
use serde::{Serialize, Serializer};

/// Every anomaly kind the queue checker can report. The crate doc has the table of
/// definitions; each family's module doc has the exact rules.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum AnomalyKind {
    /// One offset of a key holds two or more distinct values.
    InconsistentOffsets,
    /// One value of a key sits at two or more offsets.
    Duplicate,
    /// An ok read returned a value only a failed op sent (G1a).
    AbortedRead,
    /// An op read a value it sent itself, before it committed.
    PrecommittedRead,
    /// A committed write is missing from a stretch of the log that reads covered.
    LostWrite,
    /// A committed write never read, and the final reads read past where it must sit.
    UnseenLost,
    /// A committed write never read, and nothing read far enough to tell lost from late.
    Unseen,
    /// A process's send landed at or before its previous acknowledged send.
    NonmonotonicSend,
    /// A process's poll started at or before where its previous poll ended.
    NonmonotonicPoll,
    /// A process's poll started past the record after where its previous poll ended.
    PollSkip,
    /// Within one op, consecutive reads of a key skipped a record.
    IntPollSkip,
    /// Within one op, consecutive reads of a key went backwards or repeated.
    IntNonmonotonicPoll,
    /// Within one op, consecutive sends to a key were not adjacent in the log.
    IntSendSkip,
    /// Within one op, consecutive sends to a key landed out of order.
    IntNonmonotonicSend,
    /// A dependency cycle of ww edges only.
    G0,
    /// A dependency cycle of ww and wr edges with at least one wr.
    G1c,
    /// A dependency cycle with exactly one rw (anti-dependency) edge.
    GSingle,
    /// A dependency cycle with two or more rw edges.
    G2,
    /// An ok read returned some but not all records of one op's send: it stopped right before
    /// another record of an op it read from (intermediate/fractured read of one write).
    PartialRead,
    /// No real-time order of a partition's sends and reads explains what they observed.
    NonlinearizableLog,
    /// Within one producer and one key, a send submitted later was acknowledged at a lower
    /// offset than one submitted earlier (a retried batch landed after a later one).
    ReorderedSend,
    /// One process's read_committed polls of a partition saw its last stable offset move back
    /// within one leader epoch.
    LsoRegression,
    /// A read_committed poll returned a record at or above the last stable offset its own
    /// fetch answer gave.
    ReadAboveLso,
    /// A read_committed poll returned some records of a transaction on a partition and
    /// skipped another record of it inside the range it read of that partition.
    FracturedRead,
    /// A read_committed poll returned a record of a transaction that had not even begun when
    /// the poll completed (G1b: its commit cannot have happened yet).
    IntermediateRead,
    /// A read_committed answer's LSO stayed at the first record of a transaction long after
    /// every clock that ends a transaction had run out (a lost or skipped marker).
    HangingTransaction,
    /// eos: an input record reflected by two or more committed output records.
    EosDuplicate,
    /// eos: an input below the group's committed offset never reflected in the committed
    /// output, which the final read provably covered to the log end.
    EosLost,
    /// eos: as [`AnomalyKind::EosLost`], but the final read did not provably reach the end.
    EosUnseen,
    /// eos: committed output for an input at or above the group's final committed offset.
    OffsetsNotAtomic,
    /// eos: committed output written by an aborted transaction or a fenced producer.
    AbortedOutputVisible,
    /// Two members of one consumer group owned the same partition in the same generation,
    /// by their own recorded rebalances.
    DoubleAssign,
}

impl AnomalyKind {
    /// Every kind, in report order.
    pub const ALL: [AnomalyKind; 32] = [
        AnomalyKind::InconsistentOffsets,
        AnomalyKind::Duplicate,
        AnomalyKind::AbortedRead,
        AnomalyKind::PrecommittedRead,
        AnomalyKind::LostWrite,
        AnomalyKind::UnseenLost,
        AnomalyKind::Unseen,
        AnomalyKind::NonmonotonicSend,
        AnomalyKind::NonmonotonicPoll,
        AnomalyKind::PollSkip,
        AnomalyKind::IntPollSkip,
        AnomalyKind::IntNonmonotonicPoll,
        AnomalyKind::IntSendSkip,
        AnomalyKind::IntNonmonotonicSend,
        AnomalyKind::G0,
        AnomalyKind::G1c,
        AnomalyKind::GSingle,
        AnomalyKind::G2,
        AnomalyKind::PartialRead,
        AnomalyKind::NonlinearizableLog,
        AnomalyKind::ReorderedSend,
        AnomalyKind::LsoRegression,
        AnomalyKind::ReadAboveLso,
        AnomalyKind::FracturedRead,
        AnomalyKind::IntermediateRead,
        AnomalyKind::HangingTransaction,
        AnomalyKind::EosDuplicate,
        AnomalyKind::EosLost,
        AnomalyKind::EosUnseen,
        AnomalyKind::OffsetsNotAtomic,
        AnomalyKind::AbortedOutputVisible,
        AnomalyKind::DoubleAssign,
    ];

    /// The name used in reports (Jepsen's where Jepsen has one).
    pub fn as_str(self) -> &'static str {
        match self {
            AnomalyKind::InconsistentOffsets => "inconsistent-offsets",
            AnomalyKind::Duplicate => "duplicate",
            AnomalyKind::AbortedRead => "aborted-read",
            AnomalyKind::PrecommittedRead => "precommitted-read",
            AnomalyKind::LostWrite => "lost-write",
            AnomalyKind::UnseenLost => "unseen-lost",
            AnomalyKind::Unseen => "unseen",
            AnomalyKind::NonmonotonicSend => "nonmonotonic-send",
            AnomalyKind::NonmonotonicPoll => "nonmonotonic-poll",
            AnomalyKind::PollSkip => "poll-skip",
            AnomalyKind::IntPollSkip => "int-poll-skip",
            AnomalyKind::IntNonmonotonicPoll => "int-nonmonotonic-poll",
            AnomalyKind::IntSendSkip => "int-send-skip",
            AnomalyKind::IntNonmonotonicSend => "int-nonmonotonic-send",
            AnomalyKind::G0 => "G0",
            AnomalyKind::G1c => "G1c",
            AnomalyKind::GSingle => "G-single",
            AnomalyKind::G2 => "G2",
            AnomalyKind::PartialRead => "partial-read",
            AnomalyKind::NonlinearizableLog => "nonlinearizable-log",
            AnomalyKind::ReorderedSend => "reordered-send",
            AnomalyKind::LsoRegression => "lso-regression",
            AnomalyKind::ReadAboveLso => "read-above-lso",
            AnomalyKind::FracturedRead => "fractured-read",
            AnomalyKind::IntermediateRead => "intermediate-read",
            AnomalyKind::HangingTransaction => "hanging-transaction",
            AnomalyKind::EosDuplicate => "eos-duplicate",
            AnomalyKind::EosLost => "eos-lost",
            AnomalyKind::EosUnseen => "eos-unseen",
            AnomalyKind::OffsetsNotAtomic => "offsets-not-atomic",
            AnomalyKind::AbortedOutputVisible => "aborted-output-visible",
            AnomalyKind::DoubleAssign => "double-assign",
        }
    }

    /// Parses a report name back into a kind.
    pub fn from_name(name: &str) -> Option<AnomalyKind> {
        let name = match name {
            "G1a" => "aborted-read",
            "G1b" => "intermediate-read",
            other => other,
        };
        AnomalyKind::ALL.into_iter().find(|k| k.as_str() == name)
    }
}

impl fmt::Display for AnomalyKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl Serialize for AnomalyKind {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.as_str())
    }
}

/// A reference to a client op in a witness: enough to find it in the history and read it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct OpRef {
    /// The op's identifying index (its completion's, or its invoke's if never completed).
    pub index: OpIndex,
    /// Its invoke's index.
    pub invoke_index: OpIndex,
    /// The process that ran it.
    pub process: ProcessId,
    /// Its function (`send`, `poll`, `txn`, ...).
    pub f: String,
    /// How it ended.
    pub outcome: Outcome,
    /// Completion time (invoke time when never completed), ns since start.
    pub time_ns: u64,
}

impl OpRef {
    /// Builds a reference from a completed op.
    pub fn from_op(op: &CompletedOp) -> OpRef {
        OpRef {
            index: op.index(),
            invoke_index: op.invoke_index,
            process: op.process,
            f: op.f.to_string(),
            outcome: op.outcome,
            time_ns: op.complete_time_ns.unwrap_or(op.invoke_time_ns),
        }
    }
}

impl fmt::Display for OpRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "op {} ({} {} by process {})",
            self.index,
            self.outcome.as_str(),
            self.f,
            self.process
        )
    }
}

/// A dependency relation between two ops.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Relation {
    /// Write-write: T1's value immediately precedes T2's in a key's log.
    Ww,
    /// Write-read: T2 read a value T1 wrote.
    Wr,
    /// Read-write (anti-dependency): T1's highest read of a key is the version just before
    /// the one T2 wrote.
    Rw,
}

/// One edge of a witnessed cycle.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CycleStep {
    /// Source op index.
    pub from: OpIndex,
    /// Target op index.
    pub to: OpIndex,
    /// Why the edge exists.
    pub relation: Relation,
    /// The key the edge is about.
    pub key: Key,
    /// The edge in words.
    pub explanation: String,
}

/// One witnessed case of an anomaly.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Anomaly {
    /// The kind.
    pub kind: AnomalyKind,
    /// The key involved, when there is one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub key: Option<Key>,
    /// The ops that witness it.
    pub ops: Vec<OpRef>,
    /// Offsets involved.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub offsets: Vec<Offset>,
    /// Values involved.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub values: Vec<Value>,
    /// For cycles: every edge, explained.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub cycle: Vec<CycleStep>,
    /// What happened, in plain words a person can check against the history.
    pub explanation: String,
}

impl Anomaly {
    /// An anomaly with no cycle.
    pub fn new(kind: AnomalyKind, key: Option<Key>, explanation: String) -> Anomaly {
        Anomaly {
            kind,
            key,
            ops: Vec::new(),
            offsets: Vec::new(),
            values: Vec::new(),
            cycle: Vec::new(),
            explanation,
        }
    }
}

/// All cases of one kind: the total count and the first witnesses.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct AnomalyGroup {
    /// How many cases were found.
    pub count: u64,
    /// True when `witnesses` holds fewer than `count` cases.
    pub truncated: bool,
    /// The first cases found, at most [`Anomalies::WITNESS_LIMIT`].
    pub witnesses: Vec<Anomaly>,
}

/// Collects anomalies per kind, keeping counts exact and witness lists bounded.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Anomalies {
    groups: BTreeMap<AnomalyKind, AnomalyGroup>,
}

impl Anomalies {
    /// Witnesses kept per kind; the count keeps going past it.
    pub const WITNESS_LIMIT: usize = 1_000;

    /// Records one case.
    pub fn push(&mut self, anomaly: Anomaly) {
        let group = self.groups.entry(anomaly.kind).or_default();
        group.count += 1;
        if group.witnesses.len() < Self::WITNESS_LIMIT {
            group.witnesses.push(anomaly);
        } else {
            group.truncated = true;
        }
    }

    /// The count of one kind (0 when absent).
    pub fn count(&self, kind: AnomalyKind) -> u64 {
        self.groups.get(&kind).map_or(0, |g| g.count)
    }

    /// True when a witness of `kind` names `key`. Once witnesses were dropped (past
    /// [`Self::WITNESS_LIMIT`]) every key reads as present: the safe answer for a caller that
    /// must not assume the kind's absence.
    pub fn has_key(&self, kind: AnomalyKind, key: Key) -> bool {
        self.groups
            .get(&kind)
            .is_some_and(|g| g.truncated || g.witnesses.iter().any(|w| w.key == Some(key)))
    }

    /// The groups, by kind.
    pub fn into_groups(self) -> BTreeMap<AnomalyKind, AnomalyGroup> {
        self.groups
    }
}
