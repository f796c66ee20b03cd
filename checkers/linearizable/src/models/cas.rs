//! A compare-and-set register, as Jepsen's etcd tests exercise it: read,
//! write, and `cas [from to]` that succeeds iff the value equals `from`.

use crate::model::{Effect, Model};
use crate::operation::{Operation, Outcome};
use serde::{Deserialize, Serialize};
use std::fmt::Debug;
use std::hash::Hash;
use std::marker::PhantomData;

/// What a CAS-register client asks for.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum CasOp<V> {
    /// Read the current value.
    Read,
    /// Overwrite the value.
    Write(V),
    /// Set the value to `to` if it currently equals `from`.
    Cas {
        /// The value the client expects.
        from: V,
        /// The value to install.
        to: V,
    },
}

/// What a CAS-register client observes.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum CasResult<V> {
    /// The value read; `None` is nil.
    Read(Option<V>),
    /// The write was acknowledged.
    Written,
    /// The compare-and-set definitely succeeded (`true`, Jepsen `:ok`) or
    /// definitely did not (`false`, Jepsen `:fail`).
    Cas {
        /// Whether the swap happened.
        succeeded: bool,
    },
}

/// A register with compare-and-set, holding `Option<V>` (`None` = nil).
///
/// An unknown-output operation is allowed in every state and still changes
/// it: an unknown write installs its value; an unknown CAS installs `to` iff
/// the value equals `from`. This matches Porcupine's etcd model.
#[derive(Clone, Debug)]
pub struct CasRegister<V> {
    initial: Option<V>,
    _value: PhantomData<V>,
}

impl<V> CasRegister<V> {
    /// A register whose value before any write is `initial`.
    pub fn new(initial: Option<V>) -> Self {
        CasRegister {
            initial,
            _value: PhantomData,
        }
    }
}

impl<V: Clone + Eq + Hash + Debug + Sync> Model for CasRegister<V> {
    type State = Option<V>;
    type Input = CasOp<V>;
    type Output = CasResult<V>;

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
            (CasOp::Read, Outcome::Unknown) => Some(state.clone()),
            (CasOp::Read, Outcome::Returned(CasResult::Read(value))) => {
                (value == state).then(|| state.clone())
            }
            (CasOp::Write(value), Outcome::Unknown)
            | (CasOp::Write(value), Outcome::Returned(CasResult::Written)) => {
                Some(Some(value.clone()))
            }
            (CasOp::Cas { from, to }, Outcome::Unknown) => {
                if state.as_ref() == Some(from) {
                    Some(Some(to.clone()))
                } else {
                    Some(state.clone())
                }
            }
            (CasOp::Cas { from, to }, Outcome::Returned(CasResult::Cas { succeeded })) => {
                let matches = state.as_ref() == Some(from);
                match (matches, *succeeded) {
                    (true, true) => Some(Some(to.clone())),
                    (false, false) => Some(state.clone()),
                    _ => None,
                }
            }
            _ => None,
        }
    }

    fn is_read_only(&self, input: &Self::Input, output: &Outcome<Self::Output>) -> bool {
        match (input, output) {
            (CasOp::Read, _) => true,
            // A CAS known to have failed never changes the value, and one
            // that swaps a value for itself leaves it as it was.
            (CasOp::Cas { .. }, Outcome::Returned(CasResult::Cas { succeeded: false })) => true,
            (CasOp::Cas { from, to }, Outcome::Returned(CasResult::Cas { succeeded: true }))
            | (CasOp::Cas { from, to }, Outcome::Unknown) => from == to,
            _ => false,
        }
    }

    const PRUNES_UNREACHABLE_OBSERVATIONS: bool = true;

    /// Without an operation that installs the right value, the value a
    /// read expects must already be there (nil can never come back); a
    /// failed CAS needs the value to differ from `from` already.
    fn observation_consistent(
        &self,
        state: &Self::State,
        observation: &Operation<Self::Input, Self::Output>,
    ) -> bool {
        match (&observation.input, &observation.output) {
            (CasOp::Read, Outcome::Returned(CasResult::Read(value))) => value == state,
            (CasOp::Cas { from, .. }, Outcome::Returned(CasResult::Cas { succeeded: false })) => {
                state.as_ref() != Some(from)
            }
            (CasOp::Cas { from, to }, Outcome::Returned(CasResult::Cas { succeeded: true })) => {
                from != to || state.as_ref() == Some(from)
            }
            _ => true,
        }
    }

    /// An operation enables an observation if the value it may install
    /// satisfies it.
    fn enables_observation(
        &self,
        writer: &Operation<Self::Input, Self::Output>,
        observation: &Operation<Self::Input, Self::Output>,
    ) -> bool {
        let installed = match (&writer.input, &writer.output) {
            (CasOp::Write(value), _) => value,
            (CasOp::Cas { .. }, Outcome::Returned(CasResult::Cas { succeeded: false })) => {
                return false;
            }
            (CasOp::Cas { to, .. }, _) => to,
            (CasOp::Read, _) => return false,
        };
        match (&observation.input, &observation.output) {
            (CasOp::Read, Outcome::Returned(CasResult::Read(value))) => {
                value.as_ref() == Some(installed)
            }
            (CasOp::Cas { from, .. }, Outcome::Returned(CasResult::Cas { succeeded: false })) => {
                installed != from
            }
            (CasOp::Cas { from, .. }, Outcome::Returned(CasResult::Cas { succeeded: true })) => {
                installed == from
            }
            _ => true,
        }
    }

    fn effect(&self, input: &Self::Input, output: &Outcome<Self::Output>) -> Effect<Self::State> {
        match (input, output) {
            (CasOp::Read, _)
            | (CasOp::Cas { .. }, Outcome::Returned(CasResult::Cas { succeeded: false })) => {
                Effect::Keeps
            }
            (CasOp::Write(value), Outcome::Returned(CasResult::Written))
            | (
                CasOp::Cas { to: value, .. },
                Outcome::Returned(CasResult::Cas { succeeded: true }),
            ) => Effect::Sets(Some(value.clone())),
            (CasOp::Write(value) | CasOp::Cas { to: value, .. }, Outcome::Unknown) => {
                Effect::MaySet(Some(value.clone()))
            }
            _ => Effect::Other,
        }
    }

    fn observed_state(
        &self,
        input: &Self::Input,
        output: &Outcome<Self::Output>,
    ) -> Option<Self::State> {
        match (input, output) {
            (CasOp::Read, Outcome::Returned(CasResult::Read(value))) => Some(value.clone()),
            _ => None,
        }
    }

    fn describe_operation(&self, input: &Self::Input, output: &Outcome<Self::Output>) -> String {
        let shown = |value: &Option<V>| match value {
            Some(value) => format!("{value:?}"),
            None => "nil".to_owned(),
        };
        let input_text = match input {
            CasOp::Read => "read".to_owned(),
            CasOp::Write(value) => format!("write {value:?}"),
            CasOp::Cas { from, to } => format!("cas {from:?}->{to:?}"),
        };
        let output_text = match output {
            Outcome::Unknown => "?".to_owned(),
            Outcome::Returned(CasResult::Read(value)) => shown(value),
            Outcome::Returned(CasResult::Written) => "ok".to_owned(),
            Outcome::Returned(CasResult::Cas { succeeded: true }) => "ok".to_owned(),
            Outcome::Returned(CasResult::Cas { succeeded: false }) => "fail".to_owned(),
        };
        format!("{input_text} -> {output_text}")
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

    fn cas(from: i64, to: i64) -> CasOp<i64> {
        CasOp::Cas { from, to }
    }

    fn succeeded(value: bool) -> Outcome<CasResult<i64>> {
        Outcome::Returned(CasResult::Cas { succeeded: value })
    }

    #[test]
    fn successful_cas_from_current_value_is_allowed() {
        let model = CasRegister::new(Some(1));
        assert_eq!(
            model.step(&Some(1), &cas(1, 2), &succeeded(true)),
            Some(Some(2))
        );
    }

    #[test]
    fn successful_cas_from_other_value_is_rejected() {
        let model = CasRegister::new(Some(1));
        assert_eq!(model.step(&Some(1), &cas(3, 2), &succeeded(true)), None);
        assert_eq!(model.step(&None, &cas(3, 2), &succeeded(true)), None);
    }

    #[test]
    fn failed_cas_allowed_only_when_value_differs() {
        let model = CasRegister::new(Some(1));
        assert_eq!(
            model.step(&Some(1), &cas(3, 2), &succeeded(false)),
            Some(Some(1))
        );
        assert_eq!(model.step(&Some(3), &cas(3, 2), &succeeded(false)), None);
    }

    #[test]
    fn unknown_cas_applies_only_if_it_would_succeed() {
        let model = CasRegister::new(Some(1));
        assert_eq!(
            model.step(&Some(3), &cas(3, 2), &Outcome::Unknown),
            Some(Some(2))
        );
        assert_eq!(
            model.step(&Some(1), &cas(3, 2), &Outcome::Unknown),
            Some(Some(1))
        );
    }

    #[test]
    fn nil_read_allowed_only_before_any_write() {
        let model = CasRegister::<i64>::new(None);
        let nil = Outcome::Returned(CasResult::Read(None));
        assert_eq!(model.step(&None, &CasOp::Read, &nil), Some(None));
        assert_eq!(model.step(&Some(0), &CasOp::Read, &nil), None);
    }

    #[test]
    fn read_only_classification() {
        let model = CasRegister::<i64>::new(None);
        assert!(model.is_read_only(&CasOp::Read, &Outcome::Unknown));
        assert!(model.is_read_only(&cas(1, 2), &succeeded(false)));
        assert!(model.is_read_only(&cas(2, 2), &succeeded(true)));
        assert!(!model.is_read_only(&cas(1, 2), &succeeded(true)));
        assert!(!model.is_read_only(&cas(1, 2), &Outcome::Unknown));
        assert!(!model.is_read_only(&CasOp::Write(1), &Outcome::Unknown));
    }
}
