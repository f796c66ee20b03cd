//! Elections: the Vote, BeginQuorumEpoch and EndQuorumEpoch handlers, the pre-vote round
//! (Prospective, KIP-996), the vote round (Candidate), and the election timers of the
//! Unattached, Prospective, Candidate and Resigned states. Leader and follower duties live in
//! `leader.rs` and `follower.rs`.

use crate::{
    Canary, ErrorCode, Message, Moment, NodeId, QuorumState,
    node::{ElectionState, RaftNode, RequestKind, RoleState},
    rpc::{
        begin_quorum_epoch::{BeginQuorumEpochRequest, BeginQuorumEpochResponse},
        end_quorum_epoch::{EndQuorumEpochRequest, EndQuorumEpochResponse},
        vote::{VoteRequest, VoteResponse},
    },
};

impl RaftNode {
    /// Election timers of every state except Leader and Follower.
    pub(super) fn tick_election(&mut self, moment: Moment) {
        let now_ms = self.now_ms;
        match &self.role {
            RoleState::Unattached(state) => {
                if !self.is_voter() {
                    if now_ms >= state.bootstrap_fetch_at_ms {
                        self.send_bootstrap_fetch(moment);
                    }
                } else if now_ms >= state.election_deadline_ms {
                    self.become_prospective(moment, 0);
                }
            }
            RoleState::Prospective(state) | RoleState::Candidate(state) => {
                let due = state.backoff_until_ms.unwrap_or(state.election_deadline_ms);
                if now_ms >= due.min(state.election_deadline_ms) {
                    // KIP-996: a lost or expired round, Prospective or Candidate, starts a new
                    // pre-vote round; only Prospective may become Candidate.
                    self.become_prospective(moment, state.retries.saturating_add(1));
                }
            }
            RoleState::Resigned(state) => {
                if now_ms >= state.election_deadline_ms {
                    self.become_prospective(moment, 0);
                } else {
                    self.send_end_quorum_epoch();
                }
            }
            RoleState::Leader(_) | RoleState::Follower(_) => {}
        }
    }

    /// Starts a pre-vote round at the current epoch.
    pub(super) fn become_prospective(&mut self, moment: Moment, retries: u32) {
        if !self.is_voter() {
            self.become_unattached(moment, self.quorum.epoch, self.quorum.voted_for);
            return;
        }
        let deadline = self
            .now_ms
            .saturating_add(self.random_election_timeout_ms(moment));
        self.set_role(RoleState::Prospective(ElectionState::new(
            deadline, retries, self.id,
        )));
        self.send_vote_requests(true);
        self.maybe_finish_round(moment);
    }

    /// Wins the pre-vote: bumps the epoch, votes for itself (persisted), asks for votes.
    fn become_candidate(&mut self, moment: Moment, retries: u32) {
        let epoch = self.quorum.epoch.next();
        self.set_quorum(QuorumState {
            epoch,
            voted_for: Some(self.id),
            leader_id: None,
        });
        let deadline = self
            .now_ms
            .saturating_add(self.random_election_timeout_ms(moment));
        self.set_role(RoleState::Candidate(ElectionState::new(
            deadline, retries, self.id,
        )));
        self.send_vote_requests(false);
        self.maybe_finish_round(moment);
    }

    fn send_vote_requests(&mut self, pre_vote: bool) {
        let voters: Vec<NodeId> = self
            .config
            .voters
            .iter()
            .copied()
            .filter(|voter| *voter != self.id)
            .collect();
        for voter in voters {
            let request = VoteRequest {
                candidate_epoch: self.quorum.epoch,
                candidate_id: self.id,
                voter_id: voter,
                last_offset_epoch: self.log.last_epoch(),
                last_offset: self.log.end_offset(),
                pre_vote,
            };
            self.send_request(
                voter,
                Message::Vote(request),
                RequestKind::Vote { pre_vote },
            );
        }
    }

    /// Moves on when a round has a majority of grants or of refusals.
    fn maybe_finish_round(&mut self, moment: Moment) {
        let majority = self.config.majority();
        let backoff_ms = match &self.role {
            RoleState::Prospective(state) | RoleState::Candidate(state) => {
                if state.granted.len() >= majority {
                    let retries = state.retries;
                    if matches!(self.role, RoleState::Prospective(_)) {
                        self.become_candidate(moment, retries);
                    } else {
                        self.become_leader(moment);
                    }
                    return;
                }
                if state.rejected.len() < majority || state.backoff_until_ms.is_some() {
                    return;
                }
                self.election_backoff_ms(moment, state.retries)
            }
            _ => return,
        };
        let until = self.now_ms.saturating_add(backoff_ms);
        if let RoleState::Prospective(state) | RoleState::Candidate(state) = &mut self.role {
            state.backoff_until_ms = Some(until);
        }
    }

    /// Vote: the checks of `KafkaRaftClient.handleVoteRequest`, then the per-state grant
    /// decision of KIP-595 (standard votes) and KIP-996 (pre-votes).
    pub(super) fn handle_vote(&mut self, moment: Moment, request: VoteRequest) -> VoteResponse {
        if !self.is_voter() || !self.config.voters.contains(&request.candidate_id) {
            return self.vote_response(Some(ErrorCode::InconsistentVoterSet), false);
        }
        if request.candidate_epoch < self.quorum.epoch {
            return self.vote_response(Some(ErrorCode::FencedLeaderEpoch), false);
        }
        if !request.pre_vote && request.candidate_epoch > self.quorum.epoch {
            self.become_unattached(moment, request.candidate_epoch, None);
        }
        let log_is_up_to_date = (request.last_offset_epoch, request.last_offset)
            >= (self.log.last_epoch(), self.log.end_offset());
        let granted = if request.pre_vote {
            log_is_up_to_date
                && match &self.role {
                    RoleState::Leader(_) | RoleState::Resigned(_) => false,
                    RoleState::Follower(state) => !self.fetched_from_leader_recently(state),
                    _ => true,
                }
        } else {
            let vote_is_free = match self.quorum.voted_for {
                None => true,
                Some(voted) => voted == request.candidate_id || self.canary(Canary::DoubleVote),
            };
            log_is_up_to_date && self.quorum.leader_id.is_none() && vote_is_free
        };
        if granted && !request.pre_vote {
            // Persisted before the response leaves (Ready order), and the timer restarts.
            self.become_unattached(moment, self.quorum.epoch, Some(request.candidate_id));
        }
        self.vote_response(None, granted)
    }

    fn vote_response(&self, error: Option<ErrorCode>, vote_granted: bool) -> VoteResponse {
        VoteResponse {
            error,
            leader_id: self.quorum.leader_id,
            leader_epoch: self.quorum.epoch,
            vote_granted,
        }
    }

    pub(super) fn handle_vote_response(
        &mut self,
        moment: Moment,
        from: NodeId,
        pre_vote: bool,
        response: VoteResponse,
    ) {
        if response.leader_epoch > self.quorum.epoch {
            self.observe_newer_epoch(moment, response.leader_epoch, response.leader_id);
            return;
        }
        if response.leader_epoch == self.quorum.epoch
            && let Some(leader) = response.leader_id
            && !(response.vote_granted && self.quorum.leader_id == Some(leader))
        {
            // KIP-996: a voter that refuses because it still hears from the leader of this
            // epoch sends us back to following it. A *granted* vote naming the leader we already
            // held is no such evidence (the voter has stopped hearing from it too); following it
            // again would stop every election after a leader dies while the survivors still
            // remember it.
            self.observe_current_leader(moment, leader);
            if leader != self.id {
                return;
            }
        }
        let expected_pre_vote = match &self.role {
            RoleState::Prospective(_) => true,
            RoleState::Candidate(_) => false,
            _ => return,
        };
        if pre_vote != expected_pre_vote {
            return;
        }
        if let RoleState::Prospective(state) | RoleState::Candidate(state) = &mut self.role {
            if response.vote_granted && response.error.is_none() {
                let _ = state.granted.insert(from);
            } else {
                let _ = state.rejected.insert(from);
            }
        }
        self.maybe_finish_round(moment);
    }

    /// BeginQuorumEpoch: follow the new leader of this or a newer epoch.
    pub(super) fn handle_begin_quorum_epoch(
        &mut self,
        moment: Moment,
        request: BeginQuorumEpochRequest,
    ) -> BeginQuorumEpochResponse {
        if request.leader_epoch < self.quorum.epoch {
            return self.begin_quorum_epoch_response(Some(ErrorCode::FencedLeaderEpoch));
        }
        if request.leader_epoch > self.quorum.epoch {
            self.observe_newer_epoch(moment, request.leader_epoch, Some(request.leader_id));
        } else {
            self.observe_current_leader(moment, request.leader_id);
        }
        self.begin_quorum_epoch_response(None)
    }

    fn begin_quorum_epoch_response(&self, error: Option<ErrorCode>) -> BeginQuorumEpochResponse {
        BeginQuorumEpochResponse {
            error,
            leader_id: self.quorum.leader_id,
            leader_epoch: self.quorum.epoch,
        }
    }

    pub(super) fn handle_begin_quorum_epoch_response(
        &mut self,
        moment: Moment,
        from: NodeId,
        response: BeginQuorumEpochResponse,
    ) {
        if response.leader_epoch > self.quorum.epoch {
            self.observe_newer_epoch(moment, response.leader_epoch, response.leader_id);
            return;
        }
        if let RoleState::Leader(leader) = &mut self.role
            && response.error.is_none()
        {
            let _ = leader.unacknowledged_begin.remove(&from);
        }
    }

    /// EndQuorumEpoch: the leader resigned; elect a successor soon, the preferred first.
    pub(super) fn handle_end_quorum_epoch(
        &mut self,
        moment: Moment,
        request: EndQuorumEpochRequest,
    ) -> EndQuorumEpochResponse {
        if request.leader_epoch < self.quorum.epoch {
            return self.end_quorum_epoch_response(Some(ErrorCode::FencedLeaderEpoch));
        }
        if request.leader_epoch > self.quorum.epoch {
            self.become_unattached(moment, request.leader_epoch, None);
        }
        let backoff_ms = self.end_epoch_backoff_ms(&request.preferred_candidates);
        let deadline = self.now_ms.saturating_add(backoff_ms);
        match &mut self.role {
            RoleState::Follower(state) if self.quorum.leader_id == Some(request.leader_id) => {
                state.leader_resigned = true;
                state.fetch_deadline_ms = state.fetch_deadline_ms.min(deadline);
            }
            RoleState::Unattached(state) => {
                state.election_deadline_ms = state.election_deadline_ms.min(deadline);
            }
            _ => {}
        }
        self.end_quorum_epoch_response(None)
    }

    /// Kafka's `endEpochElectionBackoff`: the first preferred candidate at once, the others
    /// after an exponential delay by rank, non-candidates after `election.backoff.max.ms`.
    fn end_epoch_backoff_ms(&self, preferred_candidates: &[NodeId]) -> u64 {
        match preferred_candidates
            .iter()
            .position(|candidate| *candidate == self.id)
        {
            Some(0) => 0,
            Some(rank) => {
                let shift = u32::try_from(rank - 1).unwrap_or(u32::MAX).min(10);
                (super::ELECTION_BACKOFF_BASE_MS << shift).min(self.config.election_backoff_max_ms)
            }
            None => self.config.election_backoff_max_ms,
        }
    }

    fn end_quorum_epoch_response(&self, error: Option<ErrorCode>) -> EndQuorumEpochResponse {
        EndQuorumEpochResponse {
            error,
            leader_id: self.quorum.leader_id,
            leader_epoch: self.quorum.epoch,
        }
    }

    pub(super) fn handle_end_quorum_epoch_response(
        &mut self,
        moment: Moment,
        from: NodeId,
        response: EndQuorumEpochResponse,
    ) {
        if response.leader_epoch > self.quorum.epoch {
            self.observe_newer_epoch(moment, response.leader_epoch, response.leader_id);
            return;
        }
        if let RoleState::Resigned(state) = &mut self.role {
            let _ = state.unacknowledged.remove(&from);
        }
    }

    /// Sends EndQuorumEpoch to each voter that has not acknowledged and has none in flight.
    pub(super) fn send_end_quorum_epoch(&mut self) {
        let RoleState::Resigned(state) = &self.role else {
            return;
        };
        let preferred_candidates = state.preferred_candidates.clone();
        let targets: Vec<NodeId> = state
            .unacknowledged
            .iter()
            .copied()
            .filter(|voter| !self.has_outstanding(*voter, RequestKind::EndQuorumEpoch))
            .collect();
        for voter in targets {
            let request = EndQuorumEpochRequest {
                leader_id: self.id,
                leader_epoch: self.quorum.epoch,
                preferred_candidates: preferred_candidates.clone(),
            };
            self.send_request(
                voter,
                Message::EndQuorumEpoch(request),
                RequestKind::EndQuorumEpoch,
            );
        }
    }

    /// Whether a follower heard from its leader within `fetch.timeout.ms` (and the leader has
    /// not resigned): the KIP-996 reason to refuse a pre-vote.
    fn fetched_from_leader_recently(&self, state: &super::FollowerState) -> bool {
        !state.leader_resigned
            && state
                .last_fetch_success_ms
                .is_some_and(|last| self.now_ms < last.saturating_add(self.config.fetch_timeout_ms))
    }
}
