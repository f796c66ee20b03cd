//! A read/write register: the smallest useful model, and the reference for
//! the others.

use crate::model::{Effect, Model};
use crate::operation::{Operation, Outcome};
use serde::{Deserialize, Serialize};
use std::fmt::Debug;
use std::hash::Hash;
use std::marker::PhantomData;

/// What a register client asks for.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum RegisterOp<V> {
    /// Read the current value.
    Read,
    /// Overwrite the value.
    Write(V),
}

/// What a register client observes.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum RegisterResult<V> {
    /// The value read; `None` means the register was never written (nil).
    Read(Option<V>),
    /// The write was acknowledged.
    Written,
}

/// A single register holding `Option<V>` (`None` = nil), starting at
/// `initial`. A result of the wrong kind for the input (a read answered with
/// `Written`) is never allowed.
#[derive(Clone, Debug)]
pub struct Register<V> {
    initial: Option<V>,
    _value: PhantomData<V>,
}

impl<V> Register<V> {
    /// A register whose value before any write is `initial`.
    pub fn new(initial: Option<V>) -> Self {
        Register {
            initial,
            _value: PhantomData,
        }
    }
}

impl<V: Clone + Eq + Hash + Debug + Sync> Model for Register<V> {
    type State = Option<V>;
    type Input = RegisterOp<V>;
    type Output = RegisterResult<V>;

    fn init(&self) -> Self::State {
        self.initial.clone()
    }

    fn step(
        &self,
        state: &Self::State,
        input: &Self::Input,
        output: &Outcome<Self::Output>,
    ) -> Option<Self::State> {
        match (input, output) {
            (RegisterOp::Read, Outcome::Unknown) => Some(state.clone()),
            (RegisterOp::Read, Outcome::Returned(RegisterResult::Read(value))) => {
                (value == state).then(|| state.clone())
            }
            (RegisterOp::Write(value), Outcome::Unknown)
            | (RegisterOp::Write(value), Outcome::Returned(RegisterResult::Written)) => {
                Some(Some(value.clone()))
            }
            _ => None,
        }
    }

    fn is_read_only(&self, input: &Self::Input, _output: &Outcome<Self::Output>) -> bool {
        matches!(input, RegisterOp::Read)
    }

    const PRUNES_UNREACHABLE_OBSERVATIONS: bool = true;

    /// Without a write of the value read, the register must already hold
    /// it (nil can never come back).
    fn observation_consistent(
        &self,
        state: &Self::State,
        observation: &Operation<Self::Input, Self::Output>,
    ) -> bool {
        match &observation.output {
            Outcome::Returned(RegisterResult::Read(value)) => value == state,
            _ => true,
        }
    }

    /// A write enables a read of the value it writes.
    fn enables_observation(
        &self,
        writer: &Operation<Self::Input, Self::Output>,
        observation: &Operation<Self::Input, Self::Output>,
    ) -> bool {
        match (&writer.input, &observation.output) {
            (RegisterOp::Write(written), Outcome::Returned(RegisterResult::Read(value))) => {
                value.as_ref() == Some(written)
            }
            (RegisterOp::Write(_), _) => true,
            (RegisterOp::Read, _) => false,
        }
    }

    fn effect(&self, input: &Self::Input, output: &Outcome<Self::Output>) -> Effect<Self::State> {
        match (input, output) {
            (RegisterOp::Read, _) => Effect::Keeps,
            (RegisterOp::Write(value), Outcome::Returned(RegisterResult::Written)) => {
                Effect::Sets(Some(value.clone()))
            }
            (RegisterOp::Write(value), Outcome::Unknown) => Effect::MaySet(Some(value.clone())),
            (RegisterOp::Write(_), Outcome::Returned(RegisterResult::Read(_))) => Effect::Other,
        }
    }

    fn observed_state(
        &self,
        input: &Self::Input,
        output: &Outcome<Self::Output>,
    ) -> Option<Self::State> {
        match (input, output) {
            (RegisterOp::Read, Outcome::Returned(RegisterResult::Read(value))) => {
                Some(value.clone())
            }
            _ => None,
        }
    }

    fn describe_operation(&self, input: &Self::Input, output: &Outcome<Self::Output>) -> String {
        let shown = |value: &Option<V>| match value {
            Some(value) => format!("{value:?}"),
            None => "nil".to_owned(),
        };
        match (input, output) {
            (RegisterOp::Read, Outcome::Returned(RegisterResult::Read(value))) => {
                format!("read -> {}", shown(value))
            }
            (RegisterOp::Read, _) => "read -> ?".to_owned(),
            (RegisterOp::Write(value), Outcome::Unknown) => format!("write {value:?} -> ?"),
            (RegisterOp::Write(value), Outcome::Returned(_)) => format!("write {value:?}"),
        }
    }

    fn describe_state(&self, state: &Self::State) -> String {
        match state {
            Some(value) => format!("{value:?}"),
            None => "nil".to_owned(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn returned<V>(result: RegisterResult<V>) -> Outcome<RegisterResult<V>> {
        Outcome::Returned(result)
    }

    #[test]
    fn read_of_current_value_is_allowed() {
        let model = Register::new(Some(1));
        let next = model.step(
            &Some(1),
            &RegisterOp::Read,
            &returned(RegisterResult::Read(Some(1))),
        );
        assert_eq!(next, Some(Some(1)));
    }

    #[test]
    fn read_of_other_value_is_rejected() {
        let model = Register::new(Some(1));
        let next = model.step(
            &Some(1),
            &RegisterOp::Read,
            &returned(RegisterResult::Read(Some(2))),
        );
        assert_eq!(next, None);
        let nil = model.step(
            &Some(1),
            &RegisterOp::Read,
            &returned(RegisterResult::Read(None)),
        );
        assert_eq!(nil, None);
    }

    #[test]
    fn write_sets_value_even_when_unknown() {
        let model = Register::<i64>::new(None);
        let acked = model.step(
            &None,
            &RegisterOp::Write(3),
            &returned(RegisterResult::Written),
        );
        assert_eq!(acked, Some(Some(3)));
        let unknown = model.step(&None, &RegisterOp::Write(3), &Outcome::Unknown);
        assert_eq!(unknown, Some(Some(3)));
    }

    #[test]
    fn mismatched_result_kind_is_rejected() {
        let model = Register::<i64>::new(None);
        assert_eq!(
            model.step(&None, &RegisterOp::Read, &returned(RegisterResult::Written)),
            None
        );
        assert_eq!(
            model.step(
                &None,
                &RegisterOp::Write(1),
                &returned(RegisterResult::Read(None))
            ),
            None
        );
    }
}
