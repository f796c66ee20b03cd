//! The two per-member clocks of the new protocol, kept in memory beside the replayed state
//! (Kafka keeps them in its coordinator timer, never in the log): the session deadline
//! (`group.consumer.session.timeout.ms` after the last heartbeat) and the rebalance deadline
//! (the member's `RebalanceTimeoutMs` after it was asked to revoke, for that member epoch).

use std::collections::BTreeMap;

use super::record::MemberState;
use super::state::ConsumerGroups;

/// A change to the clocks, produced by a decision and applied once its records are written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TimerOp {
    /// (Re)arms the member's session deadline.
    Session {
        /// The group.
        group_id: String,
        /// The member.
        member_id: String,
        /// When it expires.
        deadline_ms: i64,
    },
    /// Arms the member's revocation deadline for `member_epoch`.
    Rebalance {
        /// The group.
        group_id: String,
        /// The member.
        member_id: String,
        /// The epoch it must move past.
        member_epoch: i32,
        /// When it expires.
        deadline_ms: i64,
    },
    /// Cancels the member's revocation deadline.
    CancelRebalance {
        /// The group.
        group_id: String,
        /// The member.
        member_id: String,
    },
    /// Cancels both (the member is gone).
    CancelAll {
        /// The group.
        group_id: String,
        /// The member.
        member_id: String,
    },
}

/// A clock that fired.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Expiry {
    /// No heartbeat within the session timeout.
    Session {
        /// The group.
        group_id: String,
        /// The member.
        member_id: String,
    },
    /// No revocation within the rebalance timeout.
    Rebalance {
        /// The group.
        group_id: String,
        /// The member.
        member_id: String,
        /// The epoch it was stuck at.
        member_epoch: i32,
    },
}

/// The armed clocks.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Timers {
    session: BTreeMap<(String, String), i64>,
    rebalance: BTreeMap<(String, String), (i32, i64)>,
}

impl Timers {
    /// Applies the clock changes of a written outcome.
    pub fn apply(&mut self, ops: &[TimerOp]) {
        for op in ops {
            match op {
                TimerOp::Session {
                    group_id,
                    member_id,
                    deadline_ms,
                } => {
                    self.session
                        .insert((group_id.clone(), member_id.clone()), *deadline_ms);
                }
                TimerOp::Rebalance {
                    group_id,
                    member_id,
                    member_epoch,
                    deadline_ms,
                } => {
                    self.rebalance.insert(
                        (group_id.clone(), member_id.clone()),
                        (*member_epoch, *deadline_ms),
                    );
                }
                TimerOp::CancelRebalance {
                    group_id,
                    member_id,
                } => {
                    self.rebalance
                        .remove(&(group_id.clone(), member_id.clone()));
                }
                TimerOp::CancelAll {
                    group_id,
                    member_id,
                } => {
                    let key = (group_id.clone(), member_id.clone());
                    self.session.remove(&key);
                    self.rebalance.remove(&key);
                }
            }
        }
    }

    /// Arms every clock after a load, as Kafka does: a session for every member from now,
    /// and a revocation deadline for every member still revoking.
    pub fn on_loaded(&mut self, groups: &ConsumerGroups, now_ms: i64, session_timeout_ms: i32) {
        self.session.clear();
        self.rebalance.clear();
        for group in groups.groups.values() {
            for member in group.members.values() {
                let key = (group.group_id.clone(), member.member_id.clone());
                self.session
                    .insert(key.clone(), now_ms + i64::from(session_timeout_ms));
                if member.current.state == MemberState::UnrevokedPartitions {
                    let deadline =
                        now_ms + i64::from(member.subscription.rebalance_timeout_ms.max(0));
                    self.rebalance
                        .insert(key, (member.current.member_epoch, deadline));
                }
            }
        }
    }

    /// The earliest armed deadline, for the shell's sleep.
    pub fn next_deadline(&self) -> Option<i64> {
        let rebalance = self.rebalance.values().map(|(_, deadline)| *deadline);
        self.session.values().copied().chain(rebalance).min()
    }

    /// Disarms and returns every clock whose deadline is at or before `now_ms`, sessions
    /// first, each in (group, member) order.
    pub fn take_expired(&mut self, now_ms: i64) -> Vec<Expiry> {
        let mut fired = Vec::new();
        self.session.retain(|(group_id, member_id), deadline| {
            let keep = *deadline > now_ms;
            if !keep {
                fired.push(Expiry::Session {
                    group_id: group_id.clone(),
                    member_id: member_id.clone(),
                });
            }
            keep
        });
        self.rebalance
            .retain(|(group_id, member_id), (member_epoch, deadline)| {
                let keep = *deadline > now_ms;
                if !keep {
                    fired.push(Expiry::Rebalance {
                        group_id: group_id.clone(),
                        member_id: member_id.clone(),
                        member_epoch: *member_epoch,
                    });
                }
                keep
            });
        fired
    }
}
