//! The queue's dependency analyzer: ww, wr and rw edges between ops over each key's version
//! order, fed to [`crate::graph`] for `G0`, `G1c`, `G-single` and `G2`, and `partial-read`.
//!
//! Nodes are client ops; writers must have committed, readers must be `ok`. Edges, per key,
//! over the dense version order `v_0, v_1, ...` (representative values):
//!
//! - **ww**: the writer of v_i → the writer of v_(i+1) (only when ww edges are on: header
//!   `config.ww_deps`, default true, as Jepsen's `--ww-deps`).
//! - **wr**: the writer of v → every op that read v.
//! - **rw** (anti-dependency, absent from Jepsen's Kafka checker): if T1's highest read index
//!   of k is i, then T1 → the writer of v_(i+1): T1 did not see that write.
//!
//! **partial-read** is not a cycle class: when T1 read some of T2's records (wr T2 → T1) and
//! stopped, on some key, right before another of T2's records, the rw edge T1 → T2 would
//! close the two-op cycle T1 -rw-> T2 -wr-> T1. That is one op observing part of one write
//! (Adya's intermediate read G1b on one key, a fractured read across keys), not two ops each
//! missing the other: it is reported as `partial-read` and the rw edge is left out, so
//! G-single and G2 are only ever cycles through other ops. A longer cycle that needed that
//! very rw edge can then be missed (never invented).

use logjam_history::{Key, OpIndex};

use crate::anomaly::{Anomalies, Anomaly, AnomalyKind, OpRef, Relation};
use crate::graph::explain::{self, Explainer};
use crate::graph::{self, Edge, GraphStats, Hints, Step};
use crate::queue::index::{KeyId, NO_INDEX, NO_OP, OpId, QueueIndex, ReadRecord};

/// Infers the edges, finds cycles through [`crate::graph`], reports them explained.
pub(crate) fn check(index: &QueueIndex, ww_edges: bool, out: &mut Anomalies) -> GraphStats {
    let mut stats = GraphStats::default();
    let edges = build_edges(index, ww_edges, &mut stats, out);
    // Fast path for plain send/poll histories: when every writer sits at one position of one
    // log, ww edges form disjoint paths (no ww cycle); when, in addition, no op both reads and
    // writes, wr edges only enter pure readers, which have no ww/wr out-edges, so the ww+wr
    // subgraph is acyclic too and G0, G1c and G-single are impossible.
    let hints = if edges.is_empty() {
        Hints::default()
    } else {
        let shape = Shape::of(index);
        Hints {
            ww_acyclic: shape.writers_single_position,
            wwr_acyclic: shape.writers_single_position && !shape.has_read_write_ops,
        }
    };
    let cycles = graph::find_cycles(edges, index.ops.len(), ww_edges, hints, &mut stats);
    for (kind, cycle) in cycles {
        out.push(explain::cycle_anomaly(index, kind, &cycle));
    }
    stats
}

/// True when `next` is the record right after `read` in the same key's log, both are the
/// representative values there, and both writers committed: then the ww edge between the two
/// writers plus the wr edge of `next` imply the wr edge of `read`.
fn implied_by_next_read(index: &QueueIndex, read: &ReadRecord, next: Option<&ReadRecord>) -> bool {
    let Some(next) = next else {
        return false;
    };
    let log = &index.keys[read.key as usize];
    next.key == read.key
        && next.index == read.index + 1
        && log.value_at(read.index) == Some(read.value)
        && log.value_at(next.index) == Some(next.value)
        && index.committed_writer_of(next).is_some()
}

fn build_edges(
    index: &QueueIndex,
    ww_edges: bool,
    stats: &mut GraphStats,
    out: &mut Anomalies,
) -> Vec<Step> {
    let mut edges: Vec<Step> = Vec::with_capacity(index.ops.len() * 2);
    let committed = |writer: OpId| writer != NO_OP && index.ops[writer as usize].committed;
    if ww_edges {
        for (key, log) in index.keys.iter().enumerate() {
            let key = key as KeyId;
            let mut previous: Option<OpId> = None;
            for (i, slot) in log.log.iter().enumerate() {
                let writer = committed(slot.writer).then_some(slot.writer);
                if let (Some(a), Some(b)) = (previous, writer)
                    && a != b
                {
                    let edge = Edge {
                        relation: Relation::Ww,
                        key,
                        index: i as u32 - 1,
                    };
                    edges.push((a, b, edge));
                    stats.ww_edges += 1;
                }
                previous = writer;
            }
        }
    }
    // Highest read index per key of the current op.
    let mut highest: Vec<(KeyId, u32)> = Vec::new();
    let mut reads: Vec<ReadRecord> = Vec::new();
    // Per writer: the last op that read one of its records, and that record (key, index).
    // Stamped with the reader's id, so nothing is cleared between ops: O(1) per read even for
    // final polls that return a whole log.
    let mut read_by: Vec<OpId> = vec![NO_OP; index.ops.len()];
    let mut read_at: Vec<(KeyId, u32)> = vec![(0, 0); index.ops.len()];
    for (id, record) in index.ops.iter().enumerate() {
        let id = id as OpId;
        if record.op.outcome != logjam_history::Outcome::Ok || record.reads.is_empty() {
            continue;
        }
        highest.clear();
        reads.clear();
        reads.extend(index.reads_of(id));
        let mut last_edge: Option<(OpId, KeyId)> = None;
        for (j, read) in reads.iter().enumerate() {
            match highest.iter_mut().find(|h| h.0 == read.key) {
                Some(h) => h.1 = h.1.max(read.index),
                None => highest.push((read.key, read.index)),
            }
            let Some(writer) = index.committed_writer_of(read) else {
                continue;
            };
            if writer != id && read_by[writer as usize] != id {
                read_by[writer as usize] = id;
                read_at[writer as usize] = (read.key, read.index);
            }
            if writer == id || last_edge == Some((writer, read.key)) {
                continue;
            }
            // With ww edges, writer(v_i) -ww-> writer(v_(i+1)) -wr-> this op already connects
            // the writer of v_i when the op also read v_(i+1): skip the implied edge. This
            // keeps the graph near one wr edge per key per read, not one per record.
            if ww_edges && implied_by_next_read(index, read, reads.get(j + 1)) {
                continue;
            }
            last_edge = Some((writer, read.key));
            let edge = Edge {
                relation: Relation::Wr,
                key: read.key,
                index: read.index,
            };
            edges.push((writer, id, edge));
            stats.wr_edges += 1;
        }
        for &(key, top) in &highest {
            let log = &index.keys[key as usize];
            let Some(next) = log.log.get(top as usize + 1) else {
                continue;
            };
            if committed(next.writer) && next.writer != id {
                // The op read part of next.writer's records and stopped before this one: the
                // two-op cycle reader -rw-> writer -wr-> reader is a partial read of one
                // write, not an anti-dependency cycle between two (see the module doc).
                if read_by[next.writer as usize] == id {
                    let (seen_key, seen_index) = read_at[next.writer as usize];
                    let seen = (next.writer, seen_key, seen_index);
                    out.push(partial_read(index, id, key, top, seen));
                    continue;
                }
                let edge = Edge {
                    relation: Relation::Rw,
                    key,
                    index: top,
                };
                edges.push((id, next.writer, edge));
                stats.rw_edges += 1;
            }
        }
    }
    edges
}

/// Facts about the history's shape that rule whole cycle classes out.
struct Shape {
    /// Every committed writer's values occupy at most one position across all logs.
    writers_single_position: bool,
    /// Some ok op both read and (committed) wrote.
    has_read_write_ops: bool,
}

impl Shape {
    fn of(index: &QueueIndex) -> Shape {
        let mut positions = vec![0u8; index.ops.len()];
        let mut writers_single_position = true;
        'keys: for log in &index.keys {
            for slot in &log.log {
                let writers = std::iter::once(slot.value)
                    .chain(slot.others.iter().map(|o| o.0))
                    .filter_map(|v| log.value(v).and_then(|i| i.writer));
                for writer in writers {
                    let count = &mut positions[writer as usize];
                    *count = count.saturating_add(1);
                    if *count > 1 {
                        writers_single_position = false;
                        break 'keys;
                    }
                }
            }
        }
        let has_read_write_ops = index.ops.iter().any(|r| {
            r.committed
                && r.op.outcome == logjam_history::Outcome::Ok
                && !r.reads.is_empty()
                && !r.sends.is_empty()
        });
        Shape {
            writers_single_position,
            has_read_write_ops,
        }
    }
}

/// `reader` read key `key` up to dense index `top`, and the next record there was sent by the
/// op that also sent `seen` (a record `reader` did read): it saw part of one op's records.
fn partial_read(
    index: &QueueIndex,
    reader: OpId,
    key: KeyId,
    top: u32,
    seen: (OpId, KeyId, u32),
) -> Anomaly {
    let (writer, seen_key, seen_index) = seen;
    let log = &index.keys[key as usize];
    let seen_log = &index.keys[seen_key as usize];
    let at = |log: &crate::queue::index::KeyLog, i: u32| match (log.value_at(i), log.offset_at(i)) {
        (Some(v), Some(o)) => format!("value {v} (offset {o})"),
        _ => "?".to_owned(),
    };
    let mut anomaly = Anomaly::new(
        AnomalyKind::PartialRead,
        Some(log.key),
        format!(
            "{} read {} of key {}, sent by {}, but read key {} only up to {}; the next record \
             there, {}, was sent by the same op: it saw part of that op's records",
            index.describe(reader),
            at(seen_log, seen_index),
            seen_log.key,
            index.describe(writer),
            log.key,
            at(log, top),
            at(log, top + 1),
        ),
    );
    anomaly.ops = vec![index.op_ref(reader), index.op_ref(writer)];
    anomaly.offsets = log.offset_at(top + 1).into_iter().collect();
    anomaly.values = log.value_at(top + 1).into_iter().collect();
    anomaly
}

impl Explainer for QueueIndex {
    fn op_ref(&self, node: u32) -> OpRef {
        QueueIndex::op_ref(self, node)
    }

    fn key(&self, edge: Edge) -> Key {
        QueueIndex::key(self, edge.key)
    }

    fn edge(&self, from: OpId, to: OpId, edge: Edge) -> String {
        let index = self;
        let log = &index.keys[edge.key as usize];
        let at = |i: u32| {
            if i == NO_INDEX {
                return "?".to_owned();
            }
            match (log.value_at(i), log.offset_at(i)) {
                (Some(v), Some(o)) => format!("value {v} (offset {o})"),
                _ => "?".to_owned(),
            }
        };
        let (a, b): (OpIndex, OpIndex) = (index.op(from).index(), index.op(to).index());
        match edge.relation {
            Relation::Ww => format!(
                "ww: op {a} sent {} to key {}, and op {b} sent the next record, {}",
                at(edge.index),
                log.key,
                at(edge.index + 1)
            ),
            Relation::Wr => format!(
                "wr: op {b} read {} of key {}, which op {a} sent",
                at(edge.index),
                log.key
            ),
            Relation::Rw => format!(
                "rw: op {a} read key {} only up to {}, and op {b} sent the next record, {}, so op {a} \
             did not see op {b}'s write",
                log.key,
                at(edge.index),
                at(edge.index + 1)
            ),
        }
    }
}
