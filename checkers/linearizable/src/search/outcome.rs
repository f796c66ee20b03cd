//! What one partition's search returns: its outcome (a witness order, the deepest stuck point,
//! or the budget that stopped it) and its counters.

use std::time::Duration;

use crate::counterexample::StuckReason;

/// Where the search got stuck at its deepest point: the raw material of a
/// counterexample. Ids are indices into the slice given to [`search`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct StuckPoint {
    /// The longest linearizable prefix found, in order.
    pub(crate) prefix: Vec<usize>,
    /// The operation whose return was reached without it being linearized
    /// (`None` if the search ran off the end of the list).
    pub(crate) blocking: Option<usize>,
    /// Why `blocking` could not come next.
    pub(crate) reason: StuckReason,
    /// The candidates that were concurrent at that point, in call order.
    pub(crate) candidates: Vec<usize>,
}

/// The raw outcome of one partition's search.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum SearchOutcome {
    /// A witness: the operations in linearization order (indeterminate
    /// operations that were never linearized are absent).
    Linearizable { order: Vec<usize> },
    /// No linearization exists.
    NotLinearizable { stuck: StuckPoint },
    /// The step limit was reached.
    StepBudgetExhausted { steps_max: u64 },
    /// The time limit was reached.
    TimeBudgetExhausted { time_max: Duration },
    /// The memory limit would have been crossed by the next step.
    MemoryBudgetExhausted { memory_max: u64 },
}

/// Counters from one partition's search.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct SearchStats {
    /// Attempts to linearize an operation in a configuration.
    pub(crate) steps: u64,
    /// Distinct configurations entered (visited-cache size).
    pub(crate) configurations: u64,
    /// Distinct model states seen.
    pub(crate) states: u64,
    /// Operations dropped before the search (indeterminate and read-only).
    pub(crate) dropped: u64,
    /// Visited-cache heap use in bytes.
    pub(crate) cache_bytes: u64,
    /// Most bytes the search structures held at once (counted, including
    /// the old and new arrays while one grows).
    pub(crate) memory_peak: u64,
    /// The longest linearizable prefix reached.
    pub(crate) deepest_prefix: u64,
    /// How often the visited cache was forgotten to stay in the budget.
    pub(crate) cache_resets: u64,
}

/// [`SearchOutcome`] before translating local ids.
pub(crate) enum RawOutcome {
    Linearizable { order: Vec<u32> },
    NotLinearizable,
    StepBudgetExhausted { steps_max: u64 },
    TimeBudgetExhausted { time_max: Duration },
    MemoryBudgetExhausted { memory_max: u64 },
}

impl RawOutcome {
    /// The outcome of a search stopped by its budget.
    pub(super) fn into_search_outcome(self) -> SearchOutcome {
        match self {
            RawOutcome::StepBudgetExhausted { steps_max } => {
                SearchOutcome::StepBudgetExhausted { steps_max }
            }
            RawOutcome::TimeBudgetExhausted { time_max } => {
                SearchOutcome::TimeBudgetExhausted { time_max }
            }
            RawOutcome::MemoryBudgetExhausted { memory_max } => {
                SearchOutcome::MemoryBudgetExhausted { memory_max }
            }
            RawOutcome::Linearizable { .. } | RawOutcome::NotLinearizable => {
                unreachable!("only budget outcomes are translated here")
            }
        }
    }
}

/// The deepest stuck point in local ids.
#[derive(Default)]
pub(super) struct RawStuck {
    pub(super) prefix: Vec<u32>,
    pub(super) blocking: u32,
    pub(super) reason: StuckReason,
    pub(super) candidates: Vec<u32>,
}
