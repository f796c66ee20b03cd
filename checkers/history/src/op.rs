//! One op line of a history: its type, function, process and typed value (queue micro-ops,
//! assigned keys, or free-form JSON). Parsing of a line lives in `reader`, pairing of invokes
//! with completions in `pairing`; this module only owns the shapes and their JSON encoding.

use std::fmt;

use serde::de::{self, DeserializeSeed, IgnoredAny, MapAccess, Visitor};
use serde::ser::{SerializeMap, SerializeSeq};
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::ids::{Key, Offset, OpIndex, Process, Value};

/// Jepsen's op types: an `invoke` and its completion (`ok`, `fail`, `info`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum OpType {
    /// The op was issued.
    Invoke,
    /// The op certainly took effect.
    Ok,
    /// The op certainly did not take effect.
    Fail,
    /// The op may or may not have taken effect (timeouts, lost connections, crashes).
    Info,
}

impl OpType {
    /// The lowercase name used in the JSON encoding.
    pub fn as_str(self) -> &'static str {
        match self {
            OpType::Invoke => "invoke",
            OpType::Ok => "ok",
            OpType::Fail => "fail",
            OpType::Info => "info",
        }
    }
}

impl fmt::Display for OpType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The `f` of an op. Known functions get variants; anything else is kept as [`Function::Other`]
/// so newer writers stay readable.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Function {
    /// Send one record (`[["send", k, v]]`).
    Send,
    /// One consumer poll (`[["poll"]]`).
    Poll,
    /// A poll of the final phase, after faults were healed; same value shape as `poll`.
    FinalPoll,
    /// A transaction mixing `send` and `poll` micro-ops.
    Txn,
    /// Replace the consumer's assignment with the keys in `value`.
    Assign,
    /// Subscribe to the topics of the keys in `value`; the broker picks partitions.
    Subscribe,
    /// Tell the client to die; a fresh client replaces it.
    Crash,
    /// A consumer-group assignment change the client saw (`group` workload): generation,
    /// member id, partitions assigned and revoked, cause ([`crate::group::Rebalance`]).
    Rebalance,
    /// The end of the final reads: `{"ends": {key: offset}}`, every key's log read from its
    /// start to that end (nothing at or past it).
    LogEnd,
    /// The producer workload's op: several sends submitted to one batching producer, each with
    /// its order of submission and its own outcome (`{"sends": [...]}`, see [`crate::produce`]).
    Produce,
    /// The eos workload's pipeline transaction: poll, produce one output per input, commit
    /// the input offsets (see [`crate::eos`]).
    Pipeline,
    /// A batch of the eos workload's final reads of `eos-in` or `eos-out` (see [`crate::eos`]).
    EosRead,
    /// The eos workload's final fetch of the group's committed offsets (see [`crate::eos`]).
    GroupOffsets,
    /// Nemesis: cut the network.
    Partition,
    /// Nemesis: remove every network partition.
    Heal,
    /// Nemesis: SIGKILL nodes.
    Kill,
    /// Nemesis: restart killed nodes.
    Restart,
    /// Nemesis: SIGSTOP nodes.
    Pause,
    /// Nemesis: SIGCONT nodes.
    Resume,
    /// Any other function name, kept verbatim.
    Other(String),
}

impl Function {
    /// The name used in the JSON encoding.
    pub fn as_str(&self) -> &str {
        match self {
            Function::Send => "send",
            Function::Poll => "poll",
            Function::FinalPoll => "final-poll",
            Function::Txn => "txn",
            Function::Assign => "assign",
            Function::Subscribe => "subscribe",
            Function::Crash => "crash",
            Function::Rebalance => "rebalance",
            Function::LogEnd => "log-end",
            Function::Produce => "produce",
            Function::Pipeline => "pipeline",
            Function::EosRead => "eos-read",
            Function::GroupOffsets => "group-offsets",
            Function::Partition => "partition",
            Function::Heal => "heal",
            Function::Kill => "kill",
            Function::Restart => "restart",
            Function::Pause => "pause",
            Function::Resume => "resume",
            Function::Other(s) => s,
        }
    }

    /// Parses a function name; unknown names become [`Function::Other`].
    pub fn from_name(name: &str) -> Function {
        match name {
            "send" => Function::Send,
            "poll" => Function::Poll,
            "final-poll" => Function::FinalPoll,
            "txn" => Function::Txn,
            "assign" => Function::Assign,
            "subscribe" => Function::Subscribe,
            "crash" => Function::Crash,
            "rebalance" => Function::Rebalance,
            "log-end" => Function::LogEnd,
            "produce" => Function::Produce,
            "pipeline" => Function::Pipeline,
            "eos-read" => Function::EosRead,
            "group-offsets" => Function::GroupOffsets,
            "partition" => Function::Partition,
            "heal" => Function::Heal,
            "kill" => Function::Kill,
            "restart" => Function::Restart,
            "pause" => Function::Pause,
            "resume" => Function::Resume,
            other => Function::Other(other.to_owned()),
        }
    }

    /// True for functions whose value is a list of queue micro-ops.
    pub fn has_micro_ops(&self) -> bool {
        matches!(
            self,
            Function::Send | Function::Poll | Function::FinalPoll | Function::Txn
        )
    }

    /// True for functions whose value is a list of keys.
    pub fn has_keys(&self) -> bool {
        matches!(self, Function::Assign | Function::Subscribe)
    }
}

impl fmt::Display for Function {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl Serialize for Function {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for Function {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct FunctionVisitor;
        impl Visitor<'_> for FunctionVisitor {
            type Value = Function;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a function name such as \"send\" or \"poll\"")
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Function, E> {
                Ok(Function::from_name(v))
            }
        }
        deserializer.deserialize_str(FunctionVisitor)
    }
}

/// One record returned by a poll: the offset it sits at and its value.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Record {
    /// Where the record sits in its partition.
    pub offset: Offset,
    /// The value that was sent.
    pub value: Value,
}

/// The records one poll returned for one key, in the order the consumer returned them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyReads {
    /// The key (topic-partition) read.
    pub key: Key,
    /// The records, in consumer order.
    pub records: Vec<Record>,
    /// What the poll's fetches of this key covered, as a read_committed consumer records it
    /// (`None` in histories that do not record it). A key fetched with nothing returned has
    /// empty `records` and a `fetch`.
    pub fetch: Option<Fetched>,
}

/// What one poll's fetches of one key covered and what the partition leader answered: the
/// consumer's position went from `from` to `to` (every offset in `from..to` was either
/// returned or skipped as aborted data or a control record), the last Fetch answer gave the
/// last stable offset `lso`, and the leader answered in leader epoch `epoch` (the epoch the
/// consumer sent and the leader accepted).
///
/// Encoded as a third element of the poll micro-op, `["poll", {reads}, {"<k>": [from, to,
/// lso, epoch], ...}]`; polls without it are read as before (`fetch: None`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Fetched {
    /// The position before the poll's first fetch of the key.
    pub from: Offset,
    /// The position after its last fetch.
    pub to: Offset,
    /// The last stable offset of the last answer.
    pub lso: Offset,
    /// The leader epoch the last answer was given in.
    pub epoch: i32,
}

/// A queue micro-op: Jepsen's `[:send k v]` or `[:poll]`, filled in on completion.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MicroOp {
    /// Send `value` to `key`. `offset` is set when the broker acknowledged it with an offset.
    ///
    /// Encoded `["send", k, v]` without an offset and `["send", k, [offset, v]]` with one;
    /// the reader also accepts `["send", k, [null, v]]` (offset unknown).
    Send {
        /// Destination key.
        key: Key,
        /// The value sent (unique per key).
        value: Value,
        /// The offset the broker assigned, when known.
        offset: Option<Offset>,
    },
    /// Poll the consumer. `reads` is `None` in an invoke, `Some` once completed.
    ///
    /// Encoded `["poll"]` and `["poll", {"<key>": [[offset, value], ...], ...}]`.
    Poll {
        /// What the poll returned, per key.
        reads: Option<Vec<KeyReads>>,
    },
}

/// The `value` of an op, typed by its `f`.
#[derive(Debug, Clone, PartialEq, Default)]
pub enum OpValue {
    /// JSON `null` or absent.
    #[default]
    Null,
    /// `send`, `poll`, `final-poll`, `txn`: a list of micro-ops.
    MicroOps(Vec<MicroOp>),
    /// `assign`, `subscribe`: a list of keys.
    Keys(Vec<Key>),
    /// Anything else (nemesis ops, admin ops): free-form JSON.
    Json(serde_json::Value),
}

impl OpValue {
    /// The micro-ops, or an empty slice when this value holds none.
    pub fn micro_ops(&self) -> &[MicroOp] {
        match self {
            OpValue::MicroOps(m) => m,
            _ => &[],
        }
    }

    /// True when the value is `null`.
    pub fn is_null(&self) -> bool {
        matches!(self, OpValue::Null)
    }

    /// Decodes a JSON value according to the function it belongs to.
    ///
    /// # Errors
    /// Returns the JSON error when the value does not have the shape `f` requires.
    pub fn from_json_str(f: &Function, json: &str) -> Result<OpValue, serde_json::Error> {
        if json == "null" {
            return Ok(OpValue::Null);
        }
        if f.has_micro_ops() {
            let ops: Vec<MicroOp> = serde_json::from_str(json)?;
            Ok(OpValue::MicroOps(ops))
        } else if f.has_keys() {
            let keys: Vec<Key> = serde_json::from_str(json)?;
            Ok(OpValue::Keys(keys))
        } else {
            Ok(OpValue::Json(serde_json::from_str(json)?))
        }
    }
}

impl Serialize for OpValue {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self {
            OpValue::Null => serializer.serialize_unit(),
            OpValue::MicroOps(ops) => ops.serialize(serializer),
            OpValue::Keys(keys) => keys.serialize(serializer),
            OpValue::Json(v) => v.serialize(serializer),
        }
    }
}

/// One op line (not the header): Jepsen's op map, typed.
///
/// Serialized with `index, time, process, type, f, value[, error]` in that order. Sends in a
/// completion (`ok`/`fail`/`info`) are written in Jepsen's completion form
/// `["send", k, [offset, v]]`, with `null` when the offset is unknown; in an invoke as
/// `["send", k, v]`.
#[derive(Debug, Clone, PartialEq)]
pub struct Op {
    /// Position in the history; strictly increasing.
    pub index: OpIndex,
    /// Nanoseconds since the run started (`time` in JSON).
    pub time_ns: u64,
    /// Who issued the op.
    pub process: Process,
    /// `invoke`, `ok`, `fail` or `info` (`type` in JSON).
    pub op_type: OpType,
    /// What the op does.
    pub f: Function,
    /// The op's argument (invoke) or result (completion).
    pub value: OpValue,
    /// Why a `fail`/`info` op failed, as the client classified it.
    pub error: Option<serde_json::Value>,
}

impl Serialize for Op {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(Some(6 + usize::from(self.error.is_some())))?;
        map.serialize_entry("index", &self.index)?;
        map.serialize_entry("time", &self.time_ns)?;
        map.serialize_entry("process", &self.process)?;
        map.serialize_entry("type", &self.op_type)?;
        map.serialize_entry("f", &self.f)?;
        match &self.value {
            OpValue::MicroOps(ops) if self.op_type != OpType::Invoke => {
                map.serialize_entry("value", &CompletedMicroOps(ops))?;
            }
            value => map.serialize_entry("value", value)?,
        }
        if let Some(error) = &self.error {
            map.serialize_entry("error", error)?;
        }
        map.end()
    }
}

/// Micro-ops of a completion: sends always carry the `[offset|null, v]` pair.
struct CompletedMicroOps<'a>(&'a [MicroOp]);

impl Serialize for CompletedMicroOps<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut seq = serializer.serialize_seq(Some(self.0.len()))?;
        for micro in self.0 {
            match micro {
                MicroOp::Send { key, value, offset } => {
                    seq.serialize_element(&("send", key, (offset, value)))?;
                }
                poll => seq.serialize_element(poll)?,
            }
        }
        seq.end()
    }
}

/// Why one line could not be decoded into an [`Op`].
#[derive(Debug, thiserror::Error)]
pub enum OpDecodeError {
    /// The line is not a JSON op object with the required fields, or its value does not have
    /// the shape its `f` requires (the message names `f`).
    #[error("{source}")]
    Json {
        /// The JSON error, with its column.
        source: serde_json::Error,
    },
    /// `value` came before `f` on the line and does not have the shape `f` requires.
    #[error("value of f={f:?} has the wrong shape: {source}")]
    Value {
        /// The op's function name.
        f: String,
        /// The JSON error.
        source: serde_json::Error,
    },
}

impl Op {
    /// Decodes one op line. Unknown extra fields are ignored (forward compatibility).
    ///
    /// # Errors
    /// [`OpDecodeError`] when the line is not valid JSON, lacks a required field, or its value
    /// does not match its `f`.
    pub fn from_json_line(line: &str) -> Result<Op, OpDecodeError> {
        let raw: RawOp<'_> =
            serde_json::from_str(line).map_err(|source| OpDecodeError::Json { source })?;
        let value = match raw.value {
            RawOpValue::Typed(value) => value,
            RawOpValue::Deferred(json) => {
                OpValue::from_json_str(&raw.f, json.get()).map_err(|source| {
                    OpDecodeError::Value {
                        f: raw.f.to_string(),
                        source,
                    }
                })?
            }
        };
        Ok(Op {
            index: raw.index,
            time_ns: raw.time_ns,
            process: raw.process,
            op_type: raw.op_type,
            f: raw.f,
            value,
            error: raw.error,
        })
    }
}

/// An op as decoded in one pass. Writers put `f` before `value`, so the value is usually
/// decoded straight into its typed shape; when `value` comes first it is kept raw (borrowed
/// from the line) and decoded once `f` is known.
struct RawOp<'a> {
    index: OpIndex,
    time_ns: u64,
    process: Process,
    op_type: OpType,
    f: Function,
    value: RawOpValue<'a>,
    error: Option<serde_json::Value>,
}

enum RawOpValue<'a> {
    Typed(OpValue),
    Deferred(&'a serde_json::value::RawValue),
}

impl<'de: 'a, 'a> Deserialize<'de> for RawOp<'a> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_map(RawOpVisitor(std::marker::PhantomData))
    }
}

struct RawOpVisitor<'a>(std::marker::PhantomData<&'a ()>);

impl<'de: 'a, 'a> Visitor<'de> for RawOpVisitor<'a> {
    type Value = RawOp<'a>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("an op object with index, time, process, type, f and value")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<RawOp<'a>, A::Error> {
        let mut index = None;
        let mut time_ns = None;
        let mut process = None;
        let mut op_type = None;
        let mut f: Option<Function> = None;
        let mut value = None;
        let mut error = None;
        while let Some(field) = map.next_key::<std::borrow::Cow<'de, str>>()? {
            match field.as_ref() {
                "index" => index = Some(map.next_value()?),
                "time" => time_ns = Some(map.next_value()?),
                "process" => process = Some(map.next_value()?),
                "type" => op_type = Some(map.next_value()?),
                "f" => f = Some(map.next_value()?),
                "value" => {
                    value = Some(match &f {
                        Some(f) => RawOpValue::Typed(map.next_value_seed(ValueSeed(f))?),
                        None => RawOpValue::Deferred(map.next_value()?),
                    });
                }
                "error" => error = map.next_value()?,
                _ => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        Ok(RawOp {
            index: index.ok_or_else(|| de::Error::missing_field("index"))?,
            time_ns: time_ns.ok_or_else(|| de::Error::missing_field("time"))?,
            process: process.ok_or_else(|| de::Error::missing_field("process"))?,
            op_type: op_type.ok_or_else(|| de::Error::missing_field("type"))?,
            f: f.ok_or_else(|| de::Error::missing_field("f"))?,
            value: value.unwrap_or(RawOpValue::Typed(OpValue::Null)),
            error,
        })
    }
}

/// Decodes a `value` whose `f` is already known.
struct ValueSeed<'f>(&'f Function);

impl<'de> DeserializeSeed<'de> for ValueSeed<'_> {
    type Value = OpValue;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<OpValue, D::Error> {
        let f = self.0;
        let wrong_shape = |e: D::Error| {
            de::Error::custom(format_args!("value of f={f} has the wrong shape: {e}"))
        };
        if f.has_micro_ops() {
            Ok(Option::<Vec<MicroOp>>::deserialize(deserializer)
                .map_err(wrong_shape)?
                .map_or(OpValue::Null, OpValue::MicroOps))
        } else if f.has_keys() {
            Ok(Option::<Vec<Key>>::deserialize(deserializer)
                .map_err(wrong_shape)?
                .map_or(OpValue::Null, OpValue::Keys))
        } else {
            let json = serde_json::Value::deserialize(deserializer)?;
            Ok(if json.is_null() {
                OpValue::Null
            } else {
                OpValue::Json(json)
            })
        }
    }
}

mod micro_codec;

#[cfg(test)]
mod tests;
