//! The sequential specification trait every model implements.
//!
//! A [`Model`] is a pure state machine: an initial state and a step function
//! that says whether an operation (input plus observed output) is allowed in a
//! state and, if so, the next state. It knows nothing about time or search;
//! `search.rs` is generic over it, and the concrete models live in `models/`.

use crate::operation::{OpIndex, Operation, Outcome};
use std::fmt::Debug;
use std::hash::Hash;

/// A sequential specification of an object (register, key-value map, log).
///
/// Contracts the engine relies on:
///
/// * `step` is a pure function of its arguments.
/// * For [`Outcome::Unknown`], `step` accepts whenever *some* output would be
///   accepted and returns the state that operation would produce (for the
///   models here the next state never depends on the output).
/// * [`Model::is_read_only`] may only return true if, for *every* state `s`
///   where `step` allows the operation, the next state equals `s`. The engine
///   uses this to linearize such operations greedily, without branching.
/// * A model, its inputs and outputs are `Sync`: independent parts are
///   searched on several threads at once.
/// * [`Model::partition`] must split the history into independent
///   sub-histories (P-compositionality): the history is linearizable iff each
///   part is, checked from [`Model::init`].
pub trait Model: Sync {
    /// The object's state. The engine hash-conses states, so `Clone` is
    /// called once per distinct state, not once per search step.
    type State: Clone + Eq + Hash + Debug;
    /// What a client asks for.
    type Input: Clone + Eq + Hash + Debug + Sync;
    /// What a client observes.
    type Output: Clone + Eq + Hash + Debug + Sync;

    /// The state before any operation.
    fn init(&self) -> Self::State;

    /// Applies one operation: `None` when the model forbids this output in
    /// this state, otherwise the next state.
    fn step(
        &self,
        state: &Self::State,
        input: &Self::Input,
        output: &Outcome<Self::Output>,
    ) -> Option<Self::State>;

    /// True if the operation never changes the state (see the trait
    /// contract). The default, `false`, is always sound.
    fn is_read_only(&self, _input: &Self::Input, _output: &Outcome<Self::Output>) -> bool {
        false
    }

    /// True if the model implements [`Model::observation_consistent`] and
    /// [`Model::enables_observation`]; the engine skips that work otherwise.
    const PRUNES_UNREACHABLE_OBSERVATIONS: bool = false;

    /// Optional pruning hint, for a read-only `observation` that must still
    /// be linearized: can it still be satisfied from `state` *without* an
    /// enabler (see [`Model::enables_observation`])?
    ///
    /// Contract: if `observation` is allowed in some state reached from
    /// `state` by a sequence of operations none of which enables it, this
    /// must return `true`. When it returns `false` and no enabler is still
    /// pending, the engine abandons the configuration. The default, `true`,
    /// is always sound.
    fn observation_consistent(
        &self,
        _state: &Self::State,
        _observation: &Operation<Self::Input, Self::Output>,
    ) -> bool {
        true
    }

    /// Optional pruning hint: may `writer` move the state to one from which
    /// `observation` becomes satisfiable, whatever the state before it?
    /// (A put whose value starts the observed string; a write of the read
    /// value.) Must be `true` whenever in doubt; the default is `true`.
    fn enables_observation(
        &self,
        _writer: &Operation<Self::Input, Self::Output>,
        _observation: &Operation<Self::Input, Self::Output>,
    ) -> bool {
        true
    }

    /// For the cheap witness scans (`witness.rs`): how the operation
    /// changes the state when it takes effect. The default, [`Effect::Other`],
    /// turns the scans off for the model, which is always sound.
    ///
    /// Contract: [`Effect::Keeps`] only if the operation never changes the
    /// state; [`Effect::Sets`] only if the state after it is always the
    /// given one (whatever it was before, wherever it is allowed);
    /// [`Effect::MaySet`] only if the state after it is either the given
    /// one or unchanged.
    fn effect(&self, _input: &Self::Input, _output: &Outcome<Self::Output>) -> Effect<Self::State> {
        Effect::Other
    }

    /// For the cheap witness scans: the one state in which this (read-only)
    /// operation is allowed, if there is exactly one (a read that returned
    /// a value). `None` when in doubt.
    fn observed_state(
        &self,
        _input: &Self::Input,
        _output: &Outcome<Self::Output>,
    ) -> Option<Self::State> {
        None
    }

    /// Splits a history into independently checkable parts, each a list of
    /// indices into `history`. Every index must appear in exactly one part.
    /// The default keeps the history whole.
    fn partition(&self, history: &[Operation<Self::Input, Self::Output>]) -> Vec<Vec<OpIndex>> {
        vec![(0..history.len()).map(OpIndex).collect()]
    }

    /// A short human-readable rendering of one operation, for
    /// counterexamples.
    fn describe_operation(&self, input: &Self::Input, output: &Outcome<Self::Output>) -> String {
        match output {
            Outcome::Returned(output) => format!("{input:?} -> {output:?}"),
            Outcome::Unknown => format!("{input:?} -> ?"),
        }
    }

    /// A short human-readable rendering of a state, for counterexamples.
    fn describe_state(&self, state: &Self::State) -> String {
        format!("{state:?}")
    }
}

/// How an operation changes a model's state, for the witness scans (see
/// [`Model::effect`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Effect<S> {
    /// Never changes the state (a read, a failed compare-and-set).
    Keeps,
    /// Always leaves the state equal to this (a write; a compare-and-set
    /// known to have succeeded).
    Sets(S),
    /// Leaves the state equal to this or unchanged (a compare-and-set
    /// whose outcome is unknown).
    MaySet(S),
    /// Anything else (an append): the scans do not apply.
    Other,
}
