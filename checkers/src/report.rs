//! The checker's output: [`Verdict`] (valid / invalid / unknown, with exit codes), [`Report`]
//! (every anomaly by kind, the policy's split into bad and allowed, the durability report,
//! stats, warnings) and its condensed console form, [`Report::summary`]. Full detail goes to
//! `report.json`; the summary shows counts and one witness per kind.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use serde::Serialize;

use logjam_history::Header;

use crate::anomaly::{AnomalyGroup, AnomalyKind};
use crate::durability::DurabilityReport;
use crate::findings::{Findings, ProducerStats, ReadCommittedStats, WorkloadStats, ZombieStats};
use crate::policy::Policy;
use crate::queue::realtime::LinearizabilitySummary;

pub use crate::findings::{OutcomeCounts, Stats};

/// The tri-state result of a check.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Verdict {
    /// Something was checked and no bad anomaly was found.
    Valid,
    /// At least one anomaly the policy forbids.
    Invalid,
    /// Nothing could be checked (e.g. no ok read returned anything). Never reported as valid.
    Unknown,
}

impl Verdict {
    /// Process exit code: 0 valid, 1 invalid, 2 unknown.
    pub fn exit_code(self) -> i32 {
        match self {
            Verdict::Valid => 0,
            Verdict::Invalid => 1,
            Verdict::Unknown => 2,
        }
    }

    /// Lowercase name.
    pub fn as_str(self) -> &'static str {
        match self {
            Verdict::Valid => "valid",
            Verdict::Invalid => "invalid",
            Verdict::Unknown => "unknown",
        }
    }
}

/// Everything a check found.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    /// The header's workload.
    pub workload: String,
    /// The header's seed, for the replay command.
    pub seed: u64,
    /// The verdict after the policy.
    pub verdict: Verdict,
    /// Why, in one sentence.
    pub reason: String,
    /// Kinds found that the policy forbids.
    pub bad_kinds: Vec<AnomalyKind>,
    /// Kinds found that the policy allows.
    pub allowed_kinds: Vec<AnomalyKind>,
    /// The policy applied.
    pub policy: Policy,
    /// Every anomaly found, by kind.
    pub anomalies: BTreeMap<AnomalyKind, AnomalyGroup>,
    /// Acknowledged writes lost.
    pub durability: DurabilityReport,
    /// What the per-partition log linearizability check covered.
    pub linearizability: LinearizabilitySummary,
    /// Op counts and graph sizes.
    pub stats: Stats,
    /// Things the user should know that are not anomalies (e.g. a torn last line).
    pub warnings: Vec<String>,
    /// What only this workload's checker counts, under its own key (`read_committed`,
    /// `zombies`, `producer`); absent for the others.
    #[serde(flatten)]
    pub workload_stats: Option<WorkloadStats>,
}

impl Report {
    /// The report for `findings` under `policy`: `invalid` when any kind found is bad under
    /// the policy; otherwise `unknown` when no ok read returned a record (nothing was checked);
    /// otherwise `valid`.
    pub fn assemble(header: &Header, findings: Findings, policy: Policy) -> Report {
        let Findings {
            anomalies,
            durability,
            linearizability,
            stats,
            warnings,
            workload_stats,
        } = findings;
        let groups = anomalies.into_groups();
        let (allowed_kinds, bad_kinds): (Vec<AnomalyKind>, Vec<AnomalyKind>) =
            groups.keys().copied().partition(|k| policy.allows(*k));
        let nothing_read = "no ok read returned any record, so nothing could be checked";
        // With no record read at all, "unseen" says only that the run never looked: that is
        // a run that checked nothing (unknown), not evidence against the cluster.
        let only_unseen = bad_kinds.iter().all(|kind| *kind == AnomalyKind::Unseen);
        let (verdict, reason) = if stats.ok_records_read == 0 && only_unseen {
            (Verdict::Unknown, nothing_read.to_owned())
        } else if !bad_kinds.is_empty() {
            let names: Vec<&str> = bad_kinds.iter().map(|k| k.as_str()).collect();
            (Verdict::Invalid, format!("found {}", names.join(", ")))
        } else if allowed_kinds.is_empty() {
            (Verdict::Valid, "no anomalies".to_owned())
        } else {
            (
                Verdict::Valid,
                "only anomalies the policy allows".to_owned(),
            )
        };
        Report {
            workload: header.workload.clone(),
            seed: header.seed,
            verdict,
            reason,
            bad_kinds,
            allowed_kinds,
            policy,
            anomalies: groups,
            durability,
            linearizability,
            stats,
            warnings,
            workload_stats,
        }
    }

    /// The read-committed checker's statistics (txn workload).
    pub fn read_committed(&self) -> Option<&ReadCommittedStats> {
        match &self.workload_stats {
            Some(WorkloadStats::ReadCommitted(stats)) => Some(stats),
            _ => None,
        }
    }

    /// The eos checker's zombies (none when the run had none).
    pub fn zombies(&self) -> Option<&ZombieStats> {
        match &self.workload_stats {
            Some(WorkloadStats::Zombies(stats)) => Some(stats),
            _ => None,
        }
    }

    /// The producer workload's send figures.
    pub fn producer(&self) -> Option<&ProducerStats> {
        match &self.workload_stats {
            Some(WorkloadStats::Producer(stats)) => Some(stats),
            _ => None,
        }
    }
}

/// Witnesses shown per kind in the summary.
const SUMMARY_WITNESSES: usize = 1;
/// Lost writes listed per partition in the summary.
const SUMMARY_LOST_VALUES: usize = 8;

impl Report {
    /// Condensed console text: verdict, counts per kind, one witness per kind, durability
    /// and warnings. The full detail is in the JSON.
    pub fn summary(&self) -> String {
        let mut s = String::new();
        let _ = writeln!(
            s,
            "logjam check: {} ({} workload, seed {}): {}",
            self.verdict.as_str().to_uppercase(),
            self.workload,
            self.seed,
            self.reason
        );
        let _ = writeln!(
            s,
            "  history: {} client ops, {} nemesis events, {} keys, {} acknowledged sends, {} records read by ok ops",
            self.stats.client_ops,
            self.stats.nemesis_events,
            self.stats.keys,
            self.stats.ok_sends,
            self.stats.ok_records_read
        );
        if let Some(rc) = self.read_committed() {
            let _ = writeln!(
                s,
                "  read_committed: {} polls checked, {} LSOs seen over {} partition leader epochs, {} records checked against their LSO; {} LSO drops across leader epochs, {} records past their answer's LSO but not the next one's (the LSO moved while the leader read), {} times a transaction was visible on one partition and not yet stable on another (all allowed)",
                rc.polls_checked,
                rc.lsos_seen,
                rc.leader_epochs_seen,
                rc.records_checked,
                rc.lso_drops_across_epochs,
                rc.lso_capture_races,
                rc.cross_partition_partial
            );
            if let Some(longest) = rc.lso_stalls.first() {
                let _ = writeln!(
                    s,
                    "  LSO stalls: {} of a second or more; longest {} ms on key {} at offset {} (held by {}, {} ms to {} ms)",
                    rc.lso_stalls.len(),
                    longest.duration_ms,
                    longest.key,
                    longest.offset,
                    longest.held_by_op.map_or_else(
                        || "a record no op saw acknowledged".to_owned(),
                        |op| format!("op {op}'s transaction")
                    ),
                    longest.from_ms,
                    longest.to_ms
                );
            }
        }
        if let Some(z) = self.zombies() {
            let _ = writeln!(
                s,
                "  zombies: {} pipeline ops paused mid-transaction past the session timeout; {} of them had inputs another op committed meanwhile; {} were refused, {} committed, {} ended unknown",
                z.paused, z.taken_over, z.refused, z.committed, z.unknown
            );
        }
        let list = |kinds: &[AnomalyKind]| {
            kinds
                .iter()
                .map(|k| format!("{k} x{}", self.anomalies.get(k).map_or(0, |g| g.count)))
                .collect::<Vec<_>>()
                .join(", ")
        };
        if !self.bad_kinds.is_empty() {
            let _ = writeln!(s, "  bad:     {}", list(&self.bad_kinds));
        }
        if !self.allowed_kinds.is_empty() {
            let _ = writeln!(s, "  allowed: {}", list(&self.allowed_kinds));
        }
        for kind in self.bad_kinds.iter().chain(&self.allowed_kinds) {
            if let Some(group) = self.anomalies.get(kind) {
                for w in group.witnesses.iter().take(SUMMARY_WITNESSES) {
                    let _ = writeln!(s, "  - {kind}: {}", w.explanation);
                }
            }
        }
        if let Some(producer) = self.producer() {
            producer_summary(&mut s, producer);
            for w in &self.warnings {
                let _ = writeln!(s, "  warning: {w}");
            }
            return s;
        }
        let d = &self.durability;
        for u in &d.unavailable {
            let _ = writeln!(
                s,
                "  unavailable: partition {} had no leader after the heal, since {:.1} s{}",
                u.partition,
                u.since_ns as f64 / 1e9,
                if u.since_seen {
                    ""
                } else {
                    " (when the harness gave up waiting; the watcher saw no change to no leader)"
                }
            );
        }
        if d.lost > 0 || d.unconfirmed > 0 {
            let _ = writeln!(
                s,
                "  durability: {} of {} acknowledged writes lost, {} unconfirmed (final reads: {:?})",
                d.lost, d.acknowledged, d.unconfirmed, d.final_reads
            );
            if d.lost > 0 {
                let _ = writeln!(
                    s,
                    "    lost {} by mechanism: {}",
                    d.lost,
                    mechanism_list(&d.lost_by_mechanism)
                );
            }
            for p in d.partitions.iter().filter(|p| p.lost_count > 0) {
                let name = p.topic_partition.as_ref().map_or_else(
                    || format!("key {}", p.key),
                    |tp| format!("{tp} (key {})", p.key),
                );
                let ranges: Vec<String> = p
                    .offset_ranges
                    .iter()
                    .map(|r| {
                        if r.first == r.last {
                            r.first.to_string()
                        } else {
                            format!("{}..={}", r.first, r.last)
                        }
                    })
                    .collect();
                let values: Vec<String> = p
                    .lost
                    .iter()
                    .take(SUMMARY_LOST_VALUES)
                    .map(|w| w.value.to_string())
                    .collect();
                let _ = writeln!(
                    s,
                    "    {name}: {} lost at offsets [{}], values [{}{}]",
                    p.lost_count,
                    ranges.join(", "),
                    values.join(", "),
                    if p.lost.len() > SUMMARY_LOST_VALUES {
                        ", ..."
                    } else {
                        ""
                    }
                );
            }
        } else {
            let _ = writeln!(
                s,
                "  durability: all {} acknowledged writes accounted for",
                d.acknowledged
            );
        }
        let l = &self.linearizability;
        let _ = writeln!(
            s,
            "  log linearizability: {} key(s) decided, {} skipped",
            l.keys_decided,
            l.keys_skipped.len()
        );
        for (key, reason) in l.keys_skipped.iter().take(3) {
            let _ = writeln!(s, "    key {key}: {reason}");
        }
        for w in &self.warnings {
            let _ = writeln!(s, "  warning: {w}");
        }
        s
    }

    /// The report as pretty JSON (what `report.json` holds).
    ///
    /// # Errors
    /// Only if serialization fails, which the report's types do not allow in practice.
    pub fn to_json(&self) -> Result<String, serde_json::Error> {
        serde_json::to_string_pretty(self)
    }
}

/// The producer workload's block of the summary: outcomes, retries, latency, blocking.
fn producer_summary(s: &mut String, p: &ProducerStats) {
    let _ = writeln!(
        s,
        "  sends: {} submitted, {} acknowledged ({} of them retried), {} failed, {} indeterminate",
        p.sends, p.acknowledged, p.retried, p.failed, p.indeterminate
    );
    let l = &p.ack_latency;
    let _ = writeln!(
        s,
        "  send latency (send() to acknowledgement, {} sends): p50 {:.1} ms, p90 {:.1} ms, p99 {:.1} ms, max {:.1} ms",
        l.count, l.p50_ms, l.p90_ms, l.p99_ms, l.max_ms
    );
    let b = &p.blocked;
    let _ = writeln!(
        s,
        "  send() blocked (max.block.ms: metadata, buffer.memory): p50 {:.3} ms, p99 {:.3} ms, max {:.1} ms, {:.1} ms in all; {} sends blocked >= 1 ms, {} failed on buffer exhaustion",
        b.p50_ms, b.p99_ms, b.max_ms, b.total_ms, p.blocked_over_1ms, p.buffer_exhausted
    );
}

/// `212 isr-of-one, 3 unattributed`: counts per loss mechanism, largest first.
pub fn mechanism_list(counts: &BTreeMap<String, u64>) -> String {
    let mut sorted: Vec<(&String, &u64)> = counts.iter().collect();
    sorted.sort_by(|a, b| b.1.cmp(a.1).then(a.0.cmp(b.0)));
    sorted
        .iter()
        .map(|(name, count)| format!("{count} {name}"))
        .collect::<Vec<_>>()
        .join(", ")
}
