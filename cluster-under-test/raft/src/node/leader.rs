//! The leader's duties: the LEADER_CHANGE record at epoch start, BeginQuorumEpoch, serving
//! Fetch (divergence check, snapshot redirect, long-poll parking) and FetchSnapshot, advancing
//! the high watermark only over an entry of its own epoch, check quorum, and batching
//! proposals for `append.linger.ms`. Also the non-leader answer to a stray Fetch.

use std::collections::{BTreeMap, BTreeSet};
use std::ops::Range;

use crate::{
    Canary, CorrelationId, Entry, EntryKind, Epoch, Error, ErrorCode, LogOp, Message, Moment,
    NodeId, Offset, QuorumConfig, QuorumState, RaftLog, SnapshotId,
    node::{RaftNode, RequestKind, RoleState},
    rpc::{
        begin_quorum_epoch::BeginQuorumEpochRequest,
        describe_quorum::{QuorumDescription, ReplicaDescription},
        fetch::{EpochEndOffset, FetchRequest, FetchResponse, LeaderIdAndEpoch},
        fetch_snapshot::{FetchSnapshotRequest, FetchSnapshotResponse},
    },
};

/// Volatile state of the leader of one epoch.
#[derive(Debug)]
pub(crate) struct LeaderState {
    /// Offset of this epoch's LEADER_CHANGE record: the high watermark must pass it before it
    /// may move at all (Raft §5.4.2, Figure 8).
    epoch_start_offset: Offset,
    /// When this replica became leader; check quorum gives a full window from here.
    started_ms: u64,
    /// What the leader knows of every replica that fetched (voters and observers).
    replicas: BTreeMap<NodeId, ReplicaProgress>,
    /// Fetches with nothing new to return, answered on new data, a high-watermark move or
    /// their deadline. At most one per replica (a newer fetch replaces the older).
    parked: BTreeMap<NodeId, ParkedFetch>,
    /// Proposals waiting for `append.linger.ms`.
    pending: Vec<Vec<u8>>,
    /// When the oldest pending proposal arrived.
    pending_since_ms: Option<u64>,
    /// Voters that have neither acknowledged BeginQuorumEpoch nor fetched in this epoch.
    pub(crate) unacknowledged_begin: BTreeSet<NodeId>,
}

/// The leader's view of one replica.
#[derive(Clone, Copy, Debug, Default)]
struct ReplicaProgress {
    /// The largest fetch offset validated against the leader's log: the replica's log matches
    /// the leader's below it.
    end_offset: Option<Offset>,
    /// The last Fetch or FetchSnapshot at this epoch (check quorum).
    last_fetch_ms: Option<u64>,
    /// The last fetch at the leader's end offset.
    last_caught_up_ms: Option<u64>,
}

#[derive(Clone, Debug)]
struct ParkedFetch {
    correlation_id: CorrelationId,
    request: FetchRequest,
    deadline_ms: u64,
}

/// How a fetch position compares with the leader's log.
enum FetchPosition {
    Valid,
    Diverging(EpochEndOffset),
    NeedsSnapshot(SnapshotId),
}

impl LeaderState {
    pub(crate) fn next_deadline_ms(&self, now_ms: u64, config: &QuorumConfig) -> u64 {
        let parked = self.parked.values().map(|fetch| fetch.deadline_ms).min();
        let linger = self
            .pending_since_ms
            .map(|since| since.saturating_add(config.append_linger_ms));
        // The recent-fetcher count can only drop when a window (from the epoch start or from
        // a voter's last fetch) closes: the next such moment in the future.
        let window_ms = config.check_quorum_timeout_ms();
        let check_quorum = std::iter::once(self.started_ms)
            .chain(
                self.replicas
                    .values()
                    .filter_map(|progress| progress.last_fetch_ms),
            )
            .map(|since| since.saturating_add(window_ms))
            .filter(|closes| *closes > now_ms)
            .min();
        [parked, linger, check_quorum]
            .into_iter()
            .flatten()
            .min()
            .unwrap_or(u64::MAX)
    }

    /// Voters other than the leader, best replicated first (EndQuorumEpoch's
    /// `PreferredCandidates`).
    pub(crate) fn preferred_candidates(&self, me: NodeId, config: &QuorumConfig) -> Vec<NodeId> {
        let mut voters: Vec<(Offset, NodeId)> = config
            .voters
            .iter()
            .filter(|voter| **voter != me)
            .map(|voter| {
                let end = self.replicas.get(voter).and_then(|p| p.end_offset);
                (end.unwrap_or(Offset::ZERO), *voter)
            })
            .collect();
        voters.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
        voters.into_iter().map(|(_, voter)| voter).collect()
    }

    pub(crate) fn describe(
        &self,
        me: NodeId,
        epoch: Epoch,
        high_watermark: Offset,
        log: &RaftLog,
        config: &QuorumConfig,
    ) -> QuorumDescription {
        let describe = |id: NodeId| {
            let progress = self.replicas.get(&id).copied().unwrap_or_default();
            ReplicaDescription {
                replica_id: id,
                log_end_offset: if id == me {
                    Some(log.end_offset())
                } else {
                    progress.end_offset
                },
                last_fetch_timestamp_ms: progress.last_fetch_ms,
                last_caught_up_timestamp_ms: progress.last_caught_up_ms,
            }
        };
        QuorumDescription {
            leader_id: me,
            leader_epoch: epoch,
            high_watermark,
            current_voters: config.voters.iter().map(|id| describe(*id)).collect(),
            observers: self
                .replicas
                .keys()
                .filter(|id| !config.voters.contains(id))
                .map(|id| describe(*id))
                .collect(),
        }
    }
}

impl RaftNode {
    /// Won the election: persist leadership, append LEADER_CHANGE, announce the epoch.
    pub(super) fn become_leader(&mut self, moment: Moment) {
        let granting_voters = match &self.role {
            RoleState::Candidate(state) => state.granted.iter().copied().collect(),
            _ => vec![self.id],
        };
        let _ = moment;
        self.set_quorum(QuorumState {
            epoch: self.quorum.epoch,
            voted_for: self.quorum.voted_for,
            leader_id: Some(self.id),
        });
        let epoch_start_offset = self.log.end_offset();
        let others: BTreeSet<NodeId> = self
            .config
            .voters
            .iter()
            .copied()
            .filter(|voter| *voter != self.id)
            .collect();
        self.set_role(RoleState::Leader(Box::new(LeaderState {
            epoch_start_offset,
            started_ms: self.now_ms,
            replicas: BTreeMap::new(),
            parked: BTreeMap::new(),
            pending: Vec::new(),
            pending_since_ms: None,
            unacknowledged_begin: others,
        })));
        let record = Entry {
            offset: epoch_start_offset,
            epoch: self.quorum.epoch,
            kind: EntryKind::LeaderChange {
                leader_id: self.id,
                granting_voters,
            },
        };
        self.push_log_op(LogOp::Append(vec![record]));
        self.send_begin_quorum_epoch();
        let _ = self.maybe_advance_high_watermark();
    }

    pub(super) fn tick_leader(&mut self, moment: Moment) {
        let now_ms = self.now_ms;
        let RoleState::Leader(leader) = &self.role else {
            return;
        };
        // Check quorum (KIP-595): resign when a majority has not fetched within 1.5 × the
        // fetch timeout.
        let window_ms = self.config.check_quorum_timeout_ms();
        if now_ms >= leader.started_ms.saturating_add(window_ms) {
            let recent = self
                .config
                .voters
                .iter()
                .filter(|voter| {
                    **voter == self.id
                        || leader
                            .replicas
                            .get(voter)
                            .and_then(|p| p.last_fetch_ms)
                            .is_some_and(|last| now_ms < last.saturating_add(window_ms))
                })
                .count();
            if recent < self.config.majority() {
                let preferred = leader.preferred_candidates(self.id, &self.config);
                self.become_resigned(moment, preferred);
                return;
            }
        }
        if leader
            .pending_since_ms
            .is_some_and(|since| now_ms >= since.saturating_add(self.config.append_linger_ms))
        {
            self.flush_pending();
        }
        self.expire_parked_fetches();
        self.send_begin_quorum_epoch();
    }

    pub(super) fn propose_as_leader(
        &mut self,
        payloads: Vec<Vec<u8>>,
    ) -> Result<Range<Offset>, Error> {
        let not_leader = self.not_leader();
        let linger_ms = self.config.append_linger_ms;
        let end = self.log.end_offset();
        let now_ms = self.now_ms;
        let RoleState::Leader(leader) = &mut self.role else {
            return Err(not_leader);
        };
        let first = end.plus(leader.pending.len() as u64);
        let last = first.plus(payloads.len() as u64);
        leader.pending.extend(payloads);
        let since = *leader.pending_since_ms.get_or_insert(now_ms);
        if now_ms >= since.saturating_add(linger_ms) {
            self.flush_pending();
        }
        Ok(first..last)
    }

    /// Appends the lingering proposals as one batch.
    fn flush_pending(&mut self) {
        let epoch = self.quorum.epoch;
        let start = self.log.end_offset();
        let RoleState::Leader(leader) = &mut self.role else {
            return;
        };
        leader.pending_since_ms = None;
        let payloads = std::mem::take(&mut leader.pending);
        if payloads.is_empty() {
            return;
        }
        let entries = payloads
            .into_iter()
            .enumerate()
            .map(|(i, payload)| Entry {
                offset: start.plus(i as u64),
                epoch,
                kind: EntryKind::Data(payload),
            })
            .collect();
        self.push_log_op(LogOp::Append(entries));
        // The leader's own end offset counts at once: the Ready contract makes it durable
        // before any response that relies on it leaves (KRaft's `flushLeaderLog`).
        let _ = self.maybe_advance_high_watermark();
        self.complete_parked_fetches();
    }

    /// The largest offset a majority of voters holds, if it covers an entry of this epoch.
    /// Returns whether the high watermark moved (parked fetches are then answered).
    fn maybe_advance_high_watermark(&mut self) -> bool {
        let RoleState::Leader(leader) = &self.role else {
            return false;
        };
        let mut ends: Vec<Offset> = self
            .config
            .voters
            .iter()
            .map(|voter| {
                if *voter == self.id {
                    self.log.end_offset()
                } else {
                    leader
                        .replicas
                        .get(voter)
                        .and_then(|p| p.end_offset)
                        .unwrap_or(Offset::ZERO)
                }
            })
            .collect();
        ends.sort_unstable_by(|a, b| b.cmp(a));
        let Some(candidate) = ends.get(self.config.majority() - 1).copied() else {
            return false;
        };
        let covers_own_epoch = candidate > leader.epoch_start_offset;
        if candidate <= self.high_watermark
            || !(covers_own_epoch || self.canary(Canary::CommitPreviousEpoch))
        {
            return false;
        }
        self.set_high_watermark(candidate);
        self.complete_parked_fetches();
        true
    }

    fn send_begin_quorum_epoch(&mut self) {
        let RoleState::Leader(leader) = &self.role else {
            return;
        };
        let targets: Vec<NodeId> = leader
            .unacknowledged_begin
            .iter()
            .copied()
            .filter(|voter| !self.has_outstanding(*voter, RequestKind::BeginQuorumEpoch))
            .collect();
        for voter in targets {
            let request = BeginQuorumEpochRequest {
                leader_id: self.id,
                leader_epoch: self.quorum.epoch,
                voter_id: voter,
            };
            self.send_request(
                voter,
                Message::BeginQuorumEpoch(request),
                RequestKind::BeginQuorumEpoch,
            );
        }
    }

    fn current_leader(&self) -> LeaderIdAndEpoch {
        LeaderIdAndEpoch {
            leader_id: self.quorum.leader_id,
            leader_epoch: self.quorum.epoch,
        }
    }

    fn fetch_error(&self, error: ErrorCode) -> FetchResponse {
        let current_leader = match self.role {
            // A resigned leader no longer serves; it names no leader.
            RoleState::Resigned(_) => LeaderIdAndEpoch {
                leader_id: None,
                leader_epoch: self.quorum.epoch,
            },
            _ => self.current_leader(),
        };
        FetchResponse {
            error: Some(error),
            current_leader,
            high_watermark: self.high_watermark,
            log_start_offset: self.log.start_offset(),
            diverging_epoch: None,
            snapshot_id: None,
            records: Vec::new(),
        }
    }

    /// Fetch, any role. `None` means the request was parked (answered later).
    pub(super) fn handle_fetch(
        &mut self,
        moment: Moment,
        from: NodeId,
        correlation_id: CorrelationId,
        request: FetchRequest,
    ) -> Option<FetchResponse> {
        let _ = moment;
        if request.current_leader_epoch < self.quorum.epoch {
            return Some(self.fetch_error(ErrorCode::FencedLeaderEpoch));
        }
        if request.current_leader_epoch > self.quorum.epoch {
            return Some(self.fetch_error(ErrorCode::UnknownLeaderEpoch));
        }
        if !matches!(self.role, RoleState::Leader(_)) {
            return Some(self.fetch_error(ErrorCode::NotLeaderOrFollower));
        }
        let now_ms = self.now_ms;
        let position = self.fetch_position(request.fetch_offset, request.last_fetched_epoch);
        let end = self.log.end_offset();
        let RoleState::Leader(leader) = &mut self.role else {
            return None;
        };
        let _ = leader.unacknowledged_begin.remove(&from);
        let progress = leader.replicas.entry(from).or_default();
        progress.last_fetch_ms = Some(now_ms);
        if matches!(position, FetchPosition::Valid) {
            progress.end_offset = progress.end_offset.max(Some(request.fetch_offset));
            if request.fetch_offset >= end {
                progress.last_caught_up_ms = Some(now_ms);
            }
        }
        let moved = matches!(position, FetchPosition::Valid) && self.maybe_advance_high_watermark();
        let response = self.fetch_response(position, &request);
        let can_park = response.records.is_empty()
            && response.diverging_epoch.is_none()
            && response.snapshot_id.is_none()
            && !moved
            && request.max_wait_ms > 0;
        if !can_park {
            return Some(response);
        }
        let deadline_ms =
            now_ms.saturating_add(request.max_wait_ms.min(self.config.fetch_max_wait_ms));
        if let RoleState::Leader(leader) = &mut self.role {
            let _ = leader.parked.insert(
                from,
                ParkedFetch {
                    correlation_id,
                    request,
                    deadline_ms,
                },
            );
        }
        None
    }

    /// KIP-595 fetch validation against the leader's log and snapshot.
    fn fetch_position(&self, fetch_offset: Offset, last_fetched_epoch: Epoch) -> FetchPosition {
        let start = self.log.start_offset();
        let snapshot = self.log.snapshot_id();
        if let Some(snapshot) = snapshot
            && (fetch_offset < start
                || (fetch_offset == start && last_fetched_epoch != snapshot.epoch))
        {
            return FetchPosition::NeedsSnapshot(snapshot);
        }
        if fetch_offset == Offset::ZERO && last_fetched_epoch == Epoch::ZERO {
            return FetchPosition::Valid;
        }
        let (epoch, end_offset) = self.log.end_offset_for_epoch(last_fetched_epoch);
        if epoch == last_fetched_epoch && fetch_offset <= end_offset {
            return FetchPosition::Valid;
        }
        match snapshot {
            // The fetcher's history runs below our log start: only the snapshot can fix it.
            Some(snapshot) if epoch == Epoch::ZERO || end_offset < start => {
                FetchPosition::NeedsSnapshot(snapshot)
            }
            _ => FetchPosition::Diverging(EpochEndOffset { epoch, end_offset }),
        }
    }

    fn fetch_response(&self, position: FetchPosition, request: &FetchRequest) -> FetchResponse {
        let mut response = FetchResponse {
            error: None,
            current_leader: self.current_leader(),
            high_watermark: self.high_watermark,
            log_start_offset: self.log.start_offset(),
            diverging_epoch: None,
            snapshot_id: None,
            records: Vec::new(),
        };
        match position {
            FetchPosition::Valid => {
                response.records = self
                    .log
                    .read(request.fetch_offset, self.config.fetch_max_bytes);
            }
            FetchPosition::Diverging(diverging) => response.diverging_epoch = Some(diverging),
            FetchPosition::NeedsSnapshot(snapshot) => response.snapshot_id = Some(snapshot),
        }
        response
    }

    /// Answers every parked fetch (new data or a new high watermark).
    fn complete_parked_fetches(&mut self) {
        let RoleState::Leader(leader) = &mut self.role else {
            return;
        };
        let parked = std::mem::take(&mut leader.parked);
        for (from, fetch) in parked {
            self.answer_parked_fetch(from, fetch);
        }
    }

    fn expire_parked_fetches(&mut self) {
        let now_ms = self.now_ms;
        let RoleState::Leader(leader) = &mut self.role else {
            return;
        };
        let due: Vec<NodeId> = leader
            .parked
            .iter()
            .filter(|(_, fetch)| fetch.deadline_ms <= now_ms)
            .map(|(from, _)| *from)
            .collect();
        let fetches: Vec<(NodeId, ParkedFetch)> = due
            .into_iter()
            .filter_map(|from| leader.parked.remove(&from).map(|fetch| (from, fetch)))
            .collect();
        for (from, fetch) in fetches {
            self.answer_parked_fetch(from, fetch);
        }
    }

    fn answer_parked_fetch(&mut self, from: NodeId, fetch: ParkedFetch) {
        // The log only grew since the fetch was validated, so validate again and answer.
        let position =
            self.fetch_position(fetch.request.fetch_offset, fetch.request.last_fetched_epoch);
        let response = self.fetch_response(position, &fetch.request);
        self.send_response(from, fetch.correlation_id, Message::FetchResponse(response));
    }

    /// FetchSnapshot, any role: chunks of the leader's latest snapshot.
    pub(super) fn handle_fetch_snapshot(
        &mut self,
        from: NodeId,
        request: FetchSnapshotRequest,
    ) -> FetchSnapshotResponse {
        let mut response = FetchSnapshotResponse {
            error: None,
            current_leader: self.current_leader(),
            snapshot_id: request.snapshot_id,
            size: 0,
            position: request.position,
            unaligned_records: Vec::new(),
        };
        let error = if request.current_leader_epoch < self.quorum.epoch {
            Some(ErrorCode::FencedLeaderEpoch)
        } else if request.current_leader_epoch > self.quorum.epoch {
            Some(ErrorCode::UnknownLeaderEpoch)
        } else if !matches!(self.role, RoleState::Leader(_)) {
            Some(ErrorCode::NotLeaderOrFollower)
        } else {
            None
        };
        if error.is_some() {
            response.error = error;
            return response;
        }
        let now_ms = self.now_ms;
        if let RoleState::Leader(leader) = &mut self.role {
            leader.replicas.entry(from).or_default().last_fetch_ms = Some(now_ms);
        }
        let Some(snapshot) = self.log.snapshot().filter(|s| s.id == request.snapshot_id) else {
            response.error = Some(ErrorCode::SnapshotNotFound);
            return response;
        };
        let size = snapshot.data.len() as u64;
        response.size = size;
        if request.position > size {
            response.error = Some(ErrorCode::PositionOutOfRange);
            return response;
        }
        let chunk_end = size.min(request.position.saturating_add(request.max_bytes.max(1)));
        response.unaligned_records =
            snapshot.data[request.position as usize..chunk_end as usize].to_vec();
        response
    }
}
