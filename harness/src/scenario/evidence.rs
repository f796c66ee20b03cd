//! What a scenario's expectations read from a run's report.json: the read-committed
//! checker's LSO stalls, the eos checker's zombies, the producer checker's retries.

use std::path::Path;

use anyhow::Context;
use serde_json::Value;

/// What the read-committed checker measured of the LSO's holds (report.json's
/// `stats.read_committed`; nothing for a run without read_committed polls).
pub(super) struct LsoStalls {
    pub(super) polls_checked: u64,
    pub(super) longest_ms: u64,
    longest: Option<String>,
}

impl LsoStalls {
    pub(super) fn of(run_dir: &Path) -> anyhow::Result<LsoStalls> {
        let report = read_json(&run_dir.join("report.json"))?;
        let stats = &report["stats"]["read_committed"];
        let stalls = stats["lso_stalls"].as_array().cloned().unwrap_or_default();
        let longest = stalls
            .iter()
            .max_by_key(|stall| stall["duration_ms"].as_u64().unwrap_or(0));
        Ok(LsoStalls {
            polls_checked: stats["polls_checked"].as_u64().unwrap_or(0),
            longest_ms: longest.map_or(0, |stall| stall["duration_ms"].as_u64().unwrap_or(0)),
            longest: longest.map(|stall| {
                format!(
                    "key {} held at offset {} for {:.1} s (from {:.1} s into the run)",
                    stall["key"],
                    stall["offset"],
                    stall["duration_ms"].as_u64().unwrap_or(0) as f64 / 1000.0,
                    stall["from_ms"].as_u64().unwrap_or(0) as f64 / 1000.0,
                )
            }),
        })
    }

    pub(super) fn describe(&self) -> String {
        match &self.longest {
            Some(longest) => format!(
                "{} read_committed poll(s) checked; the longest LSO stall: {longest}",
                self.polls_checked
            ),
            None => format!(
                "{} read_committed poll(s) checked; no LSO stall of a second or more",
                self.polls_checked
            ),
        }
    }
}

/// Acknowledged sends the producer checker saw retried (`producer.retried` in report.json;
/// 0 for other workloads).
pub(super) fn retried_sends(run_dir: &Path) -> anyhow::Result<u64> {
    let report = read_json(&run_dir.join("report.json"))?;
    Ok(report["producer"]["retried"].as_u64().unwrap_or(0))
}

pub(super) fn read_json(path: &Path) -> anyhow::Result<Value> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))?;
    serde_json::from_str(&text).with_context(|| format!("{} is not JSON", path.display()))
}

/// What the eos checker counted of the run's zombies (report.json's `stats.zombies`; zeros
/// for a run without them).
pub(super) struct Zombies {
    paused: u64,
    taken_over: u64,
    pub(super) refused: u64,
    pub(super) committed: u64,
    unknown: u64,
}

impl Zombies {
    pub(super) fn of(run_dir: &Path) -> anyhow::Result<Zombies> {
        let report = read_json(&run_dir.join("report.json"))?;
        let stats = &report["stats"]["zombies"];
        let count = |key: &str| stats[key].as_u64().unwrap_or(0);
        Ok(Zombies {
            paused: count("paused"),
            taken_over: count("taken_over"),
            refused: count("refused"),
            committed: count("committed"),
            unknown: count("unknown"),
        })
    }

    pub(super) fn describe(&self) -> String {
        format!(
            "{} zombie(s) paused mid-transaction; {} taken over (another op committed their \
             inputs), of which {} refused, {} committed, {} unknown",
            self.paused, self.taken_over, self.refused, self.committed, self.unknown
        )
    }
}
