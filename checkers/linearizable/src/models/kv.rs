//! A string key-value store with `get`, `put` and `append`, partitioned by
//! key: each key is checked as its own history (P-compositionality), with a
//! single string as the state.
//!
//! This is the model of Porcupine's `kv` test histories; `kv_map.rs` holds
//! the unpartitioned variant used to cross-check it.

use crate::model::{Effect, Model};
use crate::operation::{OpIndex, Operation, Outcome};
use serde::{Deserialize, Serialize};
use std::collections::HashMap;

/// What a key-value client asks for.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum KvOp {
    /// Read the value of `key` (the empty string if never written).
    Get {
        /// The key read.
        key: String,
    },
    /// Replace the value of `key`.
    Put {
        /// The key written.
        key: String,
        /// The new value.
        value: String,
    },
    /// Append `value` to the value of `key`.
    Append {
        /// The key appended to.
        key: String,
        /// The suffix appended.
        value: String,
    },
}

impl KvOp {
    /// The key the operation touches.
    pub fn key(&self) -> &str {
        match self {
            KvOp::Get { key } | KvOp::Put { key, .. } | KvOp::Append { key, .. } => key,
        }
    }
}

/// What a key-value client observes.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum KvResult {
    /// The value a `get` returned.
    Value(String),
    /// A `put` or `append` was acknowledged.
    Done,
}

/// Per-key string state; partitions the history by key. A missing key reads
/// as the empty string, as in Porcupine's model.
#[derive(Clone, Copy, Debug, Default)]
pub struct KvModel;

/// Applies one key-value operation to one key's value; shared with
/// [`crate::models::kv_map::KvMapModel`].
pub(crate) fn step_value(value: &str, input: &KvOp, output: &Outcome<KvResult>) -> Option<String> {
    match (input, output) {
        (KvOp::Get { .. }, Outcome::Unknown) => Some(value.to_owned()),
        (KvOp::Get { .. }, Outcome::Returned(KvResult::Value(read))) => {
            (read == value).then(|| value.to_owned())
        }
        (KvOp::Put { value: new, .. }, Outcome::Unknown | Outcome::Returned(KvResult::Done)) => {
            Some(new.clone())
        }
        (
            KvOp::Append { value: suffix, .. },
            Outcome::Unknown | Outcome::Returned(KvResult::Done),
        ) => {
            let mut next = String::with_capacity(value.len() + suffix.len());
            next.push_str(value);
            next.push_str(suffix);
            Some(next)
        }
        _ => None,
    }
}

/// Renders a key-value operation for counterexamples.
pub(crate) fn describe(input: &KvOp, output: &Outcome<KvResult>) -> String {
    let output_text = match output {
        Outcome::Unknown => "?".to_owned(),
        Outcome::Returned(KvResult::Value(value)) => format!("{value:?}"),
        Outcome::Returned(KvResult::Done) => "ok".to_owned(),
    };
    match input {
        KvOp::Get { key } => format!("get {key:?} -> {output_text}"),
        KvOp::Put { key, value } => format!("put {key:?} {value:?} -> {output_text}"),
        KvOp::Append { key, value } => format!("append {key:?} {value:?} -> {output_text}"),
    }
}

impl Model for KvModel {
    type State = String;
    type Input = KvOp;
    type Output = KvResult;

    fn init(&self) -> Self::State {
        String::new()
    }

    fn step(
        &self,
        state: &Self::State,
        input: &Self::Input,
        output: &Outcome<Self::Output>,
    ) -> Option<Self::State> {
        step_value(state, input, output)
    }

    fn is_read_only(&self, input: &Self::Input, _output: &Outcome<Self::Output>) -> bool {
        matches!(input, KvOp::Get { .. })
    }

    const PRUNES_UNREACHABLE_OBSERVATIONS: bool = true;

    /// Appends only extend the value, so without a `put` a `get` can only
    /// ever observe an extension of the current value.
    fn observation_consistent(
        &self,
        state: &Self::State,
        observation: &Operation<Self::Input, Self::Output>,
    ) -> bool {
        match &observation.output {
            Outcome::Returned(KvResult::Value(observed)) => observed.starts_with(state.as_str()),
            _ => true,
        }
    }

    /// A `put` (acknowledged or not) of a value the observed string starts
    /// with resets the value so that appends may produce the observation.
    fn enables_observation(
        &self,
        writer: &Operation<Self::Input, Self::Output>,
        observation: &Operation<Self::Input, Self::Output>,
    ) -> bool {
        match (&writer.input, &observation.output) {
            (KvOp::Put { value, .. }, Outcome::Returned(KvResult::Value(observed))) => {
                observed.starts_with(value.as_str())
            }
            (KvOp::Put { .. }, _) => true,
            _ => false,
        }
    }

    /// One part per key, in order of each key's first appearance.
    fn partition(&self, history: &[Operation<Self::Input, Self::Output>]) -> Vec<Vec<OpIndex>> {
        let mut part_of_key: HashMap<&str, usize> = HashMap::new();
        let mut parts: Vec<Vec<OpIndex>> = Vec::new();
        for (index, operation) in history.iter().enumerate() {
            let part = *part_of_key.entry(operation.input.key()).or_insert_with(|| {
                parts.push(Vec::new());
                parts.len() - 1
            });
            parts[part].push(OpIndex(index));
        }
        parts
    }

    fn effect(&self, input: &Self::Input, output: &Outcome<Self::Output>) -> Effect<Self::State> {
        match (input, output) {
            (KvOp::Get { .. }, _) => Effect::Keeps,
            (KvOp::Put { value, .. }, Outcome::Returned(KvResult::Done)) => {
                Effect::Sets(value.clone())
            }
            (KvOp::Put { value, .. }, Outcome::Unknown) => Effect::MaySet(value.clone()),
            _ => Effect::Other,
        }
    }

    fn observed_state(
        &self,
        input: &Self::Input,
        output: &Outcome<Self::Output>,
    ) -> Option<Self::State> {
        match (input, output) {
            (KvOp::Get { .. }, Outcome::Returned(KvResult::Value(value))) => Some(value.clone()),
            _ => None,
        }
    }

    fn describe_operation(&self, input: &Self::Input, output: &Outcome<Self::Output>) -> String {
        describe(input, output)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::operation::ClientId;

    fn append(key: &str, value: &str) -> KvOp {
        KvOp::Append {
            key: key.to_owned(),
            value: value.to_owned(),
        }
    }

    fn got(value: &str) -> Outcome<KvResult> {
        Outcome::Returned(KvResult::Value(value.to_owned()))
    }

    #[test]
    fn get_of_appended_value_is_allowed() {
        let model = KvModel;
        let state = model.step(
            &"a".to_owned(),
            &append("k", "b"),
            &Outcome::Returned(KvResult::Done),
        );
        assert_eq!(state.as_deref(), Some("ab"));
        let get = KvOp::Get {
            key: "k".to_owned(),
        };
        assert!(model.step(&"ab".to_owned(), &get, &got("ab")).is_some());
    }

    #[test]
    fn get_of_other_value_is_rejected() {
        let model = KvModel;
        let get = KvOp::Get {
            key: "k".to_owned(),
        };
        assert!(model.step(&"ab".to_owned(), &get, &got("a")).is_none());
        assert!(model.step(&String::new(), &get, &got("a")).is_none());
    }

    #[test]
    fn partition_groups_by_key_in_first_appearance_order() {
        let op =
            |key: &str| Operation::completed(ClientId(0), append(key, "x"), 0, KvResult::Done, 1);
        let history = vec![op("b"), op("a"), op("b")];
        let parts = KvModel.partition(&history);
        assert_eq!(parts, vec![vec![OpIndex(0), OpIndex(2)], vec![OpIndex(1)]]);
    }
}
