//! The pure part of KIP-848 membership (`group.protocol=consumer`), as Kafka 4's
//! `ConsumerMembershipManager` and `ConsumerHeartbeatRequestManager` decide it: what each
//! ConsumerGroupHeartbeat carries (everything when joining or after a failed request, then
//! only the fields that changed since they were last sent: Java's `sentFields`), what each
//! answer means (a new member epoch and target assignment; fenced: give every partition up
//! as lost and rejoin at epoch 0; the coordinator moved; fatal), the poll clock's leave
//! (epoch -1, or -2 for a static member) and `close`'s. No I/O and no clock: the shell
//! (`kip848_shell.rs`) sends the requests, feeds the answers and reconciles the target
//! assignment on the consumer's poll, revoking before it assigns, then acknowledges it.
//!
//! States:
//!
//! ```text
//!   Joining --ok--> Member --(target != owned: the consumer reconciles, then acknowledges)
//!      ^               |  \
//!      |   fenced /    |   poll clock expired --> Leaving(stale) --answer--> Stale
//!      |   unknown id  v                                                       |
//!      +---------- Fenced <-- (the consumer released its partitions as lost) --+
//!   close(): Leaving(close) --answer or failure--> Left
//! ```

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

/// The member epoch of a dynamic member leaving the group.
pub const LEAVE_EPOCH: i32 = -1;
/// The member epoch of a static member leaving for now (its assignment waits for it).
pub const LEAVE_STATIC_EPOCH: i32 = -2;

/// Partitions by topic id: how the coordinator names an assignment.
pub type TopicIdAssignment = BTreeMap<uuid::Uuid, BTreeSet<i32>>;

/// Error codes of ConsumerGroupHeartbeat.
pub mod codes {
    /// COORDINATOR_LOAD_IN_PROGRESS.
    pub const COORDINATOR_LOAD_IN_PROGRESS: i16 = 14;
    /// COORDINATOR_NOT_AVAILABLE.
    pub const COORDINATOR_NOT_AVAILABLE: i16 = 15;
    /// NOT_COORDINATOR.
    pub const NOT_COORDINATOR: i16 = 16;
    /// UNKNOWN_MEMBER_ID.
    pub const UNKNOWN_MEMBER_ID: i16 = 25;
    /// FENCED_MEMBER_EPOCH.
    pub const FENCED_MEMBER_EPOCH: i16 = 110;
}

/// Where the member stands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum State {
    /// Sending epoch 0: the first join, or a rejoin after a fence or a poll timeout.
    Joining,
    /// In the group with an epoch; the consumer reconciles any new target assignment.
    Member,
    /// The coordinator fenced the member (FENCED_MEMBER_EPOCH, UNKNOWN_MEMBER_ID): nothing
    /// is sent until the consumer has given its partitions up as lost.
    Fenced,
    /// Sending the leave heartbeat, for the poll clock (`stale`) or for `close`.
    Leaving {
        /// True when the poll clock expired: the member becomes [`State::Stale`] after.
        stale: bool,
    },
    /// Left because the poll clock expired: its partitions are lost, and the next poll
    /// rejoins (Java's `maybeRejoinStaleMember`).
    Stale,
    /// Left for good (`close`).
    Left,
    /// An error no retry fixes (UNRELEASED_INSTANCE_ID, INVALID_REQUEST, ...): the code.
    Fatal(i16),
}

/// The fields of one ConsumerGroupHeartbeat; `None` means "unchanged since last sent".
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Heartbeat {
    /// Member id (the client's; see [`Heartbeat::wire_member_id`] for v0).
    pub member_id: String,
    /// Whether a coordinator has answered with this id (under v0 it names members).
    pub member_id_confirmed: bool,
    /// Member epoch: 0 to join, -1 / -2 to leave.
    pub member_epoch: i32,
    /// `group.instance.id`, on joins only.
    pub instance_id: Option<String>,
    /// `max.poll.interval.ms`, on joins only; -1 otherwise.
    pub rebalance_timeout_ms: i32,
    /// The subscription, when it changed.
    pub subscribed_topic_names: Option<Vec<String>>,
    /// `group.remote.assignor`, when it changed.
    pub server_assignor: Option<String>,
    /// The partitions owned, when they changed (this is the acknowledgement).
    pub owned: Option<TopicIdAssignment>,
}

impl Heartbeat {
    /// The member id to send at `version`: under v0 the coordinator names members, so the
    /// first join goes out with none and the member keeps the id it is answered with (a
    /// rejoin after a fence sends it again, as Java's 3.7 client did); from v1 on (KIP-1082)
    /// the client's own id goes out every time.
    pub fn wire_member_id(&self, version: i16) -> &str {
        if version == 0 && !self.member_id_confirmed {
            ""
        } else {
            &self.member_id
        }
    }
}

/// A ConsumerGroupHeartbeat answer, as the shell decoded it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Answer {
    /// The error code.
    pub error_code: i16,
    /// Member id (the coordinator's, under v0).
    pub member_id: Option<String>,
    /// The member's epoch now.
    pub member_epoch: i32,
    /// How often to heartbeat.
    pub heartbeat_interval_ms: i32,
    /// The assignment, when it changed.
    pub assignment: Option<TopicIdAssignment>,
}

/// What the shell does after an answer or a failed request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Next {
    /// Heartbeat again at the interval (sooner if the consumer acknowledges something).
    Beat,
    /// Back off, then send again (the coordinator is loading).
    Retry,
    /// Find the coordinator again, then send.
    Rediscover,
    /// Stop sending until the consumer acts (fenced, stale, left, fatal).
    Wait,
}

/// What the member last sent, to send only what changed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
struct Sent {
    subscription: Vec<String>,
    assignor: Option<String>,
    owned: TopicIdAssignment,
}

/// One KIP-848 member's decisions.
#[derive(Debug, Clone)]
pub struct Member848 {
    /// Member id: generated by the client (v1), or the coordinator's (v0).
    pub member_id: String,
    /// Whether a coordinator has answered with `member_id`.
    member_id_confirmed: bool,
    /// The epoch the coordinator last gave, 0 before joining.
    pub member_epoch: i32,
    /// The last epoch the member held in the group (kept through a fence or a leave), for
    /// the event that records the partitions it lost.
    pub last_epoch: i32,
    /// Where the member stands.
    pub state: State,
    /// The coordinator's heartbeat interval (0 until the first answer).
    pub heartbeat_interval: Duration,
    subscription: Vec<String>,
    instance_id: Option<String>,
    rebalance_timeout_ms: i32,
    assignor: Option<String>,
    owned: TopicIdAssignment,
    target: Option<TopicIdAssignment>,
    sent: Option<Sent>,
}

impl Member848 {
    /// A member about to join, with the member id the client generated (KIP-1082).
    pub fn new(
        member_id: String,
        subscription: Vec<String>,
        instance_id: Option<String>,
        rebalance_timeout: Duration,
        assignor: Option<String>,
    ) -> Member848 {
        Member848 {
            member_id,
            member_id_confirmed: false,
            member_epoch: 0,
            last_epoch: -1,
            state: State::Joining,
            heartbeat_interval: Duration::ZERO,
            subscription,
            instance_id,
            rebalance_timeout_ms: rebalance_timeout.as_millis().min(i32::MAX as u128) as i32,
            assignor,
            owned: TopicIdAssignment::new(),
            target: None,
            sent: None,
        }
    }

    /// Changes the subscription (sent with the next heartbeat).
    pub fn subscribe(&mut self, topics: Vec<String>) {
        // A stale or fenced member rejoins only once the consumer has given its partitions
        // up ([`Member848::release`]), whatever the subscription.
        self.subscription = topics;
    }

    /// The next heartbeat to send, or `None` when the member must not send now.
    pub fn request(&mut self) -> Option<Heartbeat> {
        match self.state {
            State::Joining => {
                self.sent = Some(Sent {
                    subscription: self.subscription.clone(),
                    assignor: self.assignor.clone(),
                    owned: TopicIdAssignment::new(),
                });
                Some(Heartbeat {
                    member_id: self.member_id.clone(),
                    member_id_confirmed: self.member_id_confirmed,
                    member_epoch: 0,
                    instance_id: self.instance_id.clone(),
                    rebalance_timeout_ms: self.rebalance_timeout_ms,
                    subscribed_topic_names: Some(self.subscription.clone()),
                    server_assignor: self.assignor.clone(),
                    owned: Some(TopicIdAssignment::new()),
                })
            }
            State::Member => {
                let full = self.sent.is_none();
                let sent = self.sent.get_or_insert_with(Sent::default);
                let changed = |differs: bool| full || differs;
                let subscribed = changed(sent.subscription != self.subscription)
                    .then(|| self.subscription.clone());
                let assignor = if changed(sent.assignor != self.assignor) {
                    self.assignor.clone()
                } else {
                    None
                };
                let owned = changed(sent.owned != self.owned).then(|| self.owned.clone());
                *sent = Sent {
                    subscription: self.subscription.clone(),
                    assignor: self.assignor.clone(),
                    owned: self.owned.clone(),
                };
                Some(Heartbeat {
                    member_id: self.member_id.clone(),
                    member_id_confirmed: self.member_id_confirmed,
                    member_epoch: self.member_epoch,
                    // Always, as Java: the coordinator checks it against the member id.
                    instance_id: self.instance_id.clone(),
                    rebalance_timeout_ms: if full { self.rebalance_timeout_ms } else { -1 },
                    subscribed_topic_names: subscribed,
                    server_assignor: assignor,
                    owned,
                })
            }
            State::Leaving { .. } => Some(self.leave_request()),
            State::Fenced | State::Stale | State::Left | State::Fatal(_) => None,
        }
    }

    /// The leave heartbeat: epoch -1, or -2 for a static member (its assignment waits).
    pub fn leave_request(&self) -> Heartbeat {
        Heartbeat {
            member_id: self.member_id.clone(),
            member_id_confirmed: self.member_id_confirmed,
            member_epoch: if self.instance_id.is_some() {
                LEAVE_STATIC_EPOCH
            } else {
                LEAVE_EPOCH
            },
            instance_id: self.instance_id.clone(),
            rebalance_timeout_ms: -1,
            subscribed_topic_names: None,
            server_assignor: None,
            owned: None,
        }
    }

    /// Applies an answer.
    pub fn on_answer(&mut self, answer: &Answer) -> Next {
        use codes::*;
        if answer.heartbeat_interval_ms > 0 {
            self.heartbeat_interval = Duration::from_millis(answer.heartbeat_interval_ms as u64);
        }
        if let State::Leaving { stale } = self.state {
            return match answer.error_code {
                COORDINATOR_LOAD_IN_PROGRESS => Next::Retry,
                COORDINATOR_NOT_AVAILABLE | NOT_COORDINATOR => Next::Rediscover,
                // Left, or already gone: either way nobody holds the place any more.
                _ => {
                    self.state = if stale { State::Stale } else { State::Left };
                    self.member_epoch = 0;
                    Next::Wait
                }
            };
        }
        match answer.error_code {
            0 => {
                if matches!(self.state, State::Fenced | State::Stale | State::Left) {
                    // An answer to a request sent before the member stopped: too late.
                    return Next::Wait;
                }
                if let Some(id) = answer.member_id.as_ref().filter(|id| !id.is_empty()) {
                    self.member_id = id.clone();
                }
                self.member_id_confirmed = true;
                self.member_epoch = answer.member_epoch;
                self.last_epoch = answer.member_epoch;
                self.state = State::Member;
                if let Some(assignment) = &answer.assignment {
                    // Kept even when it equals what is owned now: a reconciliation under way
                    // compares it with what it will have acknowledged (Java keeps every
                    // target and compares when reconciling).
                    self.target = Some(assignment.clone());
                }
                Next::Beat
            }
            COORDINATOR_LOAD_IN_PROGRESS => {
                self.sent = None;
                Next::Retry
            }
            COORDINATOR_NOT_AVAILABLE | NOT_COORDINATOR => {
                self.sent = None;
                Next::Rediscover
            }
            FENCED_MEMBER_EPOCH | UNKNOWN_MEMBER_ID => {
                self.fence();
                Next::Wait
            }
            code => {
                self.state = State::Fatal(code);
                Next::Wait
            }
        }
    }

    /// A request that got no answer (timeout, connection lost): the next one carries every
    /// field, so a coordinator that took the lost one still gets the whole picture.
    pub fn on_failure(&mut self) -> Next {
        self.sent = None;
        if let State::Leaving { stale } = self.state {
            // Leaving is best effort: the session clock removes the member anyway.
            self.state = if stale { State::Stale } else { State::Left };
            self.member_epoch = 0;
            return Next::Wait;
        }
        Next::Rediscover
    }

    fn fence(&mut self) {
        self.state = State::Fenced;
        self.member_epoch = 0;
        self.target = None;
        self.sent = None;
    }

    /// The poll clock expired: leave (the partitions are lost, not revoked).
    pub fn leave_on_poll_timeout(&mut self) {
        if matches!(self.state, State::Member | State::Joining) {
            self.state = State::Leaving { stale: true };
        }
    }

    /// `close`: whether a leave heartbeat is owed: the member holds a place, or a join went
    /// out whose answer may have created one (Java leaves from JOINING too).
    pub fn close(&mut self) -> bool {
        let in_group = match self.state {
            State::Member => true,
            State::Joining => self.sent.is_some(),
            _ => false,
        };
        self.state = State::Left;
        in_group
    }

    /// Whether the consumer must give every partition up as lost: fenced, or its poll clock
    /// expired (from the moment the leave is decided, as Java marks the member stale when it
    /// builds the leave: the group may hand the partitions on before the answer comes).
    pub fn must_release(&self) -> bool {
        matches!(
            self.state,
            State::Fenced | State::Stale | State::Leaving { stale: true }
        )
    }

    /// The consumer gave its partitions up as lost. A fenced or stale member joins again at
    /// epoch 0 (returns true); one whose poll-clock leave is still going out waits for it.
    pub fn release(&mut self) -> bool {
        self.owned.clear();
        self.target = None;
        if !matches!(self.state, State::Fenced | State::Stale) {
            return false;
        }
        self.sent = None;
        self.member_epoch = 0;
        self.state = State::Joining;
        true
    }

    /// Whether the member is in the group at `epoch` with `target` still to reconcile: a
    /// reconciliation that awaited something checks it is still wanted before applying.
    pub fn still_reconciling(&self, epoch: i32, target: &TopicIdAssignment) -> bool {
        self.state == State::Member
            && self.member_epoch == epoch
            && self.target.as_ref() == Some(target)
    }

    /// The target assignment the consumer has still to reconcile.
    pub fn target(&self) -> Option<&TopicIdAssignment> {
        self.target.as_ref()
    }

    /// The consumer now owns `owned` (the target, reconciled): the next heartbeat
    /// acknowledges it, and should go out at once.
    pub fn reconciled(&mut self, owned: TopicIdAssignment) {
        if self.target.as_ref() == Some(&owned) {
            self.target = None;
        }
        self.owned = owned;
    }

    /// Whether a heartbeat should go out now rather than at the interval: joining, leaving,
    /// or an acknowledgement owed.
    pub fn urgent(&self) -> bool {
        match self.state {
            State::Joining | State::Leaving { .. } => true,
            State::Member => self
                .sent
                .as_ref()
                .is_none_or(|sent| sent.owned != self.owned),
            _ => false,
        }
    }
}

#[cfg(test)]
#[path = "kip848_tests.rs"]
mod tests;
