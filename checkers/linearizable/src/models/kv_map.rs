//! The key-value store as a single unpartitioned map state: the same
//! semantics as `kv.rs`, checked without P-compositionality. Porcupine runs
//! this variant on its small kv histories to cross-check the partitioned one.

use crate::model::Model;
use crate::models::kv::{KvOp, KvResult, describe, step_value};
use crate::operation::Outcome;
use std::collections::BTreeMap;

/// All keys in one state. Keys whose value is the empty string are absent,
/// so "never written" and "written empty" are the same state, as they are
/// to a reader.
#[derive(Clone, Copy, Debug, Default)]
pub struct KvMapModel;

impl Model for KvMapModel {
    type State = BTreeMap<String, String>;
    type Input = KvOp;
    type Output = KvResult;

    fn init(&self) -> Self::State {
        BTreeMap::new()
    }

    fn step(
        &self,
        state: &Self::State,
        input: &Self::Input,
        output: &Outcome<Self::Output>,
    ) -> Option<Self::State> {
        let key = input.key();
        let current = state.get(key).map(String::as_str).unwrap_or("");
        let next = step_value(current, input, output)?;
        if next == current {
            return Some(state.clone());
        }
        let mut state = state.clone();
        if next.is_empty() {
            let _removed = state.remove(key);
        } else {
            let _previous = state.insert(key.to_owned(), next);
        }
        Some(state)
    }

    fn is_read_only(&self, input: &Self::Input, _output: &Outcome<Self::Output>) -> bool {
        matches!(input, KvOp::Get { .. })
    }

    fn describe_operation(&self, input: &Self::Input, output: &Outcome<Self::Output>) -> String {
        describe(input, output)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_independent() {
        let model = KvMapModel;
        let put = KvOp::Put {
            key: "a".to_owned(),
            value: "1".to_owned(),
        };
        let state = model
            .step(&model.init(), &put, &Outcome::Returned(KvResult::Done))
            .expect("put allowed");
        let get_b = KvOp::Get {
            key: "b".to_owned(),
        };
        let empty = Outcome::Returned(KvResult::Value(String::new()));
        assert!(model.step(&state, &get_b, &empty).is_some());
        let get_a = KvOp::Get {
            key: "a".to_owned(),
        };
        assert!(model.step(&state, &get_a, &empty).is_none());
    }

    #[test]
    fn empty_put_equals_never_written() {
        let model = KvMapModel;
        let put = KvOp::Put {
            key: "a".to_owned(),
            value: String::new(),
        };
        let state = model.step(&model.init(), &put, &Outcome::Returned(KvResult::Done));
        assert_eq!(state, Some(model.init()));
    }
}
