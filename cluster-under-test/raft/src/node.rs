//! [`RaftNode`]: one KRaft replica as a pure state machine. This file owns the public API
//! (events in), the role transitions, request bookkeeping and the apply/high-watermark
//! plumbing; the handlers live in `node/election.rs` (Vote, BeginQuorumEpoch,
//! EndQuorumEpoch, election timers), `node/leader.rs` (serving Fetch and FetchSnapshot, the
//! high watermark, check quorum) and `node/follower.rs` (fetching, truncation, snapshot
//! download). No I/O happens anywhere here: every effect is a field of [`Ready`].

mod election;
mod follower;
mod leader;
mod role_state;

use std::collections::{BTreeMap, BTreeSet};
use std::ops::Range;

use crate::{
    Canary, CorrelationId, Envelope, Epoch, Error, LogOp, Message, Moment, NodeId, Offset,
    QuorumConfig, QuorumState, RaftLog, Ready, Role, Snapshot, SnapshotId,
    rpc::describe_quorum::QuorumDescription,
};
use role_state::{ElectionState, FollowerState, ResignedState, RoleState, UnattachedState};

/// Base of the exponential election backoff (`KafkaRaftClient`'s `RETRY_BACKOFF_BASE_MS`).
const ELECTION_BACKOFF_BASE_MS: u64 = 50;
/// Cap on the backoff exponent so `2^retries` stays small.
const ELECTION_BACKOFF_RETRIES_MAX: u32 = 10;

/// One Raft replica of the metadata quorum.
///
/// Drive it with [`tick`](RaftNode::tick), [`step`](RaftNode::step),
/// [`propose`](RaftNode::propose), [`create_snapshot`](RaftNode::create_snapshot) and
/// [`resign`](RaftNode::resign); after each call (or a batch of calls) take the
/// [`Ready`] with [`take_ready`](RaftNode::take_ready) and execute it in the documented order.
#[derive(Debug)]
pub struct RaftNode {
    /// This replica's `node.id`.
    id: NodeId,
    /// Settings; `config.voters` decides whether this replica votes.
    config: QuorumConfig,
    /// The persisted election state. Every change is copied into `ready.quorum_state`.
    quorum: QuorumState,
    /// The working copy of the durable log; every change is also a `ready.log_ops` entry.
    log: RaftLog,
    /// The current state and its volatile data.
    role: RoleState,
    /// Exclusive end of the committed prefix as far as this replica knows. Volatile (KRaft does
    /// not persist it); it only grows while the process lives.
    high_watermark: Offset,
    /// Exclusive end of what has been handed to the state machine through `ready.apply`.
    applied_end: Offset,
    /// Payload bytes applied since the latest snapshot, for `snapshot_suggested`.
    bytes_since_snapshot: u64,
    /// A snapshot was suggested and none has been created since; suggest once.
    snapshot_suggested: bool,
    /// Requests sent and not yet answered, by correlation id (Kafka's `RequestManager`).
    /// Cleared on every state change, so a late response to an old state is dropped.
    outstanding: BTreeMap<CorrelationId, Outstanding>,
    /// The next correlation id to use.
    next_correlation_id: CorrelationId,
    /// The latest `Moment::now_ms` seen.
    now_ms: u64,
    /// Commands accumulated for the driver.
    ready: Ready,
}

/// A request this replica sent and still expects an answer to.
#[derive(Clone, Copy, Debug)]
struct Outstanding {
    to: NodeId,
    sent_ms: u64,
    kind: RequestKind,
}

/// What an outstanding request was; a response must match it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum RequestKind {
    Vote { pre_vote: bool },
    BeginQuorumEpoch,
    EndQuorumEpoch,
    Fetch { fetch_offset: Offset },
    FetchSnapshot,
}

impl RaftNode {
    /// A replica that has never run: epoch 0, empty log.
    #[must_use]
    pub fn new(id: NodeId, config: QuorumConfig, moment: Moment) -> RaftNode {
        RaftNode::restart(id, config, QuorumState::default(), RaftLog::new(), moment)
    }

    /// A replica coming back from its durable state: the last persisted [`QuorumState`] and the
    /// log rebuilt by applying every [`LogOp`] it was given (see [`RaftLog::apply`]).
    ///
    /// Like Kafka: a replica that was leader comes back Resigned, one that knew a leader comes
    /// back as its Follower, any other Unattached (keeping its vote). The state machine must be
    /// rebuilt from the first [`Ready`] (`load_snapshot`, then `apply` as the high watermark is
    /// learned again).
    #[must_use]
    pub fn restart(
        id: NodeId,
        config: QuorumConfig,
        quorum: QuorumState,
        log: RaftLog,
        moment: Moment,
    ) -> RaftNode {
        let start = log.start_offset();
        let mut node = RaftNode {
            id,
            config,
            quorum,
            log,
            role: RoleState::Unattached(UnattachedState {
                election_deadline_ms: u64::MAX,
                bootstrap_fetch_at_ms: u64::MAX,
            }),
            high_watermark: start,
            applied_end: Offset::ZERO,
            bytes_since_snapshot: 0,
            snapshot_suggested: false,
            outstanding: BTreeMap::new(),
            next_correlation_id: CorrelationId(moment.random as u32),
            now_ms: moment.now_ms,
            ready: Ready::default(),
        };
        match quorum.leader_id {
            Some(leader) if leader == id => node.become_resigned(moment, Vec::new()),
            Some(leader) => node.become_follower(moment, quorum.epoch, leader),
            None => node.become_unattached(moment, quorum.epoch, quorum.voted_for),
        }
        node.finish();
        node
    }

    /// This replica's id.
    #[must_use]
    pub fn id(&self) -> NodeId {
        self.id
    }

    /// The current role.
    #[must_use]
    pub fn role(&self) -> Role {
        self.role.role()
    }

    /// The current epoch.
    #[must_use]
    pub fn epoch(&self) -> Epoch {
        self.quorum.epoch
    }

    /// The leader of the current epoch, if known.
    #[must_use]
    pub fn leader(&self) -> Option<NodeId> {
        self.quorum.leader_id
    }

    /// The election state as last handed out for persistence.
    #[must_use]
    pub fn quorum_state(&self) -> QuorumState {
        self.quorum
    }

    /// The replica's log (working copy of the durable one).
    #[must_use]
    pub fn log(&self) -> &RaftLog {
        &self.log
    }

    /// The high watermark this replica knows (exclusive).
    #[must_use]
    pub fn high_watermark(&self) -> Offset {
        self.high_watermark
    }

    /// Exclusive end of what has been handed to the state machine.
    #[must_use]
    pub fn applied_end(&self) -> Offset {
        self.applied_end
    }

    /// Whether this replica is in `controller.quorum.voters` (otherwise it is an observer).
    #[must_use]
    pub fn is_voter(&self) -> bool {
        self.config.voters.contains(&self.id)
    }

    /// The settings this replica runs with.
    #[must_use]
    pub fn config(&self) -> &QuorumConfig {
        &self.config
    }

    /// Takes the commands accumulated since the last call. See [`Ready`] for the order in
    /// which the driver must execute them.
    pub fn take_ready(&mut self) -> Ready {
        std::mem::take(&mut self.ready)
    }

    /// Whether commands are waiting in [`take_ready`](RaftNode::take_ready).
    #[must_use]
    pub fn has_ready(&self) -> bool {
        !self.ready.is_empty()
    }

    /// Advances time: fires election, fetch, check-quorum, linger and request timers that are
    /// due at `moment.now_ms`. Call it at [`next_deadline_ms`](RaftNode::next_deadline_ms) or
    /// more often.
    pub fn tick(&mut self, moment: Moment) {
        self.observe_time(moment);
        let request_timeout_ms = self.config.request_timeout_ms;
        let now_ms = self.now_ms;
        self.outstanding
            .retain(|_, request| request.sent_ms.saturating_add(request_timeout_ms) > now_ms);
        match &self.role {
            RoleState::Leader(_) => self.tick_leader(moment),
            RoleState::Follower(_) => self.tick_follower(moment),
            _ => self.tick_election(moment),
        }
        self.finish();
    }

    /// The earliest time at which [`tick`](RaftNode::tick) has something to do; the driver
    /// may sleep until then unless a message or proposal arrives.
    #[must_use]
    pub fn next_deadline_ms(&self) -> u64 {
        let requests = self
            .outstanding
            .values()
            .map(|request| {
                request
                    .sent_ms
                    .saturating_add(self.config.request_timeout_ms)
            })
            .min()
            .unwrap_or(u64::MAX);
        // A fetch in flight is covered by its request timeout above.
        let fetching = self.has_outstanding_fetch();
        let role = match &self.role {
            RoleState::Unattached(state) => {
                if self.is_voter() {
                    state.election_deadline_ms
                } else if fetching {
                    u64::MAX
                } else {
                    state.bootstrap_fetch_at_ms
                }
            }
            RoleState::Prospective(state) | RoleState::Candidate(state) => state
                .backoff_until_ms
                .unwrap_or(u64::MAX)
                .min(state.election_deadline_ms),
            RoleState::Leader(leader) => leader.next_deadline_ms(self.now_ms, &self.config),
            RoleState::Follower(state) if fetching => state.fetch_deadline_ms,
            RoleState::Follower(state) => state.fetch_deadline_ms.min(state.next_fetch_at_ms),
            RoleState::Resigned(state) => state.election_deadline_ms,
        };
        requests.min(role).max(self.now_ms)
    }

    /// Handles one message addressed to this replica. Responses that do not answer an
    /// outstanding request (stale, duplicated, or from a previous state) are dropped.
    pub fn step(&mut self, moment: Moment, envelope: Envelope) {
        self.observe_time(moment);
        if envelope.to != self.id {
            return;
        }
        let from = envelope.from;
        let correlation_id = envelope.correlation_id;
        if !envelope.message.is_request() {
            let Some(request) = self.outstanding.remove(&correlation_id) else {
                return;
            };
            if request.to != from {
                return;
            }
            self.handle_response(moment, from, request.kind, envelope.message);
        } else {
            self.handle_request(moment, from, correlation_id, envelope.message);
        }
        self.finish();
    }

    fn handle_request(
        &mut self,
        moment: Moment,
        from: NodeId,
        correlation_id: CorrelationId,
        message: Message,
    ) {
        let response = match message {
            Message::Vote(request) => Message::VoteResponse(self.handle_vote(moment, request)),
            Message::BeginQuorumEpoch(request) => {
                Message::BeginQuorumEpochResponse(self.handle_begin_quorum_epoch(moment, request))
            }
            Message::EndQuorumEpoch(request) => {
                Message::EndQuorumEpochResponse(self.handle_end_quorum_epoch(moment, request))
            }
            Message::Fetch(request) => {
                match self.handle_fetch(moment, from, correlation_id, request) {
                    Some(response) => Message::FetchResponse(response),
                    // Parked until data, a high-watermark move, or `MaxWaitMs`.
                    None => return,
                }
            }
            Message::FetchSnapshot(request) => {
                Message::FetchSnapshotResponse(self.handle_fetch_snapshot(from, request))
            }
            _ => return,
        };
        self.send_response(from, correlation_id, response);
    }

    fn handle_response(
        &mut self,
        moment: Moment,
        from: NodeId,
        kind: RequestKind,
        message: Message,
    ) {
        match (kind, message) {
            (RequestKind::Vote { pre_vote }, Message::VoteResponse(response)) => {
                self.handle_vote_response(moment, from, pre_vote, response);
            }
            (RequestKind::BeginQuorumEpoch, Message::BeginQuorumEpochResponse(response)) => {
                self.handle_begin_quorum_epoch_response(moment, from, response);
            }
            (RequestKind::EndQuorumEpoch, Message::EndQuorumEpochResponse(response)) => {
                self.handle_end_quorum_epoch_response(moment, from, response);
            }
            (RequestKind::Fetch { fetch_offset }, Message::FetchResponse(response)) => {
                self.handle_fetch_response(moment, from, fetch_offset, response);
            }
            (RequestKind::FetchSnapshot, Message::FetchSnapshotResponse(response)) => {
                self.handle_fetch_snapshot_response(moment, from, response);
            }
            _ => {}
        }
    }

    /// Queues payloads for the log, as the leader. They are appended as one batch after
    /// `controller.quorum.append.linger.ms` (at once when it is zero) and are committed once
    /// the high watermark passes them; [`Ready::apply`] reports that.
    ///
    /// Returns the offsets the payloads will occupy.
    ///
    /// # Errors
    ///
    /// [`Error::NotLeader`] (with the leader hint) unless this replica leads the current
    /// epoch; [`Error::EmptyProposal`] for no payloads.
    pub fn propose(
        &mut self,
        moment: Moment,
        payloads: Vec<Vec<u8>>,
    ) -> Result<Range<Offset>, Error> {
        self.observe_time(moment);
        if payloads.is_empty() {
            return Err(Error::EmptyProposal);
        }
        let result = self.propose_as_leader(payloads);
        self.finish();
        result
    }

    /// Records a state-machine snapshot covering every offset below `end_offset` and trims the
    /// log below it (emitted as [`LogOp::Snapshot`]). The state machine must have applied
    /// exactly `[0, end_offset)` when it produced `data`.
    ///
    /// # Errors
    ///
    /// [`Error::SnapshotBeyondApplied`] if `end_offset` is past what was applied (so possibly
    /// uncommitted); [`Error::SnapshotNotNewer`] if it does not move past the latest snapshot.
    pub fn create_snapshot(
        &mut self,
        end_offset: Offset,
        data: Vec<u8>,
    ) -> Result<SnapshotId, Error> {
        if end_offset > self.applied_end {
            return Err(Error::SnapshotBeyondApplied {
                end_offset,
                applied_end: self.applied_end,
            });
        }
        let latest = self.log.start_offset();
        let last_offset = end_offset.previous();
        let epoch = last_offset
            .and_then(|last| self.log.entry(last))
            .map(|entry| entry.epoch);
        let Some(epoch) = epoch.filter(|_| end_offset > latest) else {
            return Err(Error::SnapshotNotNewer { end_offset, latest });
        };
        let id = SnapshotId { end_offset, epoch };
        self.push_log_op(LogOp::Snapshot(Snapshot { id, data }));
        self.bytes_since_snapshot = 0;
        self.snapshot_suggested = false;
        self.finish();
        Ok(id)
    }

    /// Gracefully steps down as leader (controlled shutdown): becomes Resigned and sends
    /// EndQuorumEpoch with the voters ranked by replicated end offset.
    ///
    /// # Errors
    ///
    /// [`Error::NotLeader`] unless this replica leads the current epoch.
    pub fn resign(&mut self, moment: Moment) -> Result<(), Error> {
        self.observe_time(moment);
        let RoleState::Leader(leader) = &self.role else {
            return Err(self.not_leader());
        };
        let preferred = leader.preferred_candidates(self.id, &self.config);
        self.become_resigned(moment, preferred);
        self.finish();
        Ok(())
    }

    /// DescribeQuorum, answered by the leader only (`None` elsewhere, which the node maps to
    /// `NOT_LEADER_OR_FOLLOWER`).
    #[must_use]
    pub fn describe_quorum(&self) -> Option<QuorumDescription> {
        let RoleState::Leader(leader) = &self.role else {
            return None;
        };
        Some(leader.describe(
            self.id,
            self.quorum.epoch,
            self.high_watermark,
            &self.log,
            &self.config,
        ))
    }

    // ----- transitions -----

    fn observe_time(&mut self, moment: Moment) {
        self.now_ms = self.now_ms.max(moment.now_ms);
    }

    /// Persists `quorum` if it changed: the driver must fsync it before sending anything.
    fn set_quorum(&mut self, quorum: QuorumState) {
        if quorum != self.quorum {
            self.quorum = quorum;
            self.ready.quorum_state = Some(quorum);
        }
    }

    /// Replaces the role, forgetting outstanding requests of the old one.
    fn set_role(&mut self, role: RoleState) {
        let changed = role.role() != self.role.role();
        self.role = role;
        self.outstanding.clear();
        if changed {
            self.ready.role = Some(self.role.role());
        }
    }

    fn random_election_timeout_ms(&self, moment: Moment) -> u64 {
        let base = self.config.election_timeout_ms;
        base.saturating_add(moment.random_below(base, 1))
    }

    /// `min(50 ms · rand(2^retries), election.backoff.max.ms)`, never zero.
    fn election_backoff_ms(&self, moment: Moment, retries: u32) -> u64 {
        let slots = 1_u64 << retries.min(ELECTION_BACKOFF_RETRIES_MAX);
        let backoff = ELECTION_BACKOFF_BASE_MS * (1 + moment.random_below(slots, 2));
        backoff.min(self.config.election_backoff_max_ms).max(1)
    }

    fn become_unattached(&mut self, moment: Moment, epoch: Epoch, voted_for: Option<NodeId>) {
        self.set_quorum(QuorumState {
            epoch,
            voted_for,
            leader_id: None,
        });
        let election_deadline_ms = self
            .now_ms
            .saturating_add(self.random_election_timeout_ms(moment));
        self.set_role(RoleState::Unattached(UnattachedState {
            election_deadline_ms,
            bootstrap_fetch_at_ms: self.now_ms,
        }));
    }

    fn become_follower(&mut self, moment: Moment, epoch: Epoch, leader: NodeId) {
        debug_assert_ne!(leader, self.id);
        let voted_for = if epoch == self.quorum.epoch {
            self.quorum.voted_for
        } else {
            None
        };
        self.set_quorum(QuorumState {
            epoch,
            voted_for,
            leader_id: Some(leader),
        });
        self.set_role(RoleState::Follower(FollowerState {
            fetch_deadline_ms: self.now_ms.saturating_add(self.config.fetch_timeout_ms),
            last_fetch_success_ms: None,
            leader_resigned: false,
            next_fetch_at_ms: self.now_ms,
            download: None,
        }));
        self.maybe_send_fetch(moment);
    }

    /// A response or request showed a newer epoch: follow its leader if named, else wait.
    fn observe_newer_epoch(&mut self, moment: Moment, epoch: Epoch, leader: Option<NodeId>) {
        debug_assert!(epoch > self.quorum.epoch);
        match leader {
            Some(leader) if leader != self.id => self.become_follower(moment, epoch, leader),
            _ => self.become_unattached(moment, epoch, None),
        }
    }

    /// A message named the leader of the current epoch; follow it unless already doing so.
    fn observe_current_leader(&mut self, moment: Moment, leader: NodeId) {
        let following = matches!(self.role, RoleState::Follower(_));
        if leader == self.id || (following && self.quorum.leader_id == Some(leader)) {
            return;
        }
        if matches!(self.role, RoleState::Leader(_) | RoleState::Resigned(_)) {
            // Two leaders in one epoch: only possible if election safety is broken. Do not
            // follow; the simulator's checker reports it.
            return;
        }
        self.become_follower(moment, self.quorum.epoch, leader);
    }

    fn become_resigned(&mut self, moment: Moment, preferred_candidates: Vec<NodeId>) {
        let others: BTreeSet<NodeId> = self
            .config
            .voters
            .iter()
            .copied()
            .filter(|voter| *voter != self.id)
            .collect();
        let election_deadline_ms = self
            .now_ms
            .saturating_add(self.random_election_timeout_ms(moment));
        self.set_role(RoleState::Resigned(ResignedState {
            election_deadline_ms,
            unacknowledged: others,
            preferred_candidates,
        }));
        self.send_end_quorum_epoch();
    }

    fn not_leader(&self) -> Error {
        // A resigned leader is still the persisted leader of its epoch, but no use as a hint.
        let leader = self.quorum.leader_id.filter(|leader| *leader != self.id);
        Error::NotLeader {
            leader,
            epoch: self.quorum.epoch,
        }
    }

    // ----- plumbing -----

    fn push_log_op(&mut self, op: LogOp) {
        self.log.apply(&op);
        self.ready.log_ops.push(op);
    }

    fn send_request(&mut self, to: NodeId, message: Message, kind: RequestKind) {
        let correlation_id = self.next_correlation_id;
        self.next_correlation_id = correlation_id.next();
        let _ = self.outstanding.insert(
            correlation_id,
            Outstanding {
                to,
                sent_ms: self.now_ms,
                kind,
            },
        );
        self.ready.messages.push(Envelope {
            from: self.id,
            to,
            correlation_id,
            message,
        });
    }

    fn send_response(&mut self, to: NodeId, correlation_id: CorrelationId, message: Message) {
        self.ready.messages.push(Envelope {
            from: self.id,
            to,
            correlation_id,
            message,
        });
    }

    fn has_outstanding(&self, to: NodeId, kind: RequestKind) -> bool {
        self.outstanding
            .values()
            .any(|request| request.to == to && request.kind == kind)
    }

    fn has_outstanding_fetch(&self) -> bool {
        self.outstanding.values().any(|request| {
            matches!(
                request.kind,
                RequestKind::Fetch { .. } | RequestKind::FetchSnapshot
            )
        })
    }

    fn canary(&self, canary: Canary) -> bool {
        self.config.canary == Some(canary)
    }

    fn set_high_watermark(&mut self, high_watermark: Offset) {
        if high_watermark > self.high_watermark {
            self.high_watermark = high_watermark;
            self.ready.high_watermark = Some(high_watermark);
        }
    }

    /// Hands newly committed entries (and, after a restart or install, the snapshot) to the
    /// state machine, and suggests a snapshot when the log has grown enough.
    fn finish(&mut self) {
        let start = self.log.start_offset();
        if self.applied_end < start {
            // The snapshot supersedes anything applied earlier in this Ready.
            self.ready.apply.clear();
            self.ready.load_snapshot = self.log.snapshot().cloned();
            self.applied_end = start;
            self.bytes_since_snapshot = 0;
        }
        let target = self.high_watermark.min(self.log.end_offset());
        if self.applied_end < target {
            let entries = self.log.range(self.applied_end, target);
            for entry in entries {
                self.bytes_since_snapshot =
                    self.bytes_since_snapshot.saturating_add(entry.size_bytes());
            }
            self.ready.apply.extend_from_slice(entries);
            self.applied_end = target;
        }
        if !self.snapshot_suggested
            && self.bytes_since_snapshot >= self.config.max_record_bytes_between_snapshots
        {
            self.snapshot_suggested = true;
            self.ready.snapshot_suggested = Some(self.applied_end);
        }
    }
}
