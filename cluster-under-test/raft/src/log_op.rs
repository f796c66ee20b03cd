//! [`LogOp`]: one change to the durable metadata log, as emitted in [`crate::Ready::log_ops`].
//! [`crate::RaftLog::apply`] is the reference semantics: the node applies every op to its own
//! in-memory log with it, and a driver (or the simulator's disk) applies the same ops to its
//! copy, so the two never disagree.

use crate::{Entry, Offset, Snapshot};

/// A durable log change. Apply in order; fsync before sending the step's messages (KRaft flushes
/// the metadata log on every append: `KafkaRaftClient.flushLeaderLog`, `appendAsFollower`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LogOp {
    /// Append these entries; the first one's offset equals the log's current end offset and
    /// the offsets are consecutive.
    Append(Vec<Entry>),
    /// Remove every entry at or after this offset (divergence truncation on a follower). Never
    /// below the log start.
    TruncateTo(Offset),
    /// Store this snapshot as the latest one and make its end offset the log start. Entries
    /// below it are dropped; if the log does not hold the snapshot's last entry with the
    /// snapshot's epoch, every entry is dropped (the snapshot replaces the log).
    Snapshot(Snapshot),
}
