//! The queue workload behind the harness's [`Workload`] interface: the topic it needs, the
//! header config the checkers read, one generator for the run, fresh [`QueueClient`]s on
//! demand, and the final reads by a fresh process.

use std::sync::Arc;

use logjam_history::{Function, ProcessId};

use super::{Invocation, QueueClient, QueueGenerator, QueueSettings, Targets};
use crate::handoff::Handoff;
use crate::recorder::{RecordError, Recorder};
use crate::workload::{self, Completion, TopicSpec, Workload};

/// The queue workload behind the harness's [`Workload`] interface: one generator for the run,
/// fresh [`QueueClient`]s on demand (resuming from positions closed processes handed on), the
/// final reads by a fresh process from the start.
#[derive(Debug)]
pub struct QueueWorkload {
    settings: Arc<QueueSettings>,
    targets: Arc<Targets>,
    handoff: Arc<Handoff>,
}

impl QueueWorkload {
    /// The workload of a run with these settings.
    pub fn new(settings: QueueSettings) -> QueueWorkload {
        let targets = Arc::new(Targets::new(settings.keys));
        QueueWorkload {
            settings: Arc::new(settings),
            targets,
            handoff: Arc::new(Handoff::new()),
        }
    }
}

impl QueueWorkload {
    /// The settings its clients use.
    pub fn settings(&self) -> &QueueSettings {
        &self.settings
    }
}

impl Workload for QueueWorkload {
    type Op = Invocation;
    type Generator = QueueGenerator;
    type Client = QueueClient;

    fn name(&self) -> &'static str {
        "queue"
    }

    fn functions(&self) -> &'static [Function] {
        &[
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
            "sub_via": ["assign"],
        })
    }

    fn generator(&self, seed: u64) -> QueueGenerator {
        // One generator for the whole run: values are unique because it alone draws them.
        QueueGenerator::new(seed, 0, self.settings.keys).with_crash_keep(self.settings.crash_keep)
    }

    fn client(&self, process: ProcessId, recorder: &Arc<Recorder>) -> QueueClient {
        QueueClient::new(
            process,
            self.settings.clone(),
            recorder.clone(),
            self.targets.clone(),
        )
        .with_handoff(self.handoff.clone())
    }

    async fn final_phase(
        &self,
        process: ProcessId,
        recorder: &Arc<Recorder>,
        deadline: tokio::time::Instant,
    ) -> Result<(), RecordError> {
        let targets = self.targets.snapshot();
        // Not `self.client`: the final reads start from the start, with no handed-on positions.
        let mut reader = QueueClient::new(
            process,
            self.settings.clone(),
            recorder.clone(),
            self.targets.clone(),
        );
        reader.final_reads(&targets, deadline).await
    }
}

impl workload::Client for QueueClient {
    type Op = Invocation;

    fn process(&self) -> ProcessId {
        self.process
    }

    async fn invoke(&mut self, op: Invocation) -> Result<Completion, RecordError> {
        QueueClient::invoke(self, op).await
    }

    async fn close(self) {
        QueueClient::close(self).await;
    }
}
