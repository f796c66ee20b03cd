//! [`ErrorCode`]: the Kafka error codes a KRaft response can carry, with their wire numbers.
//! The node maps them 1:1 onto the `ErrorCode` fields of the Kafka messages.

/// A partition-level error in a Raft response. `None` in a response means `NONE` (0).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ErrorCode {
    /// `NOT_LEADER_OR_FOLLOWER` (6): a Fetch/FetchSnapshot reached a replica that is not the
    /// leader; the response's `current_leader` carries the hint.
    NotLeaderOrFollower,
    /// `FENCED_LEADER_EPOCH` (74): the request's epoch is older than the receiver's.
    FencedLeaderEpoch,
    /// `UNKNOWN_LEADER_EPOCH` (75): the request's epoch is newer than the receiver's.
    UnknownLeaderEpoch,
    /// `INCONSISTENT_VOTER_SET` (94): a voter-only request came from or to a non-voter.
    InconsistentVoterSet,
    /// `SNAPSHOT_NOT_FOUND` (98): the requested snapshot id is not the leader's latest.
    SnapshotNotFound,
    /// `POSITION_OUT_OF_RANGE` (99): a FetchSnapshot position beyond the snapshot's size.
    PositionOutOfRange,
}

impl ErrorCode {
    /// The Kafka wire number of this error.
    #[must_use]
    pub fn code(self) -> i16 {
        match self {
            ErrorCode::NotLeaderOrFollower => 6,
            ErrorCode::FencedLeaderEpoch => 74,
            ErrorCode::UnknownLeaderEpoch => 75,
            ErrorCode::InconsistentVoterSet => 94,
            ErrorCode::SnapshotNotFound => 98,
            ErrorCode::PositionOutOfRange => 99,
        }
    }
}
