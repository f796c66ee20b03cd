//! Vote (API key 52, KIP-595; `PreVote` from v2, KIP-996): a candidate or prospective asks a
//! voter for its vote.

use crate::{Epoch, ErrorCode, NodeId, Offset};

/// `VoteRequest` partition data.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct VoteRequest {
    /// `ReplicaEpoch` (formerly `CandidateEpoch`): the sender's epoch. A candidate sends its
    /// bumped epoch; a prospective sends its current epoch unchanged.
    pub candidate_epoch: Epoch,
    /// `ReplicaId` (formerly `CandidateId`).
    pub candidate_id: NodeId,
    /// `VoterId`: the voter the request is meant for.
    pub voter_id: NodeId,
    /// `LastOffsetEpoch`: epoch of the sender's last log entry (or snapshot).
    pub last_offset_epoch: Epoch,
    /// `LastOffset`: the sender's log end offset (exclusive), compared after the epoch.
    pub last_offset: Offset,
    /// `PreVote`: ask whether the voter *would* grant, without changing its state.
    pub pre_vote: bool,
}

/// `VoteResponse` partition data.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct VoteResponse {
    /// `ErrorCode`; `None` is `NONE`.
    pub error: Option<ErrorCode>,
    /// `LeaderId`: the leader the voter knows in `leader_epoch` (`-1` on the wire when `None`).
    pub leader_id: Option<NodeId>,
    /// `LeaderEpoch`: the voter's epoch.
    pub leader_epoch: Epoch,
    /// `VoteGranted`.
    pub vote_granted: bool,
}
