//! `Checker` and `Violation`: the Raft safety properties, checked incrementally from what the
//! nodes emit (log ops, high-watermark moves, applied entries) and from their roles after each
//! step. Each violation carries its evidence. The property table is in `main.rs`.

use std::collections::{BTreeMap, HashMap};
use std::fmt;

use logjam_raft::{Entry, Epoch, LogOp, NodeId, Offset, RaftLog, RaftNode, Role};

/// A broken safety (or, after healing, liveness) property, with evidence.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Violation {
    /// Two nodes led the same epoch.
    ElectionSafety {
        epoch: Epoch,
        first: NodeId,
        second: NodeId,
    },
    /// Two logs hold the same `(offset, epoch)` with different contents or different
    /// predecessors (so different prefixes).
    LogMatching {
        node: NodeId,
        offset: Offset,
        epoch: Epoch,
    },
    /// A leader's log lacks (or differs at) an entry committed in an earlier epoch.
    LeaderCompleteness {
        leader: NodeId,
        epoch: Epoch,
        offset: Offset,
    },
    /// Two different entries were committed at the same offset.
    CommitConflict { node: NodeId, offset: Offset },
    /// A node applied an entry different from one applied elsewhere at that offset.
    StateMachineSafety { node: NodeId, offset: Offset },
    /// A node applied an entry no leader had committed.
    AppliedUncommitted { node: NodeId, offset: Offset },
    /// A node's applied sequence skipped or repeated an offset.
    ApplyGap {
        node: NodeId,
        expected: Offset,
        got: Offset,
    },
    /// After healing, the cluster did not converge within the bound.
    Liveness { reason: String },
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{self:?}")
    }
}

#[derive(Default)]
pub struct Checker {
    /// Epoch → the leader seen leading it.
    leaders: BTreeMap<Epoch, NodeId>,
    /// `(offset, epoch)` → (entry, epoch of the entry before it): log matching by induction.
    appended: HashMap<(Offset, Epoch), (Entry, Option<Epoch>)>,
    /// Offset → entry committed there, with the epoch of the leader that first committed it.
    committed: BTreeMap<Offset, (Entry, Epoch)>,
    /// Offset → entry applied there by some node.
    applied: BTreeMap<Offset, Entry>,
    /// `(node, epoch)` pairs whose leadership was already checked for completeness.
    completeness_checked: std::collections::BTreeSet<(NodeId, Epoch)>,
    /// The high watermark last seen per leader-epoch.
    leader_high_watermarks: HashMap<(NodeId, Epoch), Offset>,
    pub leaders_elected: u64,
    pub max_epoch: Epoch,
}

impl Checker {
    /// Log matching: checked on every append against everything ever appended anywhere.
    /// `before` is the node's log before the op.
    pub fn observe_log_op(
        &mut self,
        node: NodeId,
        before: &RaftLog,
        op: &LogOp,
    ) -> Result<(), Violation> {
        let LogOp::Append(entries) = op else {
            return Ok(());
        };
        let mut previous = before
            .end_offset()
            .previous()
            .and_then(|o| before.epoch_at(o));
        for entry in entries {
            let key = (entry.offset, entry.epoch);
            match self.appended.get(&key) {
                Some((known, known_previous)) => {
                    if known != entry || *known_previous != previous {
                        return Err(Violation::LogMatching {
                            node,
                            offset: entry.offset,
                            epoch: entry.epoch,
                        });
                    }
                }
                None => {
                    let _ = self.appended.insert(key, (entry.clone(), previous));
                }
            }
            previous = Some(entry.epoch);
        }
        Ok(())
    }

    /// A leader moved its high watermark to `to`: everything below is committed. The first
    /// move of each leader-epoch re-checks its whole log against earlier commits.
    pub fn observe_commit(&mut self, node: &RaftNode, to: Offset) -> Result<(), Violation> {
        let key = (node.id(), node.epoch());
        let from = self
            .leader_high_watermarks
            .get(&key)
            .copied()
            .unwrap_or(Offset::ZERO);
        let _ = self.leader_high_watermarks.insert(key, to);
        for entry in node.log().range(from, to) {
            match self.committed.get(&entry.offset) {
                Some((known, _)) if known != entry => {
                    return Err(Violation::CommitConflict {
                        node: node.id(),
                        offset: entry.offset,
                    });
                }
                Some(_) => {}
                None => {
                    let _ = self
                        .committed
                        .insert(entry.offset, (entry.clone(), node.epoch()));
                }
            }
        }
        Ok(())
    }

    /// State-machine safety and applied ⊆ committed, for entries handed to a node's state
    /// machine (directly or through a snapshot).
    pub fn observe_apply(&mut self, node: NodeId, entry: &Entry) -> Result<(), Violation> {
        if let Some(known) = self.applied.get(&entry.offset) {
            if known != entry {
                return Err(Violation::StateMachineSafety {
                    node,
                    offset: entry.offset,
                });
            }
        } else {
            let _ = self.applied.insert(entry.offset, entry.clone());
        }
        match self.committed.get(&entry.offset) {
            Some((known, _)) if known == entry => Ok(()),
            _ => Err(Violation::AppliedUncommitted {
                node,
                offset: entry.offset,
            }),
        }
    }

    /// Election safety and leader completeness, from the roles after a step.
    pub fn observe_roles<'a>(
        &mut self,
        nodes: impl Iterator<Item = &'a RaftNode>,
    ) -> Result<(), Violation> {
        for node in nodes {
            self.max_epoch = self.max_epoch.max(node.epoch());
            if node.role() != Role::Leader {
                continue;
            }
            let epoch = node.epoch();
            match self.leaders.get(&epoch) {
                Some(first) if *first != node.id() => {
                    return Err(Violation::ElectionSafety {
                        epoch,
                        first: *first,
                        second: node.id(),
                    });
                }
                Some(_) => {}
                None => {
                    let _ = self.leaders.insert(epoch, node.id());
                    self.leaders_elected += 1;
                }
            }
            if self.completeness_checked.insert((node.id(), epoch)) {
                let log = node.log();
                for (offset, (entry, commit_epoch)) in self.committed.range(log.start_offset()..) {
                    // Raft §5.4: committed in an earlier epoch ⇒ in every later leader's log.
                    if *commit_epoch >= epoch {
                        continue;
                    }
                    if log.entry(*offset) != Some(entry) {
                        return Err(Violation::LeaderCompleteness {
                            leader: node.id(),
                            epoch,
                            offset: *offset,
                        });
                    }
                }
            }
        }
        Ok(())
    }
}
