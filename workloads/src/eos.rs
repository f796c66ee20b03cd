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
//! member and gives its partitions to another, which processes the same inputs again. The
//! zombie stays paused until that commit is seen (at most 10 s past its pause, `zombie.rs`),
//! so a loaded machine's slow rebalance does not wake it first. Then the zombie resumes and
//! tries to commit: KIP-447's fence (the group metadata in TxnOffsetCommit)
//! refuses it. One zombie at a time. `group_metadata = false` sends the offsets with the group
//! id alone (the pre-2.5 `sendOffsetsToTransaction(offsets, groupId)`, which is only safe with
//! one producer per input partition): no generation to fence, so the zombie commits and its
//! inputs are in the output twice.
//!
//! `offsets_in_txn = false` is the common mistake (`--set logjam.eos=offsets-outside-transaction`):
//! offsets are committed with a plain `commit_sync` after the transaction, so a failure or a
//! rebalance between the two reprocesses committed input: duplicates in the output.

mod adapter;
mod feed;
mod final_reads;
mod generator;
mod members;
mod zombie;

pub use adapter::{EosSettings, EosWorkload};
pub use generator::{
    CRASH_PERCENT, EosGenerator, EosInvocation, FEED_SIZE, ZOMBIE_PERCENT, output_value,
    parse_output_value,
};
pub use members::Members;

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

use crate::recorder::{RecordError, Recorder};
use crate::workload::{self, Completion};

fn properties(list: &[(String, String)]) -> impl Iterator<Item = (&str, &str)> {
    list.iter().map(|(k, v)| (k.as_str(), v.as_str()))
}

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
                let twist = if self.settings.zombie_pause.is_some() && self.members.start_zombie() {
                    Twist::Zombie
                } else {
                    Twist::None
                };
                let completion = self.pipeline(twist).await;
                if twist == Twist::Zombie {
                    self.members.end_zombie();
                }
                completion
            }
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
            tracing::info!(txn, ?pause, "zombie: pausing mid-transaction");
            let paused = self.zombie_pause(pause, &offsets).await;
            value.paused_ms = Some(paused.as_millis() as u64);
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
