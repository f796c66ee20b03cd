//! Read positions handed from closing processes to fresh ones, so a fresh consumer resumes
//! where an earlier one stopped reading instead of re-reading every partition from its start.
//!
//! Why: the harness keeps the target rate through faults by starting fresh processes while
//! others are blocked, and closes them again once idle, so a run starts many processes (a
//! few per second under faults). A fresh consumer with `auto.offset.reset=earliest` re-reads
//! each partition from offset 0 in `max.poll.records` slices: in an hour-long run nearly all
//! of the history was such re-reads (1.12 GB of history for 3,300 s at 100 ops/s), and the
//! checkers' memory grew with them. Re-reading old records adds little evidence: loss is
//! judged against the final reads, which always read every partition from its start.
//!
//! Every fresh consumer starts, per key, from the furthest position any closed process left,
//! as a group's committed offsets would have it (copied, not used up: under a fault dozens of
//! processes start within a second, long before any closes). Each position was reached by
//! reading from an earlier one, back to the run's first processes at offset 0, so every
//! offset below it was read by someone; a consumer sent back to the start by a crash leaves
//! a lower position that does not pull the others back. What stays: each process that *crashed* (its `crash` op) makes the next
//! fresh consumer start from the start, as Jepsen's client after a crash does, and so do the
//! first processes of a run, before anything was left. A handed-on position is what a consumer resuming
//! from committed offsets would use; if the log was truncated below it since, the consumer's
//! `auto.offset.reset` applies as for any out-of-range position.

use std::collections::BTreeMap;
use std::sync::Mutex;

use logjam_history::Key;

/// The positions of one closed process's consumer: key → the next offset it would read.
pub type Positions = BTreeMap<Key, i64>;

/// Where fresh consumers start: per key the furthest position closed processes left, or the
/// start.
#[derive(Debug, Default)]
pub struct Handoff {
    state: Mutex<State>,
}

#[derive(Debug, Default)]
struct State {
    furthest: Positions,
    /// Crashes not yet answered by a fresh consumer starting from the start.
    fresh_starts: u64,
}

impl Handoff {
    /// Nothing left yet: fresh consumers start from the start.
    pub fn new() -> Handoff {
        Handoff::default()
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A closing process's positions, for the fresh consumers after it: each key keeps the
    /// furthest position left.
    pub fn deposit(&self, positions: Positions) {
        let mut state = self.state();
        for (key, offset) in positions {
            let furthest = state.furthest.entry(key).or_insert(offset);
            *furthest = (*furthest).max(offset);
        }
    }

    /// A process crashed: the next fresh consumer starts from the start.
    pub fn crashed(&self) {
        self.state().fresh_starts += 1;
    }

    /// Where a fresh consumer starts: `None` for the start, else the furthest positions left
    /// (keys nobody left a position for are absent: they start from the start).
    pub fn take(&self) -> Option<Positions> {
        let mut state = self.state();
        if state.fresh_starts > 0 {
            state.fresh_starts -= 1;
            return None;
        }
        (!state.furthest.is_empty()).then(|| state.furthest.clone())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn positions(pairs: &[(i64, i64)]) -> Positions {
        pairs
            .iter()
            .map(|&(key, offset)| (Key(key), offset))
            .collect()
    }

    #[test]
    fn fresh_consumers_share_the_furthest_position_left_per_key() {
        let handoff = Handoff::new();
        assert_eq!(handoff.take(), None, "nothing left yet: from the start");
        handoff.deposit(positions(&[(0, 10), (1, 9)]));
        handoff.deposit(positions(&[(0, 20), (1, 5)]));
        handoff.deposit(positions(&[]));
        // A consumer a crash sent back to the start leaves a lower position: ignored.
        handoff.deposit(positions(&[(0, 3), (2, 1)]));
        for _ in 0..3 {
            assert_eq!(handoff.take(), Some(positions(&[(0, 20), (1, 9), (2, 1)])));
        }
    }

    #[test]
    fn each_crash_sends_one_fresh_consumer_back_to_the_start() {
        let handoff = Handoff::new();
        handoff.deposit(positions(&[(0, 7)]));
        handoff.crashed();
        handoff.crashed();
        assert_eq!(handoff.take(), None);
        assert_eq!(handoff.take(), None);
        assert_eq!(handoff.take(), Some(positions(&[(0, 7)])));
    }
}
