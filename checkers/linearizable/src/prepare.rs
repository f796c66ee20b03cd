//! The search's preparation for one partition: the tables two of its
//! reductions consult (see `search.rs`): for reduction 4, which pending
//! operations may still enable each observation; for reduction 3, each
//! operation's identical predecessor. Both are built once, before the
//! search, in time near-linear in the part (the deadline is honoured here
//! too).

use crate::hash::FxHashMap;
use crate::model::Model;
use crate::operation::{Operation, Timestamp};
use crate::search::{Limits, NONE, OBSERVATION_HORIZON, RawOutcome};

/// How often (in observations) the preparation looks at the clock.
const SETUP_TIME_CHECK_INTERVAL: usize = 1 << 10;

/// Reduction 4: each checked observation's possible enablers.
///
/// An observation `r` is only checked while the first pending deadline is
/// within [`OBSERVATION_HORIZON`] return ranks before `r`'s. At that point
/// every operation whose return ranks earlier than that frontier is already
/// linearized, so the enablers that can still be pending are those called
/// no later than `r` returns and returning no earlier than the frontier's
/// earliest possible time. Everything else is left out, which keeps each
/// list as short as the concurrency around `r`.
pub(crate) fn observation_enablers<M: Model>(
    model: &M,
    ops: &[&Operation<M::Input, M::Output>],
    read_only: &[bool],
    return_rank: &[u32],
    return_times: &[Timestamp],
    limits: &Limits,
) -> Result<Vec<Option<Vec<u32>>>, RawOutcome> {
    // A sweep over the observations in return order: both bounds (the
    // observation's return and the frontier time) only grow, so the writers
    // that satisfy them form a sliding window. Linear in the history times
    // the window, where a scan per observation would be quadratic.
    let mut observations: Vec<u32> = (0..ops.len() as u32)
        .filter(|&op| read_only[op as usize] && return_rank[op as usize] != NONE)
        .collect();
    observations.sort_unstable_by_key(|&op| return_rank[op as usize]);
    let mut writers: Vec<u32> = (0..ops.len() as u32)
        .filter(|&op| !read_only[op as usize])
        .collect();
    writers.sort_unstable_by_key(|&op| (ops[op as usize].call, op));
    let mut enablers: Vec<Option<Vec<u32>>> = vec![None; ops.len()];
    let mut window: Vec<u32> = Vec::new();
    let mut next_writer = 0;
    for (done, &observation) in observations.iter().enumerate() {
        if done.is_multiple_of(SETUP_TIME_CHECK_INTERVAL)
            && let Some(exhausted) = limits.time_exhausted()
        {
            return Err(exhausted);
        }
        let rank = return_rank[observation as usize];
        let earliest_rank = rank.saturating_sub(OBSERVATION_HORIZON - 1);
        let frontier_time = return_times[earliest_rank as usize];
        let observed = ops[observation as usize];
        while next_writer < writers.len()
            && ops[writers[next_writer] as usize].call <= observed.return_at
        {
            window.push(writers[next_writer]);
            next_writer += 1;
        }
        window.retain(|&writer| ops[writer as usize].return_at >= frontier_time);
        let mut list: Vec<u32> = window
            .iter()
            .copied()
            .filter(|&writer| model.enables_observation(ops[writer as usize], observed))
            .collect();
        list.sort_unstable();
        list.shrink_to_fit();
        enablers[observation as usize] = Some(list);
    }
    Ok(enablers)
}

/// Reduction 3: for each operation, the nearest earlier operation (by call,
/// then index) with identical input and output that also returns no later,
/// or [`NONE`].
///
/// Why this is complete: take any linearization that places `b` before its
/// identical predecessor `a` (or places `b` and leaves `a` out, when both
/// never returned). Swapping the two stays valid: `a` moves to `b`'s point,
/// which is after `b`'s call and so after `a`'s; `b` moves to `a`'s later
/// point (or out), which is before `a`'s return and so before `b`'s. Equal
/// inputs and outputs make every state identical. Each swap removes an
/// inversion of the call order, so repeating it ends in a linearization that
/// respects every such pair.
pub(crate) fn identical_predecessors<I, O>(ops: &[&Operation<I, O>]) -> Vec<u32>
where
    I: Eq + std::hash::Hash,
    O: Eq + std::hash::Hash,
{
    let mut order: Vec<u32> = (0..ops.len() as u32).collect();
    order.sort_unstable_by_key(|&id| (ops[id as usize].call, id));
    let mut last_of_kind: FxHashMap<(&I, &crate::operation::Outcome<O>), u32> =
        FxHashMap::default();
    let mut must_follow = vec![NONE; ops.len()];
    for id in order {
        let op = ops[id as usize];
        if let Some(previous) = last_of_kind.insert((&op.input, &op.output), id)
            && ops[previous as usize].return_at <= op.return_at
        {
            must_follow[id as usize] = previous;
        }
    }
    must_follow
}
