//! A brute-force linearizability oracle for tiny histories: tries every
//! order of the operations that respects real time, with no caching, no
//! reductions and no linked list. It shares nothing with `search.rs` except
//! the model, which is what makes it a useful cross-check in property tests.
//!
//! Exponential: use it for histories of at most about ten operations.

use crate::model::Model;
use crate::operation::Operation;

/// Largest part the oracle accepts (its used-set is a `u64`).
pub const ORACLE_OPERATIONS_MAX: usize = 64;

/// True if every part of `history` (per [`Model::partition`]) has an order
/// that respects real time (`a` before `b` whenever `a.return_at < b.call`),
/// is accepted step by step by the model from [`Model::init`], and includes
/// every operation that returned (operations that never returned may be
/// left out). An empty history is trivially linearizable here; the engine
/// itself answers `Unknown` for it.
///
/// # Panics
///
/// If a part has more than [`ORACLE_OPERATIONS_MAX`] operations.
pub fn is_linearizable_exhaustive<M: Model>(
    model: &M,
    history: &[Operation<M::Input, M::Output>],
) -> bool {
    model.partition(history).iter().all(|part| {
        let ops: Vec<&Operation<M::Input, M::Output>> =
            part.iter().map(|op| &history[op.0]).collect();
        assert!(
            ops.len() <= ORACLE_OPERATIONS_MAX,
            "the oracle handles at most {ORACLE_OPERATIONS_MAX} operations per part"
        );
        let required: u64 = ops
            .iter()
            .enumerate()
            .filter(|(_, op)| !op.is_optional())
            .fold(0, |mask, (index, _)| mask | (1 << index));
        try_orders(model, &ops, &model.init(), 0, required)
    })
}

fn try_orders<M: Model>(
    model: &M,
    ops: &[&Operation<M::Input, M::Output>],
    state: &M::State,
    used: u64,
    required: u64,
) -> bool {
    if used & required == required {
        return true;
    }
    (0..ops.len()).any(|candidate| {
        if used & (1 << candidate) != 0 {
            return false;
        }
        // Real time: nothing still unused may have returned before this
        // candidate was called.
        let blocked = (0..ops.len()).any(|other| {
            other != candidate
                && used & (1 << other) == 0
                && ops[other].return_at < ops[candidate].call
        });
        if blocked {
            return false;
        }
        let operation = ops[candidate];
        match model.step(state, &operation.input, &operation.output) {
            Some(next) => try_orders(model, ops, &next, used | (1 << candidate), required),
            None => false,
        }
    })
}
