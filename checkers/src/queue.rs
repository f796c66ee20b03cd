//! The queue/log checker: folds a paired history into a compact index (`index`) and runs
//! every anomaly family over it into [`Findings`]. Streaming: feed it ops with
//! [`Checker::push`] as they are read, so the history is held once, compactly. Its policy is
//! the registry's (`crate::registry`).
//!
//! Families, one module each: [`offsets`] (inconsistent-offsets, duplicate), [`aborted`]
//! (aborted-read, precommitted-read), [`loss`] (lost-write, unseen-lost, unseen), [`ordering`]
//! (poll/send skips and nonmonotonic, external and internal), [`cycles`] (G0, G1c, G-single,
//! G2). The durability report is in [`crate::durability`].

pub mod aborted;
pub mod cycles;
pub(crate) mod index;
#[cfg(test)]
mod index_tests;
pub mod loss;
pub mod offsets;
pub mod ordering;
pub mod realtime;

use logjam_history::{CompletedOp, Header, NemesisEvent, Outcome, Paired};

use crate::anomaly::Anomalies;
use crate::checker::{Checker, Findings};
use crate::durability;
use crate::findings::Stats;
use crate::policy::QueueOptions;

/// Streaming queue checker.
pub struct QueueChecker {
    /// Ops folded so far.
    index: index::QueueIndex,
    /// Nemesis events so far.
    nemesis: Vec<NemesisEvent>,
    /// Counts for the report.
    stats: Stats,
    /// Latest time seen, the end of the history.
    end_time_ns: u64,
    /// The history's header (ww edges, topic-partitions for the durability report).
    header: Header,
}

impl QueueChecker {
    /// A checker for a history with this header.
    pub fn new(header: Header) -> QueueChecker {
        QueueChecker {
            header,
            index: index::QueueIndex::new(),
            nemesis: Vec::new(),
            stats: Stats::default(),
            end_time_ns: 0,
        }
    }

    /// Feeds one client op.
    pub fn push_op(&mut self, op: CompletedOp) {
        let time = op.complete_time_ns.unwrap_or(op.invoke_time_ns);
        self.end_time_ns = self.end_time_ns.max(time);
        self.stats.client_ops += 1;
        let counts = match self.stats.by_f.get_mut(op.f.as_str()) {
            Some(c) => c,
            None => self.stats.by_f.entry(op.f.to_string()).or_default(),
        };
        match op.outcome {
            Outcome::Ok => counts.ok += 1,
            Outcome::Fail => counts.fail += 1,
            Outcome::Info => counts.info += 1,
        }
        self.index.ingest(op);
    }

    /// Feeds one nemesis event.
    pub fn push_nemesis(&mut self, event: NemesisEvent) {
        self.end_time_ns = self.end_time_ns.max(event.time_ns);
        self.stats.nemesis_events += 1;
        self.nemesis.push(event);
    }
}

impl Checker for QueueChecker {
    fn push(&mut self, item: Paired) {
        match item {
            Paired::Client(op) => self.push_op(op),
            Paired::Nemesis(event) => self.push_nemesis(event),
        }
    }

    fn finish(mut self: Box<Self>) -> Findings {
        self.index.finish();
        let index = &self.index;
        let ww_edges = QueueOptions::from_header(&self.header).ww_edges;
        let mut warnings = Vec::new();
        for (key, value, first, second) in index.repeated_sends.iter().take(10) {
            warnings.push(format!(
                "value {value} of key {} was sent by both op {} and op {}; values should be \
                 unique per key, so version orders may be ambiguous",
                index.key(*key),
                index.op(*first).index(),
                index.op(*second).index()
            ));
        }

        let mut anomalies = Anomalies::default();
        offsets::check(index, &mut anomalies);
        aborted::check(index, &mut anomalies);
        let linearizability = realtime::check_logs(index, &mut anomalies);
        let linearizable = realtime::linearizable_keys(index, &linearizability, &anomalies);
        let last_nemesis = self.nemesis.iter().map(|n| n.time_ns).max();
        let finals = loss::FinalReads::compute(index, last_nemesis);
        let proven_lost = loss::check(index, &finals, &linearizable, &mut anomalies);
        ordering::check(index, &mut anomalies);
        let mut stats = std::mem::take(&mut self.stats);
        stats.graph = cycles::check(index, ww_edges, &mut anomalies);
        let durability = durability::report(
            &self.header,
            index,
            &finals,
            &proven_lost,
            &self.nemesis,
            self.end_time_ns,
        );
        stats.keys = index.keys.len() as u64;
        stats.ok_records_read = index.ok_reads_count();
        stats.ok_sends = durability.acknowledged;
        Findings {
            anomalies,
            durability,
            linearizability,
            stats,
            warnings,
            workload_stats: None,
        }
    }
}
