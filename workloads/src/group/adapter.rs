//! The group workload behind the harness's [`Workload`] interface: the queue's topic,
//! generator and final reads (assign mode, every partition to its end), the header config
//! that tells the checkers consumers subscribed, and fresh [`GroupClient`]s on demand.

use std::sync::Arc;
use std::sync::atomic::AtomicUsize;

use logjam_history::{Function, ProcessId};

use super::GroupClient;
use crate::queue::{Invocation, QueueClient, QueueGenerator, QueueSettings, Targets};
use crate::recorder::{RecordError, Recorder};
use crate::workload::{TopicSpec, Workload};

/// Client settings of a group run.
#[derive(Debug, Clone)]
pub struct GroupSettings {
    /// The queue's settings; its consumer properties are the members' (without `group.id`,
    /// which comes from `group_id`) and the final reader's.
    pub queue: QueueSettings,
    /// The consumer group every process joins.
    pub group_id: String,
    /// At most this many processes are members at once.
    pub max_members: usize,
}

/// The queue workload in subscribe mode on one consumer group.
#[derive(Debug)]
pub struct GroupWorkload {
    settings: Arc<GroupSettings>,
    targets: Arc<Targets>,
    members: Arc<AtomicUsize>,
}

impl GroupWorkload {
    /// The workload for `settings`.
    pub fn new(settings: GroupSettings) -> GroupWorkload {
        let targets = Arc::new(Targets::new(settings.queue.keys));
        GroupWorkload {
            settings: Arc::new(settings),
            targets,
            members: Arc::new(AtomicUsize::new(0)),
        }
    }
}

impl Workload for GroupWorkload {
    type Op = Invocation;
    type Generator = QueueGenerator;
    type Client = GroupClient;

    fn name(&self) -> &'static str {
        "group"
    }

    fn functions(&self) -> &'static [Function] {
        &[
            Function::Send,
            Function::Poll,
            Function::Subscribe,
            Function::Rebalance,
            Function::Crash,
            Function::Assign,
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
        let queue = &self.settings.queue;
        serde_json::json!({
            "key_topic_partitions": (0..queue.keys)
                .map(|key| {
                    (
                        key.to_string(),
                        serde_json::json!({"topic": queue.topic, "partition": key}),
                    )
                })
                .collect::<serde_json::Map<_, _>>(),
            "sub_via": ["subscribe"],
            "group_id": self.settings.group_id,
            "max_members": self.settings.max_members,
        })
    }

    fn generator(&self, seed: u64) -> QueueGenerator {
        QueueGenerator::new(seed, 0, self.settings.queue.keys)
            .with_crash_keep(self.settings.queue.crash_keep)
    }

    fn client(&self, process: ProcessId, recorder: &Arc<Recorder>) -> GroupClient {
        GroupClient::new(
            process,
            self.settings.clone(),
            recorder.clone(),
            self.targets.clone(),
            self.members.clone(),
        )
    }

    async fn final_phase(
        &self,
        process: ProcessId,
        recorder: &Arc<Recorder>,
        deadline: tokio::time::Instant,
    ) -> Result<(), RecordError> {
        // The queue's final reads: a plain consumer (no group) assigned every partition.
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
