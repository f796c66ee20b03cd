//! What the checker concludes: the tri-state [`Verdict`], one
//! [`PartitionReport`] per independent part, and the [`CheckResult`] that
//! combines them (invalid if any part is invalid, else unknown if any is
//! unknown, else valid).

use crate::counterexample::Counterexample;
use crate::operation::OpIndex;
use serde::Serialize;
use std::fmt;
use std::time::Duration;

/// The tri-state answer. `Unknown` is never rounded to `Valid`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
pub enum Verdict {
    /// A linearization exists for every part.
    Valid,
    /// Some part has no linearization.
    Invalid,
    /// The checker could not decide (empty history, budget exhausted).
    Unknown,
}

impl fmt::Display for Verdict {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Verdict::Valid => "valid",
            Verdict::Invalid => "invalid",
            Verdict::Unknown => "unknown",
        })
    }
}

/// Why a part, or the whole history, is `Unknown`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub enum UnknownReason {
    /// The history has no operations: nothing was observed, so nothing is
    /// vouched for.
    EmptyHistory,
    /// The part's search took `steps_max` steps without deciding.
    StepBudgetExhausted {
        /// The limit that was reached.
        steps_max: u64,
    },
    /// The check ran for `time_max` without deciding this part.
    TimeBudgetExhausted {
        /// The limit that was reached.
        time_max: Duration,
    },
    /// The part's search would have held more than its share of the
    /// memory budget (`memory_max` bytes) to go on.
    MemoryBudgetExhausted {
        /// This part's share of the limit, in bytes.
        memory_max: u64,
    },
}

impl fmt::Display for UnknownReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            UnknownReason::EmptyHistory => f.write_str("the history is empty"),
            UnknownReason::StepBudgetExhausted { steps_max } => {
                write!(f, "search budget of {steps_max} steps exhausted")
            }
            UnknownReason::TimeBudgetExhausted { time_max } => {
                write!(f, "search budget of {time_max:?} exhausted")
            }
            UnknownReason::MemoryBudgetExhausted { memory_max } => {
                write!(f, "search memory budget of {memory_max} bytes exhausted")
            }
        }
    }
}

/// The outcome for one part.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub enum PartitionOutcome {
    /// Linearizable, with a witness: history indices in linearization order.
    /// Indeterminate operations left out of the witness never took effect.
    Linearizable {
        /// The witness order.
        linearization: Vec<OpIndex>,
    },
    /// Not linearizable.
    NotLinearizable {
        /// Where and why the search got stuck.
        counterexample: Box<Counterexample>,
    },
    /// Undecided.
    Unknown {
        /// Why.
        reason: UnknownReason,
    },
}

impl PartitionOutcome {
    /// The verdict for this part alone.
    pub fn verdict(&self) -> Verdict {
        match self {
            PartitionOutcome::Linearizable { .. } => Verdict::Valid,
            PartitionOutcome::NotLinearizable { .. } => Verdict::Invalid,
            PartitionOutcome::Unknown { .. } => Verdict::Unknown,
        }
    }
}

/// Search effort for one part, for benchmarks and reports.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct SearchEffort {
    /// Attempts to linearize one operation in one configuration.
    pub steps: u64,
    /// Distinct (linearized set, state) configurations entered.
    pub configurations: u64,
    /// Distinct model states seen.
    pub states: u64,
    /// Indeterminate read-only operations dropped before searching.
    pub dropped_operations: u64,
    /// Visited-cache heap use, in bytes.
    pub cache_bytes: u64,
    /// Most bytes the search structures held at once (the engine's own
    /// count; see `Budget`).
    pub memory_peak: u64,
    /// The longest linearizable prefix the search reached: how far an
    /// undecided part got.
    pub deepest_prefix: u64,
    /// How often the search forgot its visited cache to stay inside the
    /// memory budget (each time trading memory for repeated work).
    pub cache_resets: u64,
    /// True when a cheap witness scan or the zone order (`zones.rs`) decided
    /// the part (no search ran).
    pub decided_by_scan: bool,
    /// Wall time of the search.
    pub elapsed: Duration,
}

/// One independent part of the history (one key, for a partitioned model).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct PartitionReport {
    /// Position in the model's partition list.
    pub partition: usize,
    /// The history indices in this part, in history order.
    pub operations: Vec<OpIndex>,
    /// What the search concluded.
    pub outcome: PartitionOutcome,
    /// How much work it took.
    pub effort: SearchEffort,
}

/// The checker's answer for a whole history.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct CheckResult {
    /// Invalid if any part is invalid; else unknown if any part is unknown
    /// (or the history is empty); else valid.
    pub verdict: Verdict,
    /// Why the verdict is `Unknown` (the first undecided part's reason).
    pub unknown_reason: Option<UnknownReason>,
    /// One report per part.
    pub partitions: Vec<PartitionReport>,
}

impl CheckResult {
    /// The minimal counterexample: the one from the smallest part that is
    /// not linearizable (ties go to the earlier part).
    pub fn counterexample(&self) -> Option<&Counterexample> {
        self.partitions
            .iter()
            .filter_map(|report| match &report.outcome {
                PartitionOutcome::NotLinearizable { counterexample } => {
                    Some((report.operations.len(), counterexample.as_ref()))
                }
                _ => None,
            })
            .min_by_key(|(size, _)| *size)
            .map(|(_, counterexample)| counterexample)
    }

    /// Total search effort over all parts.
    pub fn total_effort(&self) -> SearchEffort {
        self.partitions
            .iter()
            .fold(SearchEffort::default(), |total, report| SearchEffort {
                steps: total.steps + report.effort.steps,
                configurations: total.configurations + report.effort.configurations,
                states: total.states + report.effort.states,
                dropped_operations: total.dropped_operations + report.effort.dropped_operations,
                cache_bytes: total.cache_bytes.max(report.effort.cache_bytes),
                memory_peak: total.memory_peak.max(report.effort.memory_peak),
                deepest_prefix: total.deepest_prefix + report.effort.deepest_prefix,
                cache_resets: total.cache_resets + report.effort.cache_resets,
                decided_by_scan: total.decided_by_scan || report.effort.decided_by_scan,
                elapsed: total.elapsed + report.effort.elapsed,
            })
    }
}
