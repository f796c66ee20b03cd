//! The crate's error types: [`Error`] for calls the driver makes on a
//! [`crate::RaftNode`], and [`ConfigError`] for `controller.quorum.*` parsing. Protocol-level
//! errors that travel in responses are [`crate::ErrorCode`], not these.

use crate::{Epoch, NodeId, Offset};

/// Why a driver call on a [`crate::RaftNode`] was refused. Every variant is a definite refusal:
/// nothing was appended or changed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    /// Proposals go to the leader only; `leader` is the best hint this replica has.
    #[error("not the leader of epoch {epoch:?}; leader hint {leader:?}")]
    NotLeader {
        /// The leader this replica knows of in `epoch`, if any.
        leader: Option<NodeId>,
        /// This replica's current epoch.
        epoch: Epoch,
    },
    /// A proposal must carry at least one payload.
    #[error("empty proposal")]
    EmptyProposal,
    /// A snapshot may only cover entries the state machine has applied (so below the high
    /// watermark).
    #[error("snapshot end offset {end_offset:?} is beyond the last applied end {applied_end:?}")]
    SnapshotBeyondApplied {
        /// The requested snapshot end offset (exclusive).
        end_offset: Offset,
        /// The end (exclusive) of what has been handed to the state machine.
        applied_end: Offset,
    },
    /// A new snapshot must end after the latest one.
    #[error("snapshot end offset {end_offset:?} is not after the latest snapshot {latest:?}")]
    SnapshotNotNewer {
        /// The requested snapshot end offset.
        end_offset: Offset,
        /// The end offset of the latest snapshot.
        latest: Offset,
    },
}

/// A `controller.quorum.*` property that could not be applied.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConfigError {
    /// The key is not a Raft setting.
    #[error("unknown raft property {key:?}")]
    UnknownKey {
        /// The key as given.
        key: String,
    },
    /// The value does not parse for this key.
    #[error("invalid value {value:?} for {key:?}")]
    InvalidValue {
        /// The key as given.
        key: String,
        /// The value as given.
        value: String,
    },
}
