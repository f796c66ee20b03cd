//! The queue workload, as in Jepsen's Kafka test: client processes send unique values to keys
//! (one key = one partition of the workload's topic) and poll them back through assigned
//! consumers; clients crash and are replaced; a final phase reads every partition from its
//! start until it has seen the highest offset any op observed.
//!
//! Two halves:
//!
//! - [`QueueGenerator`]: pure and seeded, one per process, so a process's op sequence replays
//!   from the seed whatever the interleaving. Values are unique per key because each process
//!   draws from its own residue class (`count * MAX_PROCESSES + process`).
//! - [`QueueClient`]: runs one logical process against the cluster through `logjam-client`,
//!   recording every invoke and completion. `fail` only when the client says the outcome is
//!   definite (`Certainty::Definite`); otherwise `info`, after which, as in Jepsen, the process
//!   is retired and the harness puts a fresh one (new id, new producer and consumer) in its
//!   place.
//! - [`QueueWorkload`]: the two behind the harness's
//!   [`Workload`](crate::workload::Workload) interface, with the topic and the final reads.
//!   Its fresh processes' consumers start where closed ones stopped reading
//!   ([`crate::handoff`]), not at offset 0, so a long run does not re-read its whole log over
//!   and over.

mod adapter;
mod reads;

pub use adapter::QueueWorkload;
pub use reads::Targets;
pub(crate) use reads::polled_reads;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use logjam_client::consumer::{Consumer, SeekTo};
use logjam_client::ids::{Offset, TopicPartition};
use logjam_client::outcome::Certainty;
use logjam_client::producer::{Producer, ProducerRecord};
use logjam_history::{Function, Key, MicroOp, OpType, OpValue, Process, ProcessId, Value};
use rand::rngs::StdRng;
use rand::{RngExt, SeedableRng};

use crate::handoff::Handoff;
use crate::recorder::{RecordError, Recorder};
use crate::workload::{self, Completion};

/// Generators a run may have: values are unique per key because generator `g` draws from the
/// residue class `g` modulo this.
pub const MAX_PROCESSES: i64 = 1 << 20;

/// One operation a process will invoke.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Invocation {
    /// Send `value` to `key`.
    Send {
        /// The key (partition).
        key: Key,
        /// The value, unique per key.
        value: Value,
    },
    /// One consumer poll.
    Poll,
    /// Replace the consumer's assignment.
    Assign {
        /// The keys to assign.
        keys: Vec<Key>,
    },
    /// Throw the client away and start a fresh one.
    Crash,
}

/// The seeded op source of one process.
#[derive(Debug)]
pub struct QueueGenerator {
    rng: StdRng,
    process: i64,
    keys: u32,
    sent: i64,
    /// The share of crash draws kept (see [`QueueSettings::crash_keep`]).
    crash_keep: f64,
}

impl QueueGenerator {
    /// The generator of `process` in a run seeded with `seed`, over `keys` keys.
    pub fn new(seed: u64, process: u64, keys: u32) -> QueueGenerator {
        let mixed = seed ^ process.wrapping_mul(0x9E37_79B9_7F4A_7C15);
        QueueGenerator {
            rng: StdRng::seed_from_u64(mixed),
            process: process as i64 % MAX_PROCESSES,
            keys: keys.max(1),
            sent: 0,
            crash_keep: 1.0,
        }
    }

    /// Keeps only this share of the crash draws (see [`QueueSettings::crash_keep`]); the others
    /// are drawn again as another op. At 1 (the default) the draws are exactly as without it.
    pub fn with_crash_keep(mut self, keep: f64) -> QueueGenerator {
        self.crash_keep = keep.clamp(0.0, 1.0);
        self
    }

    /// The next operation: half sends, about 45% polls, 4% re-assignments, 1% crashes (fewer
    /// with [`QueueGenerator::with_crash_keep`]).
    pub fn next_invocation(&mut self) -> Invocation {
        let roll: u32 = self.rng.random_range(0..100);
        match roll {
            0..50 => {
                let key = Key(i64::from(self.rng.random_range(0..self.keys)));
                self.sent += 1;
                Invocation::Send {
                    key,
                    value: Value(self.sent * MAX_PROCESSES + self.process),
                }
            }
            50..95 => Invocation::Poll,
            95..99 => {
                let keys = (0..self.keys)
                    .filter(|_| self.rng.random_bool(0.5))
                    .map(|key| Key(i64::from(key)))
                    .collect::<Vec<_>>();
                let keys = if keys.is_empty() { vec![Key(0)] } else { keys };
                Invocation::Assign { keys }
            }
            _ if self.crash_keep >= 1.0 || self.rng.random_bool(self.crash_keep) => {
                Invocation::Crash
            }
            _ => self.next_invocation(),
        }
    }
}

impl workload::Generator for QueueGenerator {
    type Op = Invocation;

    fn next_op(&mut self) -> Invocation {
        self.next_invocation()
    }
}

/// Client settings of a queue run.
#[derive(Debug, Clone)]
pub struct QueueSettings {
    /// The topic whose partitions are the keys.
    pub topic: String,
    /// Number of keys (= partitions).
    pub keys: u32,
    /// Producer properties (Kafka names), `bootstrap.servers` included.
    pub producer: Vec<(String, String)>,
    /// Consumer properties (Kafka names), `bootstrap.servers` included.
    pub consumer: Vec<(String, String)>,
    /// How long one poll waits for records.
    pub poll_timeout: Duration,
    /// The share of the generator's crash draws (1% of ops) kept: [`crash_keep`] of the run's
    /// rate.
    pub crash_keep: f64,
    /// How long a send may take before it is recorded as indeterminate.
    pub send_timeout: Duration,
    /// How long the final reads go on at the end the cluster reports while acknowledged
    /// offsets lie beyond it: a leader catching up, a truncated log, or, read_committed, a
    /// last stable offset an open transaction holds until its coordinator aborts it
    /// ([`FINAL_READ_GRACE`] unless the workload needs longer).
    pub final_read_grace: Duration,
}

/// Up to this rate (ops/s) every crash the generator draws (1% of ops) is kept.
pub const CRASH_RATE_FULL: f64 = 100.0;

/// The share of crash draws kept at `rate` ops/s: all up to [`CRASH_RATE_FULL`], above it
/// `CRASH_RATE_FULL / rate`, so crashes stay near one a second over all processes.
///
/// Why: Jepsen crashes each client about every 30 s whatever the rate
/// (`crash-client-interval`); a fixed 1% of ops grows with the rate instead. A crashed
/// client's successor reads every partition again from offset 0, so at 10,000 ops/s a
/// hundred fresh consumers a second re-read the log, and those re-reads, not the workload,
/// were most of what the clients, the brokers and the checkers did. At the default rate (100)
/// and below nothing changes.
pub fn crash_keep(rate: f64) -> f64 {
    // Written so a rate that is not a number keeps every crash instead of a NaN share.
    if rate > CRASH_RATE_FULL {
        CRASH_RATE_FULL / rate
    } else {
        1.0
    }
}

/// A logical client process.
pub struct QueueClient {
    process: ProcessId,
    settings: Arc<QueueSettings>,
    recorder: Arc<Recorder>,
    targets: Arc<Targets>,
    producer: Option<Producer>,
    consumer: Option<Consumer>,
    /// Where a fresh consumer takes its starting positions and a closing one leaves its own
    /// ([`Handoff`]); `None`: every fresh consumer starts from the start.
    handoff: Option<Arc<Handoff>>,
    /// The process ran a `crash` op: it hands on a start from the start.
    crashed: bool,
}

impl std::fmt::Debug for QueueClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("QueueClient")
            .field("process", &self.process)
            .finish_non_exhaustive()
    }
}

fn properties(list: &[(String, String)]) -> impl Iterator<Item = (&str, &str)> {
    list.iter()
        .map(|(key, value)| (key.as_str(), value.as_str()))
}

impl QueueClient {
    /// A fresh process `process`; it connects on its first op.
    pub fn new(
        process: ProcessId,
        settings: Arc<QueueSettings>,
        recorder: Arc<Recorder>,
        targets: Arc<Targets>,
    ) -> QueueClient {
        QueueClient {
            process,
            settings,
            recorder,
            targets,
            producer: None,
            consumer: None,
            handoff: None,
            crashed: false,
        }
    }

    /// Takes its consumer's starting positions from `handoff` and leaves its own there when it
    /// closes (after a crash: a start from the start for the next; see [`crate::handoff`]).
    pub fn with_handoff(mut self, handoff: Arc<Handoff>) -> QueueClient {
        self.handoff = Some(handoff);
        self
    }

    /// The process id ops are recorded under now.
    pub fn process(&self) -> ProcessId {
        self.process
    }

    fn partition(&self, key: Key) -> TopicPartition {
        TopicPartition::new(self.settings.topic.clone(), key.0 as i32)
    }

    fn record(
        &self,
        op_type: OpType,
        f: Function,
        value: OpValue,
        error: Option<String>,
    ) -> Result<(), RecordError> {
        self.recorder
            .record(
                Process::Client(self.process),
                op_type,
                f,
                value,
                error.map(Into::into),
            )
            .map(drop)
    }

    /// Closes the producer (flushing what it still holds, up to `delivery.timeout.ms`) and
    /// drops the consumer.
    pub async fn close(mut self) {
        if let (Some(handoff), true) = (&self.handoff, self.crashed) {
            // As Jepsen's client after a crash: the next fresh consumer starts from the start.
            handoff.crashed();
        } else if let (Some(handoff), Some(consumer)) = (&self.handoff, self.consumer.take()) {
            let positions = consumer
                .assignment()
                .into_iter()
                .filter_map(|partition| {
                    let offset = consumer.position(&partition)?;
                    Some((Key(i64::from(partition.partition.0)), offset.0))
                })
                .collect();
            handoff.deposit(positions);
        }
        self.consumer = None;
        if let Some(producer) = self.producer.take() {
            producer.close().await;
        }
    }

    fn producer(&mut self) -> Result<&Producer, String> {
        if self.producer.is_none() {
            let producer = Producer::from_properties(properties(&self.settings.producer))
                .map_err(|error| format!("producer: {error}"))?;
            self.producer = Some(producer);
        }
        Ok(self.producer.as_ref().expect("just created"))
    }

    fn consumer(&mut self) -> Result<&mut Consumer, String> {
        if self.consumer.is_none() {
            let mut consumer = Consumer::from_properties(properties(&self.settings.consumer))
                .map_err(|error| format!("consumer: {error}"))?;
            consumer.assign((0..self.settings.keys).map(|key| self.partition(Key(i64::from(key)))));
            if let Some(positions) = self.handoff.as_ref().and_then(|h| h.take()) {
                for (key, offset) in positions {
                    // A key no longer in the topic's range is not assigned: nothing to seek.
                    let _ = consumer.seek(&self.partition(key), SeekTo::Offset(Offset(offset)));
                }
            }
            self.consumer = Some(consumer);
        }
        Ok(self.consumer.as_mut().expect("just created"))
    }

    /// Invokes one operation and records its invoke and completion. After
    /// [`Completion::Info`] (an indeterminate send, or a crash) the process is done: the
    /// caller closes it and starts a fresh one.
    ///
    /// # Errors
    /// Only when the history cannot be written; cluster errors become `fail`/`info` ops.
    pub async fn invoke(&mut self, invocation: Invocation) -> Result<Completion, RecordError> {
        match invocation {
            Invocation::Send { key, value } => self.send(key, value).await,
            Invocation::Poll => self.poll(Function::Poll).await,
            Invocation::Assign { keys } => {
                let value = OpValue::Keys(keys.clone());
                self.record(OpType::Invoke, Function::Assign, value.clone(), None)?;
                let partitions: Vec<TopicPartition> =
                    keys.iter().map(|key| self.partition(*key)).collect();
                match self.consumer() {
                    Ok(consumer) => {
                        consumer.assign(partitions);
                        self.record(OpType::Ok, Function::Assign, value, None)?;
                        Ok(Completion::Ok)
                    }
                    Err(error) => {
                        self.record(OpType::Fail, Function::Assign, value, Some(error))?;
                        Ok(Completion::Fail)
                    }
                }
            }
            Invocation::Crash => {
                self.crashed = true;
                self.record(OpType::Invoke, Function::Crash, OpValue::Null, None)?;
                self.record(OpType::Info, Function::Crash, OpValue::Null, None)?;
                Ok(Completion::Info)
            }
        }
    }

    async fn send(&mut self, key: Key, value: Value) -> Result<Completion, RecordError> {
        let micro = |offset| OpValue::MicroOps(vec![MicroOp::Send { key, value, offset }]);
        self.record(OpType::Invoke, Function::Send, micro(None), None)?;
        let record = ProducerRecord::new(self.settings.topic.clone(), value.0.to_string())
            .with_partition(key.0 as i32);
        let timeout = self.settings.send_timeout;
        let outcome = match self.producer() {
            Err(error) => Err((Certainty::Definite, error)),
            Ok(producer) => match tokio::time::timeout(timeout, producer.send(record)).await {
                Err(_) => Err((
                    Certainty::Indefinite,
                    "send() blocked past the timeout".to_owned(),
                )),
                Ok(Err(error)) => Err((error.certainty(), error.to_string())),
                Ok(Ok(delivery)) => match tokio::time::timeout(timeout, delivery).await {
                    Err(_) => Err((
                        Certainty::Indefinite,
                        "no acknowledgement in time".to_owned(),
                    )),
                    Ok(Err(error)) => Err((error.certainty, error.to_string())),
                    Ok(Ok(metadata)) => Ok(metadata.offset.map(|offset| offset.0)),
                },
            },
        };
        match outcome {
            Ok(offset) => {
                if let Some(offset) = offset {
                    self.targets.observe(key, offset);
                }
                self.record(
                    OpType::Ok,
                    Function::Send,
                    micro(offset.map(logjam_history::Offset)),
                    None,
                )?;
                Ok(Completion::Ok)
            }
            Err((Certainty::Definite, error)) => {
                self.record(OpType::Fail, Function::Send, micro(None), Some(error))?;
                Ok(Completion::Fail)
            }
            Err((Certainty::Indefinite, error)) => {
                self.record(OpType::Info, Function::Send, micro(None), Some(error))?;
                Ok(Completion::Info)
            }
        }
    }

    /// One poll, recorded as `f` (`poll`, or `final-poll` in the final phase). A failed poll
    /// changed nothing on the cluster, so it is a definite `fail`.
    async fn poll(&mut self, f: Function) -> Result<Completion, RecordError> {
        let invoke = OpValue::MicroOps(vec![MicroOp::Poll { reads: None }]);
        self.record(OpType::Invoke, f.clone(), invoke.clone(), None)?;
        let timeout = self.settings.poll_timeout;
        let targets = self.targets.clone();
        let polled = match self.consumer() {
            Err(error) => Err(error),
            Ok(consumer) => match consumer.poll(timeout).await {
                Ok(records) => Ok(polled_reads(consumer, records, &targets)),
                Err(error) => Err(error.to_string()),
            },
        };
        match polled {
            Err(error) => {
                self.record(OpType::Fail, f, invoke, Some(error))?;
                Ok(Completion::Fail)
            }
            Ok(reads) => {
                self.record(
                    OpType::Ok,
                    f,
                    OpValue::MicroOps(vec![MicroOp::Poll { reads: Some(reads) }]),
                    None,
                )?;
                Ok(Completion::Ok)
            }
        }
    }

    /// Each key's log end offset, from a throwaway consumer that seeks to the end (a key
    /// whose end cannot be learned is left out).
    async fn log_ends(&self, keys: &[Key]) -> Vec<(Key, i64)> {
        let Ok(mut probe) = Consumer::from_properties(properties(&self.settings.consumer)) else {
            return Vec::new();
        };
        let partitions: Vec<TopicPartition> = keys.iter().map(|key| self.partition(*key)).collect();
        probe.assign(partitions.clone());
        for partition in &partitions {
            let _ = probe.seek(partition, SeekTo::Latest);
        }
        // A poll resolves the seeks; anything it returns was written after the end was taken.
        let _ = probe.poll(Duration::from_millis(500)).await;
        keys.iter()
            .zip(&partitions)
            .filter_map(|(key, partition)| Some((*key, probe.position(partition)?.0)))
            .collect()
    }

    /// The final phase of a fresh process: a consumer assigned every key from the start,
    /// polling until every key reached `targets` or `deadline` passed.
    ///
    /// # Errors
    /// Only when the history cannot be written.
    pub async fn final_reads(
        &mut self,
        targets: &BTreeMap<i64, i64>,
        deadline: tokio::time::Instant,
    ) -> Result<(), RecordError> {
        let keys: Vec<Key> = targets.keys().map(|key| Key(*key)).collect();
        let value = OpValue::Keys(keys.clone());
        self.record(OpType::Invoke, Function::Assign, value.clone(), None)?;
        match self.consumer() {
            Err(error) => return self.record(OpType::Fail, Function::Assign, value, Some(error)),
            Ok(consumer) => {
                let partitions: Vec<TopicPartition> = consumer.assignment();
                for partition in &partitions {
                    let _ = consumer.seek(partition, SeekTo::Earliest);
                }
            }
        }
        self.record(OpType::Ok, Function::Assign, value, None)?;
        // Read to each partition's end as the cluster reports it now (sends acknowledged
        // without an offset, acks=0, never raised the observed targets). Offsets acknowledged
        // beyond that end may be late (a leader still catching up) or gone (a truncated log):
        // keep reading and probing for a grace period, then settle for the end the cluster
        // reports, and say so in the history, so the checkers can call writes beyond it lost.
        let observed = targets.clone();
        let mut ends: BTreeMap<i64, i64> = self
            .log_ends(&keys)
            .await
            .into_iter()
            .map(|(key, end)| (key.0, end))
            .collect();
        let mut reached: BTreeMap<i64, i64> = targets.keys().map(|key| (*key, -1)).collect();
        let mut at_end_since: Option<tokio::time::Instant> = None;
        let mut next_probe = tokio::time::Instant::now() + Duration::from_secs(1);
        while tokio::time::Instant::now() < deadline {
            let at_end = reached
                .iter()
                .all(|(key, offset)| *offset >= ends.get(key).copied().unwrap_or(0) - 1);
            let at_observed = reached
                .iter()
                .all(|(key, offset)| *offset >= observed.get(key).copied().unwrap_or(-1));
            if at_end && at_observed {
                break;
            }
            if at_end {
                let since = *at_end_since.get_or_insert_with(tokio::time::Instant::now);
                if since.elapsed() >= self.settings.final_read_grace {
                    break;
                }
            } else {
                at_end_since = None;
            }
            if tokio::time::Instant::now() >= next_probe {
                next_probe += Duration::from_secs(1);
                for (key, end) in self.log_ends(&keys).await {
                    ends.insert(key.0, end);
                }
            }
            self.poll(Function::FinalPoll).await?;
            if let Some(consumer) = &self.consumer {
                for (key, offset) in reached.iter_mut() {
                    let partition = TopicPartition::new(self.settings.topic.clone(), *key as i32);
                    if let Some(position) = consumer.position(&partition) {
                        *offset = position.0 - 1;
                    }
                }
            }
        }
        // The ends the final reads reached: every offset below was read.
        let reached_ends: serde_json::Map<String, serde_json::Value> = reached
            .iter()
            .filter(|(key, offset)| ends.get(*key).is_some_and(|end| **offset >= *end - 1))
            .map(|(key, offset)| (key.to_string(), serde_json::json!(offset + 1)))
            .collect();
        let value = OpValue::Json(serde_json::json!({ "ends": reached_ends }));
        self.record(OpType::Invoke, Function::LogEnd, value.clone(), None)?;
        self.record(OpType::Ok, Function::LogEnd, value, None)?;
        Ok(())
    }
}

/// How long the final reads keep looking for acknowledged offsets beyond the log end the
/// cluster reports before settling for that end: the default of
/// [`QueueSettings::final_read_grace`].
pub const FINAL_READ_GRACE: Duration = Duration::from_secs(5);

#[cfg(test)]
mod tests;
