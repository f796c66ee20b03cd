//! The queue/log checker: folds a paired history into a compact index (`index`), runs every
//! anomaly family over it, applies the policy and assembles the [`Report`]. Streaming: feed
//! it ops with [`QueueChecker::push`] as they are read, so the history is held once, compactly.
//!
//! Families, one module each: [`offsets`] (inconsistent-offsets, duplicate), [`aborted`]
//! (aborted-read, precommitted-read), [`loss`] (lost-write, unseen-lost, unseen), [`ordering`]
//! (poll/send skips and nonmonotonic, external and internal), [`cycles`] (G0, G1c, G-single,
//! G2). The durability report is in [`crate::durability`].

pub mod aborted;
pub mod cycles;
pub(crate) mod index;
pub mod loss;
pub mod offsets;
pub mod ordering;
pub mod realtime;

use logjam_history::{CompletedOp, Header, NemesisEvent, Outcome, Paired};

use crate::anomaly::{Anomalies, AnomalyKind};
use crate::durability;
use crate::policy::{Policy, QueueOptions};
use crate::report::{Report, Stats, Verdict};

/// Streaming queue checker.
pub struct QueueChecker {
    /// The history's header (workload, seed, config).
    header: Header,
    /// Ops folded so far.
    index: index::QueueIndex,
    /// Nemesis events so far.
    nemesis: Vec<NemesisEvent>,
    /// Counts for the report.
    stats: Stats,
    /// Latest time seen, the end of the history.
    end_time_ns: u64,
    /// Warnings collected by the caller (e.g. a torn tail).
    warnings: Vec<String>,
    /// Policy override; `None` means the queue policy from the header.
    policy: Option<Policy>,
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
            warnings: Vec::new(),
            policy: None,
        }
    }

    /// Uses `policy` instead of the queue policy derived from the header.
    pub fn with_policy(mut self, policy: Policy) -> QueueChecker {
        self.policy = Some(policy);
        self
    }

    /// Adds a warning to the report.
    pub fn warn(&mut self, warning: String) {
        self.warnings.push(warning);
    }

    /// Counts one op line read (for stats).
    pub fn count_line(&mut self) {
        self.stats.op_lines += 1;
    }

    /// Feeds one paired item.
    pub fn push(&mut self, item: Paired) {
        match item {
            Paired::Client(op) => self.push_op(op),
            Paired::Nemesis(event) => self.push_nemesis(event),
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

    /// Runs every analysis and returns the report.
    pub fn finish(mut self) -> Report {
        let index = &mut self.index;
        index.finish();
        let index = &self.index;
        let options = QueueOptions {
            subscribe: QueueOptions::from_header(&self.header).subscribe || index.saw_subscribe,
            ..QueueOptions::from_header(&self.header)
        };
        let policy = self.policy.take().unwrap_or_else(|| Policy::queue(options));

        for (key, value, first, second) in index.repeated_sends.iter().take(10) {
            self.warnings.push(format!(
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
        self.stats.graph = cycles::check(index, options.ww_edges, &mut anomalies);
        let durability = durability::report(
            &self.header,
            index,
            &finals,
            &proven_lost,
            &self.nemesis,
            self.end_time_ns,
        );

        self.stats.keys = index.keys.len() as u64;
        self.stats.ok_records_read = index.ok_reads_count();
        self.stats.ok_sends = durability.acknowledged;

        let groups = anomalies.into_groups();
        let (allowed_kinds, bad_kinds): (Vec<AnomalyKind>, Vec<AnomalyKind>) =
            groups.keys().copied().partition(|k| policy.allows(*k));
        // With no record read at all, "unseen" says only that the run never looked: that is
        // a run that checked nothing (unknown), not evidence against the cluster.
        let only_unseen = bad_kinds.iter().all(|kind| *kind == AnomalyKind::Unseen);
        let (verdict, reason) = if self.stats.ok_records_read == 0 && only_unseen {
            (
                Verdict::Unknown,
                "no ok read returned any record, so nothing could be checked".to_owned(),
            )
        } else if !bad_kinds.is_empty() {
            let names: Vec<&str> = bad_kinds.iter().map(|k| k.as_str()).collect();
            (Verdict::Invalid, format!("found {}", names.join(", ")))
        } else if self.stats.ok_records_read == 0 {
            (
                Verdict::Unknown,
                "no ok read returned any record, so nothing could be checked".to_owned(),
            )
        } else if allowed_kinds.is_empty() {
            (Verdict::Valid, "no anomalies".to_owned())
        } else {
            (
                Verdict::Valid,
                "only anomalies the policy allows".to_owned(),
            )
        };
        Report {
            workload: self.header.workload.clone(),
            seed: self.header.seed,
            verdict,
            reason,
            bad_kinds,
            allowed_kinds,
            policy,
            anomalies: groups,
            durability,
            linearizability,
            stats: self.stats,
            warnings: self.warnings,
        }
    }
}
