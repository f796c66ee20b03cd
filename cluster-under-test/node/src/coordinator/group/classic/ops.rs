//! [`ClassicGroup`]'s SyncGroup, Heartbeat, LeaveGroup and the clocks ([`ClassicGroup::tick`]):
//! session expiry, the end of a join phase (rebalance timeout or initial delay), a sync phase
//! the leader never completed, members that never sent SyncGroup (Kafka's pending-sync
//! timeout), and member ids handed out but never used; the outcome of an assignment's write
//! ([`ClassicGroup::assignment_written`]). Pure, like `classic.rs`.

use bytes::Bytes;
use kafka_protocol::ResponseError;

use super::{Cause, ClassicGroup, Effects};
use crate::coordinator::group::view::GroupState;

/// What a SyncGroup carries.
#[derive(Debug, Clone)]
pub struct SyncRequest {
    /// `MemberId`.
    pub member_id: String,
    /// `GroupInstanceId`.
    pub instance_id: Option<String>,
    /// `GenerationId`.
    pub generation: i32,
    /// `ProtocolType` (v5+).
    pub protocol_type: Option<String>,
    /// `ProtocolName` (v5+).
    pub protocol: Option<String>,
    /// The leader's assignment: member id → assignment.
    pub assignments: Vec<(String, Bytes)>,
}

/// One member's answer to a LeaveGroup.
pub type LeaveOutcome = (String, Option<String>, Option<ResponseError>);

impl ClassicGroup {
    /// SyncGroup. An immediate answer is in `Effects.syncs` for the member; a follower in
    /// CompletingRebalance waits for the leader's.
    pub fn sync(&mut self, request: &SyncRequest, now: i64, canary_double_assign: bool) -> Effects {
        let mut effects = Effects::default();
        let id = request.member_id.clone();
        let refused = if self.state == GroupState::Dead {
            Some(ResponseError::CoordinatorNotAvailable)
        } else if let Err(error) = self.validate_member(&id, request.instance_id.as_deref()) {
            Some(error)
        } else if request.generation != self.generation {
            Some(ResponseError::IllegalGeneration)
        } else if request
            .protocol_type
            .as_ref()
            .is_some_and(|t| Some(t) != self.protocol_type.as_ref())
            || request
                .protocol
                .as_ref()
                .is_some_and(|p| Some(p) != self.protocol.as_ref())
        {
            Some(ResponseError::InconsistentGroupProtocol)
        } else {
            match self.state {
                GroupState::Empty => Some(ResponseError::UnknownMemberId),
                GroupState::PreparingRebalance => Some(ResponseError::RebalanceInProgress),
                _ => None,
            }
        };
        if let Some(error) = refused {
            effects.syncs.push((id, Err(error)));
            return effects;
        }
        if let Some(member) = self.members.get_mut(&id) {
            member.last_heartbeat_ms = now;
        }
        self.pending_sync.remove(&id);
        if self.pending_sync.is_empty() && self.state == GroupState::Stable {
            self.sync_deadline_ms = None;
        }
        if self.state == GroupState::Stable {
            let assignment = self
                .members
                .get(&id)
                .map(|m| m.assignment.clone())
                .unwrap_or_default();
            effects.syncs.push((id, Ok(assignment)));
            return effects;
        }
        // CompletingRebalance.
        if let Some(member) = self.members.get_mut(&id) {
            member.awaiting_sync = true;
        }
        if self.leader.as_deref() == Some(id.as_str()) && self.assignment_pending.is_none() {
            for member in self.members.values_mut() {
                member.assignment = request
                    .assignments
                    .iter()
                    .find(|(m, _)| *m == member.member_id)
                    .map(|(_, a)| a.clone())
                    .unwrap_or_default();
            }
            // CANARY(double-assign): one member is given the leader's own assignment as well,
            // so two members own the same partitions for this generation.
            if canary_double_assign {
                let leader_assignment = self.members.get(&id).map(|m| m.assignment.clone());
                let other = self.members.keys().find(|m| **m != id).cloned();
                if let (Some(assignment), Some(member)) = (
                    leader_assignment,
                    other.and_then(|o| self.members.get_mut(&o)),
                ) {
                    member.assignment = assignment;
                }
            }
            // As Kafka: the group stays CompletingRebalance and nobody is answered until the
            // assignment's record is written ([`ClassicGroup::assignment_written`]).
            self.assignment_pending = Some(self.generation);
            effects.persist = Some(self.to_value(now));
            effects.assignment = Some(self.generation);
        }
        effects
    }

    /// The write of `generation`'s assignment finished with `written`. Written: the group is
    /// Stable and every member waiting in SyncGroup gets its assignment. Failed (Kafka's
    /// `resetAndPropagateAssignmentError`): they get the write's error, the assignments are
    /// cleared and the group rebalances (`write-failed`). Nothing, when the group moved on.
    pub fn assignment_written(
        &mut self,
        generation: i32,
        written: Result<(), ResponseError>,
        now: i64,
    ) -> Effects {
        let mut effects = Effects::default();
        if self.state != GroupState::CompletingRebalance
            || self.generation != generation
            || self.assignment_pending != Some(generation)
        {
            return effects;
        }
        self.assignment_pending = None;
        match written {
            Ok(()) => {
                self.state = GroupState::Stable;
                if self.pending_sync.is_empty() {
                    self.sync_deadline_ms = None;
                }
                for member in self.members.values_mut() {
                    if member.awaiting_sync {
                        member.awaiting_sync = false;
                        effects
                            .syncs
                            .push((member.member_id.clone(), Ok(member.assignment.clone())));
                    }
                }
            }
            Err(error) => {
                for member in self.members.values_mut() {
                    member.assignment = Bytes::new();
                    if member.awaiting_sync {
                        member.awaiting_sync = false;
                        effects.syncs.push((member.member_id.clone(), Err(error)));
                    }
                }
                self.prepare_rebalance(Cause::WriteFailed, now, &mut effects);
                self.maybe_complete_join(now, &mut effects);
            }
        }
        effects
    }

    /// Heartbeat: keeps the member's session alive; tells it to rejoin during a join phase.
    ///
    /// # Errors
    /// `COORDINATOR_NOT_AVAILABLE` (dead), `UNKNOWN_MEMBER_ID`, `FENCED_INSTANCE_ID`,
    /// `ILLEGAL_GENERATION`, `REBALANCE_IN_PROGRESS`.
    pub fn heartbeat(
        &mut self,
        member_id: &str,
        instance: Option<&str>,
        generation: i32,
        now: i64,
    ) -> Result<(), ResponseError> {
        if self.state == GroupState::Dead {
            return Err(ResponseError::CoordinatorNotAvailable);
        }
        if self.state == GroupState::Empty {
            return Err(ResponseError::UnknownMemberId);
        }
        self.validate_member(member_id, instance)?;
        if generation != self.generation {
            return Err(ResponseError::IllegalGeneration);
        }
        if let Some(member) = self.members.get_mut(member_id) {
            member.last_heartbeat_ms = now;
        }
        if self.state == GroupState::PreparingRebalance {
            return Err(ResponseError::RebalanceInProgress);
        }
        Ok(())
    }

    /// LeaveGroup of `members` (member id, instance id, reason): each leaves or gets its
    /// error; a departure starts a rebalance whose cause is the reason's (`poll-timeout` for
    /// a client whose poll clock expired, `leave` otherwise).
    pub fn leave(
        &mut self,
        members: &[(String, Option<String>, Option<String>)],
        now: i64,
    ) -> (Vec<LeaveOutcome>, Effects) {
        let mut effects = Effects::default();
        let mut outcomes = Vec::new();
        let mut cause = None;
        for (member_id, instance, reason) in members {
            let found = match instance.as_deref() {
                Some(instance) => match self.member_of_instance(instance) {
                    None => Err(ResponseError::UnknownMemberId),
                    Some(current) if !member_id.is_empty() && current != member_id => {
                        Err(ResponseError::FencedInstanceId)
                    }
                    Some(current) => Ok(current.to_owned()),
                },
                None if self.pending.remove(member_id).is_some() => {
                    outcomes.push((member_id.clone(), None, None));
                    continue;
                }
                None if self.members.contains_key(member_id) => Ok(member_id.clone()),
                None => Err(ResponseError::UnknownMemberId),
            };
            match found {
                Err(error) => outcomes.push((member_id.clone(), instance.clone(), Some(error))),
                Ok(id) => {
                    self.remove_member(&id, &mut effects);
                    cause.get_or_insert(Cause::of_leave_reason(reason.as_deref()));
                    outcomes.push((member_id.clone(), instance.clone(), None));
                }
            }
        }
        if let Some(cause) = cause {
            self.member_gone(cause, now, &mut effects);
        }
        (outcomes, effects)
    }

    /// Removes a member, answering what it waits for.
    fn remove_member(&mut self, id: &str, effects: &mut Effects) {
        if let Some(member) = self.members.remove(id) {
            if member.awaiting_join {
                effects.joins.push((
                    id.to_owned(),
                    super::JoinReply::error(ResponseError::UnknownMemberId, id),
                ));
            }
            if member.awaiting_sync {
                effects
                    .syncs
                    .push((id.to_owned(), Err(ResponseError::UnknownMemberId)));
            }
        }
        self.pending_sync.remove(id);
        if self.leader.as_deref() == Some(id) {
            self.leader = None;
        }
    }

    /// After members left or expired: a settled group rebalances; a join phase may now be
    /// complete.
    fn member_gone(&mut self, cause: Cause, now: i64, effects: &mut Effects) {
        match self.state {
            GroupState::Stable | GroupState::CompletingRebalance => {
                self.prepare_rebalance(cause, now, effects);
                self.maybe_complete_join(now, effects);
            }
            GroupState::PreparingRebalance => self.maybe_complete_join(now, effects),
            GroupState::Empty | GroupState::Dead => {}
        }
    }

    /// The clocks at `now`: expired sessions leave (`session-timeout`), a join phase past its
    /// deadline completes, a sync phase past its deadline rebalances without the members that
    /// never synced, unused member ids are dropped.
    pub fn tick(&mut self, now: i64) -> Effects {
        let mut effects = Effects::default();
        let session = |m: &super::Member| m.last_heartbeat_ms + i64::from(m.session_timeout_ms);
        let expired: Vec<String> = self
            .members
            .values()
            .filter(|m| !m.awaiting_join && !m.awaiting_sync && session(m) < now)
            .map(|m| m.member_id.clone())
            .collect();
        self.pending.retain(|_, expires| *expires >= now);
        if !expired.is_empty() {
            for id in &expired {
                self.remove_member(id, &mut effects);
            }
            self.member_gone(Cause::SessionTimeout, now, &mut effects);
        }
        if self.state == GroupState::PreparingRebalance {
            self.maybe_complete_join(now, &mut effects);
        }
        if self.state == GroupState::CompletingRebalance
            && self
                .sync_deadline_ms
                .is_some_and(|deadline| now >= deadline)
        {
            let unsynced: Vec<String> = self
                .members
                .values()
                .filter(|m| !m.awaiting_sync)
                .map(|m| m.member_id.clone())
                .collect();
            for id in &unsynced {
                self.remove_member(id, &mut effects);
            }
            self.prepare_rebalance(Cause::SessionTimeout, now, &mut effects);
            self.maybe_complete_join(now, &mut effects);
        } else if self.state == GroupState::Stable
            && !self.pending_sync.is_empty()
            && self
                .sync_deadline_ms
                .is_some_and(|deadline| now >= deadline)
        {
            // Kafka's pending-sync timeout: a member given the generation that never sent
            // SyncGroup within the rebalance timeout is removed, and the group rebalances.
            let unsynced: Vec<String> = self.pending_sync.iter().cloned().collect();
            for id in &unsynced {
                self.remove_member(id, &mut effects);
            }
            self.member_gone(Cause::SessionTimeout, now, &mut effects);
        }
        effects
    }
}
