//! EndQuorumEpoch (API key 54): a resigning leader tells the voters to elect a successor,
//! ranking them so the most caught-up voter tries first.

use crate::{Epoch, ErrorCode, NodeId};

/// `EndQuorumEpochRequest` partition data.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EndQuorumEpochRequest {
    /// `LeaderId`: the resigning leader.
    pub leader_id: NodeId,
    /// `LeaderEpoch`: the epoch being ended.
    pub leader_epoch: Epoch,
    /// `PreferredCandidates` (`PreferredSuccessors` before v1): voters ordered by their
    /// replicated end offset, best first. Position 0 campaigns at once; others back off.
    pub preferred_candidates: Vec<NodeId>,
}

/// `EndQuorumEpochResponse` partition data.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EndQuorumEpochResponse {
    /// `ErrorCode`; `None` is `NONE`.
    pub error: Option<ErrorCode>,
    /// `LeaderId` as the responder knows it.
    pub leader_id: Option<NodeId>,
    /// `LeaderEpoch`: the responder's epoch.
    pub leader_epoch: Epoch,
}
