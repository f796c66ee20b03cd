//! DescribeQuorum (API key 55): answered by the leader from its replica progress; not a
//! replica-to-replica message, so it is a query on [`crate::RaftNode::describe_quorum`].

use crate::{Epoch, NodeId, Offset};

/// `DescribeQuorumResponse` partition data.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct QuorumDescription {
    /// `LeaderId`.
    pub leader_id: NodeId,
    /// `LeaderEpoch`.
    pub leader_epoch: Epoch,
    /// `HighWatermark` (exclusive).
    pub high_watermark: Offset,
    /// `CurrentVoters`, the leader included.
    pub current_voters: Vec<ReplicaDescription>,
    /// `Observers`: non-voters that fetched in this epoch.
    pub observers: Vec<ReplicaDescription>,
}

/// `ReplicaState` of a DescribeQuorum response.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReplicaDescription {
    /// `ReplicaId`.
    pub replica_id: NodeId,
    /// `LogEndOffset`: the end offset the leader has confirmed for this replica (`-1` unknown).
    pub log_end_offset: Option<Offset>,
    /// `LastFetchTimestamp` on the driver's clock (`-1` unknown).
    pub last_fetch_timestamp_ms: Option<u64>,
    /// `LastCaughtUpTimestamp`: the last time it fetched at the leader's end offset.
    pub last_caught_up_timestamp_ms: Option<u64>,
}
