//! The statistics only one workload's checker keeps, as one enum: what the read-committed
//! checker looked at (txn), what the eos run's zombies did, and the producer's send figures.
//! In `report.json` each sits under its own key (`read_committed`, `zombies`, `producer`).
//! Data only: the checkers that fill them import this, never the other way round.

use logjam_history::{Key, Offset};
use serde::Serialize;

/// What only one workload's checker counts.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum WorkloadStats {
    /// txn (and every run with read_committed polls): the read-committed checker's coverage.
    ReadCommitted(ReadCommittedStats),
    /// eos with `logjam.eos=zombie`: the zombies (present only when a run had one).
    Zombies(ZombieStats),
    /// producer: the send figures.
    Producer(ProducerStats),
}

/// What the read-committed checker looked at, for the report.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct ReadCommittedStats {
    /// Poll micro-ops that recorded fetch ranges.
    pub polls_checked: u64,
    /// Fetch ranges (one per key per poll), each with an LSO.
    pub lsos_seen: u64,
    /// Records returned by those polls, each checked against its LSO.
    pub records_checked: u64,
    /// Distinct (key, leader epoch) pairs answered.
    pub leader_epochs_seen: u64,
    /// Times one process saw a partition's LSO lower than before in a later leader epoch
    /// (allowed: a new leader's LSO may start behind the old one's).
    pub lso_drops_across_epochs: u64,
    /// Records returned at or above the LSO their own answer reported but below the LSO of
    /// the process's next answer in the same leader epoch (allowed: the broker captures the
    /// LSO it reports before it reads, and the LSO may move in between), or with no later
    /// answer to bound the read.
    pub lso_capture_races: u64,
    /// (poll, transaction) pairs where a poll returned the transaction's records on one
    /// partition while its answer for another partition put the transaction's record there
    /// at or above the LSO (allowed: markers land per partition, no cross-partition
    /// atomicity).
    pub cross_partition_partial: u64,
    /// The longest LSO holds the answers proved (an open transaction at an acknowledged
    /// record), a second or longer, longest first, at most 20.
    pub lso_stalls: Vec<LsoStall>,
}

/// One partition's LSO held by one open transaction, as the answers proved it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct LsoStall {
    /// The key (partition).
    pub key: Key,
    /// The offset the LSO was held at: the first record of the open transaction.
    pub offset: Offset,
    /// The op acknowledged at that offset, when one was (a record whose acknowledgement was
    /// lost still holds the LSO; the hold is proven by an acknowledgement past it).
    pub held_by_op: Option<u64>,
    /// Milliseconds since the history's start of the first answer that proved the hold.
    pub from_ms: u64,
    /// ... and of the last.
    pub to_ms: u64,
    /// `to_ms - from_ms`.
    pub duration_ms: u64,
}

/// What the zombies of an eos run did (`zombies` in `report.json`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct ZombieStats {
    /// Pipeline ops that paused mid-transaction.
    pub paused: u64,
    /// Of those, the ones with an input that another pipeline op consumed and committed
    /// (its op ended ok): the group gave their partitions to another member.
    pub taken_over: u64,
    /// Zombies taken over whose op ended `fail`: the commit was refused (fenced) and aborted.
    pub refused: u64,
    /// Zombies taken over whose op ended `ok`: they committed anyway.
    pub committed: u64,
    /// Zombies taken over whose commit's outcome is unknown.
    pub unknown: u64,
}

/// Percentiles of a set of durations, in milliseconds.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct Percentiles {
    /// How many durations.
    pub count: u64,
    /// Median.
    pub p50_ms: f64,
    /// 90th percentile.
    pub p90_ms: f64,
    /// 99th percentile.
    pub p99_ms: f64,
    /// Maximum.
    pub max_ms: f64,
    /// Sum.
    pub total_ms: f64,
}

impl Percentiles {
    /// Nearest-rank percentiles of `micros` (sorted in place).
    pub fn of(micros: &mut [u64]) -> Percentiles {
        if micros.is_empty() {
            return Percentiles::default();
        }
        micros.sort_unstable();
        let rank = |p: f64| {
            let index = ((p * micros.len() as f64).ceil() as usize).clamp(1, micros.len()) - 1;
            micros[index] as f64 / 1000.0
        };
        Percentiles {
            count: micros.len() as u64,
            p50_ms: rank(0.50),
            p90_ms: rank(0.90),
            p99_ms: rank(0.99),
            max_ms: micros[micros.len() - 1] as f64 / 1000.0,
            total_ms: micros.iter().sum::<u64>() as f64 / 1000.0,
        }
    }
}

/// What the producer's sends went through, for the summary and `report.json`.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct ProducerStats {
    /// Sends submitted.
    pub sends: u64,
    /// Acknowledged.
    pub acknowledged: u64,
    /// Certainly not written.
    pub failed: u64,
    /// May have been written.
    pub indeterminate: u64,
    /// Acknowledged sends whose batch took more than one produce request.
    pub retried: u64,
    /// Acknowledged sends, from `send()` to the acknowledgement.
    pub ack_latency: Percentiles,
    /// Every send, how long `send()` itself blocked.
    pub blocked: Percentiles,
    /// Sends whose `send()` blocked 1 ms or more.
    pub blocked_over_1ms: u64,
    /// Sends that failed because buffer memory stayed exhausted for `max.block.ms`.
    pub buffer_exhausted: u64,
}
