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
        /// The deadline that passed (a later one armed since supersedes it).
        deadline_ms: i64,
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

    /// Whether `expiry` no longer applies because its clock was re-armed since it fired: a
    /// heartbeat renewed the member's session to a later deadline (Kafka's timer is replaced
    /// by the renewal and never fires).
    pub fn superseded(&self, expiry: &Expiry) -> bool {
        match expiry {
            Expiry::Session {
                group_id,
                member_id,
                deadline_ms,
            } => self
                .session
                .get(&(group_id.clone(), member_id.clone()))
                .is_some_and(|current| current > deadline_ms),
            Expiry::Rebalance { .. } => false,
        }
    }

    /// Re-arms the clock of `expiry` at `deadline_ms` (its fencing could not be written),
    /// unless the member's clock of that kind was armed again meanwhile: a renewal wins.
    pub fn rearm(&mut self, expiry: &Expiry, deadline_ms: i64) {
        match expiry {
            Expiry::Session {
                group_id,
                member_id,
                ..
            } => {
                self.session
                    .entry((group_id.clone(), member_id.clone()))
                    .or_insert(deadline_ms);
            }
            Expiry::Rebalance {
                group_id,
                member_id,
                member_epoch,
            } => {
                self.rebalance
                    .entry((group_id.clone(), member_id.clone()))
                    .or_insert((*member_epoch, deadline_ms));
            }
        }
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
                    deadline_ms: *deadline,
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

#[cfg(test)]
mod tests {
    use super::*;

    fn session(member: &str, deadline_ms: i64) -> TimerOp {
        TimerOp::Session {
            group_id: "g".into(),
            member_id: member.into(),
            deadline_ms,
        }
    }

    /// Regression test: a session clock that fired was fenced even when a heartbeat renewed
    /// the session between the firing and the fencing write; the renewal supersedes it.
    #[test]
    fn a_fired_session_is_superseded_by_a_later_renewal_only() {
        let mut timers = Timers::default();
        timers.apply(&[session("a", 1_000), session("b", 1_000)]);
        let fired = timers.take_expired(1_000);
        assert_eq!(fired.len(), 2);
        let cases = [
            ("no clock since it fired", None, false),
            ("renewed to a later deadline", Some(7_000), true),
            ("re-armed at the same deadline", Some(1_000), false),
        ];
        for (name, renewed, expected) in cases {
            let mut timers = timers.clone();
            if let Some(deadline) = renewed {
                timers.apply(&[session("a", deadline)]);
            }
            assert_eq!(timers.superseded(&fired[0]), expected, "{name}");
            assert!(!timers.superseded(&fired[1]), "{name}: b was not renewed");
        }
        let rebalance = Expiry::Rebalance {
            group_id: "g".into(),
            member_id: "a".into(),
            member_epoch: 3,
        };
        assert!(!timers.superseded(&rebalance));
    }

    /// Regression test: a fencing write that failed re-armed the clock a second later even
    /// when a heartbeat had renewed the session meanwhile, fencing a live member.
    #[test]
    fn a_retry_never_replaces_a_renewed_clock() {
        let mut timers = Timers::default();
        timers.apply(&[session("a", 1_000), session("b", 1_000)]);
        let fired = timers.take_expired(1_000);
        timers.apply(&[session("a", 7_000)]);
        for expiry in &fired {
            timers.rearm(expiry, 2_000);
        }
        let refired = timers.take_expired(2_000);
        assert_eq!(
            refired,
            [Expiry::Session {
                group_id: "g".into(),
                member_id: "b".into(),
                deadline_ms: 2_000
            }],
            "only b, whose session was not renewed, fires again"
        );
        assert_eq!(timers.next_deadline(), Some(7_000));
    }
}
