//! FetchSnapshot (API key 59, KIP-630): a follower behind the leader's log start downloads the
//! leader's snapshot in chunks.

use crate::{Epoch, ErrorCode, NodeId, SnapshotId, rpc::fetch::LeaderIdAndEpoch};

/// `FetchSnapshotRequest` partition data.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FetchSnapshotRequest {
    /// `ReplicaId`: the fetching replica.
    pub replica_id: NodeId,
    /// `CurrentLeaderEpoch`: the fetcher's epoch.
    pub current_leader_epoch: Epoch,
    /// `SnapshotId`: the snapshot named by the leader's Fetch response.
    pub snapshot_id: SnapshotId,
    /// `Position`: byte offset of the next chunk.
    pub position: u64,
    /// `MaxBytes`: chunk size limit.
    pub max_bytes: u64,
}

/// `FetchSnapshotResponse` partition data.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FetchSnapshotResponse {
    /// `ErrorCode`; `None` is `NONE`.
    pub error: Option<ErrorCode>,
    /// `CurrentLeader`.
    pub current_leader: LeaderIdAndEpoch,
    /// `SnapshotId` of the chunk.
    pub snapshot_id: SnapshotId,
    /// `Size`: total snapshot size in bytes.
    pub size: u64,
    /// `Position`: where `unaligned_records` starts.
    pub position: u64,
    /// `UnalignedRecords`: the chunk.
    pub unaligned_records: Vec<u8>,
}
