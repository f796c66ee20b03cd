//! The group workload's checker: the queue checker, plus what the members' `rebalance` ops
//! prove about the group's assignments. A classic consumer group hands each partition to at
//! most one member per generation; `double-assign` is two members (different member ids)
//! that, by their own recorded rebalances, owned the same key in the same generation. Each
//! process's ownership is folded from its rebalances in history order (revoked keys leave,
//! assigned keys join); after an event of generation `g` ≥ 0 the process owns what it holds
//! then, in `g`. Rebalances outside any generation (`-1`) claim nothing.

use std::collections::BTreeMap;
use std::collections::BTreeSet;

use logjam_history::{CompletedOp, Function, Header, Key, OpValue, Outcome, Paired, Rebalance};

use crate::anomaly::{Anomaly, AnomalyKind, OpRef};
use crate::checker::{Checker, Findings};
use crate::queue::QueueChecker;

/// Who owned a key in a generation: the member and the rebalance op that shows it.
#[derive(Debug, Clone)]
struct Claim {
    member_id: String,
    op: OpRef,
}

/// Ownership by generation, folded from the members' rebalances.
#[derive(Debug, Default)]
pub struct Ownership {
    /// Each process's keys now.
    owned: BTreeMap<u64, BTreeSet<Key>>,
    /// (generation, key) → the first member seen owning it.
    claims: BTreeMap<(i32, Key), Claim>,
    /// (generation, key, member ids) already reported.
    reported: BTreeSet<(i32, Key, String, String)>,
    /// Every `double-assign` found.
    found: Vec<Anomaly>,
    /// Rebalance ops whose value is not a rebalance, by index.
    malformed: Vec<String>,
    /// Rebalances folded.
    pub rebalances: u64,
}

impl Ownership {
    /// Folds one client op in (only ok `rebalance` ops matter).
    pub fn push_op(&mut self, op: &CompletedOp) {
        if op.f != Function::Rebalance || op.outcome != Outcome::Ok {
            return;
        }
        let change = match &op.value {
            OpValue::Json(json) => serde_json::from_value::<Rebalance>(json.clone()).ok(),
            _ => None,
        };
        let Some(change) = change else {
            self.malformed.push(format!(
                "op {}: a rebalance whose value is not {{generation, member_id, assigned, \
                 revoked, cause}}; ignored",
                op.index()
            ));
            return;
        };
        self.rebalances += 1;
        let owned = self.owned.entry(op.process.0).or_default();
        for key in &change.revoked {
            owned.remove(key);
        }
        owned.extend(change.assigned.iter().copied());
        if change.generation < 0 {
            return;
        }
        let here = OpRef::from_op(op);
        for key in owned.iter().copied() {
            let claim = self
                .claims
                .entry((change.generation, key))
                .or_insert_with(|| Claim {
                    member_id: change.member_id.clone(),
                    op: here.clone(),
                });
            if claim.member_id == change.member_id {
                continue;
            }
            let seen = (
                change.generation,
                key,
                claim.member_id.clone(),
                change.member_id.clone(),
            );
            if !self.reported.insert(seen) {
                continue;
            }
            let mut anomaly = Anomaly::new(
                AnomalyKind::DoubleAssign,
                Some(key),
                format!(
                    "generation {}: member {} ({}) and member {} ({}) both owned key {key}, \
                     each by its own recorded rebalances; a generation gives each partition \
                     to one member",
                    change.generation, claim.member_id, claim.op, change.member_id, here
                ),
            );
            anomaly.ops = vec![claim.op.clone(), here.clone()];
            self.found.push(anomaly);
        }
    }

    /// The anomalies found and the warnings about malformed rebalances.
    pub fn finish(self) -> (Vec<Anomaly>, Vec<String>) {
        (self.found, self.malformed)
    }
}

/// The queue checker and the ownership check, findings combined.
pub struct GroupChecker {
    queue: QueueChecker,
    ownership: Ownership,
}

impl GroupChecker {
    /// A checker for a history with this header.
    pub fn new(header: Header) -> GroupChecker {
        GroupChecker {
            queue: QueueChecker::new(header),
            ownership: Ownership::default(),
        }
    }
}

impl Checker for GroupChecker {
    fn push(&mut self, item: Paired) {
        if let Paired::Client(op) = &item {
            self.ownership.push_op(op);
        }
        self.queue.push(item);
    }

    fn finish(self: Box<Self>) -> Findings {
        let GroupChecker { queue, ownership } = *self;
        let mut findings = Box::new(queue).finish();
        let (found, malformed) = ownership.finish();
        for anomaly in found {
            findings.anomalies.push(anomaly);
        }
        findings.warnings.extend(malformed.into_iter().take(10));
        findings
    }
}
