//! The `eos` workload's op values (a consume-transform-produce pipeline): what a pipeline
//! transaction consumed and committed ([`PipelineValue`]), the final reads of the input and
//! output topics ([`EosReadValue`], closed by a `log-end` op, [`EosEndValue`]) and the group's
//! committed offsets ([`GroupOffsetsValue`]). The workload writes them and the exactly-once
//! checker reads them, so the schema lives here with the rest of the history format.
//!
//! ```json
//! {"f": "pipeline", "type": "invoke", "value": {"txn": 7}}
//! {"f": "pipeline", "type": "ok", "value": {"txn": 7, "producer": "eos-p3",
//!   "inputs": [[0, 41, 1041]], "offsets": {"0": 42}, "offsets_in_txn": true,
//!   "rebalances": ["assigned [0, 1]"]}}
//! {"f": "eos-read", "type": "ok", "value": {"topic": "eos-out", "records": [[1, 9, 0, 41, 1041, 7]]}}
//! {"f": "eos-read", "type": "ok", "value": {"topic": "eos-in", "records": [[0, 41, 1041]]}}
//! {"f": "log-end", "type": "ok", "value": {"topic": "eos-out", "ends": {"1": 10}, "high_watermarks": {"1": 10}}}
//! {"f": "group-offsets", "type": "ok", "value": {"group": "eos", "offsets": {"0": 42}}}
//! ```
//!
//! | field | meaning |
//! |---|---|
//! | `txn` | run-unique number of the pipeline transaction; every output record carries it |
//! | `inputs` | `[partition, offset, value]` of each input record the transaction consumed |
//! | `offsets` | input partition → next offset committed (inside the transaction, or after it) |
//! | `offsets_in_txn` | false when the process committed offsets with a plain commit after the transaction |
//! | `crashed_after_commit` | the process crashed as the commit returned (before any plain offset commit) |
//! | `records` (`eos-out`) | `[partition, offset, input partition, input offset, input value, txn]` |
//! | `records` (`eos-in`) | `[partition, offset, value]` |
//! | `ends` | partition → the position the final read reached (read from offset 0) |
//! | `high_watermarks` | partition → the log end (high watermark) when the read finished |
//!
//! A `pipeline` op is `ok` when its transaction committed, `fail` when it was aborted (or its
//! producer fenced before committing), `info` when the commit's outcome is unknown.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// The output topic's name in `eos-read` / `log-end` values.
pub const OUTPUT_TOPIC: &str = "eos-out";
/// The input topic's name.
pub const INPUT_TOPIC: &str = "eos-in";

/// One input record: where it sits and its (run-unique) value.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(from = "(i32, i64, i64)", into = "(i32, i64, i64)")]
pub struct InputRecord {
    /// Partition of `eos-in`.
    pub partition: i32,
    /// Offset in it.
    pub offset: i64,
    /// The value the idempotent producer wrote.
    pub value: i64,
}

impl From<(i32, i64, i64)> for InputRecord {
    fn from((partition, offset, value): (i32, i64, i64)) -> Self {
        InputRecord {
            partition,
            offset,
            value,
        }
    }
}

impl From<InputRecord> for (i32, i64, i64) {
    fn from(r: InputRecord) -> Self {
        (r.partition, r.offset, r.value)
    }
}

/// One output record as read back: where it sits, the input it reflects and the transaction
/// that wrote it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(
    from = "(i32, i64, i32, i64, i64, u64)",
    into = "(i32, i64, i32, i64, i64, u64)"
)]
pub struct OutputRecord {
    /// Partition of `eos-out`.
    pub partition: i32,
    /// Offset in it.
    pub offset: i64,
    /// The input record it was made from.
    pub input: InputRecord,
    /// The pipeline transaction (`txn`) that wrote it.
    pub txn: u64,
}

impl From<(i32, i64, i32, i64, i64, u64)> for OutputRecord {
    fn from((partition, offset, ip, io, iv, txn): (i32, i64, i32, i64, i64, u64)) -> Self {
        OutputRecord {
            partition,
            offset,
            input: InputRecord::from((ip, io, iv)),
            txn,
        }
    }
}

impl From<OutputRecord> for (i32, i64, i32, i64, i64, u64) {
    fn from(r: OutputRecord) -> Self {
        (
            r.partition,
            r.offset,
            r.input.partition,
            r.input.offset,
            r.input.value,
            r.txn,
        )
    }
}

/// The value of a `pipeline` op: one poll-transform-produce-commit transaction.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PipelineValue {
    /// Run-unique transaction number; each output record carries it.
    pub txn: u64,
    /// The producer's `transactional.id`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub producer: Option<String>,
    /// Input records consumed (one output record each).
    #[serde(default)]
    pub inputs: Vec<InputRecord>,
    /// Input partition → next offset committed for the group.
    #[serde(default)]
    pub offsets: BTreeMap<i32, i64>,
    /// True when the offsets were committed inside the transaction (KIP-98/447); false when
    /// committed after it with a plain commit.
    #[serde(default = "yes")]
    pub offsets_in_txn: bool,
    /// Rebalances the consumer saw during the op, in words.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub rebalances: Vec<String>,
    /// The process crashed right after the transaction's commit returned (before a plain
    /// offset commit, when offsets are committed outside the transaction) and restarted.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub crashed_after_commit: bool,
    /// True when the offsets went to the transaction with the consumer's group metadata
    /// (generation and member id: KIP-447's fence); false when with the group id alone.
    #[serde(default = "yes")]
    pub group_metadata: bool,
    /// A zombie: the member paused this long after its sends, with the transaction open and
    /// its heartbeats stopped, before it committed its offsets and the transaction.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub paused_ms: Option<u64>,
}

fn yes() -> bool {
    true
}

/// The value of an `eos-read` op: one batch of the final reads of a topic.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EosReadValue {
    /// [`OUTPUT_TOPIC`] or [`INPUT_TOPIC`].
    pub topic: String,
    /// The records, as raw tuples (decode with [`EosReadValue::outputs`] / [`EosReadValue::inputs`]).
    pub records: Vec<serde_json::Value>,
}

/// The value of the eos workload's `log-end` op: how far the final read of a topic got.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct EosEndValue {
    /// The topic read.
    pub topic: String,
    /// Partition → position the read reached, reading from offset 0.
    pub ends: BTreeMap<i32, i64>,
    /// Partition → high watermark (log end) when the read finished.
    #[serde(default)]
    pub high_watermarks: BTreeMap<i32, i64>,
}

impl EosEndValue {
    /// True when every partition was read to its high watermark: nothing of the topic, not
    /// even an open transaction's records, was left unread.
    pub fn covers_log(&self) -> bool {
        !self.high_watermarks.is_empty()
            && self
                .high_watermarks
                .iter()
                .all(|(p, hw)| self.ends.get(p).is_some_and(|end| end >= hw))
    }
}

/// The value of a `group-offsets` op: the group's committed offsets after the pipeline ended.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct GroupOffsetsValue {
    /// The group.
    pub group: String,
    /// Input partition → committed offset (the next record to process).
    pub offsets: BTreeMap<i32, i64>,
}

/// The records of an `eos-read` value of one topic, decoded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EosRecords {
    /// `eos-out` records.
    Outputs(Vec<OutputRecord>),
    /// `eos-in` records.
    Inputs(Vec<InputRecord>),
}

impl EosReadValue {
    /// Decodes the records by topic.
    ///
    /// # Errors
    /// The JSON error when a record does not have the topic's shape, or the topic is unknown.
    pub fn decode(json: &serde_json::Value) -> Result<EosRecords, serde_json::Error> {
        #[derive(Deserialize)]
        struct Raw<T> {
            topic: String,
            records: Vec<T>,
        }
        let topic = json.get("topic").and_then(|t| t.as_str()).unwrap_or("");
        match topic {
            OUTPUT_TOPIC => {
                let raw: Raw<OutputRecord> = Raw::deserialize(json)?;
                debug_assert_eq!(raw.topic, OUTPUT_TOPIC);
                Ok(EosRecords::Outputs(raw.records))
            }
            INPUT_TOPIC => {
                let raw: Raw<InputRecord> = Raw::deserialize(json)?;
                debug_assert_eq!(raw.topic, INPUT_TOPIC);
                Ok(EosRecords::Inputs(raw.records))
            }
            other => Err(serde::de::Error::custom(format!(
                "unknown eos topic {other:?} (expected {OUTPUT_TOPIC} or {INPUT_TOPIC})"
            ))),
        }
    }

    /// The JSON value of a batch of output records.
    pub fn outputs(records: &[OutputRecord]) -> serde_json::Value {
        serde_json::json!({"topic": OUTPUT_TOPIC, "records": records})
    }

    /// The JSON value of a batch of input records.
    pub fn inputs(records: &[InputRecord]) -> serde_json::Value {
        serde_json::json!({"topic": INPUT_TOPIC, "records": records})
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_round_trip_in_the_documented_shape() {
        let out = OutputRecord::from((1, 9, 0, 41, 1041, 7));
        let json = EosReadValue::outputs(&[out]);
        assert_eq!(
            json.to_string(),
            r#"{"records":[[1,9,0,41,1041,7]],"topic":"eos-out"}"#
        );
        assert_eq!(
            EosReadValue::decode(&json).unwrap(),
            EosRecords::Outputs(vec![out])
        );
        let pipeline: PipelineValue =
            serde_json::from_str(r#"{"txn": 7, "inputs": [[0, 41, 1041]], "offsets": {"0": 42}}"#)
                .unwrap();
        assert!(pipeline.offsets_in_txn);
        assert_eq!(pipeline.offsets[&0], 42);
        assert_eq!(pipeline.inputs[0].value, 1041);
        let bad = serde_json::json!({"topic": "eos-out", "records": [[1, 2]]});
        assert!(EosReadValue::decode(&bad).is_err());
        let end = EosEndValue {
            topic: OUTPUT_TOPIC.into(),
            ends: [(0, 5)].into(),
            high_watermarks: [(0, 6)].into(),
        };
        assert!(!end.covers_log());
    }
}
