//! The one interface every workload's checker implements: paired history in ([`Checker::push`],
//! streaming, so a million-op history is held once, compactly), [`Findings`] with witnesses
//! out. Which findings fail a run is not the checker's business: the registry's policy for the
//! workload decides, and [`crate::Report::assemble`] turns findings and policy into a verdict.

use logjam_history::Paired;

use crate::anomaly::Anomalies;
use crate::durability::DurabilityReport;
use crate::producer::ProducerStats;
use crate::queue::realtime::LinearizabilitySummary;
use crate::report::Stats;

/// A streaming checker for one workload's histories.
pub trait Checker {
    /// Feeds one paired item (a completed client op or a nemesis event), in history order.
    /// Client ops never completed arrive last, as `info`.
    fn push(&mut self, item: Paired);

    /// Runs every analysis over what was pushed.
    fn finish(self: Box<Self>) -> Findings;
}

/// What a checker found: anomalies with witnesses, and the facts the report shows. Findings
/// claim only what the history proves; the policy then decides which fail the run.
#[derive(Debug, Clone)]
pub struct Findings {
    /// Every anomaly, by kind, with witnesses.
    pub anomalies: Anomalies,
    /// Acknowledged writes lost (empty for workloads without writes).
    pub durability: DurabilityReport,
    /// What the log linearizability analysis covered.
    pub linearizability: LinearizabilitySummary,
    /// Counts; `ok_records_read == 0` makes a run that found nothing `unknown`.
    pub stats: Stats,
    /// Things the user should know that are not anomalies.
    pub warnings: Vec<String>,
    /// The producer workload's send figures (latency, blocking, retries); `None` elsewhere.
    pub producer: Option<ProducerStats>,
}
