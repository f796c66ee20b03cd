//! The producer workload behind the harness's [`Workload`] interface: the topic it needs, the
//! header config the checkers read, one generator for the run, fresh [`ProducerClient`]s on
//! demand, and the final reads (the queue workload's, by a fresh process).

use std::sync::Arc;
use std::time::Duration;

use logjam_history::{Function, ProcessId};

use super::{Burst, ProducerClient, ProducerGenerator, ProducerSettings};
use crate::queue::{QueueClient, QueueSettings, Targets};
use crate::recorder::{RecordError, Recorder};
use crate::workload::{self, Completion, TopicSpec, Workload};

/// The producer workload behind the harness's [`Workload`] interface.
#[derive(Debug)]
pub struct ProducerWorkload {
    settings: Arc<ProducerSettings>,
    targets: Arc<Targets>,
}

impl ProducerWorkload {
    /// The workload of a run with these settings.
    pub fn new(settings: ProducerSettings) -> ProducerWorkload {
        let targets = Arc::new(Targets::new(settings.keys));
        ProducerWorkload {
            settings: Arc::new(settings),
            targets,
        }
    }
}

impl Workload for ProducerWorkload {
    type Op = Burst;
    type Generator = ProducerGenerator;
    type Client = ProducerClient;

    fn name(&self) -> &'static str {
        "producer"
    }

    fn functions(&self) -> &'static [Function] {
        &[
            Function::Produce,
            Function::Assign,
            Function::FinalPoll,
            Function::LogEnd,
        ]
    }

    fn topics(&self) -> Vec<TopicSpec> {
        vec![TopicSpec {
            name: self.settings.topic.clone(),
            partitions: self.settings.keys,
        }]
    }

    fn history_config(&self) -> serde_json::Value {
        serde_json::json!({
            "key_topic_partitions": (0..self.settings.keys)
                .map(|key| {
                    (
                        key.to_string(),
                        serde_json::json!({"topic": self.settings.topic, "partition": key}),
                    )
                })
                .collect::<serde_json::Map<_, _>>(),
            "sends_per_op": super::SENDS_PER_OP,
            "send_spacing_ms": super::SEND_SPACING.as_millis() as u64,
        })
    }

    fn generator(&self, seed: u64) -> ProducerGenerator {
        ProducerGenerator::new(seed, self.settings.keys)
    }

    fn client(&self, process: ProcessId, recorder: &Arc<Recorder>) -> ProducerClient {
        ProducerClient::new(
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
        let settings = QueueSettings {
            topic: self.settings.topic.clone(),
            keys: self.settings.keys,
            producer: self.settings.producer.clone(),
            consumer: self.settings.consumer.clone(),
            poll_timeout: Duration::from_millis(100),
            crash_keep: 1.0,
            send_timeout: self.settings.send_timeout,
            final_read_grace: crate::queue::FINAL_READ_GRACE,
        };
        let mut reader = QueueClient::new(
            process,
            Arc::new(settings),
            recorder.clone(),
            self.targets.clone(),
        );
        reader.final_reads(&self.targets.snapshot(), deadline).await
    }
}

impl workload::Client for ProducerClient {
    type Op = Burst;

    fn process(&self) -> ProcessId {
        self.process
    }

    async fn invoke(&mut self, op: Burst) -> Result<Completion, RecordError> {
        ProducerClient::invoke(self, op).await
    }

    async fn close(self) {
        ProducerClient::close(self).await;
    }
}
