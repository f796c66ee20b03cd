//! [`SnapshotId`] and [`Snapshot`]: a state-machine image covering every offset below
//! `end_offset`, named like Kafka's `<end offset>-<epoch>.checkpoint` files. The bytes are
//! opaque to Raft: the driver's state machine produces and consumes them.

use crate::{Epoch, Offset};

/// Kafka's `SnapshotId { EndOffset, Epoch }`: the snapshot holds offsets `< end_offset`, and
/// `epoch` is the epoch of the entry at `end_offset - 1`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct SnapshotId {
    /// Exclusive end: the first offset not in the snapshot (the log start after trimming).
    pub end_offset: Offset,
    /// Epoch of the last entry the snapshot covers.
    pub epoch: Epoch,
}

/// A complete snapshot: id plus the state machine's bytes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Snapshot {
    /// Which prefix of the log the bytes stand for.
    pub id: SnapshotId,
    /// The state machine's serialized image, opaque to Raft.
    pub data: Vec<u8>,
}
