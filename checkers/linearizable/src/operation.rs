//! The history the engine checks: one [`Operation`] per client call, with its
//! call and return times and its observed [`Outcome`].
//!
//! This module owns only the data shape and its time semantics; the search
//! lives in `search.rs` and the importers in `porcupine/`.
//!
//! # Time and intervals
//!
//! An operation occupies the *closed* interval `[call, return_at]`. Operation
//! `a` must be linearized before operation `b` only when `a.return_at <
//! b.call`, strictly. Two operations whose intervals touch at one instant
//! (`a.return_at == b.call`) are concurrent. We choose closed intervals for the
//! same reason Porcupine does: timestamps come from clocks with finite
//! resolution (or from the position of a log line), so equal stamps say
//! "we cannot tell these apart", and treating them as concurrent can only
//! accept more orders. A checker that is too strict here reports false
//! anomalies; one that is lenient here loses nothing real, because a genuinely
//! ordered pair would get distinct stamps from a finer clock.
//!
//! # Indeterminate operations
//!
//! An operation whose client never learned the result (Jepsen's `:info`,
//! a timeout, a lost connection) has `return_at == Timestamp::INFINITY` and
//! output [`Outcome::Unknown`]. It may take effect at any instant after its
//! call, or never. The engine therefore never *requires* it to be linearized;
//! if it is linearized, the model applies its state change and accepts any
//! output.

use serde::{Deserialize, Serialize};
use std::fmt;

/// A point in time, in whatever unit the history uses (nanoseconds, event
/// index, line number). Only the order matters.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct Timestamp(pub u64);

impl Timestamp {
    /// "Never returned": the return time of an indeterminate operation.
    pub const INFINITY: Timestamp = Timestamp(u64::MAX);

    /// True for [`Timestamp::INFINITY`].
    pub fn is_infinite(self) -> bool {
        self == Self::INFINITY
    }
}

impl fmt::Display for Timestamp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.is_infinite() {
            f.write_str("∞")
        } else {
            write!(f, "{}", self.0)
        }
    }
}

/// The client (Jepsen "process") that issued an operation. Only used for
/// reporting; the search does not assume a client is sequential.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct ClientId(pub u64);

impl fmt::Display for ClientId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

/// The position of an operation in the history slice given to the checker.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct OpIndex(pub usize);

impl fmt::Display for OpIndex {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "#{}", self.0)
    }
}

/// What the client observed when the operation ended.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Outcome<O> {
    /// The operation completed and returned this output.
    Returned(O),
    /// The client does not know what happened (timeout, crash, `:info`).
    /// Models accept any output for it but still apply its state change.
    Unknown,
}

impl<O> Outcome<O> {
    /// The output, if one was observed.
    pub fn returned(&self) -> Option<&O> {
        match self {
            Outcome::Returned(output) => Some(output),
            Outcome::Unknown => None,
        }
    }

    /// True for [`Outcome::Unknown`].
    pub fn is_unknown(&self) -> bool {
        matches!(self, Outcome::Unknown)
    }
}

/// One client call in a history.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Operation<I, O> {
    /// Who issued it; used in reports only.
    pub client_id: ClientId,
    /// What was asked of the system.
    pub input: I,
    /// When the call was issued (inclusive bound of the interval).
    pub call: Timestamp,
    /// What came back, or [`Outcome::Unknown`].
    pub output: Outcome<O>,
    /// When the response arrived (inclusive bound), or
    /// [`Timestamp::INFINITY`] when it never did.
    pub return_at: Timestamp,
}

impl<I, O> Operation<I, O> {
    /// A completed operation.
    pub fn completed(client_id: ClientId, input: I, call: u64, output: O, return_at: u64) -> Self {
        Operation {
            client_id,
            input,
            call: Timestamp(call),
            output: Outcome::Returned(output),
            return_at: Timestamp(return_at),
        }
    }

    /// An indeterminate operation: called at `call`, never returned.
    pub fn indeterminate(client_id: ClientId, input: I, call: u64) -> Self {
        Operation {
            client_id,
            input,
            call: Timestamp(call),
            output: Outcome::Unknown,
            return_at: Timestamp::INFINITY,
        }
    }

    /// True when the engine may leave this operation out of the
    /// linearization (it never returned, so it may never have happened).
    pub fn is_optional(&self) -> bool {
        self.return_at.is_infinite()
    }
}
