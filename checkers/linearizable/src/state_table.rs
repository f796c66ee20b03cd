//! Hash-consed model states and memoized transitions for one partition.
//!
//! The search handles states only as `u32` ids. Each distinct state is
//! cloned and hashed once, when first produced; after that a transition
//! `(operation, state id)` is a table lookup, so an expensive model state (a
//! string built by appends, a whole log) costs nothing in the inner loop.
//! The model itself is consulted once per distinct `(operation, state)`.

use crate::hash::FxHashMap;
use crate::memory::{map_bytes, map_insert_growth, vec_bytes, vec_push_growth};
use crate::model::Model;
use crate::operation::Operation;
use std::mem::size_of;

/// Transition not computed yet.
const UNCOMPUTED: u32 = u32::MAX;
/// The model rejects the operation in this state.
const REJECTED: u32 = u32::MAX - 1;
/// Upper bound on the dense transition table, in entries (4 MiB). Rows for
/// states beyond it go to a hash map instead, so memory grows with the
/// transitions actually taken, not with states × operations. (At 64 MiB
/// the dense rows were most of a 10,000-operation register search's
/// memory: a row spans every operation, but only the few concurrent with
/// the state's writer are ever tried in it.)
const DENSE_ENTRIES_MAX: usize = 1 << 20;
/// Parts with more operations than this get no dense rows at all: a row
/// would span the whole part while only the few operations concurrent with
/// the state's writer are ever tried in it, and its growth (a doubling of
/// megabytes) would dominate a tight memory budget.
const DENSE_OPERATIONS_MAX: usize = 8_192;

/// Interned states of one partition plus the memoized step function.
pub(crate) struct StateTable<'a, M: Model> {
    model: &'a M,
    /// The partition's operations, indexed by local operation id.
    ops: Vec<&'a Operation<M::Input, M::Output>>,
    /// State by id; id 0 is `model.init()`.
    states: Vec<M::State>,
    /// Id by state.
    ids: FxHashMap<M::State, u32>,
    /// `dense[state * ops.len() + op]`, for `state < dense_states`.
    dense: Vec<u32>,
    /// How many states get a dense row.
    dense_states: usize,
    /// `(state << 32 | op) -> next` for the remaining states.
    sparse: FxHashMap<u64, u32>,
}

impl<'a, M: Model> StateTable<'a, M> {
    /// A table holding only the initial state (id 0).
    pub(crate) fn new(model: &'a M, ops: Vec<&'a Operation<M::Input, M::Output>>) -> Self {
        let dense_states = if ops.len() > DENSE_OPERATIONS_MAX {
            0
        } else {
            (DENSE_ENTRIES_MAX / ops.len().max(1)).max(1)
        };
        let mut table = StateTable {
            model,
            ops,
            states: Vec::new(),
            ids: FxHashMap::default(),
            dense: Vec::new(),
            dense_states,
            sparse: FxHashMap::default(),
        };
        let init = table.intern(model.init());
        debug_assert_eq!(init, 0);
        table
    }

    /// Number of distinct states seen.
    pub(crate) fn len(&self) -> usize {
        self.states.len()
    }

    /// Heap use in bytes (the states' own heap contents, such as a KV
    /// model's strings, are not counted).
    pub(crate) fn bytes(&self) -> u64 {
        self.parts().iter().sum()
    }

    /// Heap use of each growable part, in bytes: states, ids, dense rows,
    /// sparse transitions.
    pub(crate) fn parts(&self) -> [u64; 4] {
        [
            vec_bytes(&self.states),
            map_bytes(self.ids.capacity(), size_of::<(M::State, u32)>()),
            vec_bytes(&self.dense),
            map_bytes(self.sparse.capacity(), size_of::<(u64, u32)>()),
        ]
    }

    /// Bytes one [`StateTable::step`] may newly allocate at most: a new
    /// state (its slot, its id, its dense row) and a new sparse transition.
    pub(crate) fn step_growth(&self) -> u64 {
        let dense_row = if self.states.len() < self.dense_states {
            vec_push_growth(&self.dense, self.ops.len())
        } else {
            0
        };
        vec_push_growth(&self.states, 1)
            + map_insert_growth(
                self.ids.len(),
                self.ids.capacity(),
                size_of::<(M::State, u32)>(),
            )
            + dense_row
            + map_insert_growth(
                self.sparse.len(),
                self.sparse.capacity(),
                size_of::<(u64, u32)>(),
            )
    }

    /// The state behind an id.
    pub(crate) fn state(&self, id: u32) -> &M::State {
        &self.states[id as usize]
    }

    fn intern(&mut self, state: M::State) -> u32 {
        if let Some(&id) = self.ids.get(&state) {
            return id;
        }
        let id = u32::try_from(self.states.len())
            .ok()
            .filter(|&id| id < REJECTED)
            .expect("more than 2^32 - 2 distinct model states");
        self.states.push(state.clone());
        let _previous = self.ids.insert(state, id);
        if (id as usize) < self.dense_states {
            self.dense
                .resize(self.dense.len() + self.ops.len(), UNCOMPUTED);
        }
        id
    }

    /// The state after applying local operation `op` in state `state`, or
    /// `None` if the model forbids it.
    #[inline]
    pub(crate) fn step(&mut self, op: u32, state: u32) -> Option<u32> {
        let dense_index = if (state as usize) < self.dense_states {
            let index = state as usize * self.ops.len() + op as usize;
            match self.dense[index] {
                UNCOMPUTED => Some(index),
                REJECTED => return None,
                next => return Some(next),
            }
        } else {
            None
        };
        let sparse_key = (u64::from(state) << 32) | u64::from(op);
        if dense_index.is_none()
            && let Some(&next) = self.sparse.get(&sparse_key)
        {
            return (next != REJECTED).then_some(next);
        }
        let next = self.compute(op, state);
        let encoded = next.unwrap_or(REJECTED);
        match dense_index {
            Some(index) => self.dense[index] = encoded,
            None => {
                let _previous = self.sparse.insert(sparse_key, encoded);
            }
        }
        next
    }

    #[cold]
    fn compute(&mut self, op: u32, state: u32) -> Option<u32> {
        let operation = self.ops[op as usize];
        let next = self.model.step(
            &self.states[state as usize],
            &operation.input,
            &operation.output,
        )?;
        Some(self.intern(next))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::models::register::{Register, RegisterOp, RegisterResult};
    use crate::operation::ClientId;

    #[test]
    fn interns_equal_states_once_and_memoizes_rejection() {
        let model = Register::<i64>::new(None);
        let write = Operation::completed(
            ClientId(0),
            RegisterOp::Write(1),
            0,
            RegisterResult::Written,
            1,
        );
        let read_one = Operation::completed(
            ClientId(1),
            RegisterOp::Read,
            0,
            RegisterResult::Read(Some(1)),
            1,
        );
        let read_nil = Operation::completed(
            ClientId(2),
            RegisterOp::Read,
            0,
            RegisterResult::Read(None),
            1,
        );
        let mut table = StateTable::new(&model, vec![&write, &read_one, &read_nil]);
        let after_write = table.step(0, 0).expect("write allowed");
        assert_eq!(table.state(after_write), &Some(1));
        assert_eq!(table.step(0, after_write), Some(after_write));
        assert_eq!(table.step(1, after_write), Some(after_write));
        assert_eq!(table.step(2, after_write), None);
        assert_eq!(table.step(2, after_write), None);
        assert_eq!(table.step(1, 0), None);
        assert_eq!(table.len(), 2);
    }
}
