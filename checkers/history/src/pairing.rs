//! Pairs each client invoke with its completion into a [`CompletedOp`], and turns nemesis ops
//! into [`NemesisEvent`]s. Malformed histories (a completion without an invoke, two open ops in
//! one process, a completion whose `f` differs from its invoke) are [`PairingError`]s: harness
//! bugs, never anomalies of the cluster. Works streaming: only open invokes are held.

use std::collections::HashMap;

use serde::Serialize;

use crate::ids::{OpIndex, Process, ProcessId};
use crate::op::{Function, Op, OpType, OpValue};

/// How a client op ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Outcome {
    /// Certainly took effect.
    Ok,
    /// Certainly did not take effect.
    Fail,
    /// May have taken effect; also every invoke still open at the end of the history.
    Info,
}

impl Outcome {
    /// The lowercase name.
    pub fn as_str(self) -> &'static str {
        match self {
            Outcome::Ok => "ok",
            Outcome::Fail => "fail",
            Outcome::Info => "info",
        }
    }
}

/// A client op: its invoke and completion folded together.
#[derive(Debug, Clone, PartialEq)]
pub struct CompletedOp {
    /// The client process that ran it.
    pub process: ProcessId,
    /// How it ended.
    pub outcome: Outcome,
    /// What it did.
    pub f: Function,
    /// Index of the invoke line.
    pub invoke_index: OpIndex,
    /// Index of the completion line; `None` when the history ended with the op still open.
    pub complete_index: Option<OpIndex>,
    /// Time of the invoke, ns since start.
    pub invoke_time_ns: u64,
    /// Time of the completion; `None` when never completed.
    pub complete_time_ns: Option<u64>,
    /// The completion's value when it has one, else the invoke's.
    pub value: OpValue,
    /// The completion's `error`, if any.
    pub error: Option<serde_json::Value>,
}

impl CompletedOp {
    /// The index that identifies this op in reports: the completion's, else the invoke's.
    pub fn index(&self) -> OpIndex {
        self.complete_index.unwrap_or(self.invoke_index)
    }
}

/// A fault (or its undo) applied by the nemesis.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct NemesisEvent {
    /// Index of the op line that completed the action (or the lone `info` line).
    pub index: OpIndex,
    /// Index of the nemesis invoke, when the nemesis logged one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub invoke_index: Option<OpIndex>,
    /// When the action started (invoke time, else completion time), ns since start.
    pub start_time_ns: u64,
    /// When the action was complete, ns since start.
    pub time_ns: u64,
    /// The action: `partition`, `heal`, `kill`, `restart`, `pause`, `resume`, ...
    pub f: Function,
    /// The nodes targeted, from `value.targets` (or `value` itself when it is a list).
    pub targets: Vec<String>,
    /// The full free-form value.
    pub value: serde_json::Value,
}

impl NemesisEvent {
    fn from_ops(invoke: Option<Op>, completion: Op) -> NemesisEvent {
        let value = match (&completion.value, invoke.as_ref().map(|i| &i.value)) {
            (OpValue::Json(v), _) => v.clone(),
            (_, Some(OpValue::Json(v))) => v.clone(),
            (OpValue::Keys(k), _) => serde_json::to_value(k).unwrap_or_default(),
            _ => serde_json::Value::Null,
        };
        let targets_json = value.get("targets").unwrap_or(&value);
        let targets = targets_json
            .as_array()
            .map(|a| {
                a.iter()
                    .map(|t| match t.as_str() {
                        Some(s) => s.to_owned(),
                        None => t.to_string(),
                    })
                    .collect()
            })
            .unwrap_or_default();
        NemesisEvent {
            index: completion.index,
            invoke_index: invoke.as_ref().map(|i| i.index),
            start_time_ns: invoke.as_ref().map_or(completion.time_ns, |i| i.time_ns),
            time_ns: completion.time_ns,
            f: completion.f,
            targets,
            value,
        }
    }
}

/// What [`Pairer::push`] produced for one op.
#[derive(Debug, Clone, PartialEq)]
pub enum Paired {
    /// A client op completed.
    Client(CompletedOp),
    /// A nemesis action was recorded.
    Nemesis(NemesisEvent),
}

/// A malformed history: the harness (or whatever wrote the file) is at fault, not the cluster.
#[derive(Debug, thiserror::Error)]
pub enum PairingError {
    /// A completion arrived for a process with no open invoke.
    #[error("op {index}: {op_type} completion from process {process} without an open invoke")]
    CompletionWithoutInvoke {
        /// The completion's index.
        index: OpIndex,
        /// Its process.
        process: ProcessId,
        /// Its type.
        op_type: OpType,
    },
    /// A process invoked a second op while its first was still open.
    #[error("op {index}: process {process} invoked again while op {open_index} is still open")]
    ProcessAlreadyOpen {
        /// The second invoke's index.
        index: OpIndex,
        /// The process.
        process: ProcessId,
        /// The open invoke's index.
        open_index: OpIndex,
    },
    /// A completion's `f` differs from its invoke's.
    #[error(
        "op {index}: completion f={completion_f} does not match invoke {invoke_index} f={invoke_f}"
    )]
    FunctionMismatch {
        /// The completion's index.
        index: OpIndex,
        /// The open invoke's index.
        invoke_index: OpIndex,
        /// The invoke's function.
        invoke_f: String,
        /// The completion's function.
        completion_f: String,
    },
}

/// Streaming pairer: feed ops in history order with [`Pairer::push`], then call
/// [`Pairer::finish`] for the ops still open (they become `info`).
#[derive(Debug, Default)]
pub struct Pairer {
    /// The open invoke of each client process (at most one each).
    open: HashMap<ProcessId, Op>,
    /// Nemesis invokes awaiting their completion.
    open_nemesis: Vec<Op>,
}

impl Pairer {
    /// A pairer with nothing open.
    pub fn new() -> Pairer {
        Pairer::default()
    }

    /// Feeds one op. Returns the completed client op or nemesis event it closes, if any.
    ///
    /// # Errors
    /// A [`PairingError`] when the op cannot belong to a well-formed history.
    pub fn push(&mut self, op: Op) -> Result<Option<Paired>, PairingError> {
        let process = match op.process {
            Process::Nemesis => return Ok(self.push_nemesis(op)),
            Process::Client(p) => p,
        };
        let outcome = match op.op_type {
            OpType::Invoke => {
                if let Some(open) = self.open.get(&process) {
                    return Err(PairingError::ProcessAlreadyOpen {
                        index: op.index,
                        process,
                        open_index: open.index,
                    });
                }
                self.open.insert(process, op);
                return Ok(None);
            }
            OpType::Ok => Outcome::Ok,
            OpType::Fail => Outcome::Fail,
            OpType::Info => Outcome::Info,
        };
        let Some(invoke) = self.open.remove(&process) else {
            return Err(PairingError::CompletionWithoutInvoke {
                index: op.index,
                process,
                op_type: op.op_type,
            });
        };
        if invoke.f != op.f {
            return Err(PairingError::FunctionMismatch {
                index: op.index,
                invoke_index: invoke.index,
                invoke_f: invoke.f.to_string(),
                completion_f: op.f.to_string(),
            });
        }
        let value = if op.value.is_null() {
            invoke.value
        } else {
            op.value
        };
        Ok(Some(Paired::Client(CompletedOp {
            process,
            outcome,
            f: op.f,
            invoke_index: invoke.index,
            complete_index: Some(op.index),
            invoke_time_ns: invoke.time_ns,
            complete_time_ns: Some(op.time_ns),
            value,
            error: op.error,
        })))
    }

    fn push_nemesis(&mut self, op: Op) -> Option<Paired> {
        if op.op_type == OpType::Invoke {
            self.open_nemesis.push(op);
            return None;
        }
        let position = self.open_nemesis.iter().rposition(|i| i.f == op.f).or(
            if self.open_nemesis.is_empty() {
                None
            } else {
                Some(0)
            },
        );
        let invoke = position.map(|p| self.open_nemesis.remove(p));
        Some(Paired::Nemesis(NemesisEvent::from_ops(invoke, op)))
    }

    /// Ends the history: every client op still open becomes an `info` op with its invoke's
    /// value (it may have taken effect), ordered by invoke index; open nemesis invokes become
    /// events (the fault may have been applied).
    pub fn finish(self) -> (Vec<CompletedOp>, Vec<NemesisEvent>) {
        let mut open: Vec<Op> = self.open.into_values().collect();
        open.sort_by_key(|op| op.index);
        let ops = open
            .into_iter()
            .filter_map(|op| match op.process {
                Process::Client(process) => Some(CompletedOp {
                    process,
                    outcome: Outcome::Info,
                    f: op.f,
                    invoke_index: op.index,
                    complete_index: None,
                    invoke_time_ns: op.time_ns,
                    complete_time_ns: None,
                    value: op.value,
                    error: None,
                }),
                Process::Nemesis => None,
            })
            .collect();
        let nemesis = self
            .open_nemesis
            .into_iter()
            .map(|op| NemesisEvent::from_ops(None, op))
            .collect();
        (ops, nemesis)
    }
}

/// A fully paired history, for callers that want everything in memory.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PairedHistory {
    /// Client ops in completion order, then never-completed ops in invoke order.
    pub ops: Vec<CompletedOp>,
    /// Nemesis events in history order.
    pub nemesis: Vec<NemesisEvent>,
}

/// Pairs a whole sequence of ops.
///
/// # Errors
/// The first [`PairingError`] met.
pub fn pair(ops: impl IntoIterator<Item = Op>) -> Result<PairedHistory, PairingError> {
    let mut pairer = Pairer::new();
    let mut history = PairedHistory::default();
    for op in ops {
        match pairer.push(op)? {
            Some(Paired::Client(c)) => history.ops.push(c),
            Some(Paired::Nemesis(n)) => history.nemesis.push(n),
            None => {}
        }
    }
    let (open, nemesis) = pairer.finish();
    history.ops.extend(open);
    history.nemesis.extend(nemesis);
    Ok(history)
}
