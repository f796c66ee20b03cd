//! The txn workload behind the harness's [`Workload`] interface: the queue's topic and final
//! reads (by a read_committed consumer), the header config that tells the checkers the reads
//! were read_committed, one generator for the run and fresh [`TxnClient`]s on demand.

use std::sync::Arc;

use logjam_history::{Function, ProcessId};

use super::{TxnClient, TxnGenerator, TxnInvocation};
use crate::queue::{QueueClient, QueueSettings, Targets};
use crate::recorder::{RecordError, Recorder};
use crate::workload::{TopicSpec, Workload};

/// Client settings of a txn run.
#[derive(Debug, Clone)]
pub struct TxnSettings {
    /// The queue's settings; the consumer's must include `isolation.level=read_committed`
    /// for the run to be the transactional queue Jepsen checks.
    pub queue: QueueSettings,
    /// Each process's `transactional.id` is this, a dash, and its process id.
    pub transactional_id_prefix: String,
    /// The share of transactions aborted on purpose, in percent.
    pub abort_percent: u32,
    /// The share of the others whose process dies before EndTxn, in percent (0: none).
    pub abandon_percent: u32,
}

/// Jepsen's transactional queue.
#[derive(Debug)]
pub struct TxnWorkload {
    settings: Arc<TxnSettings>,
    targets: Arc<Targets>,
}

impl TxnWorkload {
    /// The workload for `settings`.
    pub fn new(settings: TxnSettings) -> TxnWorkload {
        let targets = Arc::new(Targets::new(settings.queue.keys));
        TxnWorkload {
            settings: Arc::new(settings),
            targets,
        }
    }

    fn isolation_level(&self) -> &str {
        self.settings
            .queue
            .consumer
            .iter()
            .rev()
            .find(|(key, _)| key == "isolation.level")
            .map_or("read_uncommitted", |(_, value)| value.as_str())
    }

    /// The producers' `transaction.timeout.ms` (the client's default, 60 s, when unset; the
    /// largest when set twice; none when unreadable, and the checker assumes Kafka's maximum).
    fn transaction_timeout_ms(&self) -> Option<u64> {
        let set: Vec<_> = self
            .settings
            .queue
            .producer
            .iter()
            .filter(|(key, _)| key == "transaction.timeout.ms")
            .map(|(_, value)| value.trim().parse::<u64>().ok())
            .collect();
        if set.is_empty() {
            return Some(60_000);
        }
        set.into_iter()
            .try_fold(0, |most, ms| ms.map(|ms| most.max(ms)))
    }
}

impl Workload for TxnWorkload {
    type Op = TxnInvocation;
    type Generator = TxnGenerator;
    type Client = TxnClient;

    fn name(&self) -> &'static str {
        "txn"
    }

    fn functions(&self) -> &'static [Function] {
        &[
            Function::Txn,
            Function::Send,
            Function::Poll,
            Function::Assign,
            Function::Crash,
            Function::FinalPoll,
            Function::LogEnd,
        ]
    }

    fn topics(&self) -> Vec<TopicSpec> {
        vec![TopicSpec {
            name: self.settings.queue.topic.clone(),
            partitions: self.settings.queue.keys,
        }]
    }

    fn history_config(&self) -> serde_json::Value {
        let keys = self.settings.queue.keys;
        serde_json::json!({
            "key_topic_partitions": (0..keys)
                .map(|key| {
                    (
                        key.to_string(),
                        serde_json::json!({"topic": self.settings.queue.topic, "partition": key}),
                    )
                })
                .collect::<serde_json::Map<_, _>>(),
            "sub_via": ["assign"],
            "txn": true,
            "isolation_level": self.isolation_level(),
            "abort_percent": self.settings.abort_percent,
            "abandon_percent": self.settings.abandon_percent,
            // What the read-committed checker bounds a transaction's hold on the LSO with.
            "transaction_timeout_ms": self.transaction_timeout_ms(),
        })
    }

    fn generator(&self, seed: u64) -> TxnGenerator {
        TxnGenerator::new(
            seed,
            0,
            self.settings.queue.keys,
            self.settings.abort_percent,
        )
        .with_abandon_percent(self.settings.abandon_percent)
    }

    fn client(&self, process: ProcessId, recorder: &Arc<Recorder>) -> TxnClient {
        TxnClient::new(
            process,
            self.settings.clone(),
            recorder.clone(),
            self.targets.clone(),
        )
    }

    async fn final_phase(
        &self,
        process: ProcessId,
        recorder: &Arc<Recorder>,
        deadline: tokio::time::Instant,
    ) -> Result<(), RecordError> {
        // The queue's final reads, by a plain consumer with the run's isolation level.
        let targets = self.targets.snapshot();
        let mut reader = QueueClient::new(
            process,
            Arc::new(self.settings.queue.clone()),
            recorder.clone(),
            self.targets.clone(),
        );
        reader.final_reads(&targets, deadline).await
    }
}
