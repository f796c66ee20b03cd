//! The one interface every workload offers the harness: a seeded generator of operations, a
//! client adapter that runs one logical process's operations against the cluster and records
//! them, the topics it needs, the ops it writes, and its final phase. The harness schedules
//! ops and manages processes (fresh ids after `info`); it never sees a workload's client
//! library calls. Today: [`crate::queue::QueueWorkload`]; transactions, exactly-once pipelines
//! and consumer groups plug in the same way.

use std::future::Future;
use std::sync::Arc;

use logjam_history::{Function, ProcessId};

use crate::recorder::{RecordError, Recorder};

/// How one operation ended, as the harness's scheduler needs to know it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Completion {
    /// Recorded `ok`.
    Ok,
    /// Recorded `fail`: it definitely did not happen.
    Fail,
    /// Recorded `info`: it may or may not have happened. The process is retired (as in
    /// Jepsen, a process never has two ops open) and a fresh one takes its place.
    Info,
}

/// A topic a workload needs, created by the harness before the workload starts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TopicSpec {
    /// The topic's name.
    pub name: String,
    /// Its partitions.
    pub partitions: u32,
}

/// The seeded op source of one run: the same seed gives the same op sequence whatever the
/// interleaving of the processes that run them.
pub trait Generator: Send + 'static {
    /// One operation to invoke.
    type Op: Send + 'static;
    /// The next operation.
    fn next_op(&mut self) -> Self::Op;
}

/// One logical client process: runs ops one at a time and records each invoke and completion
/// into the history under its own process id.
pub trait Client: Send + 'static {
    /// The operations it runs.
    type Op: Send + 'static;
    /// The process id its ops are recorded under.
    fn process(&self) -> ProcessId;
    /// Invokes one operation and records its invoke and completion.
    ///
    /// # Errors
    /// Only when the history cannot be written; cluster errors become `fail`/`info` ops.
    fn invoke(
        &mut self,
        op: Self::Op,
    ) -> impl Future<Output = Result<Completion, RecordError>> + Send;
    /// Releases the process's connections (called in the background after a retirement, so
    /// a close that waits on a dead node never holds up the run).
    fn close(self) -> impl Future<Output = ()> + Send;
}

/// A workload: generator + client adapter + the ops it writes + its final phase.
pub trait Workload: Send + Sync + 'static {
    /// The operations its generator makes and its clients run.
    type Op: Send + 'static;
    /// Its generator.
    type Generator: Generator<Op = Self::Op>;
    /// Its client adapter.
    type Client: Client<Op = Self::Op>;
    /// The name in the history header, run.json and the run directory's name.
    fn name(&self) -> &'static str;
    /// The functions its clients write into the history (the checkers' input).
    fn functions(&self) -> &'static [Function];
    /// The topics it needs.
    fn topics(&self) -> Vec<TopicSpec>;
    /// The history header's `config` for this workload.
    fn history_config(&self) -> serde_json::Value;
    /// The run's generator.
    fn generator(&self, seed: u64) -> Self::Generator;
    /// A fresh process recording into `recorder`.
    fn client(&self, process: ProcessId, recorder: &Arc<Recorder>) -> Self::Client;
    /// After the workload phase (faults healed, cluster ready again): whatever the workload
    /// reads back, by a fresh process `process`, until `deadline`.
    ///
    /// # Errors
    /// Only when the history cannot be written.
    fn final_phase(
        &self,
        process: ProcessId,
        recorder: &Arc<Recorder>,
        deadline: tokio::time::Instant,
    ) -> impl Future<Output = Result<(), RecordError>> + Send;
}
