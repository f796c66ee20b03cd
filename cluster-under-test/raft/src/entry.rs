//! [`Entry`]: one record of the metadata log, `(offset, epoch, payload)`, and [`EntryKind`],
//! which separates the leader's control record from client data. Encoding into Kafka record
//! batches is the node's job.

use crate::{Epoch, NodeId, Offset};

/// One record of the replicated log.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Entry {
    /// Where the record sits in the log.
    pub offset: Offset,
    /// The epoch of the leader that appended it.
    pub epoch: Epoch,
    /// Control record or client data.
    pub kind: EntryKind,
}

/// What an [`Entry`] holds.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum EntryKind {
    /// The `LEADER_CHANGE` control record a new leader appends at the start of its epoch.
    /// Committing it is what lets the high watermark move in the new epoch.
    LeaderChange {
        /// The new leader.
        leader_id: NodeId,
        /// The voters that granted the election (Kafka's `Voters`/`GrantingVoters`).
        granting_voters: Vec<NodeId>,
    },
    /// An opaque payload proposed through [`crate::RaftNode::propose`].
    Data(Vec<u8>),
}

impl Entry {
    /// The payload size this entry counts against fetch and snapshot byte limits (control
    /// records count as a small constant).
    #[must_use]
    pub fn size_bytes(&self) -> u64 {
        match &self.kind {
            EntryKind::LeaderChange { .. } => 16,
            EntryKind::Data(bytes) => bytes.len() as u64,
        }
    }

    /// Whether this is client data rather than a control record.
    #[must_use]
    pub fn is_data(&self) -> bool {
        matches!(self.kind, EntryKind::Data(_))
    }
}
