//! Cheap witness scans run before the exhaustive search: patterns that
//! prove a part is not linearizable on their own, found in O(n log n), with
//! a counterexample of two or three operations instead of a search tree.
//!
//! The scan is the stale read: a read returns `v`, yet some operation `w`
//! that definitely set another value returned before the read began, and
//! every operation that could set `v` returned before `w` began. In every
//! linearization the setters of `v` come before `w`, `w` before the read,
//! and nothing between `w` and the read can bring `v` back, so the read
//! cannot be placed. (A read of a value nothing could have produced is the
//! degenerate case.) The read from the future is its mirror: a read of a
//! value other than the initial one that returned before any operation that
//! could set that value was called. It needs the model's [`Model::effect`] and
//! [`Model::observed_state`]; for a model or part where some operation's
//! effect is [`Effect::Other`] the scan does nothing.

use crate::counterexample::{Counterexample, LinearizedStep, ReportedOperation, StuckReason};
use crate::hash::FxHashMap;
use crate::model::{Effect, Model};
use crate::operation::{OpIndex, Operation, Timestamp};

/// A witness found by the scan, in local ids of the part.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Witness {
    /// `read` returned the value last set by `setter` (`None`: the initial
    /// value), though `overwrite` set another value after every setter of
    /// it returned and returned before `read` began.
    StaleRead {
        read: usize,
        overwrite: usize,
        setter: Option<usize>,
    },
    /// `read` returned a value no operation could have set.
    NeverWritten { read: usize },
    /// `read` returned a value (not the initial one) before `setter`, the
    /// first operation that could set it, was called.
    FutureRead { read: usize, setter: usize },
}

/// The first stale read of the part (by position), if any.
pub(crate) fn stale_read_scan<M: Model>(
    model: &M,
    ops: &[&Operation<M::Input, M::Output>],
) -> Option<Witness> {
    let mut effects = Vec::with_capacity(ops.len());
    for op in ops {
        match model.effect(&op.input, &op.output) {
            Effect::Other => return None,
            effect => effects.push(effect),
        }
    }
    // Per value, the setter that returns last (never-returned ones last of
    // all: they may take effect at any time).
    let mut last_setter: FxHashMap<&M::State, (Timestamp, usize)> = FxHashMap::default();
    // Per value, the setter called first.
    let mut first_setter: FxHashMap<&M::State, (Timestamp, usize)> = FxHashMap::default();
    // Operations that certainly set some value and certainly took effect.
    let mut overwrites: Vec<(Timestamp, Timestamp, usize)> = Vec::new();
    for (id, effect) in effects.iter().enumerate() {
        let (Effect::Sets(value) | Effect::MaySet(value)) = effect else {
            continue;
        };
        let returned = ops[id].return_at;
        let entry = last_setter.entry(value).or_insert((returned, id));
        if returned > entry.0 {
            *entry = (returned, id);
        }
        let called = ops[id].call;
        let entry = first_setter.entry(value).or_insert((called, id));
        if called < entry.0 {
            *entry = (called, id);
        }
        if matches!(effect, Effect::Sets(_)) && !ops[id].is_optional() {
            overwrites.push((ops[id].call, returned, id));
        }
    }
    overwrites.sort_unstable();
    // earliest[i]: the overwrite returning first among overwrites[i..].
    let mut earliest: Vec<(Timestamp, usize)> =
        vec![(Timestamp::INFINITY, usize::MAX); overwrites.len() + 1];
    for index in (0..overwrites.len()).rev() {
        let (_, returned, id) = overwrites[index];
        earliest[index] = earliest[index + 1].min((returned, id));
    }
    let init = model.init();
    for (read, op) in ops.iter().enumerate() {
        if op.is_optional() {
            continue;
        }
        let Some(value) = model.observed_state(&op.input, &op.output) else {
            continue;
        };
        if value != init
            && let Some(&(called, setter)) = first_setter.get(&value)
            && op.return_at < called
        {
            return Some(Witness::FutureRead { read, setter });
        }
        let setter = last_setter.get(&value).copied();
        // Overwrites that must come after every setter of the value.
        let first = match setter {
            Some((returned, _)) => overwrites.partition_point(|&(call, _, _)| call <= returned),
            None if value == init => 0,
            None => return Some(Witness::NeverWritten { read }),
        };
        let (returned, overwrite) = earliest[first];
        if overwrite != usize::MAX && returned < op.call {
            return Some(Witness::StaleRead {
                read,
                overwrite,
                setter: setter.map(|(_, id)| id),
            });
        }
    }
    None
}

/// Renders a witness as a counterexample: the operations that must precede
/// the read, in their forced order, each with the value it leaves, and the
/// read that cannot follow them.
pub(crate) fn counterexample<M: Model>(
    model: &M,
    history: &[Operation<M::Input, M::Output>],
    partition: usize,
    operations: &[OpIndex],
    witness: &Witness,
) -> Counterexample {
    let report = |local: usize| {
        let op = operations[local];
        let operation = &history[op.0];
        ReportedOperation {
            op,
            client_id: operation.client_id,
            call: operation.call,
            return_at: operation.return_at,
            description: model.describe_operation(&operation.input, &operation.output),
        }
    };
    let state_after = |local: usize| {
        let operation = &history[operations[local].0];
        match model.effect(&operation.input, &operation.output) {
            Effect::Sets(state) | Effect::MaySet(state) => model.describe_state(&state),
            Effect::Keeps | Effect::Other => unreachable!("witness steps set a value"),
        }
    };
    let (read, prefix, reason) = match *witness {
        Witness::StaleRead {
            read,
            overwrite,
            setter,
        } => {
            let prefix: Vec<LinearizedStep> = setter
                .into_iter()
                .chain([overwrite])
                .map(|local| LinearizedStep {
                    operation: report(local),
                    state_after: state_after(local),
                })
                .collect();
            (read, prefix, StuckReason::StaleRead)
        }
        Witness::NeverWritten { read } => (read, Vec::new(), StuckReason::NeverWritten),
        Witness::FutureRead { read, setter } => {
            let step = LinearizedStep {
                operation: report(setter),
                state_after: state_after(setter),
            };
            (read, vec![step], StuckReason::FutureRead)
        }
    };
    let state = match (reason, prefix.last()) {
        (StuckReason::StaleRead, Some(step)) => step.state_after.clone(),
        _ => model.describe_state(&model.init()),
    };
    Counterexample {
        partition,
        partition_operations: operations.len(),
        prefix,
        state,
        blocking: Some(report(read)),
        reason,
        candidates: Vec::new(),
    }
}
