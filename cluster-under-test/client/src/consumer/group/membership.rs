//! The pure part of classic group membership: what each coordinator answer means (retry,
//! rediscover the coordinator, reset the member id and rejoin, rejoin, fatal), the member's
//! identity (member id, generation, owned partitions), the poll clock, and the rebalance
//! events every assignment change produces. No I/O and no clock of its own: the shell
//! (`group/coordinator.rs`) feeds it answers and instants.

use std::collections::BTreeSet;
use std::time::Duration;

use crate::ids::TopicPartition;

/// Java's reason for the LeaveGroup a member sends when its poll clock expires.
pub const POLL_TIMEOUT_REASON: &str = "consumer poll timeout has expired. This means the time \
    between subsequent calls to poll() was longer than the configured max.poll.interval.ms, \
    which typically implies that the poll loop is spending too much time processing messages. \
    You can address this either by increasing max.poll.interval.ms or by reducing the maximum \
    size of batches returned in poll() with max.poll.records.";

/// Java's reason for the LeaveGroup of `close()`.
pub const CLOSE_REASON: &str = "the consumer is being closed";

/// Kafka error codes the group protocol reacts to.
pub mod codes {
    /// COORDINATOR_LOAD_IN_PROGRESS.
    pub const COORDINATOR_LOAD_IN_PROGRESS: i16 = 14;
    /// COORDINATOR_NOT_AVAILABLE.
    pub const COORDINATOR_NOT_AVAILABLE: i16 = 15;
    /// NOT_COORDINATOR.
    pub const NOT_COORDINATOR: i16 = 16;
    /// ILLEGAL_GENERATION.
    pub const ILLEGAL_GENERATION: i16 = 22;
    /// UNKNOWN_MEMBER_ID.
    pub const UNKNOWN_MEMBER_ID: i16 = 25;
    /// REBALANCE_IN_PROGRESS.
    pub const REBALANCE_IN_PROGRESS: i16 = 27;
    /// MEMBER_ID_REQUIRED.
    pub const MEMBER_ID_REQUIRED: i16 = 79;
    /// FENCED_INSTANCE_ID.
    pub const FENCED_INSTANCE_ID: i16 = 82;
}

/// What the member does after a coordinator answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reaction {
    /// Nothing wrong.
    Ok,
    /// Try the same request again after a backoff (coordinator loading).
    Retry,
    /// Find the coordinator again, then retry (it moved or is not available).
    Rediscover,
    /// The group is rebalancing: rejoin with the same member id.
    Rejoin,
    /// The coordinator forgot us or our generation: reset member id and generation, rejoin.
    ResetAndRejoin,
    /// Another instance took our `group.instance.id`: the consumer cannot continue.
    Fatal,
    /// Any other error: fail the call.
    Fail,
}

/// The reaction to an error code of JoinGroup, SyncGroup, Heartbeat or OffsetCommit.
pub fn reaction(code: i16) -> Reaction {
    use codes::*;
    match code {
        0 => Reaction::Ok,
        COORDINATOR_LOAD_IN_PROGRESS => Reaction::Retry,
        COORDINATOR_NOT_AVAILABLE | NOT_COORDINATOR => Reaction::Rediscover,
        REBALANCE_IN_PROGRESS => Reaction::Rejoin,
        ILLEGAL_GENERATION | UNKNOWN_MEMBER_ID => Reaction::ResetAndRejoin,
        FENCED_INSTANCE_ID => Reaction::Fatal,
        _ => Reaction::Fail,
    }
}

/// Why the assignment changed, as far as this client knows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RebalanceCause {
    /// The first join of this member (or after `subscribe`).
    Join,
    /// The coordinator answered REBALANCE_IN_PROGRESS (another member joined or left, or a
    /// metadata change).
    RebalanceInProgress,
    /// The coordinator no longer knew the member or generation (e.g. its session expired).
    MemberReset,
    /// This member's own `max.poll.interval.ms` expired; it left the group.
    PollTimeout,
    /// A cooperative rebalance revoked partitions, so the member joined again to get the rest.
    CooperativeFollowUp,
    /// The consumer was closed or unsubscribed.
    Close,
    /// This member led the group and a subscribed topic's partition count changed since its
    /// assignment (Java's "cached metadata has changed"): it rejoins so the group reassigns.
    MetadataChange,
    /// KIP-848: the coordinator sent a new target assignment (another member joined or left,
    /// or the metadata changed; the coordinator's log names which).
    Assignment,
}

impl RebalanceCause {
    /// A short name for histories (`poll-timeout`, `member-reset`, ...).
    pub fn name(&self) -> &'static str {
        match self {
            RebalanceCause::Join => "join",
            RebalanceCause::RebalanceInProgress => "rebalance-in-progress",
            RebalanceCause::MemberReset => "member-reset",
            RebalanceCause::PollTimeout => "poll-timeout",
            RebalanceCause::CooperativeFollowUp => "cooperative-follow-up",
            RebalanceCause::Close => "close",
            RebalanceCause::MetadataChange => "metadata-change",
            RebalanceCause::Assignment => "assignment",
        }
    }
}

/// One assignment change: which partitions this member owned from when.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RebalanceEvent {
    /// The generation the change belongs to (-1 for a revocation outside any generation).
    pub generation: i32,
    /// The member id at the change.
    pub member_id: String,
    /// Partitions added.
    pub assigned: Vec<TopicPartition>,
    /// Partitions taken away.
    pub revoked: Vec<TopicPartition>,
    /// Why, as far as the client knows.
    pub cause: RebalanceCause,
}

/// The member's identity and ownership.
#[derive(Debug, Clone, Default)]
pub struct GroupMember {
    /// Member id, empty before the first JoinGroup answer.
    pub member_id: String,
    /// Generation, -1 when not in one.
    pub generation: i32,
    /// Partitions owned now.
    pub owned: BTreeSet<TopicPartition>,
    /// Whether the member must (re)join before its next fetch, and why.
    pub rejoin: Option<RebalanceCause>,
    events: Vec<RebalanceEvent>,
}

impl GroupMember {
    /// A member that has not joined yet.
    pub fn new() -> GroupMember {
        GroupMember {
            generation: -1,
            rejoin: Some(RebalanceCause::Join),
            ..GroupMember::default()
        }
    }

    /// Forgets member id and generation (UNKNOWN_MEMBER_ID, ILLEGAL_GENERATION, leaving).
    pub fn reset(&mut self) {
        self.member_id.clear();
        self.generation = -1;
    }

    /// Gives up every owned partition (eager rejoin, poll timeout, close); records the event
    /// when there was something to give up.
    pub fn revoke_all(&mut self, cause: RebalanceCause) -> Vec<TopicPartition> {
        let revoked: Vec<TopicPartition> = std::mem::take(&mut self.owned).into_iter().collect();
        if !revoked.is_empty() {
            self.events.push(RebalanceEvent {
                generation: self.generation,
                member_id: self.member_id.clone(),
                assigned: Vec::new(),
                revoked: revoked.clone(),
                cause,
            });
        }
        revoked
    }

    /// A SyncGroup assignment for `generation`. Returns (added, revoked). A cooperative member
    /// that had partitions revoked must rejoin so the group can hand them on (Java's
    /// `ConsumerCoordinator.onJoinComplete`).
    pub fn on_assignment(
        &mut self,
        generation: i32,
        member_id: &str,
        assignment: &[TopicPartition],
        cooperative: bool,
        cause: RebalanceCause,
    ) -> (Vec<TopicPartition>, Vec<TopicPartition>) {
        let next: BTreeSet<TopicPartition> = assignment.iter().cloned().collect();
        let added: Vec<TopicPartition> = next.difference(&self.owned).cloned().collect();
        let revoked: Vec<TopicPartition> = self.owned.difference(&next).cloned().collect();
        self.generation = generation;
        self.member_id = member_id.to_owned();
        self.owned = next;
        self.rejoin =
            (cooperative && !revoked.is_empty()).then_some(RebalanceCause::CooperativeFollowUp);
        self.events.push(RebalanceEvent {
            generation,
            member_id: member_id.to_owned(),
            assigned: added.clone(),
            revoked: revoked.clone(),
            cause,
        });
        (added, revoked)
    }

    /// Drains the recorded events, oldest first.
    pub fn take_events(&mut self) -> Vec<RebalanceEvent> {
        std::mem::take(&mut self.events)
    }

    /// The last event recorded, for a listener.
    pub fn last_event(&self) -> Option<&RebalanceEvent> {
        self.events.last()
    }
}

/// Whether the poll clock has expired: more than `max_poll_interval` since the last poll.
pub fn poll_expired(since_last_poll: Duration, max_poll_interval: Duration) -> bool {
    since_last_poll > max_poll_interval
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tps(list: &[i32]) -> Vec<TopicPartition> {
        list.iter().map(|p| TopicPartition::new("t", *p)).collect()
    }

    #[test]
    fn reactions_follow_kafkas_consumer_coordinator() {
        assert_eq!(reaction(0), Reaction::Ok);
        assert_eq!(reaction(codes::REBALANCE_IN_PROGRESS), Reaction::Rejoin);
        assert_eq!(reaction(codes::UNKNOWN_MEMBER_ID), Reaction::ResetAndRejoin);
        assert_eq!(
            reaction(codes::ILLEGAL_GENERATION),
            Reaction::ResetAndRejoin
        );
        assert_eq!(reaction(codes::NOT_COORDINATOR), Reaction::Rediscover);
        assert_eq!(
            reaction(codes::COORDINATOR_NOT_AVAILABLE),
            Reaction::Rediscover
        );
        assert_eq!(
            reaction(codes::COORDINATOR_LOAD_IN_PROGRESS),
            Reaction::Retry
        );
        assert_eq!(reaction(codes::FENCED_INSTANCE_ID), Reaction::Fatal);
        assert_eq!(reaction(30), Reaction::Fail);
    }

    #[test]
    fn assignments_record_what_moved_and_cooperative_revocation_rejoins() {
        let mut member = GroupMember::new();
        let (added, revoked) =
            member.on_assignment(1, "m", &tps(&[0, 1, 2]), true, RebalanceCause::Join);
        assert_eq!((added, revoked), (tps(&[0, 1, 2]), vec![]));
        assert_eq!(member.rejoin, None);
        let (added, revoked) = member.on_assignment(
            2,
            "m",
            &tps(&[0, 1]),
            true,
            RebalanceCause::RebalanceInProgress,
        );
        assert_eq!((added, revoked), (vec![], tps(&[2])));
        assert_eq!(member.rejoin, Some(RebalanceCause::CooperativeFollowUp));
        // Eager: a revocation does not by itself ask for another round.
        member.on_assignment(
            3,
            "m",
            &tps(&[0]),
            false,
            RebalanceCause::RebalanceInProgress,
        );
        assert_eq!(member.rejoin, None);
        let events = member.take_events();
        assert_eq!(events.len(), 3);
        assert_eq!(events[1].generation, 2);
        assert_eq!(events[1].revoked, tps(&[2]));
        assert!(member.take_events().is_empty());
    }

    #[test]
    fn revoking_all_records_the_cause_once() {
        let mut member = GroupMember::new();
        member.on_assignment(4, "m", &tps(&[0]), false, RebalanceCause::Join);
        member.take_events();
        assert_eq!(member.revoke_all(RebalanceCause::PollTimeout), tps(&[0]));
        assert!(member.revoke_all(RebalanceCause::PollTimeout).is_empty());
        let events = member.take_events();
        assert_eq!(events.len(), 1);
        assert_eq!(events[0].cause.name(), "poll-timeout");
        member.reset();
        assert_eq!((member.member_id.as_str(), member.generation), ("", -1));
    }

    #[test]
    fn the_poll_clock_expires_strictly_after_the_interval() {
        let max = Duration::from_millis(300);
        assert!(!poll_expired(Duration::from_millis(300), max));
        assert!(poll_expired(Duration::from_millis(301), max));
    }
}
