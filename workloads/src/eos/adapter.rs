//! The eos workload behind the harness's [`Workload`] interface: its two topics, the header
//! config (group, partitions, where offsets are committed), one generator for the run, fresh
//! [`EosClient`]s, and the final phase (`final_reads`).

use std::sync::Arc;
use std::time::Duration;

use logjam_history::{Function, ProcessId};

use super::final_reads::FinalReader;
use super::{EosClient, EosGenerator, EosInvocation, Members};
use crate::recorder::{RecordError, Recorder};
use crate::workload::{TopicSpec, Workload};

/// Client settings of an eos run.
#[derive(Debug, Clone)]
pub struct EosSettings {
    /// Producer properties (bootstrap included).
    pub producer: Vec<(String, String)>,
    /// Consumer properties (bootstrap included).
    pub consumer: Vec<(String, String)>,
    /// The input topic.
    pub input_topic: String,
    /// The output topic.
    pub output_topic: String,
    /// Partitions of each topic (an input's output goes to the same partition number).
    pub partitions: u32,
    /// The pipeline's consumer group.
    pub group: String,
    /// Each process's `transactional.id` is this, a dash, and its process id.
    pub transactional_id_prefix: String,
    /// Offsets committed inside the transaction (true, exactly-once) or with a plain
    /// `commit_sync` after it (false: the common mistake).
    pub offsets_in_txn: bool,
    /// Offsets sent to the transaction with the consumer's group metadata (true, KIP-447's
    /// fence) or with the group id alone (false: the pre-2.5 API, no generation fence).
    pub group_metadata: bool,
    /// With `Some`, a few pipeline ops are zombies paused this long mid-transaction (longer
    /// than the consumer's `session.timeout.ms`).
    pub zombie_pause: Option<Duration>,
    /// Members of the pipeline's group (see [`super::Members`]).
    pub members: u32,
    /// Every harness process is its own group member instead (joining at its first op and
    /// leaving when the harness closes it after 2 s idle): a group in constant churn.
    pub member_per_process: bool,
    /// Pipeline ops whose process crashes as the commit returns, in percent.
    pub crash_percent: u32,
    /// One pipeline op's poll timeout.
    pub poll_timeout: Duration,
    /// Bound on each send, commit and abort.
    pub send_timeout: Duration,
}

/// The consume-transform-produce pipeline.
#[derive(Debug)]
pub struct EosWorkload {
    settings: Arc<EosSettings>,
    members: Arc<Members>,
}

impl EosWorkload {
    /// The workload for `settings`.
    pub fn new(settings: EosSettings) -> EosWorkload {
        EosWorkload {
            members: Arc::new(Members::new(settings.members)),
            settings: Arc::new(settings),
        }
    }
}

impl Workload for EosWorkload {
    type Op = EosInvocation;
    type Generator = EosGenerator;
    type Client = EosClient;

    fn name(&self) -> &'static str {
        "eos"
    }

    fn functions(&self) -> &'static [Function] {
        &[
            Function::Produce,
            Function::Pipeline,
            Function::EosRead,
            Function::LogEnd,
            Function::GroupOffsets,
        ]
    }

    fn topics(&self) -> Vec<TopicSpec> {
        [&self.settings.input_topic, &self.settings.output_topic]
            .into_iter()
            .map(|name| TopicSpec {
                name: name.clone(),
                partitions: self.settings.partitions,
            })
            .collect()
    }

    fn history_config(&self) -> serde_json::Value {
        serde_json::json!({
            "input_topic": self.settings.input_topic,
            "output_topic": self.settings.output_topic,
            "partitions": self.settings.partitions,
            "group": self.settings.group,
            "offsets_in_txn": self.settings.offsets_in_txn,
            "crash_percent": self.settings.crash_percent,
            "group_metadata": self.settings.group_metadata,
            "zombie_pause_ms": self.settings.zombie_pause.map(|p| p.as_millis() as u64),
            "members": self.settings.members,
            "member_per_process": self.settings.member_per_process,
            "isolation_level": "read_committed",
        })
    }

    fn generator(&self, seed: u64) -> EosGenerator {
        let generator =
            EosGenerator::new(seed, self.settings.partitions, self.settings.crash_percent);
        if self.settings.zombie_pause.is_some() {
            generator.with_zombie_percent(super::ZOMBIE_PERCENT)
        } else {
            generator
        }
    }

    fn client(&self, process: ProcessId, recorder: &Arc<Recorder>) -> EosClient {
        EosClient::new(
            process,
            self.settings.clone(),
            recorder.clone(),
            self.members.clone(),
        )
    }

    async fn final_phase(
        &self,
        process: ProcessId,
        recorder: &Arc<Recorder>,
        deadline: tokio::time::Instant,
    ) -> Result<(), RecordError> {
        let reader = FinalReader {
            process,
            settings: &self.settings,
            recorder,
        };
        // Output first (most of the time: open transactions must time out before the LSO
        // reaches the high watermark), then the offsets, then the input.
        let now = tokio::time::Instant::now();
        let output_deadline = now + (deadline - now).mul_f64(0.6);
        reader
            .read_topic(&self.settings.output_topic, true, output_deadline)
            .await?;
        let offsets_deadline =
            tokio::time::Instant::now() + (deadline - tokio::time::Instant::now()).mul_f64(0.3);
        reader.group_offsets(offsets_deadline).await?;
        reader
            .read_topic(&self.settings.input_topic, false, deadline)
            .await
    }
}
