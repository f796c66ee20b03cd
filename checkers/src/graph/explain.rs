//! The explainer: a cycle found by [`crate::graph`] becomes an [`Anomaly`] a person can check
//! against the history: a one-line chain (`op 3 -rw-> op 7 -wr-> op 3`) and every edge in
//! words. The words come from the analyzer that built the edges ([`Explainer`]), since only it
//! knows what an edge's key and index mean.

use logjam_history::Key;

use crate::anomaly::{Anomaly, AnomalyKind, CycleStep, OpRef, Relation};
use crate::graph::{Edge, Step};

/// Edges spelled out in a cycle's one-line explanation; every edge is in `cycle` anyway.
const CHAIN_SHOWN_MAX: usize = 12;

/// What an analyzer tells the explainer about its nodes and edges.
pub(crate) trait Explainer {
    /// The op behind a node.
    fn op_ref(&self, node: u32) -> OpRef;
    /// The key an edge is about.
    fn key(&self, edge: Edge) -> Key;
    /// One edge in words, e.g. "wr: op 7 read value 3 (offset 2) of key 1, which op 3 sent".
    fn edge(&self, from: u32, to: u32, edge: Edge) -> String;
}

/// The witness for `cycle`: every edge explained, a one-line chain, the ops involved.
pub(crate) fn cycle_anomaly(
    explainer: &impl Explainer,
    kind: AnomalyKind,
    cycle: &[Step],
) -> Anomaly {
    let mut steps = Vec::with_capacity(cycle.len());
    let mut chain = Vec::with_capacity(cycle.len() + 1);
    for (n, &(from, to, edge)) in cycle.iter().enumerate() {
        if n == 0 {
            chain.push(format!("op {}", explainer.op_ref(from).index));
        }
        if n < CHAIN_SHOWN_MAX || n + 1 == cycle.len() {
            chain.push(format!(
                "-{}-> op {}",
                relation_name(edge.relation),
                explainer.op_ref(to).index
            ));
        } else if n == CHAIN_SHOWN_MAX {
            chain.push(format!("... ({} more edges)", cycle.len() - 1 - n));
        }
        steps.push(CycleStep {
            from: explainer.op_ref(from).index,
            to: explainer.op_ref(to).index,
            relation: edge.relation,
            key: explainer.key(edge),
            explanation: explainer.edge(from, to, edge),
        });
    }
    let mut anomaly = Anomaly::new(
        kind,
        cycle.first().map(|s| explainer.key(s.2)),
        format!(
            "{kind} cycle of {} ops: {}; {}",
            cycle.len(),
            chain.join(" "),
            match kind {
                AnomalyKind::G0 => "every edge is a write-write order, so the writes interleave",
                AnomalyKind::G1c => "ops observed each other's writes circularly",
                AnomalyKind::GSingle =>
                    "exactly one op missed a write it should have seen (read skew)",
                _ => "several ops each missed another's write (write skew)",
            }
        ),
    );
    anomaly.ops = cycle.iter().map(|s| explainer.op_ref(s.0)).collect();
    anomaly.cycle = steps;
    anomaly
}

pub(crate) fn relation_name(r: Relation) -> &'static str {
    match r {
        Relation::Ww => "ww",
        Relation::Wr => "wr",
        Relation::Rw => "rw",
    }
}
