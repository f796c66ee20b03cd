//! The search's limits and its early cut-offs: the memory it holds and may grow by per step,
//! the step, memory and time budget checked before each step (dropping the visited cache
//! before giving up on memory), and the observation-reachability test that abandons a
//! configuration whose next observation can no longer be satisfied.

use super::*;

/// The limits one partition's search runs under (see `Budget`).
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Limits {
    /// At most this many steps.
    pub(crate) steps_max: Option<u64>,
    /// Stop at this instant; the duration is the configured limit, for the
    /// reason.
    pub(crate) deadline: Option<(Instant, Duration)>,
    /// At most this many bytes of search structures.
    pub(crate) memory_max: Option<u64>,
}

impl Limits {
    pub(crate) fn time_exhausted(&self) -> Option<RawOutcome> {
        let (deadline, time_max) = self.deadline?;
        (Instant::now() >= deadline).then_some(RawOutcome::TimeBudgetExhausted { time_max })
    }
}

impl<M: Model> Search<'_, M> {
    /// Bytes the search structures hold now.
    pub(super) fn memory_in_use(&self) -> u64 {
        self.fixed_bytes
            + self.cache.bytes()
            + self.linearized.interned_bytes()
            + self.table.bytes()
    }

    /// Bytes one step may newly allocate at most.
    pub(super) fn step_growth(&self) -> u64 {
        self.cache.insert_growth() + self.linearized.intern_growth() + self.table.step_growth()
    }

    /// Reduction 4: a pending read-only operation whose deadline is near
    /// (among the next [`OBSERVATION_HORIZON`] deadlines) must still be
    /// satisfiable: either the model finds it consistent with the current
    /// state, or one of its enablers is still unlinearized. Otherwise the
    /// configuration is dead.
    pub(super) fn observation_reachable(&mut self) -> bool {
        match self.unreachable_observation() {
            None => true,
            Some(op) => {
                self.record_stuck(
                    self.first_return_entry(),
                    Some((op, StuckReason::Unsatisfiable)),
                );
                false
            }
        }
    }

    /// The first entry that is not a call (a return entry or the tail).
    pub(super) fn first_return_entry(&self) -> u32 {
        let mut entry = self.next[HEAD as usize];
        while entry != self.tail && self.entry_is_call[entry as usize] {
            entry = self.next[entry as usize];
        }
        entry
    }

    /// The first pending observation (within the horizon) that can no
    /// longer be satisfied, if any.
    pub(super) fn unreachable_observation(&self) -> Option<u32> {
        if !M::PRUNES_UNREACHABLE_OBSERVATIONS {
            return None;
        }
        let mut entry = self.first_return_entry();
        if entry == self.tail {
            return None;
        }
        let horizon =
            self.return_rank[self.entry_op[entry as usize] as usize] + OBSERVATION_HORIZON;
        let state = self.table.state(self.state);
        while entry != self.tail {
            let op = self.entry_op[entry as usize] as usize;
            if !self.entry_is_call[entry as usize] {
                if self.return_rank[op] >= horizon {
                    return None;
                }
                if let Some(enablers) = &self.enablers[op] {
                    let enabled = enablers
                        .iter()
                        .any(|&writer| !self.linearized.contains(writer as usize));
                    if !enabled && !self.model.observation_consistent(state, self.ops[op]) {
                        return Some(op as u32);
                    }
                }
            }
            entry = self.next[entry as usize];
        }
        None
    }

    /// Before each step: stop if the step limit is reached, if the step
    /// could grow the structures past the memory limit (the check is on
    /// the worst case, so the limit is never crossed), or, every
    /// [`TIME_CHECK_INTERVAL`] steps, if the deadline has passed.
    pub(super) fn check_budget(&mut self) -> Option<RawOutcome> {
        if let Some(steps_max) = self.limits.steps_max
            && self.steps >= steps_max
        {
            return Some(RawOutcome::StepBudgetExhausted { steps_max });
        }
        if let Some(memory_max) = self.limits.memory_max
            && self.memory_in_use() + self.step_growth() > memory_max
        {
            // Growing would pass the limit: forget the visited cache and give
            // its room back (only work is lost, see `VisitedCache::clear`).
            // Stop only when even that is not enough.
            if self.cache.len() == 0 {
                return Some(RawOutcome::MemoryBudgetExhausted { memory_max });
            }
            self.cache.clear();
            self.linearized.forget_chunks();
            self.cache_resets += 1;
            if self.memory_in_use() + self.step_growth() > memory_max {
                return Some(RawOutcome::MemoryBudgetExhausted { memory_max });
            }
        }
        if self.steps >= self.next_time_check {
            self.next_time_check = self.steps + TIME_CHECK_INTERVAL;
            return self.limits.time_exhausted();
        }
        None
    }
}
