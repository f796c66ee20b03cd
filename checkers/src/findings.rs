//! What checkers find, in a leaf that imports no checker: [`Findings`] (anomalies with
//! witnesses, the durability report, what the linearizability analysis covered, [`Stats`]
//! of the history, warnings) and the statistics only one workload's checker keeps, as one
//! enum ([`WorkloadStats`], `findings/workload.rs`). Checkers produce findings
//! (`checker.rs`), the report turns findings and a policy into a verdict (`report.rs`); a new
//! workload's statistics are a new variant here, not a field on shared structs.

pub mod workload;

use std::collections::BTreeMap;

use serde::Serialize;

use crate::anomaly::Anomalies;
use crate::durability::DurabilityReport;
use crate::graph::GraphStats;
use crate::queue::realtime::LinearizabilitySummary;

pub use workload::{
    LsoStall, Percentiles, ProducerStats, ReadCommittedStats, WorkloadStats, ZombieStats,
};

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
    /// What only this workload's checker counts (read_committed, zombies, send figures).
    pub workload_stats: Option<WorkloadStats>,
}

/// Counts of client ops by outcome.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct OutcomeCounts {
    /// `ok` ops.
    pub ok: u64,
    /// `fail` ops.
    pub fail: u64,
    /// `info` ops (including those never completed).
    pub info: u64,
}

/// What the history contained.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Stats {
    /// Op lines read (client and nemesis, invokes and completions).
    pub op_lines: u64,
    /// Client ops after pairing.
    pub client_ops: u64,
    /// Nemesis events.
    pub nemesis_events: u64,
    /// Client ops by `f`, then by outcome.
    pub by_f: BTreeMap<String, OutcomeCounts>,
    /// Keys seen.
    pub keys: u64,
    /// Records returned by ok reads.
    pub ok_records_read: u64,
    /// Acknowledged sends.
    pub ok_sends: u64,
    /// Dependency graph sizes.
    pub graph: GraphStats,
}
