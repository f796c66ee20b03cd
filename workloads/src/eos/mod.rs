//! The eos workload: a consume-transform-produce pipeline, as Kafka Streams runs one with
//! exactly-once. An idempotent producer fills the input topic `eos-in` with unique values
//! (`produce` ops, the producer workload's schema); N pipeline processes in one consumer group
//! (classic `subscribe`, `read_committed`, no auto-commit) each run `pipeline` ops: poll a
//! batch, begin a transaction, produce one record per input to `eos-out` carrying the input's
//! partition, offset and value and the transaction's number, add the consumed offsets to the
//! transaction with the consumer's group metadata (KIP-447 fencing), commit. Schema:
//! `logjam_history::eos`. The final phase (`final.rs`) reads `eos-out` read_committed to its
//! high watermark, the group's committed offsets, and `eos-in`.
//!
//! The group's members are a fixed pool ([`Members`], one per partition up to the run's
//! concurrency, as Kafka Streams' threads): each pipeline op borrows one (`fail` "every
//! pipeline member is busy" when none is free within a second).
//!
//! Outcomes: `ok` committed; `fail` aborted (the member is closed, leaving the group, and its
//! slot starts afresh, so the next op on it rejoins and reads from the group's committed
//! offsets, as an application restarts its pipeline after an abort); `info` when the commit's
//! outcome is unknown (the harness retires the process, which closes its member).
//!
//! A zombie (`--set logjam.eos=zombie`): a few pipeline ops pause their member mid-transaction,
//! after their sends and before their offsets and commit, for longer than the consumer's
//! `session.timeout.ms` (heartbeats stop too, as in a GC pause), so the group removes the
//! member and gives its partitions to another, which processes the same inputs again. Then the
//! zombie resumes and tries to commit: KIP-447's fence (the group metadata in TxnOffsetCommit)
//! refuses it. One zombie at a time. `group_metadata = false` sends the offsets with the group
//! id alone (the pre-2.5 `sendOffsetsToTransaction(offsets, groupId)`, which is only safe with
//! one producer per input partition): no generation to fence, so the zombie commits and its
//! inputs are in the output twice.
//!
//! `offsets_in_txn = false` is the common mistake (`--set logjam.eos=offsets-outside-transaction`):
//! offsets are committed with a plain `commit_sync` after the transaction, so a failure or a
//! rebalance between the two reprocesses committed input: duplicates in the output.

mod adapter;
mod final_reads;

pub use adapter::{EosSettings, EosWorkload};

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Instant;

use logjam_client::ConsumerGroupMetadata;
use logjam_client::consumer::Consumer;
use logjam_client::ids::{Offset, TopicPartition};
use logjam_client::outcome::Certainty;
use logjam_client::producer::{Producer, ProducerRecord};
use logjam_history::{
    Function, InputRecord, OpType, OpValue, PipelineValue, Process, ProcessId, ProduceValue,
    ProducedSend, SendOutcome,
};
use rand::rngs::StdRng;
use rand::{RngExt, SeedableRng};

use crate::recorder::{RecordError, Recorder};
use crate::workload::{self, Completion};

/// Input records written per `produce` op.
pub const FEED_SIZE: usize = 10;

/// One operation of an eos process.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EosInvocation {
    /// Write these `(partition, value)` input records with the idempotent producer.
    Feed(Vec<(i32, i64)>),
    /// One pipeline transaction.
    Pipeline,
    /// One pipeline transaction, then the process crashes as the commit returns (before a
    /// plain offset commit, in the common mistake's mode) and restarts: it leaves the group
    /// and rejoins with fresh clients.
    PipelineThenCrash,
    /// One pipeline transaction whose member pauses after its sends, past the session
    /// timeout, before it commits its offsets and the transaction (a zombie).
    PipelineZombie,
}

/// Pipeline ops that crash after their commit, in percent, by default.
pub const CRASH_PERCENT: u32 = 3;

/// The seeded op source of a run: a third of the ops feed the input, the rest process it.
#[derive(Debug)]
pub struct EosGenerator {
    rng: StdRng,
    partitions: u32,
    next_value: i64,
    crash_percent: u32,
    zombie_percent: u32,
}

impl EosGenerator {
    /// The generator of a run seeded with `seed`, over `partitions` input partitions, with
    /// `crash_percent`% of pipeline ops crashing their process as the commit returns.
    pub fn new(seed: u64, partitions: u32, crash_percent: u32) -> EosGenerator {
        EosGenerator {
            rng: StdRng::seed_from_u64(seed ^ 0x656f_7300),
            partitions: partitions.max(1),
            next_value: 0,
            crash_percent: crash_percent.min(100),
            zombie_percent: 0,
        }
    }

    /// The same generator with `percent`% of pipeline ops zombies (after the crashing ones).
    pub fn with_zombie_percent(mut self, percent: u32) -> EosGenerator {
        self.zombie_percent = percent.min(100);
        self
    }

    /// The next operation.
    pub fn next_invocation(&mut self) -> EosInvocation {
        if self.rng.random_range(0..3) == 0 {
            let values = (0..FEED_SIZE)
                .map(|_| {
                    self.next_value += 1;
                    let partition = self.rng.random_range(0..self.partitions) as i32;
                    (partition, self.next_value)
                })
                .collect();
            EosInvocation::Feed(values)
        } else {
            let roll = self.rng.random_range(0..100);
            if roll < self.crash_percent {
                EosInvocation::PipelineThenCrash
            } else if roll < self.crash_percent + self.zombie_percent {
                EosInvocation::PipelineZombie
            } else {
                EosInvocation::Pipeline
            }
        }
    }
}

impl workload::Generator for EosGenerator {
    type Op = EosInvocation;

    fn next_op(&mut self) -> EosInvocation {
        self.next_invocation()
    }
}

/// The value an output record carries: `input partition,input offset,input value,txn`.
pub fn output_value(input: &InputRecord, txn: u64) -> String {
    format!("{},{},{},{txn}", input.partition, input.offset, input.value)
}

/// Parses [`output_value`]'s text.
pub fn parse_output_value(text: &str) -> Option<(InputRecord, u64)> {
    let mut parts = text.split(',').map(str::trim);
    let partition = parts.next()?.parse().ok()?;
    let offset = parts.next()?.parse().ok()?;
    let value = parts.next()?.parse().ok()?;
    let txn = parts.next()?.parse().ok()?;
    Some((
        InputRecord {
            partition,
            offset,
            value,
        },
        txn,
    ))
}

fn properties(list: &[(String, String)]) -> impl Iterator<Item = (&str, &str)> {
    list.iter().map(|(k, v)| (k.as_str(), v.as_str()))
}

/// Pipeline ops that are zombies, in percent, with `logjam.eos=zombie`: with one zombie at a
/// time, about one every few seconds at the harness's default rate.
pub const ZOMBIE_PERCENT: u32 = 2;

/// How a pipeline op ends besides committing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Twist {
    /// Nothing besides.
    None,
    /// The process crashes as the commit returns.
    CrashAfterCommit,
    /// The member pauses mid-transaction, past its session timeout.
    Zombie,
}

/// Why a pipeline op did not commit, and whether that is certain.
struct Failure {
    certainty: Certainty,
    error: String,
}

impl Failure {
    fn definite(error: String) -> Failure {
        Failure {
            certainty: Certainty::Definite,
            error,
        }
    }
}

/// One member slot of the pipeline's group.
enum Slot {
    /// No member: the next op to take the slot creates one (joins, InitProducerId).
    Fresh,
    /// A member between ops: its consumer and transactional producer.
    Idle(Box<(Consumer, Producer)>),
    /// An op is running on it.
    Busy,
}

/// The pipeline's group members, shared by the run's processes: a fixed number of members
/// (Kafka Streams' stream threads), each op borrowing one. Without the pool every fresh
/// harness process would join the group and its idle close leave it again, so the group
/// rebalanced without pause and, under faults, never settled long enough to process anything.
/// A member whose op failed or crashed is closed and its slot started afresh (same
/// `transactional.id`, so the new producer fences the old one).
pub struct Members {
    slots: std::sync::Mutex<Vec<Slot>>,
    /// A zombie is paused now (one at a time, so the pool keeps members to take over).
    zombie: std::sync::atomic::AtomicBool,
}

impl std::fmt::Debug for Members {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Members").finish_non_exhaustive()
    }
}

impl Members {
    /// `count` empty slots (at least one).
    pub fn new(count: u32) -> Members {
        Members {
            slots: std::sync::Mutex::new((0..count.max(1)).map(|_| Slot::Fresh).collect()),
            zombie: std::sync::atomic::AtomicBool::new(false),
        }
    }

    /// An idle member, else a fresh slot; `None` when every slot is busy.
    fn checkout(&self) -> Option<(usize, Option<(Consumer, Producer)>)> {
        let mut slots = self.slots.lock().expect("members");
        if let Some(i) = slots.iter().position(|s| matches!(s, Slot::Idle(_))) {
            let Slot::Idle(clients) = std::mem::replace(&mut slots[i], Slot::Busy) else {
                unreachable!("just found idle");
            };
            return Some((i, Some(*clients)));
        }
        let i = slots.iter().position(|s| matches!(s, Slot::Fresh))?;
        slots[i] = Slot::Busy;
        Some((i, None))
    }

    fn checkin(&self, slot: usize, clients: Option<(Consumer, Producer)>) {
        let mut slots = self.slots.lock().expect("members");
        slots[slot] = match clients {
            Some(clients) => Slot::Idle(Box::new(clients)),
            None => Slot::Fresh,
        };
    }
}

/// One eos process: an idempotent feeder, and while a pipeline op runs, a member of the
/// pipeline's group borrowed from [`Members`].
pub struct EosClient {
    process: ProcessId,
    settings: Arc<EosSettings>,
    recorder: Arc<Recorder>,
    members: Arc<Members>,
    feeder: Option<Producer>,
    feed_seq: u64,
    slot: Option<usize>,
    consumer: Option<Consumer>,
    producer: Option<Producer>,
    txns: u64,
}

impl std::fmt::Debug for EosClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EosClient")
            .field("process", &self.process)
            .finish_non_exhaustive()
    }
}

impl EosClient {
    /// A fresh process; it connects on its first op.
    pub fn new(
        process: ProcessId,
        settings: Arc<EosSettings>,
        recorder: Arc<Recorder>,
        members: Arc<Members>,
    ) -> Self {
        EosClient {
            process,
            settings,
            recorder,
            members,
            feeder: None,
            feed_seq: 0,
            slot: None,
            consumer: None,
            producer: None,
            txns: 0,
        }
    }

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

    /// Invokes one operation and records it.
    ///
    /// # Errors
    /// Only when the history cannot be written.
    pub async fn invoke(&mut self, op: EosInvocation) -> Result<Completion, RecordError> {
        match op {
            EosInvocation::Feed(values) => self.feed(values).await,
            EosInvocation::Pipeline => self.pipeline(Twist::None).await,
            EosInvocation::PipelineThenCrash => self.pipeline(Twist::CrashAfterCommit).await,
            EosInvocation::PipelineZombie => {
                let twist = if self.settings.zombie_pause.is_some()
                    && !self
                        .members
                        .zombie
                        .swap(true, std::sync::atomic::Ordering::SeqCst)
                {
                    Twist::Zombie
                } else {
                    Twist::None
                };
                let completion = self.pipeline(twist).await;
                if twist == Twist::Zombie {
                    self.members
                        .zombie
                        .store(false, std::sync::atomic::Ordering::SeqCst);
                }
                completion
            }
        }
    }

    async fn feed(&mut self, values: Vec<(i32, i64)>) -> Result<Completion, RecordError> {
        let mut sends: Vec<ProducedSend> = values
            .iter()
            .map(|(partition, value)| {
                self.feed_seq += 1;
                ProducedSend::invoked(self.feed_seq, i64::from(*partition), *value)
            })
            .collect();
        let invoke = ProduceValue {
            sends: sends.clone(),
        };
        self.record(OpType::Invoke, Function::Produce, invoke.to_json(), None)?;
        if self.feeder.is_none() {
            match Producer::from_properties(
                properties(&self.settings.producer).chain([("enable.idempotence", "true")]),
            ) {
                Ok(p) => self.feeder = Some(p),
                Err(error) => {
                    for send in &mut sends {
                        send.outcome = Some(SendOutcome::Fail);
                        send.error = Some(error.to_string());
                    }
                    let value = ProduceValue { sends };
                    self.record(OpType::Fail, Function::Produce, value.to_json(), None)?;
                    return Ok(Completion::Fail);
                }
            }
        }
        let feeder = self.feeder.as_ref().expect("just created");
        let timeout = self.settings.send_timeout;
        let mut pending = Vec::new();
        for send in &sends {
            let record =
                ProducerRecord::new(self.settings.input_topic.clone(), send.value.to_string())
                    .with_partition(send.key as i32);
            pending.push((
                Instant::now(),
                tokio::time::timeout(timeout, feeder.send(record)).await,
            ));
        }
        for (send, (started, submitted)) in sends.iter_mut().zip(pending) {
            let delivered = match submitted {
                Err(_) => Err((
                    "send() blocked past the timeout".to_owned(),
                    Certainty::Definite,
                )),
                Ok(Err(error)) => Err((error.to_string(), Certainty::Definite)),
                Ok(Ok(delivery)) => match tokio::time::timeout(timeout, delivery).await {
                    Err(_) => Err((
                        "no acknowledgement in time".to_owned(),
                        Certainty::Indefinite,
                    )),
                    Ok(Err(error)) => {
                        let certainty = error.certainty;
                        Err((error.to_string(), certainty))
                    }
                    Ok(Ok(metadata)) => Ok(metadata),
                },
            };
            send.latency_us = Some(started.elapsed().as_micros() as u64);
            match delivered {
                Ok(metadata) => {
                    send.outcome = Some(SendOutcome::Ok);
                    send.offset = metadata.offset.map(|o| o.0);
                    send.attempts = Some(metadata.attempts);
                }
                Err((error, certainty)) => {
                    send.outcome = Some(match certainty {
                        Certainty::Definite => SendOutcome::Fail,
                        Certainty::Indefinite => SendOutcome::Info,
                    });
                    send.error = Some(error);
                }
            }
        }
        let any_info = sends.iter().any(|s| s.outcome == Some(SendOutcome::Info));
        let all_ok = sends.iter().all(|s| s.outcome == Some(SendOutcome::Ok));
        let value = ProduceValue { sends }.to_json();
        if all_ok {
            self.record(OpType::Ok, Function::Produce, value, None)?;
            Ok(Completion::Ok)
        } else if any_info {
            self.record(OpType::Info, Function::Produce, value, None)?;
            Ok(Completion::Info)
        } else {
            self.record(OpType::Fail, Function::Produce, value, None)?;
            Ok(Completion::Fail)
        }
    }

    fn transactional_id(&self) -> String {
        format!(
            "{}-{}",
            self.settings.transactional_id_prefix,
            self.slot.unwrap_or_default()
        )
    }

    /// Borrows a member, waiting up to a second for one to be free. With
    /// `member_per_process` the process keeps its own member instead (slot = process id).
    async fn checkout(&mut self) -> bool {
        if self.settings.member_per_process {
            self.slot = Some(self.process.0 as usize);
            return true;
        }
        let give_up = Instant::now() + std::time::Duration::from_secs(1);
        loop {
            if let Some((slot, clients)) = self.members.checkout() {
                self.slot = Some(slot);
                if let Some((consumer, producer)) = clients {
                    self.consumer = Some(consumer);
                    self.producer = Some(producer);
                }
                return true;
            }
            if Instant::now() >= give_up {
                return false;
            }
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
    }

    /// Returns the borrowed member to the pool (closed and started afresh when incomplete).
    async fn checkin(&mut self) {
        if self.settings.member_per_process {
            if self.consumer.is_none() || self.producer.is_none() {
                self.reset().await;
            }
            return;
        }
        match (self.consumer.take(), self.producer.take(), self.slot.take()) {
            (Some(consumer), Some(producer), Some(slot)) => {
                self.members.checkin(slot, Some((consumer, producer)));
            }
            (consumer, producer, slot) => {
                self.consumer = consumer;
                self.producer = producer;
                self.slot = slot;
                self.reset().await;
            }
        }
    }

    async fn pipeline(&mut self, twist: Twist) -> Result<Completion, RecordError> {
        self.txns += 1;
        let txn = (self.process.0 << 24) | self.txns;
        if !self.checkout().await {
            let invoke = serde_json::json!({ "txn": txn });
            self.record(OpType::Invoke, Function::Pipeline, invoke.clone(), None)?;
            let error = "every pipeline member is busy".to_owned();
            self.record(OpType::Fail, Function::Pipeline, invoke, Some(error))?;
            return Ok(Completion::Fail);
        }
        self.record(
            OpType::Invoke,
            Function::Pipeline,
            serde_json::json!({ "txn": txn }),
            None,
        )?;
        let mut value = PipelineValue {
            txn,
            producer: Some(self.transactional_id()),
            offsets_in_txn: self.settings.offsets_in_txn,
            group_metadata: self.settings.group_metadata,
            ..PipelineValue::default()
        };
        let outcome = self.run(txn, twist, &mut value).await;
        // A zombie whose pause is over restarts with fresh clients whatever its outcome: its
        // member was removed while it slept.
        let woke = twist == Twist::Zombie && value.paused_ms.is_some();
        let json = serde_json::to_value(&value).expect("plain data serializes");
        match outcome {
            Ok(()) => {
                if woke {
                    self.reset().await;
                } else {
                    self.checkin().await;
                }
                self.record(OpType::Ok, Function::Pipeline, json, None)?;
                Ok(Completion::Ok)
            }
            Err(Failure {
                certainty: Certainty::Definite,
                error,
            }) => {
                // Restart the pipeline: the next op rejoins and reads from the group's
                // committed offsets, so this op's inputs are processed again.
                self.reset().await;
                self.record(OpType::Fail, Function::Pipeline, json, Some(error))?;
                Ok(Completion::Fail)
            }
            Err(Failure { error, .. }) => {
                if woke {
                    self.reset().await;
                }
                self.record(OpType::Info, Function::Pipeline, json, Some(error))?;
                Ok(Completion::Info)
            }
        }
    }

    async fn reset(&mut self) {
        if let Some(consumer) = self.consumer.take() {
            let _ = tokio::time::timeout(self.settings.send_timeout, consumer.close()).await;
        }
        if let Some(producer) = self.producer.take() {
            producer.close().await;
        }
        if let Some(slot) = self.slot.take()
            && !self.settings.member_per_process
        {
            self.members.checkin(slot, None);
        }
    }

    async fn ensure_clients(&mut self) -> Result<(), Failure> {
        if self.consumer.is_none() {
            let mut consumer =
                Consumer::from_properties(properties(&self.settings.consumer).chain([
                    ("group.id", self.settings.group.as_str()),
                    ("enable.auto.commit", "false"),
                    ("isolation.level", "read_committed"),
                ]))
                .map_err(|e| Failure::definite(format!("consumer: {e}")))?;
            consumer
                .subscribe([self.settings.input_topic.clone()])
                .map_err(|e| Failure::definite(format!("subscribe: {e}")))?;
            self.consumer = Some(consumer);
        }
        if self.producer.is_none() {
            let id = self.transactional_id();
            let producer = Producer::from_properties(
                properties(&self.settings.producer).chain([("transactional.id", id.as_str())]),
            )
            .map_err(|e| Failure::definite(format!("producer: {e}")))?;
            tokio::time::timeout(self.settings.send_timeout, producer.init_transactions())
                .await
                .map_err(|_| Failure::definite("init_transactions: no answer in time".into()))?
                .map_err(|e| Failure::definite(format!("init_transactions: {e}")))?;
            self.producer = Some(producer);
        }
        Ok(())
    }

    /// Poll, transform, produce, commit; fills `value` in as it goes.
    async fn run(
        &mut self,
        txn: u64,
        twist: Twist,
        value: &mut PipelineValue,
    ) -> Result<(), Failure> {
        self.ensure_clients().await?;
        let timeout = self.settings.send_timeout;
        let consumer = self.consumer.as_mut().expect("created");
        let polled = consumer.poll(self.settings.poll_timeout).await;
        value.rebalances = consumer
            .take_rebalance_events()
            .iter()
            .map(|e| {
                let names = |tps: &[TopicPartition]| {
                    tps.iter()
                        .map(|tp| tp.partition.0.to_string())
                        .collect::<Vec<_>>()
                        .join(",")
                };
                format!(
                    "generation {} member {}: assigned [{}] revoked [{}] ({:?})",
                    e.generation,
                    e.member_id,
                    names(&e.assigned),
                    names(&e.revoked),
                    e.cause
                )
            })
            .collect();
        let records = polled.map_err(|e| Failure::definite(format!("poll: {e}")))?;
        if records.is_empty() {
            return Ok(());
        }
        let group = consumer
            .group_generation()
            .map(|(member_id, generation_id)| ConsumerGroupMetadata {
                group_id: self.settings.group.clone(),
                generation_id,
                member_id,
                group_instance_id: None,
            });
        let mut offsets: BTreeMap<TopicPartition, Offset> = BTreeMap::new();
        for record in &records {
            let text = record
                .value
                .as_deref()
                .map(String::from_utf8_lossy)
                .unwrap_or_default();
            let Ok(v) = text.trim().parse::<i64>() else {
                continue;
            };
            value.inputs.push(InputRecord {
                partition: record.partition.partition.0,
                offset: record.offset.0,
                value: v,
            });
            let next = offsets
                .entry(record.partition.clone())
                .or_insert(record.offset);
            *next = Offset(next.0.max(record.offset.0 + 1));
        }
        value.offsets = offsets
            .iter()
            .map(|(tp, o)| (tp.partition.0, o.0))
            .collect();
        let producer = self.producer.as_ref().expect("initialised");
        if let Err(error) = producer.begin_transaction() {
            self.producer = None;
            return Err(Failure::definite(format!("begin_transaction: {error}")));
        }
        let mut failed: Option<String> = None;
        let mut deliveries = Vec::new();
        for input in &value.inputs {
            let record =
                ProducerRecord::new(self.settings.output_topic.clone(), output_value(input, txn))
                    .with_partition(input.partition);
            match tokio::time::timeout(timeout, producer.send(record)).await {
                Ok(Ok(delivery)) => deliveries.push(delivery),
                Ok(Err(error)) => {
                    failed = Some(format!("send: {error}"));
                    break;
                }
                Err(_) => {
                    failed = Some("send() blocked past the timeout".into());
                    break;
                }
            }
        }
        if failed.is_none() {
            for delivery in deliveries {
                match tokio::time::timeout(timeout, delivery).await {
                    Ok(Ok(_)) => {}
                    Ok(Err(error)) => {
                        failed = Some(format!("send: {error}"));
                        break;
                    }
                    Err(_) => {
                        failed = Some("no acknowledgement in time".into());
                        break;
                    }
                }
            }
        }
        if failed.is_none()
            && twist == Twist::Zombie
            && let Some(pause) = self.settings.zombie_pause
        {
            // A GC pause with the transaction open: the heartbeats stop as well, the session
            // expires, and the group gives this member's partitions to another member.
            let consumer = self.consumer.as_ref().expect("created");
            consumer.pause_heartbeats(pause);
            tracing::info!(txn, ?pause, "zombie: pausing mid-transaction");
            tokio::time::sleep(pause).await;
            value.paused_ms = Some(pause.as_millis() as u64);
        }
        let group = if self.settings.group_metadata {
            group
        } else {
            // The pre-KIP-447 call: the group id alone, no generation or member to fence.
            Some(ConsumerGroupMetadata {
                group_id: self.settings.group.clone(),
                generation_id: -1,
                member_id: String::new(),
                group_instance_id: None,
            })
        };
        if failed.is_none() && self.settings.offsets_in_txn {
            match &group {
                None => failed = Some("no group generation: cannot commit offsets".into()),
                Some(group) => {
                    match tokio::time::timeout(
                        timeout,
                        producer.send_offsets_to_transaction(&offsets, group),
                    )
                    .await
                    {
                        Ok(Ok(())) => {}
                        Ok(Err(error)) => {
                            failed = Some(format!("send_offsets_to_transaction: {error}"))
                        }
                        Err(_) => {
                            failed = Some("send_offsets_to_transaction: no answer in time".into())
                        }
                    }
                }
            }
        }
        if let Some(error) = failed {
            return Err(self.abort(error).await);
        }
        let producer = self.producer.as_ref().expect("initialised");
        match tokio::time::timeout(timeout, producer.commit_transaction()).await {
            Ok(Ok(())) => {}
            Err(_) => {
                return Err(Failure {
                    certainty: Certainty::Indefinite,
                    error: "commit_transaction: no answer in time".into(),
                });
            }
            Ok(Err(error)) if error.certainty == Certainty::Indefinite => {
                return Err(Failure {
                    certainty: Certainty::Indefinite,
                    error: format!("commit_transaction: {error}"),
                });
            }
            Ok(Err(error)) => return Err(self.abort(format!("commit_transaction: {error}")).await),
        }
        if twist == Twist::CrashAfterCommit {
            // The process dies as the commit returns: whatever it had not committed yet is
            // the next owner's to process again. It restarts with fresh clients.
            value.crashed_after_commit = true;
            self.reset().await;
            return Ok(());
        }
        if !self.settings.offsets_in_txn {
            // The common mistake: the output is committed; the offsets follow separately, and
            // whatever happens in between is processed again by whoever gets the partition.
            let consumer = self.consumer.as_mut().expect("created");
            if let Err(error) = tokio::time::timeout(timeout, consumer.commit_sync())
                .await
                .unwrap_or(Err(logjam_client::error::Error::Closed))
            {
                value
                    .rebalances
                    .push(format!("commit_sync after the transaction failed: {error}"));
                self.reset().await;
            }
        }
        Ok(())
    }

    async fn abort(&mut self, error: String) -> Failure {
        let timeout = self.settings.send_timeout;
        let producer = self.producer.as_ref().expect("initialised");
        let error = match tokio::time::timeout(timeout, producer.abort_transaction()).await {
            Ok(Ok(())) => error,
            Ok(Err(abort)) => format!("{error}; abort_transaction: {abort}"),
            Err(_) => format!("{error}; abort_transaction: no answer in time"),
        };
        Failure::definite(error)
    }

    /// Closes the process's clients (an open transaction is the coordinator's to time out).
    pub async fn close(mut self) {
        self.reset().await;
        if let Some(feeder) = self.feeder.take() {
            feeder.close().await;
        }
    }
}

impl workload::Client for EosClient {
    type Op = EosInvocation;

    fn process(&self) -> ProcessId {
        self.process
    }

    async fn invoke(&mut self, op: EosInvocation) -> Result<Completion, RecordError> {
        EosClient::invoke(self, op).await
    }

    async fn close(self) {
        EosClient::close(self).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn output_values_round_trip_and_inputs_are_unique() {
        let input = InputRecord {
            partition: 2,
            offset: 41,
            value: 1041,
        };
        assert_eq!(
            parse_output_value(&output_value(&input, 7)),
            Some((input, 7))
        );
        assert_eq!(parse_output_value("1,2"), None);
        let mut generator = EosGenerator::new(5, 4, CRASH_PERCENT);
        let mut seen = std::collections::HashSet::new();
        let mut feeds = 0;
        for _ in 0..300 {
            if let EosInvocation::Feed(values) = generator.next_invocation() {
                feeds += 1;
                for (partition, value) in values {
                    assert!((0..4).contains(&partition));
                    assert!(seen.insert(value), "value {value} repeated");
                }
            }
        }
        assert!((60..140).contains(&feeds), "about a third feed: {feeds}");
    }

    #[test]
    fn zombies_are_a_seeded_share_of_pipeline_ops_only_when_asked() {
        let count = |mut generator: EosGenerator| {
            (0..3000)
                .filter(|_| generator.next_invocation() == EosInvocation::PipelineZombie)
                .count()
        };
        assert_eq!(count(EosGenerator::new(5, 4, CRASH_PERCENT)), 0);
        let zombies = count(EosGenerator::new(5, 4, CRASH_PERCENT).with_zombie_percent(2));
        assert!(
            (20..60).contains(&zombies),
            "2% of 2000 pipeline ops: {zombies}"
        );
    }
}
