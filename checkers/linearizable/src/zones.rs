//! A fast path for register parts in which every write sets a value no other write sets: a
//! linearization built in O(n log n) from Gibbons and Korach's zones, then verified, instead
//! of a search.
//!
//! With distinct written values every read names its writer, and a linearization must place
//! each write and the reads of its value as one contiguous *cluster*. Of a cluster, let `f`
//! be the earliest return and `s` the latest call. Its block of the linearization must reach
//! back to `f` or before and forward to `s` or after. When `f < s` the block spans the
//! *forward zone* `[f, s]`; otherwise it fits anywhere in the *backward zone* `[s, f]`.
//! Gibbons and Korach ("Testing shared memories", SIAM J. Comput. 1997) show the part is
//! linearizable iff no read returns before its write is called, no two forward zones
//! intersect, and no backward zone lies inside a forward zone. Under those conditions the
//! order of clusters by their zones' low ends (reads after their write, by call) respects real
//! time: every pair of clusters is ordered by a gap between their zones.
//!
//! This module builds that order and then checks it against the model and real time. If the
//! check fails, whether because a condition fails or a value is written twice, it says
//! nothing and the search decides. So the fast path can only ever report valid, with a
//! linearization that was checked. Where it applies:
//! - every operation is a write ([`Effect::Sets`], or [`Effect::MaySet`] for one whose outcome
//!   is unknown), or a read with one observed state;
//! - no two writes set the same value, and none sets the initial one.
//!
//! An unknown write that nobody read is left out (it may never have happened); one that
//! somebody read took effect, at some time after its call. An unknown read is left out.
//!
//! Why it matters: a valid 200-client, 100,000-operation register history ran the search past
//! its 60 s budget, while here it is a sort.

use crate::hash::FxHashMap;
use crate::model::{Effect, Model};
use crate::operation::Operation;

/// The zone order of the part's operations (local ids, optional ones left out), checked
/// against the model and real time; `None` when the fast path does not apply or its order
/// does not check.
pub(crate) fn zone_order<M: Model>(
    model: &M,
    ops: &[&Operation<M::Input, M::Output>],
) -> Option<Vec<usize>> {
    let init = model.init();
    // Per value: its writer (`None` for the initial value) and its readers.
    let mut writer_of: FxHashMap<M::State, usize> = FxHashMap::default();
    let mut readers_of: FxHashMap<M::State, Vec<usize>> = FxHashMap::default();
    for (id, op) in ops.iter().enumerate() {
        match model.effect(&op.input, &op.output) {
            Effect::Sets(value) | Effect::MaySet(value) => {
                if value == init || writer_of.insert(value, id).is_some() {
                    return None;
                }
            }
            Effect::Keeps if op.is_optional() => {}
            Effect::Keeps => {
                let value = model.observed_state(&op.input, &op.output)?;
                readers_of.entry(value).or_default().push(id);
            }
            Effect::Other => return None,
        }
    }
    // Times widened so the initial value's virtual write can sit before every call.
    let call = |id: usize| i128::from(ops[id].call.0);
    let returned = |id: usize| i128::from(ops[id].return_at.0);
    // (low end of the zone, high end, writer, readers by call).
    let mut clusters: Vec<(i128, i128, Option<usize>, Vec<usize>)> = Vec::new();
    let mut add = |writer: Option<usize>, mut readers: Vec<usize>| {
        let (mut earliest_return, mut latest_call) = match writer {
            Some(w) => (returned(w), call(w)),
            None => (-1, -1),
        };
        for &r in &readers {
            earliest_return = earliest_return.min(returned(r));
            latest_call = latest_call.max(call(r));
        }
        readers.sort_unstable_by_key(|&r| (call(r), r));
        let zone = (
            earliest_return.min(latest_call),
            earliest_return.max(latest_call),
        );
        clusters.push((zone.0, zone.1, writer, readers));
    };
    for (value, writer) in &writer_of {
        let readers = readers_of.remove(value).unwrap_or_default();
        if readers.is_empty() && ops[*writer].is_optional() {
            // Unknown and unread: it may never have happened.
            continue;
        }
        add(Some(*writer), readers);
    }
    let initial_readers = readers_of.remove(&init).unwrap_or_default();
    if !readers_of.is_empty() {
        // A read of a value nothing wrote: the stale-read scan's case, not ours.
        return None;
    }
    add(None, initial_readers);
    clusters.sort_unstable_by_key(|&(low, high, writer, _)| (low, high, writer));
    let order: Vec<usize> = clusters
        .into_iter()
        .flat_map(|(_, _, writer, readers)| writer.into_iter().chain(readers))
        .collect();
    checks(model, ops, &order).then_some(order)
}

/// Whether `order` is a linearization: the model allows it from its initial state, and no
/// operation in it returned before an earlier one was called.
fn checks<M: Model>(model: &M, ops: &[&Operation<M::Input, M::Output>], order: &[usize]) -> bool {
    let mut state = model.init();
    let mut latest_call = None;
    for &id in order {
        let op = ops[id];
        if latest_call.is_some_and(|latest| op.return_at < latest) {
            return false;
        }
        latest_call = latest_call.max(Some(op.call));
        match model.step(&state, &op.input, &op.output) {
            Some(next) => state = next,
            None => return false,
        }
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::models::register::{Register, RegisterOp, RegisterResult};
    use crate::operation::{ClientId, Outcome, Timestamp};

    type Op = Operation<RegisterOp<u64>, RegisterResult<u64>>;

    fn op(client: u64, call: u64, ret: Option<u64>, input: RegisterOp<u64>) -> Op {
        let output = match (&input, ret) {
            (_, None) => Outcome::Unknown,
            (RegisterOp::Write(_), Some(_)) => Outcome::Returned(RegisterResult::Written),
            (RegisterOp::Read, Some(_)) => unreachable!("use read()"),
        };
        Operation {
            client_id: ClientId(client),
            input,
            call: Timestamp(call),
            output,
            return_at: ret.map_or(Timestamp::INFINITY, Timestamp),
        }
    }

    fn write(client: u64, call: u64, ret: Option<u64>, value: u64) -> Op {
        op(client, call, ret, RegisterOp::Write(value))
    }

    fn read(client: u64, call: u64, ret: u64, value: Option<u64>) -> Op {
        Operation {
            client_id: ClientId(client),
            input: RegisterOp::Read,
            call: Timestamp(call),
            output: Outcome::Returned(RegisterResult::Read(value)),
            return_at: Timestamp(ret),
        }
    }

    fn order(history: &[Op]) -> Option<Vec<usize>> {
        let ops: Vec<&Op> = history.iter().collect();
        zone_order(&Register::new(None), &ops)
    }

    #[test]
    fn overlapping_writes_and_their_reads_are_ordered_by_zone() {
        // w1 and w2 overlap; a read during both sees 1, a read after both sees 2: 1 comes first.
        let history = [
            read(0, 0, 1, None),
            write(1, 2, Some(10), 1),
            write(2, 3, Some(12), 2),
            read(3, 4, 11, Some(1)),
            read(4, 13, 14, Some(2)),
        ];
        assert_eq!(order(&history), Some(vec![0, 1, 3, 2, 4]));
    }

    #[test]
    fn a_write_inside_another_clusters_forward_zone_is_not_ordered() {
        // w1's block must span [10, 30] (its read starts at 30); w2 runs inside it.
        let history = [
            write(0, 0, Some(10), 1),
            write(1, 15, Some(20), 2),
            read(2, 30, 40, Some(1)),
        ];
        assert_eq!(order(&history), None);
    }

    #[test]
    fn unknown_writes_count_only_when_read() {
        let unread = [write(0, 0, None, 1), read(1, 5, 6, None)];
        assert_eq!(order(&unread), Some(vec![1]));
        let read_later = [write(0, 0, None, 1), read(1, 5, 6, Some(1))];
        assert_eq!(order(&read_later), Some(vec![0, 1]));
    }

    #[test]
    fn repeated_values_and_reads_of_nothing_are_left_to_the_search() {
        assert_eq!(
            order(&[write(0, 0, Some(1), 1), write(1, 2, Some(3), 1)]),
            None
        );
        assert_eq!(order(&[read(0, 0, 1, Some(7))]), None);
    }
}
