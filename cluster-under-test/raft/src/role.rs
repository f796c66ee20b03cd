//! [`Role`]: the KIP-595/KIP-996 replica states as the driver and tests see them. The data
//! each state carries is private to [`crate::RaftNode`].

/// The state a replica is in.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Role {
    /// No known leader in the current epoch (may have voted: the old "Voted" state).
    Unattached,
    /// Asking for pre-votes (KIP-996) without bumping the epoch.
    Prospective,
    /// Bumped the epoch, voted for itself, asking for votes.
    Candidate,
    /// Leader of the current epoch.
    Leader,
    /// Fetching from the known leader of the current epoch.
    Follower,
    /// Was leader of the current epoch and stepped down; waits for the next election.
    Resigned,
}
