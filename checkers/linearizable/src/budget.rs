//! How much search a partition may spend before the engine gives up and
//! answers `Unknown` (never `Valid`).

use serde::{Deserialize, Serialize};
use std::time::Duration;

/// Per-partition search limits. When either is exceeded the partition's
/// outcome is `Unknown` with the reason.
///
/// The step limit is deterministic (same history, same answer on every
/// machine); the time limit reads the monotonic clock and is the practical
/// guard for interactive use. A "step" is one attempt to linearize one
/// operation in one configuration.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Budget {
    /// At most this many steps per partition; `None` = no limit.
    pub steps_max: Option<u64>,
    /// At most this much time per partition; `None` = no limit.
    pub time_max: Option<Duration>,
}

impl Budget {
    /// No limits at all: the search runs until it decides.
    pub const UNLIMITED: Budget = Budget {
        steps_max: None,
        time_max: None,
    };

    /// Only a step limit (deterministic).
    pub fn steps(steps_max: u64) -> Self {
        Budget {
            steps_max: Some(steps_max),
            time_max: None,
        }
    }

    /// Only a time limit.
    pub fn time(time_max: Duration) -> Self {
        Budget {
            steps_max: None,
            time_max: Some(time_max),
        }
    }
}

impl Default for Budget {
    /// One minute per partition, no step limit.
    fn default() -> Self {
        Budget::time(Duration::from_secs(60))
    }
}
