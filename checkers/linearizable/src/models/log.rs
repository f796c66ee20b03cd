//! One Kafka partition as a sequential object: `send` appends a value and
//! returns its offset; `read` returns values starting at an offset.
//!
//! # Semantics, precisely
//!
//! The state is the log: the values at offsets `0..len`, in order.
//!
//! * `Send { value }` answered `Sent { offset }` is allowed iff `offset ==
//!   len`; the log becomes `log ++ [value]`. An unknown send (timed out)
//!   appends if it is linearized; because it never returned, the engine may
//!   also leave it out entirely ("maybe never happened"). A send that
//!   definitely failed should be left out of the history.
//! * `Read { from }` answered `Read { values }` is allowed iff `from <= len`
//!   and `values == log[from .. from + values.len()]`: the read returned a
//!   *prefix* of the log's suffix from `from`, as it stood at the read's
//!   linearization point. It may return fewer values than exist (a fetch is
//!   bounded by size), including none, but never a value out of place, a
//!   gap, or a value not yet in the log. The log is unchanged.
//! * `Read { from }` answered `OffsetOutOfRange` is allowed iff `from > len`
//!   (Kafka answers a fetch at exactly the log end offset with no records,
//!   not with an error).
//! * An unknown read is allowed in every state and changes nothing.

use crate::model::Model;
use crate::operation::{Operation, Outcome};
use serde::{Deserialize, Serialize};
use std::fmt::{self, Debug};
use std::hash::Hash;
use std::marker::PhantomData;

/// A position in one partition's log.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct Offset(pub u64);

impl fmt::Display for Offset {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

/// What a log client asks for.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum LogOp<V> {
    /// Produce one value.
    Send {
        /// The value appended.
        value: V,
    },
    /// Fetch values starting at `from`.
    Read {
        /// The first offset asked for.
        from: Offset,
    },
}

/// What a log client observes.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum LogResult<V> {
    /// The send was acknowledged at this offset.
    Sent {
        /// Where the value landed.
        offset: Offset,
    },
    /// The values at `from`, `from + 1`, ….
    Read {
        /// The values, in offset order.
        values: Vec<V>,
    },
    /// The read asked for an offset beyond the log end.
    OffsetOutOfRange,
}

/// One partition's log (see the module docs for the exact rules).
#[derive(Clone, Debug)]
pub struct LogModel<V> {
    _value: PhantomData<V>,
}

impl<V> LogModel<V> {
    /// An initially empty log.
    pub fn new() -> Self {
        LogModel {
            _value: PhantomData,
        }
    }
}

impl<V> Default for LogModel<V> {
    fn default() -> Self {
        Self::new()
    }
}

fn offset_index(offset: Offset) -> usize {
    usize::try_from(offset.0).unwrap_or(usize::MAX)
}

impl<V: Clone + Eq + Hash + Debug + Sync> Model for LogModel<V> {
    type State = Vec<V>;
    type Input = LogOp<V>;
    type Output = LogResult<V>;

    fn init(&self) -> Self::State {
        Vec::new()
    }

    fn step(
        &self,
        state: &Self::State,
        input: &Self::Input,
        output: &Outcome<Self::Output>,
    ) -> Option<Self::State> {
        match (input, output) {
            (LogOp::Send { value }, Outcome::Unknown) => {
                let mut log = state.clone();
                log.push(value.clone());
                Some(log)
            }
            (LogOp::Send { value }, Outcome::Returned(LogResult::Sent { offset })) => {
                (offset_index(*offset) == state.len()).then(|| {
                    let mut log = state.clone();
                    log.push(value.clone());
                    log
                })
            }
            (LogOp::Read { .. }, Outcome::Unknown) => Some(state.clone()),
            (LogOp::Read { from }, Outcome::Returned(LogResult::Read { values })) => {
                let start = offset_index(*from);
                let end = start.checked_add(values.len())?;
                (end <= state.len() && state[start..end] == values[..]).then(|| state.clone())
            }
            (LogOp::Read { from }, Outcome::Returned(LogResult::OffsetOutOfRange)) => {
                (offset_index(*from) > state.len()).then(|| state.clone())
            }
            _ => None,
        }
    }

    fn is_read_only(&self, input: &Self::Input, _output: &Outcome<Self::Output>) -> bool {
        matches!(input, LogOp::Read { .. })
    }

    const PRUNES_UNREACHABLE_OBSERVATIONS: bool = true;

    /// The log only grows, so the values already at `from..` can never
    /// change: a read must agree with them, and an out-of-range answer
    /// needs `from` beyond the current end.
    fn observation_consistent(
        &self,
        state: &Self::State,
        observation: &Operation<Self::Input, Self::Output>,
    ) -> bool {
        match (&observation.input, &observation.output) {
            (LogOp::Read { from }, Outcome::Returned(LogResult::Read { values })) => {
                let start = offset_index(*from);
                state
                    .iter()
                    .skip(start)
                    .zip(values.iter())
                    .all(|(logged, read)| logged == read)
            }
            (LogOp::Read { from }, Outcome::Returned(LogResult::OffsetOutOfRange)) => {
                offset_index(*from) > state.len()
            }
            _ => true,
        }
    }

    /// Nothing rewrites a log, so no operation enables an inconsistent read.
    fn enables_observation(
        &self,
        _writer: &Operation<Self::Input, Self::Output>,
        _observation: &Operation<Self::Input, Self::Output>,
    ) -> bool {
        false
    }

    fn describe_operation(&self, input: &Self::Input, output: &Outcome<Self::Output>) -> String {
        let output_text = match output {
            Outcome::Unknown => "?".to_owned(),
            Outcome::Returned(LogResult::Sent { offset }) => format!("offset {offset}"),
            Outcome::Returned(LogResult::Read { values }) => format!("{values:?}"),
            Outcome::Returned(LogResult::OffsetOutOfRange) => "offset out of range".to_owned(),
        };
        match input {
            LogOp::Send { value } => format!("send {value:?} -> {output_text}"),
            LogOp::Read { from } => format!("read from {from} -> {output_text}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sent(offset: u64) -> Outcome<LogResult<i64>> {
        Outcome::Returned(LogResult::Sent {
            offset: Offset(offset),
        })
    }

    fn read(values: &[i64]) -> Outcome<LogResult<i64>> {
        Outcome::Returned(LogResult::Read {
            values: values.to_vec(),
        })
    }

    #[test]
    fn send_at_log_end_offset_is_allowed() {
        let model = LogModel::new();
        let log = model.step(&vec![10], &LogOp::Send { value: 11 }, &sent(1));
        assert_eq!(log, Some(vec![10, 11]));
    }

    #[test]
    fn send_at_other_offset_is_rejected() {
        let model = LogModel::new();
        assert_eq!(
            model.step(&vec![10], &LogOp::Send { value: 11 }, &sent(0)),
            None
        );
        assert_eq!(
            model.step(&vec![10], &LogOp::Send { value: 11 }, &sent(2)),
            None
        );
    }

    #[test]
    fn read_of_any_prefix_from_offset_is_allowed() {
        let model = LogModel::new();
        let log = vec![1, 2, 3];
        let from_one = LogOp::Read { from: Offset(1) };
        assert!(model.step(&log, &from_one, &read(&[])).is_some());
        assert!(model.step(&log, &from_one, &read(&[2])).is_some());
        assert!(model.step(&log, &from_one, &read(&[2, 3])).is_some());
        let at_end = LogOp::Read { from: Offset(3) };
        assert!(model.step(&log, &at_end, &read(&[])).is_some());
    }

    #[test]
    fn read_with_gap_reorder_or_future_value_is_rejected() {
        let model = LogModel::new();
        let log = vec![1, 2, 3];
        let from_one = LogOp::Read { from: Offset(1) };
        assert!(model.step(&log, &from_one, &read(&[3])).is_none());
        assert!(model.step(&log, &from_one, &read(&[3, 2])).is_none());
        assert!(model.step(&log, &from_one, &read(&[2, 3, 4])).is_none());
        let beyond = LogOp::Read { from: Offset(4) };
        assert!(model.step(&log, &beyond, &read(&[])).is_none());
    }

    #[test]
    fn out_of_range_only_beyond_log_end() {
        let model = LogModel::<i64>::new();
        let out = Outcome::Returned(LogResult::OffsetOutOfRange);
        assert!(
            model
                .step(&vec![1], &LogOp::Read { from: Offset(2) }, &out)
                .is_some()
        );
        assert!(
            model
                .step(&vec![1], &LogOp::Read { from: Offset(1) }, &out)
                .is_none()
        );
    }

    #[test]
    fn unknown_send_appends() {
        let model = LogModel::new();
        let log = model.step(&vec![], &LogOp::Send { value: 5 }, &Outcome::Unknown);
        assert_eq!(log, Some(vec![5]));
    }
}
