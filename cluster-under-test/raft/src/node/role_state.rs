//! The private per-role data of a [`crate::RaftNode`]: timers, vote tallies, the follower's
//! snapshot download, the resigned leader's unacknowledged EndQuorumEpoch set. The leader's
//! larger state lives in `leader.rs`. Nothing here is persisted: it is rebuilt after a restart.

use std::collections::BTreeSet;

use crate::{NodeId, Role, SnapshotId, node::leader::LeaderState};

/// What the replica is doing, with the volatile data of that state.
#[derive(Debug)]
pub(crate) enum RoleState {
    Unattached(UnattachedState),
    Prospective(ElectionState),
    Candidate(ElectionState),
    Leader(Box<LeaderState>),
    Follower(FollowerState),
    Resigned(ResignedState),
}

impl RoleState {
    pub(crate) fn role(&self) -> Role {
        match self {
            RoleState::Unattached(_) => Role::Unattached,
            RoleState::Prospective(_) => Role::Prospective,
            RoleState::Candidate(_) => Role::Candidate,
            RoleState::Leader(_) => Role::Leader,
            RoleState::Follower(_) => Role::Follower,
            RoleState::Resigned(_) => Role::Resigned,
        }
    }
}

/// No leader known in this epoch.
#[derive(Debug)]
pub(crate) struct UnattachedState {
    /// A voter turns Prospective at this time.
    pub(crate) election_deadline_ms: u64,
    /// An observer asks a random voter for the leader at this time (voters never fetch here).
    pub(crate) bootstrap_fetch_at_ms: u64,
}

/// A pre-vote round (Prospective) or a vote round (Candidate).
#[derive(Debug)]
pub(crate) struct ElectionState {
    /// The round gives up at this time and a new pre-vote round starts.
    pub(crate) election_deadline_ms: u64,
    /// Voters that granted, self included.
    pub(crate) granted: BTreeSet<NodeId>,
    /// Voters that refused.
    pub(crate) rejected: BTreeSet<NodeId>,
    /// Rounds lost in a row; drives the exponential backoff.
    pub(crate) retries: u32,
    /// Set once the round is lost: the next round starts at this time.
    pub(crate) backoff_until_ms: Option<u64>,
}

impl ElectionState {
    /// A round that gives up at `election_deadline_ms`, `retries` rounds lost before it,
    /// with this node's own vote granted.
    pub(crate) fn new(election_deadline_ms: u64, retries: u32, me: NodeId) -> ElectionState {
        ElectionState {
            election_deadline_ms,
            granted: BTreeSet::from([me]),
            rejected: BTreeSet::new(),
            retries,
            backoff_until_ms: None,
        }
    }
}

/// Following the known leader of this epoch (voter or observer).
#[derive(Debug)]
pub(crate) struct FollowerState {
    /// Without a successful fetch by then, a voter turns Prospective (an observer Unattached).
    pub(crate) fetch_deadline_ms: u64,
    /// The last successful Fetch/FetchSnapshot response; pre-votes are refused while it is
    /// within `fetch.timeout.ms` (KIP-996).
    pub(crate) last_fetch_success_ms: Option<u64>,
    /// The leader sent EndQuorumEpoch: it is gone even if it fetched recently.
    pub(crate) leader_resigned: bool,
    /// Earliest time to send the next Fetch when none is outstanding (retry backoff).
    pub(crate) next_fetch_at_ms: u64,
    /// A snapshot being downloaded with FetchSnapshot, with the bytes so far.
    pub(crate) download: Option<SnapshotDownload>,
}

/// A FetchSnapshot download in progress.
#[derive(Debug)]
pub(crate) struct SnapshotDownload {
    pub(crate) id: SnapshotId,
    pub(crate) data: Vec<u8>,
}

/// A leader that stepped down, telling the voters until they acknowledge.
#[derive(Debug)]
pub(crate) struct ResignedState {
    /// Turns Prospective at this time.
    pub(crate) election_deadline_ms: u64,
    /// Voters that have not acknowledged EndQuorumEpoch yet.
    pub(crate) unacknowledged: BTreeSet<NodeId>,
    /// The `PreferredCandidates` sent with every EndQuorumEpoch.
    pub(crate) preferred_candidates: Vec<NodeId>,
}
