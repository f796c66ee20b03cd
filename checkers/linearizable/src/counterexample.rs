//! The evidence for "not linearizable": the longest linearizable prefix the
//! search found in the failing part, the state it leads to, and the
//! operations that could not come next, as data (serde) and as plain text.
//!
//! Built by `checker.rs` from the search's raw stuck point; the operation
//! and state texts come from the model's `describe_*` methods, so a reader
//! can verify the claim by hand.

use crate::operation::{ClientId, OpIndex, Timestamp};
use serde::Serialize;
use std::fmt;

/// How many prefix steps the text rendering shows (the most recent ones).
const PREFIX_SHOWN_MAX: usize = 20;

/// Why the blocking operation could not be linearized next.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub enum StuckReason {
    /// Its return had passed, so it had to come next, and the model
    /// refused it (or every continuation after it failed).
    #[default]
    ReturnPassed,
    /// It is a read the model says can no longer be satisfied from this
    /// state by any operation still pending.
    Unsatisfiable,
    /// Found by the stale-read scan, not the search: the prefix lists the
    /// last operation that could set the value read (absent when it is the
    /// initial value) and one that set another value after it; both
    /// returned before the read began, so every linearization orders them
    /// so, and nothing after them can set the value again.
    StaleRead,
    /// Found by the stale-read scan: the read returned a value that no
    /// operation could have set and that is not the initial value.
    NeverWritten,
    /// Found by the stale-read scan: the read returned a value (not the
    /// initial one) before the first operation that could set it (the one
    /// in the prefix) was called.
    FutureRead,
}

/// One operation as it appears in a counterexample.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct ReportedOperation {
    /// Position in the checked history.
    pub op: OpIndex,
    /// Who issued it.
    pub client_id: ClientId,
    /// Call time.
    pub call: Timestamp,
    /// Return time (infinite if it never returned).
    pub return_at: Timestamp,
    /// The model's rendering of input and output.
    pub description: String,
}

impl fmt::Display for ReportedOperation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} client {} [{}, {}] {}",
            self.op, self.client_id, self.call, self.return_at, self.description
        )
    }
}

/// One step of the linearizable prefix.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct LinearizedStep {
    /// The operation linearized.
    pub operation: ReportedOperation,
    /// The model state right after it.
    pub state_after: String,
}

/// A concurrent operation that was a candidate at the stuck point.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Candidate {
    /// The operation.
    pub operation: ReportedOperation,
    /// True if the model allowed it in the stuck state (every continuation
    /// after it failed); false if the model refused it outright.
    pub allowed_by_model: bool,
}

/// Why one part of a history is not linearizable.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Counterexample {
    /// Which part (position in the model's partition list).
    pub partition: usize,
    /// How many operations that part has.
    pub partition_operations: usize,
    /// The longest linearizable prefix found, in order.
    pub prefix: Vec<LinearizedStep>,
    /// The state after the prefix.
    pub state: String,
    /// The operation whose return had passed, so it had to be linearized
    /// next, but could not be (absent if the search ran out of candidates
    /// before any deadline).
    pub blocking: Option<ReportedOperation>,
    /// Why `blocking` could not come next.
    pub reason: StuckReason,
    /// The other operations that were concurrent at that point.
    pub candidates: Vec<Candidate>,
}

impl fmt::Display for Counterexample {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "not linearizable: partition {} ({} operations)",
            self.partition, self.partition_operations
        )?;
        match self.reason {
            StuckReason::StaleRead => writeln!(
                f,
                "stale read: these returned, in this order, before the read began, \
                 and nothing after them can set the value it read again"
            )?,
            StuckReason::FutureRead => writeln!(
                f,
                "read from the future: the first operation that could set the value read \
                 was called after the read returned"
            )?,
            StuckReason::NeverWritten => {
                writeln!(
                    f,
                    "no operation could have set the value this read returned"
                )?;
            }
            StuckReason::ReturnPassed | StuckReason::Unsatisfiable => writeln!(
                f,
                "longest linearizable prefix: {} operations",
                self.prefix.len()
            )?,
        }
        let skipped = self.prefix.len().saturating_sub(PREFIX_SHOWN_MAX);
        if skipped > 0 {
            writeln!(f, "  … {skipped} earlier operations")?;
        }
        for (position, step) in self.prefix.iter().enumerate().skip(skipped) {
            writeln!(
                f,
                "  {:>4}. {}  => {}",
                position + 1,
                step.operation,
                step.state_after
            )?;
        }
        writeln!(f, "stuck in state {}", self.state)?;
        match (&self.blocking, self.reason) {
            (Some(operation), StuckReason::ReturnPassed) => writeln!(
                f,
                "  must come next (its return has passed) but cannot: {operation}"
            )?,
            (Some(operation), StuckReason::Unsatisfiable) => writeln!(
                f,
                "  can no longer be satisfied by any pending operation: {operation}"
            )?,
            (
                Some(operation),
                StuckReason::StaleRead | StuckReason::NeverWritten | StuckReason::FutureRead,
            ) => {
                writeln!(f, "  cannot be linearized: {operation}")?;
            }
            (None, _) => writeln!(f, "  no candidate can come next")?,
        }
        for candidate in &self.candidates {
            let why = if candidate.allowed_by_model {
                "allowed here, but every continuation fails"
            } else {
                "refused by the model here"
            };
            writeln!(f, "  concurrent: {} ({why})", candidate.operation)?;
        }
        Ok(())
    }
}
