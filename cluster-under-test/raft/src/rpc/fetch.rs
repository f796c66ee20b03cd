//! Fetch (API key 1) as KRaft uses it: replication is pulled by followers, and the response
//! doubles as the divergence check (`DivergingEpoch`) and the snapshot redirect (`SnapshotId`).

use crate::{Entry, Epoch, ErrorCode, NodeId, Offset, SnapshotId};

/// `FetchRequest` for partition `__cluster_metadata-0`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FetchRequest {
    /// `ReplicaState.ReplicaId` (`ReplicaId` before v15): the fetching replica.
    pub replica_id: NodeId,
    /// `CurrentLeaderEpoch`: the fetcher's epoch.
    pub current_leader_epoch: Epoch,
    /// `FetchOffset`: the fetcher's log end offset.
    pub fetch_offset: Offset,
    /// `LastFetchedEpoch`: epoch of the entry just below `fetch_offset` (or the snapshot's).
    pub last_fetched_epoch: Epoch,
    /// `MaxWaitMs`: how long the leader may park the request when it has nothing new.
    pub max_wait_ms: u64,
}

/// `CurrentLeader` of a Fetch or FetchSnapshot response.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LeaderIdAndEpoch {
    /// `LeaderId` (`-1` on the wire when unknown).
    pub leader_id: Option<NodeId>,
    /// `LeaderEpoch`.
    pub leader_epoch: Epoch,
}

/// `DivergingEpoch` of a Fetch response: the leader's end offset for the largest epoch it has
/// that is `<=` the fetcher's `LastFetchedEpoch`. The fetcher truncates to it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EpochEndOffset {
    /// `Epoch`.
    pub epoch: Epoch,
    /// `EndOffset` (exclusive).
    pub end_offset: Offset,
}

/// `FetchResponse` partition data.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FetchResponse {
    /// `ErrorCode`; `None` is `NONE`.
    pub error: Option<ErrorCode>,
    /// `CurrentLeader`.
    pub current_leader: LeaderIdAndEpoch,
    /// `HighWatermark` (exclusive). Only meaningful when `error` is `None`.
    pub high_watermark: Offset,
    /// `LogStartOffset` of the leader.
    pub log_start_offset: Offset,
    /// `DivergingEpoch`, set when the fetch offset and last fetched epoch do not match the
    /// leader's log.
    pub diverging_epoch: Option<EpochEndOffset>,
    /// `SnapshotId`, set when the fetcher must load the leader's snapshot (its fetch offset is
    /// below the leader's log start, or its history cannot be checked against the leader's).
    pub snapshot_id: Option<SnapshotId>,
    /// `Records`: entries starting exactly at the request's `FetchOffset`.
    pub records: Vec<Entry>,
}
