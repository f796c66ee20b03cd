//! The outcome of one stored run, as `logjam matrix` and `logjam nightly` tabulate it: seed,
//! settings, verdict, acknowledged and lost writes, anomaly counts (bad or allowed), how long
//! each partition refused writes, and the leader changes the watcher saw (unclean elections
//! singled out). Read from a run directory's `run.json`, `report.json` and `history.jsonl`
//! (streamed); pure and sync, nothing here runs or judges anything.
//!
//! # Refused time
//!
//! Per key (one key is one partition), the time during which writes to it were refused,
//! measured from the clients' side only. Walk that key's `send` completions in history (time)
//! order:
//!
//! - an outage starts at the completion of a `fail` or `info` send when the previous send
//!   completion of that key was `ok`;
//! - it ends at the completion of the next `ok` send of that key, or, if none comes, at the end
//!   of the workload phase: the time of the first `final-poll` op (else of the last op);
//! - before the key's first `ok` send nothing counts (the cluster was never seen accepting
//!   writes for it, so there is nothing to be refused yet). A key that never acknowledged a
//!   write is listed in `never_acknowledged` instead.
//!
//! Completions after the end of the workload phase are ignored. The run's figures are the
//! maximum and the mean over the keys that acknowledged at least one write.

use std::collections::{BTreeMap, HashMap};
use std::io::BufRead;
use std::path::{Path, PathBuf};

use anyhow::Context;
use logjam_history::{
    Function, HistoryReader, MicroOp, Op, OpType, Outcome, Paired, Pairer, Process,
};
use serde::{Deserialize, Serialize};

/// Everything the tables need about one stored run.
#[derive(Debug, Clone, Serialize)]
pub struct RunOutcome {
    /// The run directory read.
    pub run_dir: PathBuf,
    /// The run's seed (from run.json).
    pub seed: u64,
    /// Node and client settings given to the run, and `replication.factor`.
    pub settings: BTreeMap<String, String>,
    /// `valid`, `invalid` or `unknown`.
    pub verdict: String,
    /// The checker's one-sentence reason.
    pub reason: String,
    /// Acknowledged writes in the history.
    pub acknowledged: u64,
    /// Acknowledged writes lost (the durability report's count).
    pub lost: u64,
    /// Acknowledged writes neither read nor proven lost.
    pub unconfirmed: u64,
    /// The lost writes per mechanism (`isr-of-one`, `unclean-election`, ..., `unattributed`).
    pub lost_by_mechanism: BTreeMap<String, u64>,
    /// Every anomaly kind found, with its count and whether the policy forbids it.
    pub anomalies: BTreeMap<String, AnomalyCount>,
    /// How long writes were refused, per key and overall.
    pub refused: RefusedTime,
    /// Per key, the acknowledged writes lost (keys that lost none are left out).
    pub lost_by_key: Vec<LostOnKey>,
    /// Leader changes the watcher recorded (`leader-change` nemesis ops).
    pub leader_changes: u64,
    /// The achieved client op rate, overall and per fault window (from run.json; absent in
    /// runs stored before it was recorded).
    pub rates: Option<crate::rates::Rates>,
    /// Those of them that were unclean elections.
    pub unclean_elections: Vec<LeaderChange>,
    /// Those of them that left a partition without a leader.
    pub leaderless: Vec<LeaderChange>,
    /// Sends that did not succeed because the ISR was below `min.insync.replicas`
    /// (`NOT_ENOUGH_REPLICAS`, error code 19).
    pub not_enough_replicas: u64,
}

/// One anomaly kind in a run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct AnomalyCount {
    /// Cases found.
    pub count: u64,
    /// True when the policy forbids the kind (it made the run invalid).
    pub bad: bool,
}

/// Refused time (see the module doc for the exact definition), in seconds.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct RefusedTime {
    /// Per key that acknowledged at least one write.
    pub per_key: BTreeMap<i64, f64>,
    /// The largest per-key figure (0 when no key acknowledged anything).
    pub max_seconds: f64,
    /// The mean over `per_key` (0 when empty).
    pub mean_seconds: f64,
    /// Keys that were sent to but never acknowledged a write.
    pub never_acknowledged: Vec<i64>,
}

pub use logjam_history::{LEADER_CHANGE, LeadershipChange};

/// A `leader-change` op of a stored run.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LeaderChange {
    /// The history index of the op.
    pub index: u64,
    /// Its time, seconds since the run started.
    pub time_seconds: f64,
    /// What changed.
    #[serde(flatten)]
    pub change: LeadershipChange,
    /// For a change that left the partition without a leader: seconds until the watcher saw
    /// a leader again (`None`: not before the history ends).
    pub leaderless_seconds: Option<f64>,
}

impl LeaderChange {
    /// One line for reports, e.g. `op 951 at 21.1 s: partition 0 elected n5 (epoch 1)
    /// outside the ISR [n4] led by n4`.
    #[must_use]
    pub fn describe(&self) -> String {
        let change = &self.change;
        let head = format!(
            "op {} at {:.1} s: partition {}",
            self.index, self.time_seconds, change.partition
        );
        match &change.leader {
            None => format!(
                "{head} without a leader {} (ISR [{}])",
                self.leaderless_seconds.map_or_else(
                    || "until the history ends".to_owned(),
                    |seconds| format!("for {seconds:.1} s")
                ),
                change.isr.join(", ")
            ),
            Some(leader) if change.unclean => format!(
                "{head} elected {leader} (epoch {}) outside the ISR [{}] led by {}",
                change.epoch,
                change.previous_isr.join(", "),
                change.previous_leader.as_deref().unwrap_or("nobody")
            ),
            Some(leader) => format!(
                "{head} led by {leader} (epoch {}), ISR [{}]",
                change.epoch,
                change.isr.join(", ")
            ),
        }
    }
}

/// The acknowledged writes of one key the durability check found lost.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LostOnKey {
    /// The key (one partition).
    pub key: i64,
    /// How many.
    #[serde(rename = "lost_count")]
    pub count: u64,
    /// Their offsets, as inclusive ranges.
    #[serde(rename = "offset_ranges", default)]
    pub offsets: Vec<OffsetRange>,
}

/// An inclusive range of offsets.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct OffsetRange {
    /// The first offset.
    pub first: i64,
    /// The last offset.
    pub last: i64,
}

/// Reads the outcome of the run stored in `run_dir`.
///
/// # Errors
/// A missing or malformed `run.json`, `report.json` or `history.jsonl`.
pub fn outcome(run_dir: &Path) -> anyhow::Result<RunOutcome> {
    let run: RunFile = read_json(&run_dir.join("run.json"))?;
    let report: ReportFile = read_json(&run_dir.join("report.json"))?;
    let history_path = run_dir.join("history.jsonl");
    let reader = HistoryReader::open(&history_path)
        .with_context(|| format!("cannot read {}", history_path.display()))?;
    let history =
        scan_history(reader).with_context(|| format!("cannot read {}", history_path.display()))?;
    Ok(RunOutcome {
        run_dir: run_dir.to_owned(),
        seed: run.seed,
        settings: run.settings(),
        verdict: report.verdict,
        reason: report.reason,
        acknowledged: report.durability.acknowledged,
        lost: report.durability.lost,
        unconfirmed: report.durability.unconfirmed,
        lost_by_mechanism: report.durability.lost_by_mechanism.clone(),
        anomalies: report
            .anomalies
            .iter()
            .map(|(kind, group)| {
                let bad = report.bad_kinds.contains(kind);
                (
                    kind.clone(),
                    AnomalyCount {
                        count: group.count,
                        bad,
                    },
                )
            })
            .collect(),
        lost_by_key: report
            .durability
            .partitions
            .into_iter()
            .filter(|lost| lost.count > 0)
            .collect(),
        refused: history.refused,
        leader_changes: history.leader_changes,
        rates: run.rates,
        unclean_elections: history.unclean_elections,
        leaderless: history.leaderless,
        not_enough_replicas: history.not_enough_replicas,
    })
}

fn read_json<T: serde::de::DeserializeOwned>(path: &Path) -> anyhow::Result<T> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))?;
    serde_json::from_str(&text).with_context(|| format!("malformed {}", path.display()))
}

/// The parts of `run.json` read here.
#[derive(Debug, Deserialize)]
struct RunFile {
    seed: u64,
    #[serde(default)]
    node_settings: BTreeMap<String, serde_json::Value>,
    #[serde(default)]
    client_settings: BTreeMap<String, serde_json::Value>,
    #[serde(default)]
    replication_factor: Option<serde_json::Value>,
    #[serde(default)]
    rates: Option<crate::rates::Rates>,
}

impl RunFile {
    fn settings(&self) -> BTreeMap<String, String> {
        let text = |value: &serde_json::Value| match value {
            serde_json::Value::String(s) => s.clone(),
            other => other.to_string(),
        };
        let mut settings: BTreeMap<String, String> = self
            .node_settings
            .iter()
            .chain(&self.client_settings)
            .map(|(key, value)| (key.clone(), text(value)))
            .collect();
        if let Some(factor) = &self.replication_factor {
            settings.insert("replication.factor".to_owned(), text(factor));
        }
        settings
    }
}

/// The parts of `report.json` read here.
#[derive(Debug, Deserialize)]
struct ReportFile {
    verdict: String,
    #[serde(default)]
    reason: String,
    #[serde(default)]
    bad_kinds: Vec<String>,
    #[serde(default)]
    anomalies: BTreeMap<String, GroupFile>,
    durability: DurabilityFile,
}

#[derive(Debug, Deserialize)]
struct GroupFile {
    count: u64,
}

#[derive(Debug, Deserialize)]
struct DurabilityFile {
    acknowledged: u64,
    lost: u64,
    #[serde(default)]
    unconfirmed: u64,
    #[serde(default)]
    lost_by_mechanism: BTreeMap<String, u64>,
    #[serde(default)]
    partitions: Vec<LostOnKey>,
}

/// What one pass over the history yields.
#[derive(Debug, Default)]
struct HistoryMetrics {
    refused: RefusedTime,
    leader_changes: u64,
    unclean_elections: Vec<LeaderChange>,
    leaderless: Vec<LeaderChange>,
    not_enough_replicas: u64,
}

/// One pass over the ops: send completions feed the refusal tracker, `leader-change` nemesis
/// ops are counted, the first `final-poll` ends the workload phase.
fn scan_history<R: BufRead>(reader: HistoryReader<R>) -> anyhow::Result<HistoryMetrics> {
    let mut pairer = Pairer::new();
    let mut refusals = RefusalTracker::default();
    let mut metrics = HistoryMetrics::default();
    let mut workload_end: Option<u64> = None;
    let mut last_time = 0;
    for op in reader {
        let op = match op {
            Ok(op) => op,
            // A torn last line is a warning everywhere else too; every op before it is intact.
            Err(error) if error.is_torn_tail() => break,
            Err(error) => return Err(error.into()),
        };
        last_time = last_time.max(op.time_ns);
        if op.f == Function::FinalPoll && workload_end.is_none() {
            workload_end = Some(op.time_ns);
        }
        if op.process == Process::Nemesis {
            note_nemesis(&op, &mut metrics);
            continue;
        }
        let Some(Paired::Client(completed)) = pairer.push(op)? else {
            continue;
        };
        let Some(time) = completed.complete_time_ns else {
            continue;
        };
        if completed.f != Function::Send || workload_end.is_some_and(|end| time > end) {
            continue;
        }
        if completed.outcome != Outcome::Ok
            && completed.error.as_ref().is_some_and(|error| {
                // Kafka's name or the client's.
                let text = error.to_string();
                text.contains("NOT_ENOUGH_REPLICAS") || text.contains("NotEnoughReplicas")
            })
        {
            metrics.not_enough_replicas += 1;
        }
        for micro in completed.value.micro_ops() {
            if let MicroOp::Send { key, .. } = micro {
                refusals.observe(key.0, time, completed.outcome);
            }
        }
    }
    metrics.refused = refusals.finish(workload_end.unwrap_or(last_time));
    Ok(metrics)
}

/// Counts a `leader-change` completion and keeps it when it was unclean or left the
/// partition without a leader; a leader again closes the partition's open leaderless stretch.
fn note_nemesis(op: &Op, metrics: &mut HistoryMetrics) {
    if op.f.as_str() != LEADER_CHANGE || op.op_type == OpType::Invoke {
        return;
    }
    metrics.leader_changes += 1;
    let logjam_history::OpValue::Json(value) = &op.value else {
        return;
    };
    let Ok(change) = LeadershipChange::deserialize(value) else {
        return;
    };
    let change = LeaderChange {
        index: op.index.0,
        time_seconds: seconds(op.time_ns),
        change,
        leaderless_seconds: None,
    };
    if change.change.leader.is_none() {
        metrics.leaderless.push(change);
        return;
    }
    if let Some(open) = metrics.leaderless.iter_mut().rev().find(|earlier| {
        earlier.change.partition == change.change.partition && earlier.leaderless_seconds.is_none()
    }) {
        open.leaderless_seconds = Some(change.time_seconds - open.time_seconds);
    }
    if change.change.unclean {
        metrics.unclean_elections.push(change);
    }
}

fn seconds(ns: u64) -> f64 {
    ns as f64 / 1e9
}

/// Where one key stands while its send completions are walked.
#[derive(Debug, Clone, Copy, PartialEq)]
enum KeyState {
    /// No `ok` send yet: refusals do not count.
    NeverAcknowledged,
    /// The last completion was `ok`.
    Accepting,
    /// Refusing since this time (ns).
    Refusing(u64),
}

/// The refused-time state machine of the module doc, over every key at once.
#[derive(Debug, Default)]
struct RefusalTracker {
    /// Each key's state and its refused time so far (ns).
    keys: HashMap<i64, (KeyState, u64)>,
}

impl RefusalTracker {
    /// A send to `key` completed at `time_ns` with `outcome`.
    fn observe(&mut self, key: i64, time_ns: u64, outcome: Outcome) {
        let (state, refused) = self
            .keys
            .entry(key)
            .or_insert((KeyState::NeverAcknowledged, 0));
        *state = match (*state, outcome) {
            (KeyState::Refusing(since), Outcome::Ok) => {
                *refused += time_ns.saturating_sub(since);
                KeyState::Accepting
            }
            (_, Outcome::Ok) => KeyState::Accepting,
            (KeyState::Accepting, Outcome::Fail | Outcome::Info) => KeyState::Refusing(time_ns),
            (unchanged, _) => unchanged,
        };
    }

    /// Closes outages still open at `end_ns` (the end of the workload phase).
    fn finish(self, end_ns: u64) -> RefusedTime {
        let mut result = RefusedTime::default();
        for (key, (state, mut refused)) in self.keys {
            match state {
                KeyState::NeverAcknowledged => {
                    result.never_acknowledged.push(key);
                    continue;
                }
                KeyState::Refusing(since) => refused += end_ns.saturating_sub(since),
                KeyState::Accepting => {}
            }
            result.per_key.insert(key, seconds(refused));
        }
        result.never_acknowledged.sort_unstable();
        result.max_seconds = result.per_key.values().copied().fold(0.0, f64::max);
        if !result.per_key.is_empty() {
            result.mean_seconds =
                result.per_key.values().sum::<f64>() / result.per_key.len() as f64;
        }
        result
    }
}

#[cfg(test)]
mod tests;
