//! [`QuorumState`]: the election state Kafka keeps in the `quorum-state` file
//! (`{leaderId, leaderEpoch, votedId}`). The driver must make it durable before it sends any
//! message produced in the same step; see [`crate::Ready`].

use crate::{Epoch, NodeId};

/// The persisted election state of one replica.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct QuorumState {
    /// The replica's current epoch (`leaderEpoch` in the file).
    pub epoch: Epoch,
    /// Whom this replica voted for in `epoch` (`votedId`); at most one per epoch, ever.
    pub voted_for: Option<NodeId>,
    /// The leader of `epoch`, once known (`leaderId`).
    pub leader_id: Option<NodeId>,
}
