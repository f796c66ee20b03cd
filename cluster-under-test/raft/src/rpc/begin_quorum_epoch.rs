//! BeginQuorumEpoch (API key 53): a new leader tells the voters it won the epoch.

use crate::{Epoch, ErrorCode, NodeId};

/// `BeginQuorumEpochRequest` partition data.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BeginQuorumEpochRequest {
    /// `LeaderId`.
    pub leader_id: NodeId,
    /// `LeaderEpoch`.
    pub leader_epoch: Epoch,
    /// `VoterId`: the voter the request is meant for.
    pub voter_id: NodeId,
}

/// `BeginQuorumEpochResponse` partition data.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BeginQuorumEpochResponse {
    /// `ErrorCode`; `None` is `NONE`.
    pub error: Option<ErrorCode>,
    /// `LeaderId` as the responder knows it.
    pub leader_id: Option<NodeId>,
    /// `LeaderEpoch`: the responder's epoch.
    pub leader_epoch: Epoch,
}
