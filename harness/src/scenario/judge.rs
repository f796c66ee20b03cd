//! A scenario's verdict: each `expect` line of a [`Scenario`] judged against what its run
//! stored (the checkers' report, the leadership changes, the member pool's rebalances, the
//! evidence of `evidence.rs`), with the evidence in words, as `scenario.json` holds it.

use std::path::Path;

use serde_json::{Value, json};

use super::evidence::{
    LsoStalls, ResumedCommits, StaleProduces, Zombies, node_logs, read_json, retried_sends,
};
use super::{Expectation, Scenario};
use crate::metrics::{self, LeaderChange, LostOnKey};

pub(super) fn judge(scenario: &Scenario, run_dir: &Path) -> anyhow::Result<Value> {
    let outcome = metrics::outcome(run_dir)?;
    let report = read_json(&run_dir.join("report.json"))?;
    let retried = retried_sends(&report);
    let stalls = LsoStalls::of(&report);
    let zombies = Zombies::of(&report);
    // Every node's log, read once and only when an expectation needs it.
    let logs = if scenario.expect.iter().any(|e| {
        matches!(
            e,
            Expectation::ResumedCommits(_) | Expectation::StaleProduceRefused(_)
        )
    }) {
        node_logs(run_dir)?
    } else {
        Vec::new()
    };
    let resumed = ResumedCommits::of(&logs);
    let stale = StaleProduces::of(&logs);
    let rebalances = read_json(&run_dir.join("rebalances.json")).unwrap_or(Value::Null);
    let causes = rebalances["causes_after_settle"].clone();
    let loads = rebalances["loads_after_settle"].as_u64().unwrap_or(0);
    let causes_said = || {
        if rebalances.is_null() {
            return "the run had no member pool (members N)".to_owned();
        }
        format!(
            "rebalances after the group settled: {}; loads by a new coordinator: {loads}",
            match causes.as_object() {
                Some(map) if !map.is_empty() => map
                    .iter()
                    .map(|(cause, n)| format!("{n} {cause}"))
                    .collect::<Vec<_>>()
                    .join(", "),
                _ => "none".to_owned(),
            }
        )
    };
    let kinds: Vec<&str> = outcome.anomalies.keys().map(String::as_str).collect();
    let first = |changes: &[LeaderChange]| {
        changes
            .first()
            .map(LeaderChange::describe)
            .unwrap_or_default()
    };
    let checks: Vec<Value> = scenario
        .expect
        .iter()
        .map(|expect| {
            let (holds, said) = match expect {
                Expectation::Anomaly(expected) => (
                    expected
                        .iter()
                        .any(|kind| outcome.anomalies.contains_key(kind.as_str())),
                    format!("anomalies found: {}", kinds.join(", ")),
                ),
                Expectation::Lost => (
                    outcome.lost > 0,
                    format!(
                        "{} acknowledged write(s) lost {}; elections outside the ISR: {}",
                        outcome.lost,
                        outcome
                            .lost_by_key
                            .iter()
                            .map(describe_lost)
                            .collect::<Vec<_>>()
                            .join("; "),
                        if outcome.unclean_elections.is_empty() {
                            "none seen".to_owned()
                        } else {
                            outcome
                                .unclean_elections
                                .iter()
                                .map(LeaderChange::describe)
                                .collect::<Vec<_>>()
                                .join("; ")
                        }
                    ),
                ),
                Expectation::NoLoss => (
                    outcome.lost == 0,
                    format!("{} acknowledged write(s) lost", outcome.lost),
                ),
                Expectation::UncleanElection => (
                    !outcome.unclean_elections.is_empty(),
                    format!(
                        "{} unclean election(s) {}",
                        outcome.unclean_elections.len(),
                        first(&outcome.unclean_elections)
                    ),
                ),
                Expectation::Unavailable => (
                    !outcome.leaderless.is_empty(),
                    format!(
                        "{} leaderless observation(s) {}",
                        outcome.leaderless.len(),
                        first(&outcome.leaderless)
                    ),
                ),
                Expectation::Refused => (
                    outcome.not_enough_replicas > 0,
                    format!(
                        "{} send(s) refused with NOT_ENOUGH_REPLICAS",
                        outcome.not_enough_replicas
                    ),
                ),
                Expectation::Valid => (
                    outcome.verdict == "valid",
                    format!("verdict {}", outcome.verdict),
                ),
                Expectation::Invalid => (
                    outcome.verdict == "invalid",
                    format!("verdict {}", outcome.verdict),
                ),
                Expectation::Retried => (
                    retried > 0,
                    format!("{retried} acknowledged send(s) took more than one produce request"),
                ),
                Expectation::Cause(cause) => (
                    causes[cause.as_str()].as_u64().unwrap_or(0) > 0
                        || (cause == "coordinator-moved" && loads > 0),
                    causes_said(),
                ),
                Expectation::Rebalances(count) => (
                    causes
                        .as_object()
                        .map_or(0, |map| map.values().filter_map(Value::as_u64).sum::<u64>())
                        >= *count,
                    causes_said(),
                ),
                Expectation::NoRebalance => (
                    causes.as_object().is_some_and(serde_json::Map::is_empty),
                    causes_said(),
                ),
                Expectation::LsoStallAtLeast(seconds) => {
                    (stalls.longest_ms >= seconds * 1000, stalls.describe())
                }
                Expectation::LsoStallUnder(seconds) => (
                    stalls.polls_checked > 0 && stalls.longest_ms < seconds * 1000,
                    stalls.describe(),
                ),
                Expectation::ZombiesFenced(count) => (
                    zombies.refused >= *count && zombies.committed == 0,
                    zombies.describe(),
                ),
                Expectation::ZombiesCommitted(count) => {
                    (zombies.committed >= *count, zombies.describe())
                }
                Expectation::ResumedCommits(count) => {
                    (resumed.commits >= *count, resumed.describe())
                }
                Expectation::StaleProduceRefused(count) => {
                    (stale.refused >= *count, stale.describe())
                }
                Expectation::OffsetsSurvive => (
                    rebalances["offsets_survive"] == json!(true),
                    format!(
                        "committed before the coordinator fault {}, at the end {}",
                        rebalances["committed_before_coordinator_fault"],
                        rebalances["committed_at_end"]
                    ),
                ),
            };
            json!({"expect": expect.name(), "holds": holds, "evidence": said})
        })
        .collect();
    let shown = checks.iter().all(|check| check["holds"] == json!(true));
    Ok(json!({
        "scenario": scenario.name,
        "description": scenario.description,
        "shown": shown,
        "checks": checks,
        "verdict": outcome.verdict,
    }))
}

/// `(key 0: 165 at offsets 62..=226)`.
fn describe_lost(lost: &LostOnKey) -> String {
    let ranges: Vec<String> = lost
        .offsets
        .iter()
        .map(|range| format!("{}..={}", range.first, range.last))
        .collect();
    format!(
        "(key {}: {} at offsets {})",
        lost.key,
        lost.count,
        ranges.join(", ")
    )
}
