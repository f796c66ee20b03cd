//! A small in-memory history builder for tests, fixtures and examples: it assigns indices and
//! times so a minimal history reads like a script. The harness records real runs with
//! [`crate::HistoryWriter`] instead.

use crate::header::Header;
use crate::ids::{Key, Offset, OpIndex, Process, ProcessId, Value};
use crate::op::{Fetched, Function, KeyReads, MicroOp, Op, OpType, OpValue, Record};

/// Time between consecutive ops the builder emits, in ns.
const STEP_NS: u64 = 1_000;

/// Builds a history op by op. Each op gets the next index and a time `STEP_NS` after the
/// previous one.
#[derive(Debug, Clone)]
pub struct HistoryBuilder {
    /// The header the built history will carry.
    header: Header,
    /// Ops so far.
    ops: Vec<Op>,
}

/// Shorthand for poll results: `(key, [(offset, value), ...])`.
pub type PollResult<'a> = &'a [(i64, &'a [(i64, i64)])];

impl Default for HistoryBuilder {
    fn default() -> Self {
        HistoryBuilder::new("queue")
    }
}

impl HistoryBuilder {
    /// An empty history for `workload`, seed 0.
    pub fn new(workload: &str) -> HistoryBuilder {
        HistoryBuilder {
            header: Header::new(workload, 0, "1970-01-01T00:00:00Z"),
            ops: Vec::new(),
        }
    }

    /// Mutable access to the header (config, nodes, seed).
    pub fn header_mut(&mut self) -> &mut Header {
        &mut self.header
    }

    /// Appends a raw op with the next index and time; returns its index.
    pub fn push(
        &mut self,
        process: Process,
        op_type: OpType,
        f: Function,
        value: OpValue,
    ) -> OpIndex {
        let index = OpIndex(self.ops.len() as u64);
        self.ops.push(Op {
            index,
            time_ns: index.0 * STEP_NS,
            process,
            op_type,
            f,
            value,
            error: None,
        });
        index
    }

    /// Client op line.
    pub fn client(
        &mut self,
        process: u64,
        op_type: OpType,
        f: Function,
        value: OpValue,
    ) -> OpIndex {
        self.push(Process::Client(ProcessId(process)), op_type, f, value)
    }

    /// Invoke of a single send.
    pub fn invoke_send(&mut self, process: u64, key: i64, value: i64) -> OpIndex {
        self.client(
            process,
            OpType::Invoke,
            Function::Send,
            send_ops(&[(key, value, None)]),
        )
    }

    /// Completion of a single send; `offset` `None` means "acknowledged without an offset".
    pub fn complete_send(
        &mut self,
        process: u64,
        op_type: OpType,
        key: i64,
        value: i64,
        offset: Option<i64>,
    ) -> OpIndex {
        self.client(
            process,
            op_type,
            Function::Send,
            send_ops(&[(key, value, offset)]),
        )
    }

    /// An acknowledged send: invoke then ok at `offset`. Returns the completion index.
    pub fn send_ok(&mut self, process: u64, key: i64, value: i64, offset: i64) -> OpIndex {
        self.invoke_send(process, key, value);
        self.complete_send(process, OpType::Ok, key, value, Some(offset))
    }

    /// An acknowledged send whose offset the client did not learn.
    pub fn send_ok_no_offset(&mut self, process: u64, key: i64, value: i64) -> OpIndex {
        self.invoke_send(process, key, value);
        self.complete_send(process, OpType::Ok, key, value, None)
    }

    /// A send that definitely failed.
    pub fn send_fail(&mut self, process: u64, key: i64, value: i64) -> OpIndex {
        self.invoke_send(process, key, value);
        self.complete_send(process, OpType::Fail, key, value, None)
    }

    /// A send with an indeterminate outcome.
    pub fn send_info(&mut self, process: u64, key: i64, value: i64) -> OpIndex {
        self.invoke_send(process, key, value);
        self.complete_send(process, OpType::Info, key, value, None)
    }

    /// Invoke of a poll (`f` is `poll` or `final-poll`).
    pub fn invoke_poll(&mut self, process: u64, f: Function) -> OpIndex {
        self.client(
            process,
            OpType::Invoke,
            f,
            OpValue::MicroOps(vec![MicroOp::Poll { reads: None }]),
        )
    }

    /// A successful poll returning `reads`. Returns the completion index.
    pub fn poll_ok(&mut self, process: u64, reads: PollResult<'_>) -> OpIndex {
        self.invoke_poll(process, Function::Poll);
        self.client(process, OpType::Ok, Function::Poll, poll_ops(reads))
    }

    /// A poll that completed with `op_type` (e.g. `info`) returning `reads`.
    pub fn poll_with(&mut self, process: u64, op_type: OpType, reads: PollResult<'_>) -> OpIndex {
        self.invoke_poll(process, Function::Poll);
        self.client(process, op_type, Function::Poll, poll_ops(reads))
    }

    /// A successful final poll (after recovery) returning `reads`.
    pub fn final_poll_ok(&mut self, process: u64, reads: PollResult<'_>) -> OpIndex {
        self.invoke_poll(process, Function::FinalPoll);
        self.client(process, OpType::Ok, Function::FinalPoll, poll_ops(reads))
    }

    /// A transaction: invoke with `invoke` micro-ops, complete with `op_type` and `completion`.
    pub fn txn(
        &mut self,
        process: u64,
        op_type: OpType,
        invoke: Vec<MicroOp>,
        completion: Vec<MicroOp>,
    ) -> OpIndex {
        self.client(
            process,
            OpType::Invoke,
            Function::Txn,
            OpValue::MicroOps(invoke),
        );
        self.client(
            process,
            op_type,
            Function::Txn,
            OpValue::MicroOps(completion),
        )
    }

    /// A successful `assign` (or `subscribe` with `f`) of `keys`.
    pub fn assign(&mut self, process: u64, f: Function, keys: &[i64]) -> OpIndex {
        let keys = OpValue::Keys(keys.iter().map(|&k| Key(k)).collect());
        self.client(process, OpType::Invoke, f.clone(), keys.clone());
        self.client(process, OpType::Ok, f, keys)
    }

    /// A nemesis action (`info` line) with `targets`.
    pub fn nemesis(&mut self, f: Function, targets: &[&str]) -> OpIndex {
        let value = serde_json::json!({ "targets": targets });
        self.push(Process::Nemesis, OpType::Info, f, OpValue::Json(value))
    }

    /// The ops so far.
    pub fn ops(&self) -> &[Op] {
        &self.ops
    }

    /// Finishes: the header and the ops.
    pub fn build(self) -> (Header, Vec<Op>) {
        (self.header, self.ops)
    }
}

/// Send micro-ops from `(key, value, offset)` triples.
pub fn send_ops(sends: &[(i64, i64, Option<i64>)]) -> OpValue {
    OpValue::MicroOps(
        sends
            .iter()
            .map(|&(key, value, offset)| send_micro(key, value, offset))
            .collect(),
    )
}

/// One send micro-op.
pub fn send_micro(key: i64, value: i64, offset: Option<i64>) -> MicroOp {
    MicroOp::Send {
        key: Key(key),
        value: Value(value),
        offset: offset.map(Offset),
    }
}

/// One completed poll micro-op.
pub fn poll_micro(reads: PollResult<'_>) -> MicroOp {
    MicroOp::Poll {
        reads: Some(
            reads
                .iter()
                .map(|&(key, records)| KeyReads {
                    key: Key(key),
                    records: records
                        .iter()
                        .map(|&(o, v)| Record {
                            offset: Offset(o),
                            value: Value(v),
                        })
                        .collect(),
                    fetch: None,
                })
                .collect(),
        ),
    }
}

/// A key's poll result with what its fetches covered: `(key, [(offset, value), ...], [from,
/// to, lso, epoch])`.
pub type FetchedResult<'a> = &'a [(i64, &'a [(i64, i64)], [i64; 4])];

/// One completed read_committed poll micro-op recording its fetch ranges ([`Fetched`]).
pub fn fetched_poll_micro(reads: FetchedResult<'_>) -> MicroOp {
    MicroOp::Poll {
        reads: Some(
            reads
                .iter()
                .map(|&(key, records, [from, to, lso, epoch])| KeyReads {
                    key: Key(key),
                    records: records
                        .iter()
                        .map(|&(o, v)| Record {
                            offset: Offset(o),
                            value: Value(v),
                        })
                        .collect(),
                    fetch: Some(Fetched {
                        from: Offset(from),
                        to: Offset(to),
                        lso: Offset(lso),
                        epoch: epoch as i32,
                    }),
                })
                .collect(),
        ),
    }
}

/// A poll value holding one completed poll micro-op.
pub fn poll_ops(reads: PollResult<'_>) -> OpValue {
    OpValue::MicroOps(vec![poll_micro(reads)])
}
