//! Errors for histories the engine refuses to check. Search outcomes
//! (valid, invalid, unknown) are not errors; see `verdict.rs`.

use crate::operation::{OpIndex, Timestamp};

/// A history (or a model's partition of it) that is malformed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HistoryError {
    /// An operation returns before it is called.
    #[error("operation {op} returns at {return_at}, before its call at {call}")]
    ReturnBeforeCall {
        /// The operation.
        op: OpIndex,
        /// Its call time.
        call: Timestamp,
        /// Its return time.
        return_at: Timestamp,
    },
    /// The model's partition names an operation the history does not have.
    #[error("partition {partition} names operation {op}, but the history has {len} operations")]
    PartitionIndexOutOfRange {
        /// Which part.
        partition: usize,
        /// The bad index.
        op: OpIndex,
        /// History length.
        len: usize,
    },
    /// The model's partition puts one operation in two parts (or twice in one).
    #[error("operation {op} appears in partition {first} and again in partition {second}")]
    OperationInTwoPartitions {
        /// The operation.
        op: OpIndex,
        /// The first part naming it.
        first: usize,
        /// The second part naming it.
        second: usize,
    },
    /// The model's partition leaves an operation out.
    #[error("operation {op} is in no partition")]
    OperationInNoPartition {
        /// The operation.
        op: OpIndex,
    },
    /// A partition is too large for the engine's 32-bit operation ids.
    #[error("partition {partition} has {count} operations; at most {max} are supported")]
    PartitionTooLarge {
        /// Which part.
        partition: usize,
        /// Its size.
        count: usize,
        /// The limit.
        max: usize,
    },
}
