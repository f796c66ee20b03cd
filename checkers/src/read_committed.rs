//! The read-committed checker: what a `read_committed` consumer promises, proven from the
//! fetch ranges its polls record ([`logjam_history::Fetched`]: per key, the positions before
//! and after the poll, the leader's last stable offset and leader epoch). Pure and
//! streaming: [`ReadCommittedChecker`] folds ops into a compact index; one module per family
//! runs over it. The txn workload runs it beside the queue checker ([`TxnChecker`]), which
//! already reports G1a (`aborted-read`) and `precommitted-read`; they are not repeated here.
//!
//! - [`lso`]: `read-above-lso` (a record returned at or above the LSO of the same process's
//!   next answer for the partition in the same leader epoch, which bounds the LSO the leader
//!   read under) and `lso-regression` (one process's successive answers for a partition in
//!   one leader epoch with a lower LSO; the LSO is the leader's state, so across leader
//!   epochs it may go back and is only counted).
//! - [`fractured`]: `fractured-read`: a poll returned some records of transaction T on
//!   partition p and its range on p covered another record of T it did not return. Across
//!   partitions Kafka promises no atomic visibility (markers land per partition): polls that
//!   returned T on p while T's record on another partition they fetched was at or above that
//!   partition's LSO are only counted.
//! - [`intermediate`]: `intermediate-read` (G1b): a poll returned a record of T and completed
//!   before T's op was invoked: T had not begun, so neither had its commit. That is all the
//!   history proves of "read before commit": the commit is invoked at an unrecorded moment
//!   inside T's op, so a read overlapping T proves nothing.
//! - [`stall`]: LSO stalls (counted: an answer's LSO at an acknowledged record, so an open
//!   transaction held it) and `hanging-transaction` (one held past every clock that ends a
//!   transaction).

pub mod fractured;
pub mod intermediate;
pub mod lso;
pub mod stall;
#[cfg(test)]
mod tests;

use logjam_history::{
    CompletedOp, Fetched, Header, Key, Offset, OpValue, Outcome, Paired, ProcessId, Record, Value,
};

use crate::anomaly::{Anomalies, OpRef};
use crate::checker::{Checker, Findings};
pub use crate::findings::ReadCommittedStats;
use crate::findings::WorkloadStats;
use crate::fxhash::FxHashMap;
use crate::queue::QueueChecker;

/// One op, as the checks need it.
#[derive(Debug, Clone)]
pub(crate) struct OpInfo {
    pub op_ref: OpRef,
    pub process: ProcessId,
    pub outcome: Outcome,
    pub invoke_ns: u64,
    pub complete_ns: Option<u64>,
    /// The values it sent, with their acknowledged offsets.
    pub sends: Vec<(Key, Value, Option<Offset>)>,
}

/// One key of one poll micro-op that recorded its fetch range.
#[derive(Debug, Clone)]
pub(crate) struct PollRead {
    /// The op (index into `ops`).
    pub op: u32,
    pub key: Key,
    pub fetch: Fetched,
    pub records: Vec<Record>,
    /// Which poll micro-op of the op (polls of one op share `op`, differ here).
    pub poll: u32,
}

/// The compact history the checks run over.
#[derive(Debug, Default)]
pub(crate) struct RcIndex {
    pub ops: Vec<OpInfo>,
    pub polls: Vec<PollRead>,
    /// (key, value) → the op that sent it (a failed sender gives way to another).
    pub writers: FxHashMap<(i64, i64), u32>,
    /// (key, value) → the offset it sits at, from acknowledgements and reads (first seen).
    pub offsets: FxHashMap<(i64, i64), Offset>,
}

impl RcIndex {
    fn ingest(&mut self, op: CompletedOp) {
        let id = self.ops.len() as u32;
        let mut sends = Vec::new();
        let mut poll = 0;
        if let OpValue::MicroOps(micro) = &op.value {
            for m in micro {
                match m {
                    logjam_history::MicroOp::Send { key, value, offset } => {
                        sends.push((*key, *value, *offset));
                        let slot = self.writers.entry((key.0, value.0)).or_insert(id);
                        if *slot != id && self.ops[*slot as usize].outcome == Outcome::Fail {
                            *slot = id;
                        }
                        if let Some(offset) = offset {
                            self.offsets.entry((key.0, value.0)).or_insert(*offset);
                        }
                    }
                    logjam_history::MicroOp::Poll { reads: Some(reads) } => {
                        for kr in reads {
                            for r in &kr.records {
                                self.offsets
                                    .entry((kr.key.0, r.value.0))
                                    .or_insert(r.offset);
                            }
                            if let Some(fetch) = kr.fetch {
                                self.polls.push(PollRead {
                                    op: id,
                                    key: kr.key,
                                    fetch,
                                    records: kr.records.clone(),
                                    poll,
                                });
                            }
                        }
                        poll += 1;
                    }
                    logjam_history::MicroOp::Poll { reads: None } => poll += 1,
                }
            }
        }
        self.ops.push(OpInfo {
            op_ref: OpRef::from_op(&op),
            process: op.process,
            outcome: op.outcome,
            invoke_ns: op.invoke_time_ns,
            complete_ns: op.complete_time_ns,
            sends,
        });
    }

    /// The op that wrote `value` to `key`, if any op sent it.
    pub fn writer(&self, key: Key, value: Value) -> Option<u32> {
        self.writers.get(&(key.0, value.0)).copied()
    }

    /// Where `value` of `key` sits, when an acknowledgement or a read said so.
    pub fn offset_of(&self, key: Key, value: Value) -> Option<Offset> {
        self.offsets.get(&(key.0, value.0)).copied()
    }

    pub fn op(&self, id: u32) -> &OpInfo {
        &self.ops[id as usize]
    }
}

/// The streaming read-committed checker.
#[derive(Debug)]
pub struct ReadCommittedChecker {
    index: RcIndex,
    clocks: stall::Clocks,
}

impl Default for ReadCommittedChecker {
    fn default() -> Self {
        ReadCommittedChecker {
            index: RcIndex::default(),
            clocks: stall::Clocks {
                transaction_timeout_ns: stall::MAX_TRANSACTION_TIMEOUT_MS * 1_000_000,
                last_fault_ns: 0,
            },
        }
    }
}

impl ReadCommittedChecker {
    /// An empty checker for a history with this header: its `transaction_timeout_ms` (the
    /// producers' `transaction.timeout.ms`) bounds how long a transaction may hold the LSO;
    /// without it, Kafka's largest allowed timeout does.
    pub fn new(header: &Header) -> ReadCommittedChecker {
        let mut checker = ReadCommittedChecker::default();
        if let Some(ms) = header
            .config
            .get("transaction_timeout_ms")
            .and_then(serde_json::Value::as_u64)
        {
            checker.clocks.transaction_timeout_ns = ms.saturating_mul(1_000_000);
        }
        checker
    }

    /// Notes a fault's time: markers to a partitioned leader may wait for the heal.
    pub fn push_fault(&mut self, time_ns: u64) {
        self.clocks.last_fault_ns = self.clocks.last_fault_ns.max(time_ns);
    }

    /// Feeds one completed client op.
    pub fn push_op(&mut self, op: CompletedOp) {
        self.index.ingest(op);
    }

    /// Runs every family; anomalies go to `out`.
    pub fn finish_into(self, out: &mut Anomalies) -> ReadCommittedStats {
        let (index, clocks) = (self.index, self.clocks);
        let mut stats = ReadCommittedStats {
            polls_checked: index
                .polls
                .iter()
                .map(|p| (p.op, p.poll))
                .collect::<std::collections::BTreeSet<_>>()
                .len() as u64,
            lsos_seen: index.polls.len() as u64,
            records_checked: index.polls.iter().map(|p| p.records.len() as u64).sum(),
            leader_epochs_seen: index
                .polls
                .iter()
                .map(|p| (p.key, p.fetch.epoch))
                .collect::<std::collections::BTreeSet<_>>()
                .len() as u64,
            ..ReadCommittedStats::default()
        };
        lso::check(&index, &mut stats, out);
        fractured::check(&index, &mut stats, out);
        intermediate::check(&index, out);
        stall::check(&index, clocks, &mut stats.lso_stalls, out);
        stats
    }
}

/// The txn workload's checker: the queue checker with the read_committed policy, and the
/// read-committed checker beside it, their findings combined.
pub struct TxnChecker {
    queue: QueueChecker,
    read_committed: ReadCommittedChecker,
}

impl TxnChecker {
    /// A checker for a history with this header.
    pub fn new(header: Header) -> TxnChecker {
        TxnChecker {
            read_committed: ReadCommittedChecker::new(&header),
            queue: QueueChecker::new(header),
        }
    }
}

impl Checker for TxnChecker {
    fn push(&mut self, item: Paired) {
        match &item {
            Paired::Client(op) => self.read_committed.push_op(op.clone()),
            Paired::Nemesis(event) => self.read_committed.push_fault(event.time_ns),
        }
        self.queue.push(item);
    }

    fn finish(self: Box<Self>) -> Findings {
        let TxnChecker {
            queue,
            read_committed,
        } = *self;
        let mut findings = Box::new(queue).finish();
        let stats = read_committed.finish_into(&mut findings.anomalies);
        findings.workload_stats = Some(WorkloadStats::ReadCommitted(stats));
        findings
    }
}
