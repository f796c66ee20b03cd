//! [`ClassicGroup`]: one group of the classic protocol as a pure state machine (Kafka's
//! `ClassicGroup` with the decisions of `GroupMetadataManager` for JoinGroup, SyncGroup,
//! Heartbeat and LeaveGroup): states Empty, PreparingRebalance, CompletingRebalance, Stable,
//! Dead; member ids, generations, static membership, the rebalance and session clocks.
//!
//! Nothing here waits or reads a clock: every call takes `now` (ms), and answers that Kafka
//! delays (a JoinGroup until the join phase ends, a follower's SyncGroup until the leader's)
//! come back as [`Effects`] from the call (or the [`ClassicGroup::tick`]) that releases them.
//! Each rebalance names its [`Cause`] in the seed's terms.

use std::collections::{BTreeMap, HashMap};

use bytes::Bytes;
use kafka_protocol::ResponseError;

use crate::coordinator::group::record::{GroupValue, MemberValue};
use crate::coordinator::group::view::{GroupState, GroupView};

/// One classic group.
#[derive(Debug, Clone)]
pub struct ClassicGroup {
    /// The state.
    pub state: GroupState,
    /// The generation.
    pub generation: i32,
    /// The protocol type of its members ("consumer").
    pub protocol_type: Option<String>,
    /// The chosen protocol.
    pub protocol: Option<String>,
    /// The leader's member id.
    pub leader: Option<String>,
    /// Members by id.
    pub members: BTreeMap<String, Member>,
    /// Member ids handed out with MEMBER_ID_REQUIRED, not yet joined, with when they expire
    /// (ms): the asking request's session timeout later, as Kafka's pending-member timer.
    pub pending: BTreeMap<String, i64>,
    /// When the join phase ends (ms), while PreparingRebalance.
    pub join_deadline_ms: Option<i64>,
    /// The initial delay: (when it started, its longest end) while it runs.
    pub initial_delay: Option<(i64, i64)>,
    /// When the CompletingRebalance phase ends without all syncs (ms).
    pub sync_deadline_ms: Option<i64>,
    /// The generation whose assignment is being written (CompletingRebalance until it is).
    pub assignment_pending: Option<i32>,
    /// Members given this generation that have not sent SyncGroup yet (Kafka's pending-sync
    /// members): removed when `sync_deadline_ms` passes, even once the group is Stable.
    pub pending_sync: std::collections::BTreeSet<String>,
    /// The cause of the last rebalance.
    pub last_cause: Option<Cause>,
    /// Loaded by this coordinator from the log, no rebalance since.
    pub moved: bool,
    limits: Limits,
}

impl ClassicGroup {
    /// A new, empty group.
    pub fn new(limits: Limits) -> ClassicGroup {
        ClassicGroup {
            state: GroupState::Empty,
            generation: 0,
            protocol_type: None,
            protocol: None,
            leader: None,
            members: BTreeMap::new(),
            pending: BTreeMap::new(),
            join_deadline_ms: None,
            initial_delay: None,
            sync_deadline_ms: None,
            assignment_pending: None,
            pending_sync: Default::default(),
            last_cause: None,
            moved: false,
            limits,
        }
    }

    /// The group as written to the log, loaded by a new coordinator at `now`: Stable with its
    /// members (their sessions start now), or Empty.
    pub fn from_value(value: &GroupValue, limits: Limits, now: i64) -> ClassicGroup {
        let mut group = ClassicGroup::new(limits);
        group.generation = value.generation;
        group.protocol_type = Some(value.protocol_type.clone()).filter(|t| !t.is_empty());
        group.protocol = value.protocol.clone();
        group.leader = value.leader.clone();
        for member in &value.members {
            let protocols = value
                .protocol
                .iter()
                .map(|p| (p.clone(), member.subscription.clone()))
                .collect();
            group.members.insert(
                member.member_id.clone(),
                Member {
                    member_id: member.member_id.clone(),
                    instance_id: member.group_instance_id.clone(),
                    client_id: member.client_id.clone(),
                    client_host: member.client_host.clone(),
                    rebalance_timeout_ms: member.rebalance_timeout_ms,
                    session_timeout_ms: member.session_timeout_ms,
                    protocols,
                    assignment: member.assignment.clone(),
                    awaiting_join: false,
                    awaiting_sync: false,
                    last_heartbeat_ms: now,
                },
            );
        }
        if !group.members.is_empty() {
            group.state = GroupState::Stable;
            group.moved = true;
        }
        group
    }

    /// The group as written to the log.
    pub fn to_value(&self, now: i64) -> GroupValue {
        GroupValue {
            protocol_type: self.protocol_type.clone().unwrap_or_default(),
            generation: self.generation,
            protocol: self.protocol.clone(),
            leader: self.leader.clone(),
            current_state_timestamp: now,
            members: self
                .members
                .values()
                .map(|m| MemberValue {
                    member_id: m.member_id.clone(),
                    group_instance_id: m.instance_id.clone(),
                    client_id: m.client_id.clone(),
                    client_host: m.client_host.clone(),
                    rebalance_timeout_ms: m.rebalance_timeout_ms,
                    session_timeout_ms: m.session_timeout_ms,
                    subscription: self.metadata_of(m),
                    assignment: m.assignment.clone(),
                })
                .collect(),
        }
    }

    /// What OffsetCommit's fencing reads of the group.
    pub fn view(&self) -> GroupView {
        GroupView {
            state: self.state,
            generation_id: self.generation,
            members: self.members.keys().cloned().collect(),
            static_members: self.static_members(),
        }
    }

    /// `group.instance.id` → member id.
    pub fn static_members(&self) -> HashMap<String, String> {
        self.members
            .values()
            .filter_map(|m| m.instance_id.clone().map(|i| (i, m.member_id.clone())))
            .collect()
    }

    fn metadata_of(&self, member: &Member) -> Bytes {
        let protocol = self.protocol.as_deref().unwrap_or_default();
        member
            .protocols
            .iter()
            .find(|(name, _)| name == protocol)
            .map(|(_, metadata)| metadata.clone())
            .unwrap_or_default()
    }

    fn member_of_instance(&self, instance: &str) -> Option<&str> {
        self.members
            .values()
            .find(|m| m.instance_id.as_deref() == Some(instance))
            .map(|m| m.member_id.as_str())
    }

    /// Kafka's `validateMember`: the member id must be current; a static member under
    /// another member id is fenced.
    fn validate_member(
        &self,
        member_id: &str,
        instance: Option<&str>,
    ) -> Result<(), ResponseError> {
        if let Some(instance) = instance {
            return match self.member_of_instance(instance) {
                None => Err(ResponseError::UnknownMemberId),
                Some(current) if current != member_id => Err(ResponseError::FencedInstanceId),
                Some(_) => Ok(()),
            };
        }
        if self.members.contains_key(member_id) {
            Ok(())
        } else {
            Err(ResponseError::UnknownMemberId)
        }
    }

    fn supports(&self, protocol_type: &str, protocols: &[(String, Bytes)]) -> bool {
        if protocol_type.is_empty() || protocols.is_empty() {
            return false;
        }
        if self.members.is_empty() {
            return true;
        }
        self.protocol_type.as_deref() == Some(protocol_type)
            && protocols.iter().any(|(name, _)| {
                self.members
                    .values()
                    .all(|m| m.protocols.iter().any(|(p, _)| p == name))
            })
    }

    /// JoinGroup. The answer is immediate (`Err`-like replies, MEMBER_ID_REQUIRED, a known
    /// member in a settled group) in `Effects.joins` for `request.member_id` or the new id,
    /// or comes later when the join phase ends.
    pub fn join(&mut self, request: &JoinRequest, now: i64) -> Effects {
        let mut effects = Effects::default();
        let reply = |error| JoinReply::error(error, &request.member_id);
        if self.state == GroupState::Dead {
            effects.joins.push((
                request.member_id.clone(),
                reply(ResponseError::CoordinatorNotAvailable),
            ));
            return effects;
        }
        if request.session_timeout_ms < self.limits.min_session_timeout_ms
            || request.session_timeout_ms > self.limits.max_session_timeout_ms
        {
            effects.joins.push((
                request.member_id.clone(),
                reply(ResponseError::InvalidSessionTimeout),
            ));
            return effects;
        }
        if !self.supports(&request.protocol_type, &request.protocols) {
            effects.joins.push((
                request.member_id.clone(),
                reply(ResponseError::InconsistentGroupProtocol),
            ));
            return effects;
        }
        if self.members.is_empty() {
            self.protocol_type = Some(request.protocol_type.clone());
        }
        if request.member_id.is_empty() {
            self.join_new(request, now, &mut effects);
        } else {
            self.join_known(request, now, &mut effects);
        }
        effects
    }

    fn new_member(&self, request: &JoinRequest, member_id: String, now: i64) -> Member {
        Member {
            member_id,
            instance_id: request.instance_id.clone(),
            client_id: request.client_id.clone(),
            client_host: request.client_host.clone(),
            rebalance_timeout_ms: request.rebalance_timeout_ms,
            session_timeout_ms: request.session_timeout_ms,
            protocols: request.protocols.clone(),
            assignment: Bytes::new(),
            awaiting_join: true,
            awaiting_sync: false,
            last_heartbeat_ms: now,
        }
    }

    fn join_new(&mut self, request: &JoinRequest, now: i64, effects: &mut Effects) {
        let member_id = request.new_member_id();
        if let Some(instance) = request.instance_id.as_deref() {
            if let Some(old) = self.member_of_instance(instance).map(str::to_owned) {
                self.replace_static(&old, member_id, request, now, effects);
                return;
            }
        } else if request.version >= 4 {
            let expires = now + i64::from(request.session_timeout_ms);
            self.pending.insert(member_id.clone(), expires);
            effects.joins.push((
                member_id.clone(),
                JoinReply::error(ResponseError::MemberIdRequired, &member_id),
            ));
            return;
        }
        let member = self.new_member(request, member_id.clone(), now);
        self.members.insert(member_id, member);
        self.prepare_rebalance(Cause::Join, now, effects);
        self.maybe_complete_join(now, effects);
    }

    /// A static member rejoining under a new member id: the old id is fenced; a settled
    /// group whose selected protocol stays does not rebalance (a replaced leader is told to
    /// skip the assignment, v9+, or answered as a follower before v9, as Kafka does).
    fn replace_static(
        &mut self,
        old: &str,
        new_id: String,
        request: &JoinRequest,
        now: i64,
        effects: &mut Effects,
    ) {
        let Some(mut member) = self.members.remove(old) else {
            return;
        };
        if member.awaiting_join {
            effects.joins.push((
                old.to_owned(),
                JoinReply::error(ResponseError::FencedInstanceId, old),
            ));
        }
        if member.awaiting_sync {
            effects
                .syncs
                .push((old.to_owned(), Err(ResponseError::FencedInstanceId)));
        }
        member.member_id = new_id.clone();
        member.protocols = request.protocols.clone();
        member.session_timeout_ms = request.session_timeout_ms;
        member.rebalance_timeout_ms = request.rebalance_timeout_ms;
        member.last_heartbeat_ms = now;
        member.awaiting_sync = false;
        let was_leader = self.leader.as_deref() == Some(old);
        if was_leader {
            self.leader = Some(new_id.clone());
        }
        member.awaiting_join = true;
        self.members.insert(new_id.clone(), member);
        // As Kafka: only a change of the group's selected protocol rebalances (a restarted
        // client's metadata differs in what it owned, which does not matter).
        let changed = self.select_protocol() != self.protocol;
        match self.state {
            GroupState::Stable if !changed => {
                if let Some(m) = self.members.get_mut(&new_id) {
                    m.awaiting_join = false;
                }
                // As Kafka: a leader that can skip the assignment (v9+) is told it leads with
                // the members; otherwise the answer names the old leader id, so a replaced
                // leader takes itself for a follower and assigns nothing.
                let skip = was_leader && request.version >= 9;
                let mut reply = self.join_reply(&new_id, skip);
                reply.skip_assignment = skip;
                if was_leader && !skip {
                    reply.leader = old.to_owned();
                }
                effects.joins.push((new_id, reply));
                effects.persist = Some(self.to_value(now));
            }
            GroupState::PreparingRebalance => self.maybe_complete_join(now, effects),
            _ => {
                self.prepare_rebalance(Cause::StaticMemberReplaced, now, effects);
                self.maybe_complete_join(now, effects);
            }
        }
    }

    fn join_known(&mut self, request: &JoinRequest, now: i64, effects: &mut Effects) {
        let id = request.member_id.clone();
        if self.pending.remove(&id).is_some() {
            let member = self.new_member(request, id.clone(), now);
            self.members.insert(id, member);
            self.prepare_rebalance(Cause::Join, now, effects);
            self.maybe_complete_join(now, effects);
            return;
        }
        if let Err(error) = self.validate_member(&id, request.instance_id.as_deref()) {
            effects
                .joins
                .push((id.clone(), JoinReply::error(error, &id)));
            return;
        }
        let is_leader = self.leader.as_deref() == Some(id.as_str());
        let Some(member) = self.members.get_mut(&id) else {
            return;
        };
        let changed = member.protocols != request.protocols;
        member.protocols = request.protocols.clone();
        member.session_timeout_ms = request.session_timeout_ms;
        member.rebalance_timeout_ms = request.rebalance_timeout_ms;
        member.last_heartbeat_ms = now;
        match self.state {
            GroupState::PreparingRebalance => {
                member.awaiting_join = true;
                self.maybe_complete_join(now, effects);
            }
            GroupState::CompletingRebalance if !changed => {
                effects
                    .joins
                    .push((id.clone(), self.join_reply(&id, is_leader)));
            }
            GroupState::Stable if !changed && !is_leader => {
                effects
                    .joins
                    .push((id.clone(), self.join_reply(&id, false)));
            }
            _ => {
                member.awaiting_join = true;
                self.prepare_rebalance(Cause::MetadataChange, now, effects);
                self.maybe_complete_join(now, effects);
            }
        }
    }

    fn join_reply(&self, member_id: &str, with_members: bool) -> JoinReply {
        JoinReply {
            error: None,
            generation: self.generation,
            protocol: self.protocol.clone(),
            protocol_type: self.protocol_type.clone(),
            leader: self.leader.clone().unwrap_or_default(),
            member_id: member_id.to_owned(),
            members: if with_members {
                self.members
                    .values()
                    .map(|m| {
                        (
                            m.member_id.clone(),
                            m.instance_id.clone(),
                            self.metadata_of(m),
                        )
                    })
                    .collect()
            } else {
                Vec::new()
            },
            skip_assignment: false,
        }
    }

    /// Starts a join phase (once: a rebalance in progress keeps its cause and deadline).
    fn prepare_rebalance(&mut self, cause: Cause, now: i64, effects: &mut Effects) {
        if self.state == GroupState::PreparingRebalance {
            if let Some((start, longest)) = self.initial_delay {
                let delay = i64::from(self.limits.initial_rebalance_delay_ms);
                self.join_deadline_ms = Some((now + delay).min(longest).max(start));
            }
            return;
        }
        if self.state == GroupState::CompletingRebalance {
            for member in self.members.values_mut() {
                if member.awaiting_sync {
                    member.awaiting_sync = false;
                    effects.syncs.push((
                        member.member_id.clone(),
                        Err(ResponseError::RebalanceInProgress),
                    ));
                }
            }
        }
        let cause = if self.moved {
            Cause::CoordinatorMoved
        } else {
            cause
        };
        self.moved = false;
        let timeout = self
            .members
            .values()
            .map(|m| i64::from(m.rebalance_timeout_ms))
            .max()
            .unwrap_or(0);
        if self.state == GroupState::Empty {
            let delay = i64::from(self.limits.initial_rebalance_delay_ms);
            self.initial_delay = Some((now, now + timeout.max(delay)));
            self.join_deadline_ms = Some(now + delay.min(timeout.max(delay)));
        } else {
            self.initial_delay = None;
            self.join_deadline_ms = Some(now + timeout);
        }
        self.sync_deadline_ms = None;
        self.assignment_pending = None;
        self.pending_sync.clear();
        self.state = GroupState::PreparingRebalance;
        self.last_cause = Some(cause);
        effects.rebalance = Some(cause);
    }

    fn all_joined(&self) -> bool {
        self.pending.is_empty() && self.members.values().all(|m| m.awaiting_join)
    }

    fn maybe_complete_join(&mut self, now: i64, effects: &mut Effects) {
        if self.state != GroupState::PreparingRebalance {
            return;
        }
        let due = self
            .join_deadline_ms
            .is_some_and(|deadline| now >= deadline);
        if due || (self.initial_delay.is_none() && self.all_joined()) {
            self.complete_join(now, effects);
        }
    }

    /// Ends the join phase: dynamic members that did not rejoin are removed (static ones keep
    /// their place until their session expires, as in Kafka's completeClassicGroupJoin); the
    /// rest get the new generation (the leader, a member that rejoined, with every member's
    /// metadata). When only absent static members are left, the phase is extended by a
    /// rebalance timeout instead, for their sessions to expire.
    fn complete_join(&mut self, now: i64, effects: &mut Effects) {
        self.members
            .retain(|_, m| m.awaiting_join || m.instance_id.is_some());
        self.pending.clear();
        if !self.members.is_empty() && !self.members.values().any(|m| m.awaiting_join) {
            let timeout = self
                .members
                .values()
                .map(|m| i64::from(m.rebalance_timeout_ms))
                .max()
                .unwrap_or(0);
            self.join_deadline_ms = Some(now + timeout);
            self.initial_delay = None;
            return;
        }
        self.join_deadline_ms = None;
        self.initial_delay = None;
        self.generation += 1;
        if self.members.is_empty() {
            self.state = GroupState::Empty;
            self.protocol = None;
            self.leader = None;
            effects.persist = Some(self.to_value(now));
            return;
        }
        self.protocol = self.select_protocol();
        let rejoined = |id: &String| self.members.get(id).is_some_and(|m| m.awaiting_join);
        if !self.leader.as_ref().is_some_and(rejoined) {
            self.leader = self.members.keys().find(|id| rejoined(id)).cloned();
        }
        self.state = GroupState::CompletingRebalance;
        let timeout = self
            .members
            .values()
            .map(|m| i64::from(m.rebalance_timeout_ms))
            .max()
            .unwrap_or(0);
        self.sync_deadline_ms = Some(now + timeout);
        // An absent static member gets no answer now; it learns the generation when it
        // rejoins, and its session clock keeps running.
        let ids: Vec<String> = self
            .members
            .iter()
            .filter(|(_, m)| m.awaiting_join)
            .map(|(id, _)| id.clone())
            .collect();
        self.pending_sync = ids.iter().cloned().collect();
        for id in ids {
            let is_leader = self.leader.as_deref() == Some(id.as_str());
            let reply = self.join_reply(&id, is_leader);
            if let Some(member) = self.members.get_mut(&id) {
                member.awaiting_join = false;
                member.last_heartbeat_ms = now;
            }
            effects.joins.push((id, reply));
        }
    }

    /// DeleteGroups' first step: an Empty group becomes Dead, so a JoinGroup arriving before
    /// the tombstones land is answered COORDINATOR_NOT_AVAILABLE instead of joining a group
    /// about to be deleted.
    ///
    /// # Errors
    /// `NON_EMPTY_GROUP` for a group with members or a rebalance, `GROUP_ID_NOT_FOUND` for
    /// one already being deleted.
    pub fn begin_delete(&mut self) -> Result<(), ResponseError> {
        match self.state {
            GroupState::Empty => {
                self.state = GroupState::Dead;
                Ok(())
            }
            GroupState::Dead => Err(ResponseError::GroupIdNotFound),
            _ => Err(ResponseError::NonEmptyGroup),
        }
    }

    /// The tombstones could not be written: the group is Empty again.
    pub fn abort_delete(&mut self) {
        if self.state == GroupState::Dead {
            self.state = GroupState::Empty;
        }
    }

    /// Kafka's vote: among the protocols every member supports, each member votes for its
    /// first preference; the most votes win (ties to the earliest in the leader's order).
    fn select_protocol(&self) -> Option<String> {
        let first = self.members.values().next()?;
        let candidates: Vec<&String> = first
            .protocols
            .iter()
            .map(|(name, _)| name)
            .filter(|name| {
                self.members
                    .values()
                    .all(|m| m.protocols.iter().any(|(p, _)| p == *name))
            })
            .collect();
        let mut votes: BTreeMap<&String, usize> = BTreeMap::new();
        for member in self.members.values() {
            if let Some((name, _)) = member
                .protocols
                .iter()
                .find(|(p, _)| candidates.contains(&p))
            {
                *votes.entry(name).or_default() += 1;
            }
        }
        let best = votes.values().copied().max()?;
        candidates
            .into_iter()
            .find(|c| votes.get(c) == Some(&best))
            .cloned()
    }
}

mod ops;
#[cfg(test)]
mod tests;
mod types;

pub use crate::coordinator::group::cause::Cause;
pub use ops::{LeaveOutcome, SyncRequest};
pub use types::{Effects, JoinReply, JoinRequest, Limits, MAX_MEMBER_ID_BYTES, Member, SyncReply};
