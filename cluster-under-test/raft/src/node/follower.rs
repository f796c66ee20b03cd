//! The follower's side of replication: sending Fetch (one at a time, again as soon as a
//! response arrives), appending records, truncating on `DivergingEpoch`, downloading and
//! installing a snapshot with FetchSnapshot, and the fetch timeout that turns a voter
//! Prospective. Observers (non-voters) use the same path and find the leader by asking a
//! random voter.

use crate::{
    Epoch, LogOp, Message, Moment, NodeId, Offset, Snapshot,
    node::{RaftNode, RequestKind, RoleState, role_state::SnapshotDownload},
    rpc::{
        fetch::{EpochEndOffset, FetchRequest, FetchResponse, LeaderIdAndEpoch},
        fetch_snapshot::{FetchSnapshotRequest, FetchSnapshotResponse},
    },
};

impl RaftNode {
    pub(super) fn tick_follower(&mut self, moment: Moment) {
        let RoleState::Follower(state) = &self.role else {
            return;
        };
        if self.now_ms >= state.fetch_deadline_ms {
            // No successful fetch within `fetch.timeout.ms`: the leader may be gone.
            if self.is_voter() {
                self.become_prospective(moment, 0);
            } else {
                self.become_unattached(moment, self.quorum.epoch, None);
            }
            return;
        }
        self.maybe_send_fetch(moment);
    }

    /// Sends the next Fetch (or FetchSnapshot chunk request) unless one is in flight or the
    /// retry backoff has not passed.
    pub(super) fn maybe_send_fetch(&mut self, moment: Moment) {
        let _ = moment;
        let RoleState::Follower(state) = &self.role else {
            return;
        };
        let Some(leader) = self.quorum.leader_id else {
            return;
        };
        if self.has_outstanding_fetch() || self.now_ms < state.next_fetch_at_ms {
            return;
        }
        if let Some(download) = &state.download {
            let request = FetchSnapshotRequest {
                replica_id: self.id,
                current_leader_epoch: self.quorum.epoch,
                snapshot_id: download.id,
                position: download.data.len() as u64,
                max_bytes: self.config.fetch_snapshot_max_bytes,
            };
            self.send_request(
                leader,
                Message::FetchSnapshot(request),
                RequestKind::FetchSnapshot,
            );
            return;
        }
        self.send_fetch(leader);
    }

    fn send_fetch(&mut self, to: NodeId) {
        let fetch_offset = self.log.end_offset();
        let request = FetchRequest {
            replica_id: self.id,
            current_leader_epoch: self.quorum.epoch,
            fetch_offset,
            last_fetched_epoch: self.log.last_epoch(),
            max_wait_ms: self.config.fetch_max_wait_ms,
        };
        self.send_request(
            to,
            Message::Fetch(request),
            RequestKind::Fetch { fetch_offset },
        );
    }

    /// An observer without a leader asks a random voter; the answer names the leader.
    pub(super) fn send_bootstrap_fetch(&mut self, moment: Moment) {
        if self.has_outstanding_fetch() {
            return;
        }
        let voters: Vec<NodeId> = self.config.voters.iter().copied().collect();
        let pick = moment.random_below(voters.len() as u64, 3) as usize;
        let Some(voter) = voters.get(pick).copied() else {
            return;
        };
        self.send_fetch(voter);
        let retry_ms = self.config.retry_backoff_ms;
        if let RoleState::Unattached(state) = &mut self.role {
            state.bootstrap_fetch_at_ms = self.now_ms.saturating_add(retry_ms);
        }
    }

    /// Common epoch handling of Fetch and FetchSnapshot responses. Returns `true` when the
    /// response is from the leader this follower follows and carries no error.
    fn accept_leader_response(
        &mut self,
        moment: Moment,
        from: NodeId,
        error: bool,
        current_leader: LeaderIdAndEpoch,
    ) -> bool {
        if current_leader.leader_epoch > self.quorum.epoch {
            self.observe_newer_epoch(
                moment,
                current_leader.leader_epoch,
                current_leader.leader_id,
            );
            return false;
        }
        if current_leader.leader_epoch == self.quorum.epoch
            && let Some(leader) = current_leader.leader_id
            && self.quorum.leader_id != Some(leader)
        {
            // Observers learn the leader this way; voters learn it from BeginQuorumEpoch too.
            self.observe_current_leader(moment, leader);
            return false;
        }
        let following = matches!(self.role, RoleState::Follower(_));
        if error || !following || self.quorum.leader_id != Some(from) {
            let retry_ms = self.config.retry_backoff_ms;
            if let RoleState::Follower(state) = &mut self.role {
                state.next_fetch_at_ms = self.now_ms.saturating_add(retry_ms);
            }
            return false;
        }
        let now_ms = self.now_ms;
        let fetch_timeout_ms = self.config.fetch_timeout_ms;
        if let RoleState::Follower(state) = &mut self.role {
            state.last_fetch_success_ms = Some(now_ms);
            if !state.leader_resigned {
                state.fetch_deadline_ms = now_ms.saturating_add(fetch_timeout_ms);
            }
            state.next_fetch_at_ms = now_ms;
        }
        true
    }

    pub(super) fn handle_fetch_response(
        &mut self,
        moment: Moment,
        from: NodeId,
        fetch_offset: Offset,
        response: FetchResponse,
    ) {
        let accepted = self.accept_leader_response(
            moment,
            from,
            response.error.is_some(),
            response.current_leader,
        );
        if !accepted {
            self.maybe_send_fetch(moment);
            return;
        }
        if let Some(diverging) = response.diverging_epoch {
            self.truncate_to_diverging(diverging);
        } else if let Some(snapshot_id) = response.snapshot_id {
            if let RoleState::Follower(state) = &mut self.role {
                state.download = Some(SnapshotDownload {
                    id: snapshot_id,
                    data: Vec::new(),
                });
            }
        } else if self.log.end_offset() == fetch_offset {
            let records = response.records;
            let appendable = records.first().is_none_or(|first| {
                first.offset == fetch_offset && first.epoch >= self.log.last_epoch()
            });
            if appendable {
                let appended = records.len() as u64;
                if !records.is_empty() {
                    self.push_log_op(LogOp::Append(records));
                }
                // Only the prefix the leader validated plus what it sent is known to match.
                let verified_end = fetch_offset.plus(appended);
                self.set_high_watermark(response.high_watermark.min(verified_end));
            }
        }
        self.maybe_send_fetch(moment);
    }

    /// Kafka's `truncateToEndOffset` for a `DivergingEpoch`.
    fn truncate_to_diverging(&mut self, diverging: EpochEndOffset) {
        let truncation = if diverging.epoch == Epoch::ZERO {
            diverging.end_offset.min(self.log.end_offset())
        } else {
            let (local_epoch, local_end) = self.log.end_offset_for_epoch(diverging.epoch);
            if local_epoch == diverging.epoch {
                local_end.min(diverging.end_offset)
            } else {
                local_end
            }
        };
        // Committed entries are never truncated by a correct leader; clamp so the log contract
        // holds and leave the evidence to the invariant checkers.
        let truncation = truncation.max(self.log.start_offset());
        if truncation < self.log.end_offset() {
            self.push_log_op(LogOp::TruncateTo(truncation));
        }
        if self.high_watermark > truncation {
            self.high_watermark = truncation;
        }
    }

    pub(super) fn handle_fetch_snapshot_response(
        &mut self,
        moment: Moment,
        from: NodeId,
        response: FetchSnapshotResponse,
    ) {
        let failed = response.error.is_some();
        if !self.accept_leader_response(moment, from, failed, response.current_leader) {
            // Start over with a Fetch: the leader may have a newer snapshot.
            if let RoleState::Follower(state) = &mut self.role {
                state.download = None;
            }
            self.maybe_send_fetch(moment);
            return;
        }
        let RoleState::Follower(state) = &mut self.role else {
            return;
        };
        let Some(download) = &mut state.download else {
            return;
        };
        if download.id != response.snapshot_id || download.data.len() as u64 != response.position {
            state.download = None;
            self.maybe_send_fetch(moment);
            return;
        }
        download.data.extend_from_slice(&response.unaligned_records);
        if (download.data.len() as u64) < response.size {
            self.maybe_send_fetch(moment);
            return;
        }
        let Some(download) = state.download.take() else {
            return;
        };
        if download.id.end_offset > self.log.start_offset() {
            let snapshot = Snapshot {
                id: download.id,
                data: download.data,
            };
            self.push_log_op(LogOp::Snapshot(snapshot));
            // A snapshot only ever covers committed entries.
            self.set_high_watermark(download.id.end_offset);
        }
        self.maybe_send_fetch(moment);
    }
}
