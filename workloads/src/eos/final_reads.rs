//! The eos workload's final phase: `eos-out` read read_committed from offset 0 until every
//! partition's position reaches its high watermark (proof that nothing, not even an open
//! transaction, was left unread), the group's committed offsets (OffsetFetch, require_stable),
//! and `eos-in` read in full. Each batch is an `eos-read` op; each topic ends with a `log-end`
//! op giving the positions reached and the high watermarks.

use std::collections::BTreeMap;
use std::time::Duration;

use logjam_client::consumer::{Consumer, SeekTo};
use logjam_client::ids::TopicPartition;
use logjam_history::{
    EosEndValue, EosReadValue, Function, GroupOffsetsValue, InputRecord, OpType, OpValue,
    OutputRecord, Process, ProcessId,
};

use super::{EosSettings, parse_output_value, properties};
use crate::recorder::{RecordError, Recorder};

/// How often the high watermarks are probed again while reading.
const PROBE_EVERY: Duration = Duration::from_secs(1);

/// The final reader: one fresh process.
pub(super) struct FinalReader<'a> {
    pub(super) process: ProcessId,
    pub(super) settings: &'a EosSettings,
    pub(super) recorder: &'a Recorder,
}

impl FinalReader<'_> {
    fn record(
        &self,
        op_type: OpType,
        f: Function,
        value: serde_json::Value,
        error: Option<String>,
    ) -> Result<(), RecordError> {
        self.recorder
            .record(
                Process::Client(self.process),
                op_type,
                f,
                OpValue::Json(value),
                error.map(Into::into),
            )
            .map(drop)
    }

    fn partitions(&self, topic: &str) -> Vec<TopicPartition> {
        (0..self.settings.partitions)
            .map(|p| TopicPartition::new(topic.to_owned(), p as i32))
            .collect()
    }

    /// Every partition's high watermark (read_uncommitted log end), from a throwaway consumer.
    async fn high_watermarks(&self, topic: &str) -> BTreeMap<i32, i64> {
        let Ok(mut probe) = Consumer::from_properties(properties(&self.settings.consumer)) else {
            return BTreeMap::new();
        };
        let partitions = self.partitions(topic);
        probe.assign(partitions.clone());
        for tp in &partitions {
            let _ = probe.seek(tp, SeekTo::Latest);
        }
        let _ = probe.poll(Duration::from_millis(300)).await;
        partitions
            .iter()
            .filter_map(|tp| Some((tp.partition.0, probe.position(tp)?.0)))
            .collect()
    }

    /// Reads `topic` from the start until every position reaches the high watermark.
    pub(super) async fn read_topic(
        &self,
        topic: &str,
        read_committed: bool,
        deadline: tokio::time::Instant,
    ) -> Result<(), RecordError> {
        let isolation = if read_committed {
            "read_committed"
        } else {
            "read_uncommitted"
        };
        let mut consumer = match Consumer::from_properties(
            properties(&self.settings.consumer).chain([("isolation.level", isolation)]),
        ) {
            Ok(c) => c,
            Err(error) => {
                let value = serde_json::json!({ "topic": topic, "records": [] });
                self.record(OpType::Invoke, Function::EosRead, value.clone(), None)?;
                return self.record(
                    OpType::Fail,
                    Function::EosRead,
                    value,
                    Some(error.to_string()),
                );
            }
        };
        let partitions = self.partitions(topic);
        consumer.assign(partitions.clone());
        for tp in &partitions {
            let _ = consumer.seek(tp, SeekTo::Earliest);
        }
        let mut high = self.high_watermarks(topic).await;
        let mut next_probe = tokio::time::Instant::now() + PROBE_EVERY;
        let positions = |consumer: &Consumer| -> BTreeMap<i32, i64> {
            partitions
                .iter()
                .filter_map(|tp| Some((tp.partition.0, consumer.position(tp)?.0)))
                .collect()
        };
        loop {
            let reached = positions(&consumer);
            let done = !high.is_empty()
                && high.len() == partitions.len()
                && high
                    .iter()
                    .all(|(p, hw)| reached.get(p).is_some_and(|r| r >= hw));
            if done || tokio::time::Instant::now() >= deadline {
                break;
            }
            if tokio::time::Instant::now() >= next_probe {
                next_probe += PROBE_EVERY;
                high = self.high_watermarks(topic).await;
            }
            let records = match consumer.poll(Duration::from_millis(200)).await {
                Ok(records) => records,
                Err(_) => continue,
            };
            if records.is_empty() {
                continue;
            }
            let value = if topic == self.settings.output_topic {
                let out: Vec<OutputRecord> = records
                    .iter()
                    .filter_map(|r| {
                        let text = String::from_utf8_lossy(r.value.as_deref()?).into_owned();
                        let (input, txn) = parse_output_value(&text)?;
                        Some(OutputRecord {
                            partition: r.partition.partition.0,
                            offset: r.offset.0,
                            input,
                            txn,
                        })
                    })
                    .collect();
                EosReadValue::outputs(&out)
            } else {
                let inputs: Vec<InputRecord> = records
                    .iter()
                    .filter_map(|r| {
                        let text = String::from_utf8_lossy(r.value.as_deref()?).into_owned();
                        Some(InputRecord {
                            partition: r.partition.partition.0,
                            offset: r.offset.0,
                            value: text.trim().parse().ok()?,
                        })
                    })
                    .collect();
                EosReadValue::inputs(&inputs)
            };
            self.record(
                OpType::Invoke,
                Function::EosRead,
                serde_json::json!({ "topic": topic, "records": [] }),
                None,
            )?;
            self.record(OpType::Ok, Function::EosRead, value, None)?;
        }
        let end = EosEndValue {
            topic: topic.to_owned(),
            ends: positions(&consumer),
            high_watermarks: high,
        };
        let value = serde_json::to_value(end).expect("plain data serializes");
        self.record(
            OpType::Invoke,
            Function::LogEnd,
            serde_json::json!({ "topic": topic }),
            None,
        )?;
        self.record(OpType::Ok, Function::LogEnd, value, None)
    }

    /// The group's committed offsets of every input partition, retried until `deadline`.
    pub(super) async fn group_offsets(
        &self,
        deadline: tokio::time::Instant,
    ) -> Result<(), RecordError> {
        let group = self.settings.group.clone();
        self.record(
            OpType::Invoke,
            Function::GroupOffsets,
            serde_json::json!({ "group": group }),
            None,
        )?;
        let partitions = self.partitions(&self.settings.input_topic);
        let mut last_error = String::from("no attempt before the deadline");
        while tokio::time::Instant::now() < deadline {
            let mut consumer = match group_observer(self.settings) {
                Ok(c) => c,
                Err(error) => {
                    last_error = error.to_string();
                    break;
                }
            };
            match consumer.committed(&partitions).await {
                Ok(committed) => {
                    let value = GroupOffsetsValue {
                        group,
                        offsets: committed
                            .into_iter()
                            .map(|(tp, o)| (tp.partition.0, o.0))
                            .collect(),
                    };
                    let json = serde_json::to_value(value).expect("plain data serializes");
                    return self.record(OpType::Ok, Function::GroupOffsets, json, None);
                }
                Err(error) => {
                    last_error = error.to_string();
                    tokio::time::sleep(Duration::from_millis(500)).await;
                }
            }
        }
        self.record(
            OpType::Fail,
            Function::GroupOffsets,
            serde_json::json!({ "group": group }),
            Some(last_error),
        )
    }
}

/// A consumer of the pipeline's group, subscribed to the input but never joining (no poll),
/// to read the group's committed offsets (OffsetFetch) without taking part: the final
/// group-offsets read, and a zombie's wait for its takeover.
pub(super) fn group_observer(settings: &EosSettings) -> logjam_client::Result<Consumer> {
    let mut consumer = Consumer::from_properties(properties(&settings.consumer).chain([
        ("group.id", settings.group.as_str()),
        ("enable.auto.commit", "false"),
    ]))?;
    consumer.subscribe([settings.input_topic.clone()])?;
    Ok(consumer)
}
