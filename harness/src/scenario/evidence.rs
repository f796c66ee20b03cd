//! What a scenario's expectations read from a run: in report.json the read-committed
//! checker's LSO stalls, the eos checker's zombies and the producer checker's retries; in the
//! nodes' logs the transactions a new coordinator completed for a dead one.

use std::path::Path;

use anyhow::Context;
use serde_json::Value;

/// What the read-committed checker measured of the LSO's holds (report.json's
/// `read_committed`; nothing for a run without read_committed polls).
pub(super) struct LsoStalls {
    pub(super) polls_checked: u64,
    pub(super) longest_ms: u64,
    longest: Option<String>,
}

impl LsoStalls {
    /// From report.json, read once by the judge.
    pub(super) fn of(report: &Value) -> LsoStalls {
        let stats = &report["read_committed"];
        let stalls = stats["lso_stalls"].as_array().cloned().unwrap_or_default();
        let longest = stalls
            .iter()
            .max_by_key(|stall| stall["duration_ms"].as_u64().unwrap_or(0));
        LsoStalls {
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
        }
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
pub(super) fn retried_sends(report: &Value) -> u64 {
    report["producer"]["retried"].as_u64().unwrap_or(0)
}

pub(super) fn read_json(path: &Path) -> anyhow::Result<Value> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))?;
    serde_json::from_str(&text).with_context(|| format!("{} is not JSON", path.display()))
}

/// What the eos checker counted of the run's zombies (report.json's `zombies`; zeros
/// for a run without them).
pub(super) struct Zombies {
    paused: u64,
    taken_over: u64,
    pub(super) refused: u64,
    pub(super) committed: u64,
    unknown: u64,
}

impl Zombies {
    /// From report.json, read once by the judge.
    pub(super) fn of(report: &Value) -> Zombies {
        let stats = &report["zombies"];
        let count = |key: &str| stats[key].as_u64().unwrap_or(0);
        Zombies {
            paused: count("paused"),
            taken_over: count("taken_over"),
            refused: count("refused"),
            committed: count("committed"),
            unknown: count("unknown"),
        }
    }

    pub(super) fn describe(&self) -> String {
        format!(
            "{} zombie(s) paused mid-transaction; {} taken over (another op committed their \
             inputs), of which {} refused, {} committed, {} unknown",
            self.paused, self.taken_over, self.refused, self.committed, self.unknown
        )
    }
}

/// The node log line of a marker task that completed a transaction prepared before its
/// coordinator loaded the partition (`coordinator/txn/markers.rs`).
const RESUMED: &str = "completed a transaction a previous coordinator prepared";

/// Transactions a coordinator completed that an earlier coordinator of their
/// `__transaction_state` partition had prepared (the failover resume), from every node's
/// `node.log` in the run directory (`n1/node.log`, ...).
pub(super) struct ResumedCommits {
    pub(super) commits: u64,
    aborts: u64,
    by_node: Vec<(String, u64)>,
}

/// Every node's log in the run directory (`n1/node.log`, ...), by node name.
pub(super) fn node_logs(run_dir: &Path) -> anyhow::Result<Vec<(String, String)>> {
    let mut dirs: Vec<_> = std::fs::read_dir(run_dir)
        .with_context(|| format!("cannot read {}", run_dir.display()))?
        .filter_map(Result::ok)
        .map(|entry| entry.path())
        .filter(|path| path.join("node.log").is_file())
        .collect();
    dirs.sort();
    Ok(dirs
        .into_iter()
        .map(|dir| {
            let text = std::fs::read_to_string(dir.join("node.log")).unwrap_or_default();
            let name = dir.file_name().unwrap_or_default().to_string_lossy();
            (name.into_owned(), text)
        })
        .collect())
}

impl ResumedCommits {
    /// From every node's log ([`node_logs`]).
    pub(super) fn of(logs: &[(String, String)]) -> ResumedCommits {
        let mut resumed = ResumedCommits {
            commits: 0,
            aborts: 0,
            by_node: Vec::new(),
        };
        for (name, text) in logs {
            let (commits, aborts) = count_resumed(text);
            resumed.commits += commits;
            resumed.aborts += aborts;
            if commits > 0 {
                resumed.by_node.push((name.clone(), commits));
            }
        }
        resumed
    }

    pub(super) fn describe(&self) -> String {
        let nodes: Vec<String> = self
            .by_node
            .iter()
            .map(|(node, n)| format!("{n} by {node}"))
            .collect();
        format!(
            "{} commit(s) and {} abort(s) a dead coordinator had prepared were completed by \
             the next one{}",
            self.commits,
            self.aborts,
            if nodes.is_empty() {
                String::new()
            } else {
                format!(" ({})", nodes.join(", "))
            }
        )
    }
}

/// The node log line of a transactional batch refused (`api/produce.rs`).
const REFUSED: &str = "refused a transactional produce";

/// Transactional batches the partition leaders refused because their transaction was over:
/// `INVALID_PRODUCER_EPOCH` (an epoch older than the partition's: a Produce of a finished
/// transaction delivered late under transactions V2) and `INVALID_TXN_STATE` (verification
/// found the partition in no transaction of the producer), from every node's log. Fenced
/// zombies (`PRODUCER_FENCED`) are not counted.
pub(super) struct StaleProduces {
    pub(super) refused: u64,
    by_error: std::collections::BTreeMap<String, u64>,
}

impl StaleProduces {
    /// From every node's log ([`node_logs`]).
    pub(super) fn of(logs: &[(String, String)]) -> StaleProduces {
        let mut stale = StaleProduces {
            refused: 0,
            by_error: std::collections::BTreeMap::new(),
        };
        for (_, text) in logs {
            for error in refused_stale(text) {
                stale.refused += 1;
                *stale.by_error.entry(error.to_owned()).or_default() += 1;
            }
        }
        stale
    }

    pub(super) fn describe(&self) -> String {
        let errors: Vec<String> = self
            .by_error
            .iter()
            .map(|(error, n)| format!("{n} {error}"))
            .collect();
        format!(
            "{} transactional produce(s) of a finished transaction refused by a leader{}",
            self.refused,
            if errors.is_empty() {
                String::new()
            } else {
                format!(" ({})", errors.join(", "))
            }
        )
    }
}

/// The error of each stale refusal in one node's log.
fn refused_stale(log: &str) -> impl Iterator<Item = &'static str> + '_ {
    log.lines()
        .filter(|line| line.contains(REFUSED))
        .filter_map(|line| {
            ["InvalidProducerEpoch", "InvalidTxnState"]
                .into_iter()
                .find(|error| line.contains(&format!("error={error}")))
        })
}

/// (commits, aborts) resumed in one node's log.
fn count_resumed(log: &str) -> (u64, u64) {
    let mut counts = (0, 0);
    for line in log.lines().filter(|line| line.contains(RESUMED)) {
        if line.contains("commit=true") {
            counts.0 += 1;
        } else {
            counts.1 += 1;
        }
    }
    counts
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resumed_completions_are_counted_by_outcome() {
        let log = "2026-12-04T19:40:01.1Z  INFO logjam_node::coordinator::txn::markers: \
                   completed a transaction a previous coordinator prepared \
                   transactional_id=t-1 commit=true epoch=3\n\
                   2026-12-04T19:40:01.2Z  INFO logjam_node::coordinator::txn::markers: \
                   resuming a transaction a previous coordinator prepared \
                   transactional_id=t-2 commit=false epoch=3\n\
                   2026-12-04T19:40:01.3Z  INFO logjam_node::coordinator::txn::markers: \
                   completed a transaction a previous coordinator prepared \
                   transactional_id=t-2 commit=false epoch=3\n";
        assert_eq!(count_resumed(log), (1, 1));
        assert_eq!(
            count_resumed("coordinator loaded topic=__transaction_state"),
            (0, 0)
        );
    }

    #[test]
    fn stale_refusals_are_counted_and_fenced_zombies_are_not() {
        let log = "2026-12-05T16:00:01.1Z  INFO logjam_node::api::produce: refused a \
                   transactional produce transactional_id=\"logjam-txn-3\" topic=\"txn\" \
                   partition=0 producer_id=1000 epoch=4 sequence=7 error=InvalidProducerEpoch\n\
                   2026-12-05T16:00:01.2Z  INFO logjam_node::api::produce: refused a \
                   transactional produce transactional_id=\"logjam-txn-4\" topic=\"txn\" \
                   partition=0 producer_id=1001 epoch=2 sequence=0 error=ProducerFenced\n\
                   2026-12-05T16:00:01.3Z  INFO logjam_node::api::produce: refused a \
                   transactional produce transactional_id=\"logjam-txn-5\" topic=\"txn\" \
                   partition=1 producer_id=1002 epoch=2 sequence=3 error=InvalidTxnState\n";
        let errors: Vec<&str> = refused_stale(log).collect();
        assert_eq!(errors, vec!["InvalidProducerEpoch", "InvalidTxnState"]);
        assert_eq!(refused_stale("coordinator loaded").count(), 0);
    }
}
