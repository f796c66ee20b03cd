//! The search for one partition: Wing & Gong's algorithm as refined by Lowe
//! ("Testing for linearizability", 2017), the one Porcupine implements, with
//! a visited cache of `(linearized set, state)` configurations.
//!
//! This file owns the search only; `prepare.rs` builds the tables of
//! reductions 3 and 4. It sees operations as local ids
//! `0..ops.len()`; `checker.rs` partitions the history, runs one search per
//! part and turns the raw outcome into reports and counterexamples.
//!
//! # The algorithm
//!
//! Every call and every return becomes an entry in one doubly linked list in
//! time order (at equal times calls come first: intervals are closed). The
//! search walks the list from the head. A call entry is a candidate: if the
//! model allows the operation in the current state and the resulting
//! configuration is new, the operation is *linearized*: its call and return
//! entries are unlinked ("lifted"), the choice is pushed on an explicit
//! stack, and the walk restarts at the head. Reaching a return entry means
//! that operation's deadline has passed without it being linearized, so the
//! current configuration is dead: pop the last choice, relink its entries,
//! and try the next candidate after it. Success is reaching a configuration
//! where every operation that returned is linearized.
//!
//! # Reductions (each sound and complete; arguments in the comments)
//!
//! 1. **Indeterminate operations are optional.** An operation that never
//!    returned has no return entry and need not be linearized.
//!    Indeterminate *read-only* operations are dropped outright.
//! 2. **Read-only operations are forced.** If an operation that never changes
//!    the state (see `Model::is_read_only`) is allowed right now, linearizing
//!    it now loses nothing, so the search takes it without branching.
//! 3. **Identical operations are ordered.** Of two operations with equal
//!    input and output, `a` called no later than `b` and returning no later,
//!    `b` is only tried once `a` is linearized.
//! 4. **Unreachable observations.** A model may say that a pending read
//!    can no longer be satisfied from the current state with the
//!    operations that may still precede it (`Model::can_reach_observation`);
//!    the configuration is then abandoned at once instead of after
//!    exploring every order of those operations.
//! 5. **State ids.** Model states are hash-consed (`state_table.rs`), the
//!    linearized set is a bitset hashed incrementally (Zobrist), and the
//!    visited cache stores both inline (`cache.rs`); a large part's bitset
//!    is keyed by interned chunks (`linearized.rs`).
//!
//! # Budgets
//!
//! Before every step the search adds up the bytes its structures hold and
//! the most the step could newly allocate (a growing array is counted twice
//! while it is copied). If that would pass the memory limit it forgets the
//! visited cache and frees its room (sound: the cache only saves work),
//! and stops with `MemoryBudgetExhausted` only when the rest alone does not
//! fit. The step limit is checked before every
//! step, the deadline every [`TIME_CHECK_INTERVAL`] steps and during the
//! preparation. A stopped search reports how deep it got.

use crate::cache::VisitedCache;
use crate::counterexample::StuckReason;
use crate::hash::mix_state;
use crate::linearized::LinearizedSet;
use crate::memory::vec_bytes;
use crate::model::Model;
use crate::operation::{Operation, Timestamp};
use crate::prepare::{identical_predecessors, observation_enablers};
use crate::state_table::StateTable;
use std::mem::size_of;
use std::time::{Duration, Instant};

mod limits;
mod outcome;

pub(crate) use limits::Limits;
use outcome::RawStuck;
pub(crate) use outcome::{RawOutcome, SearchOutcome, SearchStats, StuckPoint};

/// No entry / no operation.
pub(crate) const NONE: u32 = u32::MAX;
/// The list head sentinel.
const HEAD: u32 = 0;
/// Reduction 4 checks pending observations whose deadlines are among the
/// next this many deadlines.
pub(crate) const OBSERVATION_HORIZON: u32 = 256;
/// How often (in steps) the time budget is checked.
const TIME_CHECK_INTERVAL: u64 = 1 << 12;

/// One choice on the search stack.
#[derive(Clone, Copy, Debug)]
struct Frame {
    /// The operation linearized.
    op: u32,
    /// The state before it, restored on backtrack.
    previous_state: u32,
    /// True for a forced read-only operation: the configuration below it
    /// had no alternative worth trying, so backtracking continues upward.
    forced: bool,
}

/// What happened when the search tried one candidate.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Attempt {
    /// The model forbids it in this state.
    Rejected,
    /// Allowed, but the resulting configuration was explored before.
    Seen,
    /// Allowed and new: the search moved into it.
    Entered,
}

/// The result of forcing read-only operations at a new configuration.
enum Forcing {
    /// Nothing (more) to force; branch normally.
    Branch,
    /// A forced successor was explored before, so this configuration fails.
    Dead,
    /// Every required operation is linearized.
    Done,
    /// A budget ran out.
    Exhausted(RawOutcome),
}

/// Searches for a linearization of `ops` (one partition) under `model`.
pub(crate) fn search<M: Model>(
    model: &M,
    ops: &[&Operation<M::Input, M::Output>],
    limits: &Limits,
) -> (SearchOutcome, SearchStats) {
    // Reduction 1: an indeterminate read-only operation has no effect and no
    // deadline; leaving it out changes nothing.
    let kept: Vec<usize> = (0..ops.len())
        .filter(|&index| {
            let operation = ops[index];
            !(operation.is_optional() && model.is_read_only(&operation.input, &operation.output))
        })
        .collect();
    let kept_ops: Vec<&Operation<M::Input, M::Output>> =
        kept.iter().map(|&index| ops[index]).collect();
    let mut search = match Search::new(model, kept_ops, limits) {
        Ok(search) => search,
        Err(exhausted) => {
            let stats = SearchStats {
                dropped: (ops.len() - kept.len()) as u64,
                ..SearchStats::default()
            };
            return (exhausted.into_search_outcome(), stats);
        }
    };
    let outcome = search.run();
    let translate =
        |ids: Vec<u32>| -> Vec<usize> { ids.into_iter().map(|id| kept[id as usize]).collect() };
    let outcome = match outcome {
        RawOutcome::Linearizable { order } => SearchOutcome::Linearizable {
            order: translate(order),
        },
        RawOutcome::NotLinearizable => {
            let stuck = search.best.take().unwrap_or_default();
            SearchOutcome::NotLinearizable {
                stuck: StuckPoint {
                    prefix: translate(stuck.prefix),
                    blocking: (stuck.blocking != NONE).then(|| kept[stuck.blocking as usize]),
                    reason: stuck.reason,
                    candidates: translate(stuck.candidates),
                },
            }
        }
        exhausted => exhausted.into_search_outcome(),
    };
    let stats = SearchStats {
        steps: search.steps,
        configurations: search.cache.len() as u64,
        states: search.table.len() as u64,
        dropped: (ops.len() - kept.len()) as u64,
        cache_bytes: search.cache.bytes(),
        memory_peak: search.memory_peak,
        deepest_prefix: search.deepest as u64,
        cache_resets: search.cache_resets,
    };
    (outcome, stats)
}

/// The search state for one partition.
struct Search<'a, M: Model> {
    /// The model, for pruning hints.
    model: &'a M,
    /// The partition's operations by local id.
    ops: Vec<&'a Operation<M::Input, M::Output>>,
    /// Rank of each operation's return among all return entries in time
    /// order (`NONE` for operations that never return).
    return_rank: Vec<u32>,
    /// Reduction 4: for each read-only operation that returns, the
    /// operations that may enable it and may still be pending while it is
    /// checked; `None` if it is never checked.
    enablers: Vec<Option<Vec<u32>>>,
    /// Hash-consed states and memoized steps.
    table: StateTable<'a, M>,
    /// Linked list: `next[entry]`, `prev[entry]`; entry 0 is the head
    /// sentinel, `tail` the tail sentinel.
    next: Vec<u32>,
    prev: Vec<u32>,
    /// The operation each entry belongs to.
    entry_op: Vec<u32>,
    /// True for call entries, false for return entries and sentinels.
    entry_is_call: Vec<bool>,
    /// The tail sentinel.
    tail: u32,
    /// Each operation's call entry.
    call_entry: Vec<u32>,
    /// Each operation's return entry, or [`NONE`] when it never returned.
    return_entry: Vec<u32>,
    /// True for operations that returned (must be linearized).
    required: Vec<bool>,
    /// True for operations the model says never change the state.
    read_only: Vec<bool>,
    /// Reduction 3: the identical operation that must be linearized first.
    must_follow: Vec<u32>,
    /// Operations linearized on the current path, hashed and keyed.
    linearized: LinearizedSet,
    /// Configurations already entered.
    cache: VisitedCache,
    /// The current path of choices.
    stack: Vec<Frame>,
    /// Current state id.
    state: u32,
    /// How many required operations are linearized.
    required_linearized: usize,
    /// How many operations are required in total.
    required_count: usize,
    /// Steps taken so far.
    steps: u64,
    /// Limits.
    limits: Limits,
    /// Bytes of the structures whose size is fixed at setup (list, ids,
    /// bitset, stack, enablers, room for the deepest stuck point).
    fixed_bytes: u64,
    /// Most bytes held at once so far.
    memory_peak: u64,
    /// The longest stack so far.
    deepest: usize,
    /// How often the visited cache was forgotten to stay in the budget.
    cache_resets: u64,
    /// Step count at which to look at the clock next.
    next_time_check: u64,
    /// The deepest dead end seen so far (for counterexamples).
    best: Option<RawStuck>,
}

impl<'a, M: Model> Search<'a, M> {
    /// Builds the search, or says which budget ran out while building it.
    fn new(
        model: &'a M,
        ops: Vec<&'a Operation<M::Input, M::Output>>,
        limits: &Limits,
    ) -> Result<Self, RawOutcome> {
        let count = ops.len();
        assert!(count < (NONE / 2) as usize, "partition too large");
        let required: Vec<bool> = ops.iter().map(|op| !op.is_optional()).collect();
        let read_only: Vec<bool> = ops
            .iter()
            .map(|op| model.is_read_only(&op.input, &op.output))
            .collect();

        // Events in time order; calls before returns at equal times (closed
        // intervals), then by operation id for determinism.
        let mut events: Vec<(Timestamp, bool, u32)> = Vec::with_capacity(2 * count);
        for (id, op) in ops.iter().enumerate() {
            events.push((op.call, false, id as u32));
            if !op.is_optional() {
                events.push((op.return_at, true, id as u32));
            }
        }
        events.sort_unstable();
        let tail = events.len() as u32 + 1;
        let mut next = vec![NONE; events.len() + 2];
        let mut prev = vec![NONE; events.len() + 2];
        let mut entry_op = vec![NONE; events.len() + 2];
        let mut entry_is_call = vec![false; events.len() + 2];
        let mut call_entry = vec![NONE; count];
        let mut return_entry = vec![NONE; count];
        for (position, &(_, is_return, id)) in events.iter().enumerate() {
            let entry = position as u32 + 1;
            entry_op[entry as usize] = id;
            entry_is_call[entry as usize] = !is_return;
            if is_return {
                return_entry[id as usize] = entry;
            } else {
                call_entry[id as usize] = entry;
            }
        }
        for entry in 0..tail {
            next[entry as usize] = entry + 1;
            prev[entry as usize + 1] = entry;
        }

        let mut return_rank = vec![NONE; count];
        let mut return_times = Vec::with_capacity(count);
        for &(time, is_return, id) in &events {
            if is_return {
                return_rank[id as usize] = return_times.len() as u32;
                return_times.push(time);
            }
        }
        if let Some(exhausted) = limits.time_exhausted() {
            return Err(exhausted);
        }
        let enablers = if M::PRUNES_UNREACHABLE_OBSERVATIONS {
            observation_enablers(model, &ops, &read_only, &return_rank, &return_times, limits)?
        } else {
            vec![None; count]
        };
        let must_follow = identical_predecessors(&ops);
        let table = StateTable::new(model, ops.clone());
        let linearized = LinearizedSet::new(count);
        let words = linearized.key_words();
        let enabler_bytes: u64 = enablers
            .iter()
            .map(|list| {
                (size_of::<Option<Vec<u32>>>()
                    + list.as_ref().map_or(0, |list| list.capacity() * 4)) as u64
            })
            .sum();
        // Per operation: ids (8 for the op reference, 4 × 5 for ranks and
        // entries, 1 × 2 for flags, 8 for its key), two list entries of 4 × 3 + 1
        // bytes, a stack frame, and room for the deepest stuck point (its prefix
        // and candidates, old and new while one replaces the other: 4 × 4).
        let fixed_bytes = enabler_bytes
            + vec_bytes(&next) * 3
            + vec_bytes(&entry_is_call)
            + (count * (8 + 4 * 5 + 2 + size_of::<Frame>() + 16)) as u64
            + linearized.fixed_bytes();
        let search = Search {
            model,
            ops,
            return_rank,
            enablers,
            table,
            next,
            prev,
            entry_op,
            entry_is_call,
            tail,
            call_entry,
            return_entry,
            required_count: required.iter().filter(|&&required| required).count(),
            required,
            read_only,
            must_follow,
            linearized,
            cache: VisitedCache::new(words),
            stack: Vec::with_capacity(count),
            state: 0,
            required_linearized: 0,
            steps: 0,
            limits: *limits,
            fixed_bytes,
            memory_peak: 0,
            deepest: 0,
            cache_resets: 0,
            next_time_check: TIME_CHECK_INTERVAL,
            best: None,
        };
        if let Some(memory_max) = limits.memory_max
            && search.memory_in_use() + search.step_growth() > memory_max
        {
            return Err(RawOutcome::MemoryBudgetExhausted { memory_max });
        }
        Ok(search)
    }

    fn run(&mut self) -> RawOutcome {
        if self.required_count == 0 {
            return RawOutcome::Linearizable { order: Vec::new() };
        }
        // The initial configuration counts as visited.
        self.linearized.intern();
        let _new = self.cache.insert(mix_state(0), self.linearized.key(), 0);
        self.memory_peak = self.memory_in_use();
        let mut entry = match self.force_read_only() {
            Forcing::Exhausted(exhausted) => return exhausted,
            Forcing::Done => return self.witness(),
            Forcing::Branch if self.observation_reachable() => self.next[HEAD as usize],
            Forcing::Branch | Forcing::Dead => return RawOutcome::NotLinearizable,
        };
        loop {
            if entry == self.tail || !self.entry_is_call[entry as usize] {
                self.record_stuck(entry, None);
                match self.backtrack() {
                    Some(resume) => entry = resume,
                    None => return RawOutcome::NotLinearizable,
                }
                continue;
            }
            let op = self.entry_op[entry as usize];
            // Read-only candidates allowed here were already forced, so any
            // left in the window are rejected; skip them without a lookup.
            if self.read_only[op as usize] || !self.may_try(op) {
                entry = self.next[entry as usize];
                continue;
            }
            if let Some(exhausted) = self.check_budget() {
                return exhausted;
            }
            if self.try_linearize(op, false) != Attempt::Entered {
                entry = self.next[entry as usize];
                continue;
            }
            if self.is_done() {
                return self.witness();
            }
            entry = match self.force_read_only() {
                Forcing::Exhausted(exhausted) => return exhausted,
                Forcing::Done => return self.witness(),
                Forcing::Branch if self.observation_reachable() => self.next[HEAD as usize],
                Forcing::Branch | Forcing::Dead => match self.backtrack() {
                    Some(resume) => resume,
                    None => return RawOutcome::NotLinearizable,
                },
            };
        }
    }

    fn is_done(&self) -> bool {
        self.required_linearized == self.required_count
    }

    fn witness(&self) -> RawOutcome {
        RawOutcome::Linearizable {
            order: self.stack.iter().map(|frame| frame.op).collect(),
        }
    }

    /// Reduction 3: an operation with an identical predecessor waits for it.
    #[inline]
    fn may_try(&self, op: u32) -> bool {
        let predecessor = self.must_follow[op as usize];
        predecessor == NONE || self.linearized.contains(predecessor as usize)
    }

    /// Reduction 2: at a new configuration, linearize allowed read-only
    /// candidates one after another without branching.
    ///
    /// Why this is complete: let `r` be read-only and allowed in the current
    /// state `s`, and let `σ` be any completion. Moving `r` to the front of
    /// `σ` keeps every other step's state (r changes nothing, wherever it
    /// sits, because the model allows it only where it keeps the state), and
    /// keeps real-time order: `r` is in the window, so every operation that
    /// returned before `r`'s call is already linearized, and moving `r`
    /// earlier only relaxes constraints on the others.
    fn force_read_only(&mut self) -> Forcing {
        'configuration: loop {
            let mut entry = self.next[HEAD as usize];
            while entry != self.tail && self.entry_is_call[entry as usize] {
                let op = self.entry_op[entry as usize];
                if self.read_only[op as usize] && self.may_try(op) {
                    if let Some(exhausted) = self.check_budget() {
                        return Forcing::Exhausted(exhausted);
                    }
                    match self.try_linearize(op, true) {
                        Attempt::Rejected => {}
                        Attempt::Seen => return Forcing::Dead,
                        Attempt::Entered => {
                            if self.is_done() {
                                return Forcing::Done;
                            }
                            continue 'configuration;
                        }
                    }
                }
                entry = self.next[entry as usize];
            }
            return Forcing::Branch;
        }
    }

    #[inline]
    fn try_linearize(&mut self, op: u32, forced: bool) -> Attempt {
        let sizes = |search: &Self| {
            let [a, b, c, d] = search.table.parts();
            [
                search.cache.bytes(),
                search.linearized.interned_bytes(),
                a,
                b,
                c,
                d,
            ]
        };
        let before = sizes(self);
        let attempt = self.try_linearize_inner(op, forced);
        let after = sizes(self);
        if after != before {
            // While an array grows, its old and new copies are both held.
            let held: u64 = before
                .iter()
                .zip(&after)
                .map(|(&old, &new)| if old == new { old } else { old + new })
                .sum();
            self.memory_peak = self.memory_peak.max(self.fixed_bytes + held);
        }
        attempt
    }

    #[inline]
    fn try_linearize_inner(&mut self, op: u32, forced: bool) -> Attempt {
        self.steps += 1;
        let Some(next_state) = self.table.step(op, self.state) else {
            return Attempt::Rejected;
        };
        debug_assert!(
            !self.read_only[op as usize] || next_state == self.state,
            "model says operation {op} is read-only but it changed the state"
        );
        let op_index = op as usize;
        self.linearized.insert(op_index);
        self.linearized.intern();
        let hash = self.linearized.hash() ^ mix_state(next_state);
        if !self.cache.insert(hash, self.linearized.key(), next_state) {
            self.linearized.remove(op_index);
            return Attempt::Seen;
        }
        self.stack.push(Frame {
            op,
            previous_state: self.state,
            forced,
        });
        self.state = next_state;
        self.deepest = self.deepest.max(self.stack.len());
        self.lift(op);
        if self.required[op_index] {
            self.required_linearized += 1;
        }
        Attempt::Entered
    }

    /// Pops choices until one that was a real branch, and returns the entry
    /// after it to continue the scan from; `None` when the stack empties.
    fn backtrack(&mut self) -> Option<u32> {
        loop {
            let frame = self.stack.pop()?;
            let op_index = frame.op as usize;
            self.state = frame.previous_state;
            self.linearized.remove(op_index);
            if self.required[op_index] {
                self.required_linearized -= 1;
            }
            self.unlift(frame.op);
            if !frame.forced {
                return Some(self.next[self.call_entry[op_index] as usize]);
            }
        }
    }

    #[inline]
    fn unlink(&mut self, entry: u32) {
        let (before, after) = (self.prev[entry as usize], self.next[entry as usize]);
        self.next[before as usize] = after;
        self.prev[after as usize] = before;
    }

    #[inline]
    fn relink(&mut self, entry: u32) {
        let (before, after) = (self.prev[entry as usize], self.next[entry as usize]);
        self.next[before as usize] = entry;
        self.prev[after as usize] = entry;
    }

    /// Removes an operation's entries from the list (dancing links: the
    /// removed entries keep their own pointers, so `unlift` in reverse order
    /// restores the list exactly).
    fn lift(&mut self, op: u32) {
        self.unlink(self.call_entry[op as usize]);
        let return_entry = self.return_entry[op as usize];
        if return_entry != NONE {
            self.unlink(return_entry);
        }
    }

    fn unlift(&mut self, op: u32) {
        let return_entry = self.return_entry[op as usize];
        if return_entry != NONE {
            self.relink(return_entry);
        }
        self.relink(self.call_entry[op as usize]);
    }

    /// Remembers the current dead end if it is the deepest so far. `entry`
    /// is where the scan stopped (a return entry or the tail); `blocking`
    /// overrides the operation blamed.
    fn record_stuck(&mut self, entry: u32, blocking: Option<(u32, StuckReason)>) {
        let depth = self.stack.len();
        if self
            .best
            .as_ref()
            .is_some_and(|best| best.prefix.len() >= depth)
        {
            return;
        }
        let mut candidates = Vec::new();
        let mut cursor = self.next[HEAD as usize];
        while cursor != entry {
            candidates.push(self.entry_op[cursor as usize]);
            cursor = self.next[cursor as usize];
        }
        let (blocking, reason) = match blocking {
            Some(blocking) => blocking,
            None if entry == self.tail => (NONE, StuckReason::ReturnPassed),
            None => (self.entry_op[entry as usize], StuckReason::ReturnPassed),
        };
        self.best = Some(RawStuck {
            prefix: self.stack.iter().map(|frame| frame.op).collect(),
            blocking,
            reason,
            candidates,
        });
    }
}
