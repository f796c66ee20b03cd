//! How much search a check may spend before the engine gives up and answers
//! `Unknown` (never `Valid`, never an abort): steps, time and memory.

use serde::{Deserialize, Serialize};
use std::time::Duration;

/// Share of the machine's memory the default budget allows (1/4).
const DEFAULT_MEMORY_SHARE_DIVISOR: u64 = 4;
/// Memory assumed when the machine's cannot be read (4 GiB).
const FALLBACK_MACHINE_MEMORY: u64 = 4 << 30;

/// Search limits. When one is reached the part being searched ends
/// `Unknown` with the reason; parts already decided keep their verdicts.
///
/// * `steps_max` is per part and deterministic. A "step" is one attempt to
///   linearize one operation in one configuration.
/// * `time_max` is a deadline for the whole check, measured from its start
///   on the monotonic clock; every search looks at the clock every few
///   thousand steps (well under a millisecond apart), so it is honoured to
///   far better than a second.
/// * `memory_max` bounds the bytes the search's own structures hold at
///   once (visited cache, state table, list, stack, bitsets), counted by the
///   search itself from their capacities, so it is deterministic. Parts
///   searched in parallel each get an equal share
///   (`memory_max / threads`). The search stops *before* a growth that
///   would cross the limit.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Budget {
    /// At most this many steps per part; `None` = no limit.
    pub steps_max: Option<u64>,
    /// At most this much time for the whole check; `None` = no limit.
    pub time_max: Option<Duration>,
    /// At most this many bytes of search structures; `None` = no limit.
    pub memory_max: Option<u64>,
}

impl Budget {
    /// No limits at all: the search runs until it decides.
    pub const UNLIMITED: Budget = Budget {
        steps_max: None,
        time_max: None,
        memory_max: None,
    };

    /// Only a step limit (deterministic).
    pub fn steps(steps_max: u64) -> Self {
        Budget {
            steps_max: Some(steps_max),
            ..Budget::UNLIMITED
        }
    }

    /// Only a time limit.
    pub fn time(time_max: Duration) -> Self {
        Budget {
            time_max: Some(time_max),
            ..Budget::UNLIMITED
        }
    }

    /// This budget with a memory limit in bytes.
    pub fn with_memory(self, memory_max: u64) -> Self {
        Budget {
            memory_max: Some(memory_max),
            ..self
        }
    }

    /// This budget with a time limit.
    pub fn with_time(self, time_max: Duration) -> Self {
        Budget {
            time_max: Some(time_max),
            ..self
        }
    }

    /// The default memory limit: a quarter of the machine's memory
    /// (`MemTotal` of `/proc/meminfo`; 4 GiB assumed where it cannot be
    /// read).
    pub fn default_memory_max() -> u64 {
        machine_memory().unwrap_or(FALLBACK_MACHINE_MEMORY) / DEFAULT_MEMORY_SHARE_DIVISOR
    }
}

impl Default for Budget {
    /// One minute for the whole check, a quarter of the machine's memory,
    /// no step limit.
    fn default() -> Self {
        Budget::time(Duration::from_secs(60)).with_memory(Budget::default_memory_max())
    }
}

/// The machine's physical memory in bytes, from `/proc/meminfo` (Linux).
/// This one file read is the budget's only contact with the OS: it sizes
/// the default limit, it never measures the search.
fn machine_memory() -> Option<u64> {
    let meminfo = std::fs::read_to_string("/proc/meminfo").ok()?;
    parse_mem_total(&meminfo)
}

/// `MemTotal:  16318412 kB` → bytes.
fn parse_mem_total(meminfo: &str) -> Option<u64> {
    let line = meminfo.lines().find(|line| line.starts_with("MemTotal:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    kib.checked_mul(1024)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mem_total_is_read_in_kib() {
        let meminfo = "MemFree: 1 kB\nMemTotal:       16318412 kB\n";
        assert_eq!(parse_mem_total(meminfo), Some(16_318_412 * 1024));
        assert_eq!(parse_mem_total("MemFree: 1 kB\n"), None);
    }

    #[test]
    fn default_has_time_and_memory_limits() {
        let budget = Budget::default();
        assert_eq!(budget.time_max, Some(Duration::from_secs(60)));
        assert!(budget.memory_max.is_some_and(|bytes| bytes > 0));
        assert_eq!(budget.steps_max, None);
    }
}
