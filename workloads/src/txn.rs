//! The txn workload: Jepsen's queue workload in its transactional mode (`--txn`). Each op is
//! one transaction of one to four micro-ops, sends and polls mixed, run between
//! `begin_transaction` and `commit_transaction` by a transactional producer, with every poll
//! read by a `read_committed` consumer; a seeded share of transactions is aborted on purpose.
//!
//! Outcomes, as Jepsen records them:
//!
//! - `ok`: the commit returned; the sends' offsets and the polls' reads are filled in.
//! - `fail`: the transaction certainly did not commit: aborted on purpose, aborted after a
//!   failed send or poll, or a commit error the client classifies as definite. Its reads are
//!   still recorded (a read_committed poll reads committed data whatever the transaction
//!   does), and so are the offsets of its sends (aborted records hold offsets).
//! - `info`: a commit whose outcome is unknown; the process is retired, and the transaction it
//!   may have left open is aborted by the coordinator after `transaction.timeout.ms`.
//!
//! The op's `f` follows Jepsen's `tag-rw`: `send` when every micro-op sends, `poll` when every
//! one polls, `txn` otherwise. `assign` and `crash` ops are the queue workload's.

mod adapter;

pub use adapter::{TxnSettings, TxnWorkload};

use std::sync::Arc;
use std::time::Duration;

use logjam_client::consumer::{Consumer, Position};
use logjam_client::ids::TopicPartition;
use logjam_client::outcome::Certainty;
use logjam_client::producer::{Producer, ProducerRecord};
use logjam_history::{
    Function, Key, KeyReads, MicroOp, OpType, OpValue, Process, ProcessId, Value,
};
use rand::rngs::StdRng;
use rand::{RngExt, SeedableRng};

use crate::queue::{MAX_PROCESSES, Targets, polled_reads};
use crate::recorder::{RecordError, Recorder};
use crate::workload::{self, Completion};

/// One micro-op of a transaction.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    /// Send `value` to `key`.
    Send {
        /// The key (partition).
        key: Key,
        /// The value, unique per key.
        value: Value,
    },
    /// One read_committed poll.
    Poll,
}

/// One operation a txn process will invoke.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TxnInvocation {
    /// A transaction of `steps`, aborted at its end when `abort` is set.
    Txn {
        /// The micro-ops, in order.
        steps: Vec<Step>,
        /// Abort instead of committing.
        abort: bool,
    },
    /// Replace the consumer's assignment.
    Assign {
        /// The keys to assign.
        keys: Vec<Key>,
    },
    /// A transaction of `steps` whose process dies after them, before EndTxn (`--set
    /// logjam.txn=abandon`): a producer that crashed mid-transaction and never came back. The
    /// op fails (no EndTxn(commit) was sent, so nothing of it can commit) and the process is
    /// retired; the coordinator aborts what it left open after `transaction.timeout.ms`.
    Abandon {
        /// The micro-ops, in order.
        steps: Vec<Step>,
    },
    /// Throw the client away and start a fresh one.
    Crash,
}

/// How a transaction ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum End {
    Commit,
    Abort,
    Abandon,
}

/// The error of an abandoned transaction's op.
const ABANDONED: &str = "abandoned mid-transaction: the process died before EndTxn";

/// The longest transaction, in micro-ops (Jepsen's `:max-txn-length` in txn mode).
pub const MAX_TXN_LENGTH: usize = 4;

/// The seeded op source of a txn run.
#[derive(Debug)]
pub struct TxnGenerator {
    rng: StdRng,
    process: i64,
    keys: u32,
    sent: i64,
    abort_percent: u32,
    abandon_percent: u32,
}

impl TxnGenerator {
    /// The generator of `process` in a run seeded with `seed`, over `keys` keys, aborting
    /// about `abort_percent`% of its transactions on purpose.
    pub fn new(seed: u64, process: u64, keys: u32, abort_percent: u32) -> TxnGenerator {
        let mixed = seed ^ process.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ 0x7478_6E00;
        TxnGenerator {
            rng: StdRng::seed_from_u64(mixed),
            process: process as i64 % MAX_PROCESSES,
            keys: keys.max(1),
            sent: 0,
            abort_percent: abort_percent.min(100),
            abandon_percent: 0,
        }
    }

    /// Abandons about `percent`% of the transactions not aborted on purpose (their process
    /// dies before EndTxn). Zero, the default, draws nothing, so a run without it replays the
    /// same ops as before it existed.
    #[must_use]
    pub fn with_abandon_percent(mut self, percent: u32) -> TxnGenerator {
        self.abandon_percent = percent.min(100);
        self
    }

    /// The next operation: 95% transactions, 4% re-assignments, 1% crashes.
    pub fn next_invocation(&mut self) -> TxnInvocation {
        let roll: u32 = self.rng.random_range(0..100);
        match roll {
            0..95 => {
                let length = self.rng.random_range(1..=MAX_TXN_LENGTH);
                let steps = (0..length)
                    .map(|_| {
                        if self.rng.random_bool(0.5) {
                            let key = Key(i64::from(self.rng.random_range(0..self.keys)));
                            self.sent += 1;
                            Step::Send {
                                key,
                                value: Value(self.sent * MAX_PROCESSES + self.process),
                            }
                        } else {
                            Step::Poll
                        }
                    })
                    .collect();
                let abort = self.rng.random_range(0..100) < self.abort_percent;
                if !abort
                    && self.abandon_percent > 0
                    && self.rng.random_range(0..100) < self.abandon_percent
                {
                    return TxnInvocation::Abandon { steps };
                }
                TxnInvocation::Txn { steps, abort }
            }
            95..99 => {
                let keys = (0..self.keys)
                    .filter(|_| self.rng.random_bool(0.5))
                    .map(|key| Key(i64::from(key)))
                    .collect::<Vec<_>>();
                let keys = if keys.is_empty() { vec![Key(0)] } else { keys };
                TxnInvocation::Assign { keys }
            }
            _ => TxnInvocation::Crash,
        }
    }
}

impl workload::Generator for TxnGenerator {
    type Op = TxnInvocation;

    fn next_op(&mut self) -> TxnInvocation {
        self.next_invocation()
    }
}

/// Jepsen's `tag-rw`: `send` if every step sends, `poll` if every step polls, else `txn`.
pub fn function_of(steps: &[Step]) -> Function {
    if steps.iter().all(|step| matches!(step, Step::Send { .. })) {
        Function::Send
    } else if steps.iter().all(|step| matches!(step, Step::Poll)) {
        Function::Poll
    } else {
        Function::Txn
    }
}

/// Every assigned partition's position before a transaction, with the leader epoch of the
/// record before it; `None` for a partition with no position yet.
type Snapshot = Vec<(TopicPartition, Option<Position>)>;

/// The consumer's positions, for [`rewind`].
fn snapshot(consumer: &Consumer) -> Snapshot {
    consumer
        .assignment()
        .into_iter()
        .map(|tp| {
            let position = consumer.position_with_epoch(&tp);
            (tp, position)
        })
        .collect()
}

/// Moves every partition of `snapshot` back: to its saved position with its leader epoch
/// (so KIP-320 truncation detection still holds), or, for a partition that had none, back to
/// no position (the next poll starts it where `auto.offset.reset` says, as it would have).
fn rewind(consumer: &mut Consumer, snapshot: Snapshot) {
    for (tp, position) in snapshot {
        // Every partition is still assigned: a transaction does not reassign.
        let _ = match position {
            Some(position) => consumer.seek_to_position(&tp, position),
            None => consumer.reset_position(&tp),
        };
    }
}

/// Why a transaction ended without committing, and whether that is certain.
struct Failure {
    certainty: Certainty,
    error: String,
}

/// A logical txn client process: a transactional producer (`transactional.id` unique to the
/// process, as Jepsen's `jt<N>`) and a read_committed consumer assigned every key.
pub struct TxnClient {
    process: ProcessId,
    settings: Arc<TxnSettings>,
    recorder: Arc<Recorder>,
    targets: Arc<Targets>,
    producer: Option<Producer>,
    consumer: Option<Consumer>,
}

impl std::fmt::Debug for TxnClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TxnClient")
            .field("process", &self.process)
            .finish_non_exhaustive()
    }
}

fn properties(list: &[(String, String)]) -> impl Iterator<Item = (&str, &str)> {
    list.iter()
        .map(|(key, value)| (key.as_str(), value.as_str()))
}

impl TxnClient {
    /// A fresh process `process`; it connects on its first op.
    pub fn new(
        process: ProcessId,
        settings: Arc<TxnSettings>,
        recorder: Arc<Recorder>,
        targets: Arc<Targets>,
    ) -> TxnClient {
        TxnClient {
            process,
            settings,
            recorder,
            targets,
            producer: None,
            consumer: None,
        }
    }

    fn partition(&self, key: Key) -> TopicPartition {
        TopicPartition::new(self.settings.queue.topic.clone(), key.0 as i32)
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

    /// The producer, created and initialised (InitProducerId with the process's
    /// transactional.id) on first use.
    async fn producer(&mut self) -> Result<&Producer, Failure> {
        if self.producer.is_none() {
            let transactional_id = format!(
                "{}-{}",
                self.settings.transactional_id_prefix, self.process.0
            );
            let producer = Producer::from_properties(
                properties(&self.settings.queue.producer)
                    .chain([("transactional.id", transactional_id.as_str())]),
            )
            .map_err(|error| Failure {
                certainty: Certainty::Definite,
                error: format!("producer: {error}"),
            })?;
            // InitProducerId changes no data: whatever its outcome, nothing of this op committed.
            // Bounded as the op's other calls are (Kafka bounds it with max.block.ms): without a
            // coordinator to answer (brokers waiting out their old sessions after restarts),
            // every fresh process sat in it for as long as that lasted, 25 s in one run.
            let timeout = self.settings.queue.send_timeout;
            match tokio::time::timeout(timeout, producer.init_transactions()).await {
                Ok(Ok(())) => {}
                Ok(Err(error)) => {
                    return Err(Failure {
                        certainty: Certainty::Definite,
                        error: format!("init_transactions: {error}"),
                    });
                }
                Err(_) => {
                    return Err(Failure {
                        certainty: Certainty::Definite,
                        error: "init_transactions: no answer in time".to_owned(),
                    });
                }
            }
            self.producer = Some(producer);
        }
        Ok(self.producer.as_ref().expect("just created"))
    }

    fn consumer(&mut self) -> Result<&mut Consumer, String> {
        if self.consumer.is_none() {
            let mut consumer = Consumer::from_properties(properties(&self.settings.queue.consumer))
                .map_err(|error| format!("consumer: {error}"))?;
            let keys = self.settings.queue.keys;
            consumer.assign((0..keys).map(|key| self.partition(Key(i64::from(key)))));
            self.consumer = Some(consumer);
        }
        Ok(self.consumer.as_mut().expect("just created"))
    }

    /// Invokes one operation and records its invoke and completion. After
    /// [`Completion::Info`] the process is done: the caller closes it and starts a fresh one.
    ///
    /// # Errors
    /// Only when the history cannot be written; cluster errors become `fail`/`info` ops.
    pub async fn invoke(&mut self, invocation: TxnInvocation) -> Result<Completion, RecordError> {
        match invocation {
            TxnInvocation::Txn { steps, abort } => {
                let end = if abort { End::Abort } else { End::Commit };
                self.transaction(steps, end).await
            }
            TxnInvocation::Abandon { steps } => self.transaction(steps, End::Abandon).await,
            TxnInvocation::Assign { keys } => {
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
            TxnInvocation::Crash => {
                self.record(OpType::Invoke, Function::Crash, OpValue::Null, None)?;
                self.record(OpType::Info, Function::Crash, OpValue::Null, None)?;
                Ok(Completion::Info)
            }
        }
    }

    async fn transaction(&mut self, steps: Vec<Step>, end: End) -> Result<Completion, RecordError> {
        let f = function_of(&steps);
        let mut micro: Vec<MicroOp> = steps
            .iter()
            .map(|step| match step {
                Step::Send { key, value } => MicroOp::Send {
                    key: *key,
                    value: *value,
                    offset: None,
                },
                Step::Poll => MicroOp::Poll { reads: None },
            })
            .collect();
        self.record(
            OpType::Invoke,
            f.clone(),
            OpValue::MicroOps(micro.clone()),
            None,
        )?;
        let positions = self.positions();
        let outcome = self.run(&steps, end, &mut micro).await;
        let value = OpValue::MicroOps(micro);
        if end == End::Abandon && outcome.as_ref().is_err_and(|f| f.error == ABANDONED) {
            // The process dies here: its producer goes without a word (no EndTxn, no close),
            // and it never returns, so its transactional.id is never initialised again.
            self.producer = None;
            self.consumer = None;
            self.record(OpType::Fail, f, value, Some(ABANDONED.to_owned()))?;
            self.record(OpType::Invoke, Function::Crash, OpValue::Null, None)?;
            self.record(OpType::Info, Function::Crash, OpValue::Null, None)?;
            return Ok(Completion::Info);
        }
        match outcome {
            Ok(()) => {
                self.record(OpType::Ok, f, value, None)?;
                Ok(Completion::Ok)
            }
            Err(Failure {
                certainty: Certainty::Definite,
                error,
            }) => {
                self.rewind(positions);
                self.record(OpType::Fail, f, value, Some(error))?;
                Ok(Completion::Fail)
            }
            Err(Failure {
                certainty: Certainty::Indefinite,
                error,
            }) => {
                self.record(OpType::Info, f, value, Some(error))?;
                Ok(Completion::Info)
            }
        }
    }

    /// The consumer's positions before a transaction ([`snapshot`]); `None` when there is no
    /// consumer yet.
    fn positions(&self) -> Option<Snapshot> {
        self.consumer.as_ref().map(snapshot)
    }

    /// After a transaction that certainly did not commit, moves the consumer back to where it
    /// was before it (what a consume-transform-produce application does on abort: the
    /// consumer does not rewind by itself), so the `fail` op took no effect at all: its polls
    /// advanced nothing, and the next op reads on from the last committed op's position (the
    /// checker compares a poll with the process's previous `ok` read; a failed op's reads,
    /// not rewound, would show as poll-skips). A consumer created inside the transaction is
    /// dropped.
    fn rewind(&mut self, positions: Option<Snapshot>) {
        let Some(positions) = positions else {
            self.consumer = None;
            return;
        };
        if let Some(consumer) = self.consumer.as_mut() {
            rewind(consumer, positions);
        }
    }

    /// Runs the transaction, filling `micro` in as it goes; `Ok` only when it committed.
    async fn run(
        &mut self,
        steps: &[Step],
        end: End,
        micro: &mut [MicroOp],
    ) -> Result<(), Failure> {
        let timeout = self.settings.queue.send_timeout;
        self.producer().await?;
        let begun = self
            .producer
            .as_ref()
            .expect("initialised")
            .begin_transaction();
        if let Err(error) = begun {
            // A producer in an error state cannot begin: start over with a fresh one.
            self.producer = None;
            return Err(Failure {
                certainty: Certainty::Definite,
                error: format!("begin_transaction: {error}"),
            });
        }
        let mut failed: Option<String> = None;
        for (step, slot) in steps.iter().zip(micro.iter_mut()) {
            match step {
                Step::Send { key, value } => match self.send(*key, *value, timeout).await {
                    Ok(offset) => {
                        if let MicroOp::Send {
                            offset: recorded, ..
                        } = slot
                        {
                            *recorded = offset.map(logjam_history::Offset);
                        }
                    }
                    Err(error) => {
                        failed = Some(error);
                        break;
                    }
                },
                Step::Poll => match self.poll().await {
                    Ok(reads) => *slot = MicroOp::Poll { reads: Some(reads) },
                    Err(error) => {
                        failed = Some(error);
                        break;
                    }
                },
            }
        }
        if failed.is_some() || end == End::Abort {
            let error = failed.unwrap_or_else(|| "aborted on purpose".to_owned());
            return Err(self.abort(error, timeout).await);
        }
        if end == End::Abandon {
            return Err(Failure {
                certainty: Certainty::Definite,
                error: ABANDONED.to_owned(),
            });
        }
        let producer = self.producer.as_ref().expect("initialised");
        match tokio::time::timeout(timeout, producer.commit_transaction()).await {
            Ok(Ok(())) => Ok(()),
            Err(_) => Err(Failure {
                certainty: Certainty::Indefinite,
                error: "commit_transaction: no answer in time".to_owned(),
            }),
            Ok(Err(error)) if error.certainty == Certainty::Indefinite => Err(Failure {
                certainty: Certainty::Indefinite,
                error: format!("commit_transaction: {error}"),
            }),
            Ok(Err(error)) => Err(self
                .abort(format!("commit_transaction: {error}"), timeout)
                .await),
        }
    }

    /// Aborts the open transaction after `error`. Without an EndTxn(commit) the transaction
    /// cannot commit, so the op failed for certain whatever the abort does; a producer whose
    /// abort failed is dropped, and the next op's InitProducerId fences and aborts what it
    /// left open.
    async fn abort(&mut self, error: String, timeout: Duration) -> Failure {
        let producer = self.producer.as_ref().expect("initialised");
        let aborted = tokio::time::timeout(timeout, producer.abort_transaction()).await;
        let error = match aborted {
            Ok(Ok(())) => error,
            Ok(Err(abort_error)) => {
                self.producer = None;
                format!("{error}; abort_transaction: {abort_error}")
            }
            Err(_) => {
                self.producer = None;
                format!("{error}; abort_transaction: no answer in time")
            }
        };
        Failure {
            certainty: Certainty::Definite,
            error,
        }
    }

    async fn send(
        &mut self,
        key: Key,
        value: Value,
        timeout: Duration,
    ) -> Result<Option<i64>, String> {
        let record = ProducerRecord::new(self.settings.queue.topic.clone(), value.0.to_string())
            .with_partition(key.0 as i32);
        let producer = self.producer.as_ref().expect("initialised");
        let delivery = match tokio::time::timeout(timeout, producer.send(record)).await {
            Err(_) => return Err("send() blocked past the timeout".to_owned()),
            Ok(Err(error)) => return Err(error.to_string()),
            Ok(Ok(delivery)) => delivery,
        };
        match tokio::time::timeout(timeout, delivery).await {
            Err(_) => Err("no acknowledgement in time".to_owned()),
            Ok(Err(error)) => Err(error.to_string()),
            Ok(Ok(metadata)) => {
                let offset = metadata.offset.map(|offset| offset.0);
                if let Some(offset) = offset {
                    self.targets.observe(key, offset);
                }
                Ok(offset)
            }
        }
    }

    async fn poll(&mut self) -> Result<Vec<KeyReads>, String> {
        let timeout = self.settings.queue.poll_timeout;
        let targets = self.targets.clone();
        let consumer = self.consumer()?;
        let records = consumer
            .poll(timeout)
            .await
            .map_err(|error| error.to_string())?;
        Ok(polled_reads(consumer, records, &targets))
    }

    /// Closes the producer (aborting nothing: an open transaction is the coordinator's to
    /// time out) and drops the consumer.
    pub async fn close(mut self) {
        self.consumer = None;
        if let Some(producer) = self.producer.take() {
            producer.close().await;
        }
    }
}

impl workload::Client for TxnClient {
    type Op = TxnInvocation;

    fn process(&self) -> ProcessId {
        self.process
    }

    async fn invoke(&mut self, op: TxnInvocation) -> Result<Completion, RecordError> {
        TxnClient::invoke(self, op).await
    }

    async fn close(self) {
        TxnClient::close(self).await;
    }
}

#[cfg(test)]
mod tests;
