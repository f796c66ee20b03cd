//! Dependency cycles between ops: `G0`, `G1c`, `G-single`, `G2`.
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
//! Cycle classes (Adya; Elle's names): **G0** ww edges only; **G1c** ww and wr with at least
//! one wr; **G-single** exactly one rw; **G2** two or more rw.
//!
//! **partial-read** is not a cycle class: when T1 read some of T2's records (wr T2 → T1) and
//! stopped, on some key, right before another of T2's records, the rw edge T1 → T2 would
//! close the two-op cycle T1 -rw-> T2 -wr-> T1. That is one op observing part of one write
//! (Adya's intermediate read G1b on one key, a fractured read across keys), not two ops each
//! missing the other: it is reported as `partial-read` and the rw edge is left out, so
//! G-single and G2 are only ever cycles through other ops. A longer cycle that needed that
//! very rw edge can then be missed (never invented).
//!
//! Graph: a petgraph `Csr` (compressed sparse rows: one contiguous adjacency array, the
//! cache-friendly layout for a million ops). Parallel relations between the same two ops
//! are merged into one edge carrying the strongest-for-cycles relation (ww, then wr, then rw):
//! every subgraph we search is a down-set of that order, so nothing is lost.
//!
//! Search: strongly connected components of the whole graph (petgraph's Tarjan, run on a
//! thread with a stack sized to the graph because it recurses once per node along a path).
//! Inside each non-trivial component, components of the ww-only and ww+wr subgraphs locate G0
//! and G1c candidates, and a breadth-first search closes each candidate edge into a shortest
//! cycle: the witness. G-single is an rw edge u → v closed by
//! a ww/wr path v ⇝ u; G2 an rw edge closed by a path with another rw. Each component yields
//! at most one witness per class; `count` is the number of components showing the class.
//! Searches over rw edges try at most `RW_ATTEMPTS` (4) edges per component, so a G-single or G2
//! hidden behind many others can be missed (never invented).

use logjam_history::OpIndex;
use petgraph::Directed;
use petgraph::algo::TarjanScc;
use petgraph::csr::Csr;
use petgraph::visit::EdgeRef;

use crate::anomaly::{Anomalies, Anomaly, AnomalyKind, CycleStep, Relation};
use crate::queue::index::{KeyId, NO_INDEX, NO_OP, OpId, QueueIndex, ReadRecord, range};

/// rw edges tried per component when closing G-single/G2 cycles.
pub(crate) const RW_ATTEMPTS: usize = 4;

/// Edges spelled out in a cycle's one-line explanation; every edge is in `cycle` anyway.
const CHAIN_SHOWN_MAX: usize = 12;

/// Marker for "no component / no node".
const NONE: u32 = u32::MAX;

/// Stack reserved per graph node for the recursive SCC search (a frame is ~100 bytes), plus a
/// fixed floor. Only the pages actually touched count towards memory.
const SCC_STACK_BYTES_PER_NODE: usize = 256;
const SCC_STACK_BYTES_MIN: usize = 16 << 20;

/// One dependency edge (the strongest relation between its two ops, see the module doc).
#[derive(Clone, Copy, Debug)]
struct Edge {
    relation: Relation,
    key: KeyId,
    /// Dense index the edge is about: ww v_i→v_(i+1) and rw "read up to i" carry i; wr carries
    /// the index of the value read.
    index: u32,
}

type Graph = Csr<(), Edge, Directed, u32>;

/// A cycle step: (from op, to op, edge).
type Step = (u32, u32, Edge);

fn rank(relation: Relation) -> u8 {
    match relation {
        Relation::Ww => 0,
        Relation::Wr => 1,
        Relation::Rw => 2,
    }
}

/// Sizes of the dependency graph, for the report's stats.
#[derive(Debug, Clone, Copy, Default, serde::Serialize)]
pub struct GraphStats {
    /// Ops with at least one edge.
    pub nodes: u64,
    /// ww edges.
    pub ww_edges: u64,
    /// wr edges.
    pub wr_edges: u64,
    /// rw edges.
    pub rw_edges: u64,
    /// Strongly connected components with a cycle.
    pub cyclic_components: u64,
}

/// Builds the graph, finds cycles, reports them.
pub(crate) fn check(index: &QueueIndex, ww_edges: bool, out: &mut Anomalies) -> GraphStats {
    let mut stats = GraphStats::default();
    let mut edges = build_edges(index, ww_edges, &mut stats, out);
    let node_count = index.ops.len();
    let mut has_edge = vec![false; node_count];
    for &(a, b, _) in &edges {
        has_edge[a as usize] = true;
        has_edge[b as usize] = true;
    }
    stats.nodes = has_edge.iter().filter(|&&h| h).count() as u64;
    let Some(graph) = csr(&mut edges, node_count) else {
        return stats;
    };
    drop(edges);
    let cyclic = cyclic_components(&graph, node_count, |_| true);
    stats.cyclic_components = cyclic.len() as u64;
    if cyclic.is_empty() {
        return stats;
    }
    let mut component = vec![NONE; node_count];
    for (c, members) in cyclic.iter().enumerate() {
        for &n in members {
            component[n as usize] = c as u32;
        }
    }
    // Fast path for plain send/poll histories: when every writer sits at one position of one
    // log, ww edges form disjoint paths (no ww cycle); when, in addition, no op both reads and
    // writes, wr edges only enter pure readers, which have no ww/wr out-edges, so the ww+wr
    // subgraph is acyclic too and G0, G1c and G-single are impossible.
    let shape = Shape::of(index);
    let ww_acyclic = !ww_edges || shape.writers_single_position;
    let wwr_acyclic = ww_acyclic && !shape.has_read_write_ops;
    let singletons = || (0..node_count as u32).collect::<Vec<u32>>();
    let ww = if ww_acyclic {
        singletons()
    } else {
        sub_components(&graph, &component, only_ww)
    };
    let wwr = if wwr_acyclic {
        singletons()
    } else {
        sub_components(&graph, &component, ww_or_wr)
    };
    let mut search = Search {
        graph: &graph,
        component,
        ww,
        wwr,
        parent: vec![NONE; node_count],
        parent_edge: vec![None; node_count],
        touched: Vec::new(),
        g_single_possible: !wwr_acyclic,
    };
    for (c, members) in cyclic.iter().enumerate() {
        classify(index, &mut search, c as u32, members, ww_edges, out);
    }
    stats
}

/// Sorts and merges parallel edges, then builds the CSR graph (`None` when there are no edges).
fn csr(edges: &mut Vec<Step>, node_count: usize) -> Option<Graph> {
    if edges.is_empty() {
        return None;
    }
    edges.sort_unstable_by_key(|&(a, b, e)| (a, b, rank(e.relation)));
    edges.dedup_by_key(|&mut (a, b, _)| (a, b));
    let mut graph = Graph::from_sorted_edges(edges).ok()?;
    while graph.node_count() < node_count {
        graph.add_node(());
    }
    Some(graph)
}

/// Non-trivial strongly connected components of the subgraph of edges `keep` accepts.
fn cyclic_components(
    graph: &Graph,
    node_count: usize,
    keep: impl Fn(&Edge) -> bool + Sync,
) -> Vec<Vec<u32>> {
    let run = || {
        let filtered = petgraph::visit::EdgeFiltered::from_fn(
            graph,
            |e: petgraph::csr::EdgeReference<'_, Edge, Directed, u32>| keep(e.weight()),
        );
        let mut found = Vec::new();
        TarjanScc::new().run(&filtered, |scc: &[u32]| {
            if scc.len() > 1 {
                found.push(scc.to_vec());
            }
        });
        found
    };
    let stack =
        SCC_STACK_BYTES_MIN.saturating_add(node_count.saturating_mul(SCC_STACK_BYTES_PER_NODE));
    std::thread::scope(|scope| {
        match std::thread::Builder::new()
            .name("logjam-scc".to_owned())
            .stack_size(stack)
            .spawn_scoped(scope, run)
        {
            Ok(handle) => handle
                .join()
                .unwrap_or_else(|panic| std::panic::resume_unwind(panic)),
            // No thread available: small histories fit the current stack.
            Err(_) => run(),
        }
    })
}

/// Component id per node in the subgraph of edges `allowed` keeps, restricted to edges inside
/// one cyclic component (sub-cycles can only live there).
fn sub_components(graph: &Graph, component: &[u32], allowed: fn(Relation) -> bool) -> Vec<u32> {
    let mut ids: Vec<u32> = (0..component.len() as u32).collect();
    let sccs = cyclic_components(graph, component.len(), |e| allowed(e.relation));
    for (c, members) in sccs.iter().enumerate() {
        for &n in members {
            ids[n as usize] = component.len() as u32 + c as u32;
        }
    }
    ids
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
    // Committed writers the current op read from, with one record read from each.
    let mut read_from: Vec<(OpId, KeyId, u32)> = Vec::new();
    for (id, record) in index.ops.iter().enumerate() {
        let id = id as OpId;
        if record.op.outcome != logjam_history::Outcome::Ok || record.reads.is_empty() {
            continue;
        }
        highest.clear();
        read_from.clear();
        let reads = &index.reads[range(&record.reads)];
        let mut last_edge: Option<(OpId, KeyId)> = None;
        for (j, read) in reads.iter().enumerate() {
            match highest.iter_mut().find(|h| h.0 == read.key) {
                Some(h) => h.1 = h.1.max(read.index),
                None => highest.push((read.key, read.index)),
            }
            let Some(writer) = index.committed_writer_of(read) else {
                continue;
            };
            if writer != id && !read_from.iter().any(|r| r.0 == writer) {
                read_from.push((writer, read.key, read.index));
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
                if let Some(&seen) = read_from.iter().find(|r| r.0 == next.writer) {
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

/// Cycle search state over the whole graph, restricted to one component at a time.
struct Search<'g> {
    graph: &'g Graph,
    /// Non-trivial strongly connected component of each node, or `NONE`.
    component: Vec<u32>,
    /// Component of each node in the ww-only subgraph.
    ww: Vec<u32>,
    /// Component of each node in the ww+wr subgraph.
    wwr: Vec<u32>,
    /// BFS parent node per node (`NONE` when unvisited); reset through `touched`.
    parent: Vec<u32>,
    /// BFS edge from the parent.
    parent_edge: Vec<Option<Edge>>,
    touched: Vec<u32>,
    /// False when the history's shape rules G-single out (see `check`).
    g_single_possible: bool,
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

impl Search<'_> {
    /// Shortest path of `allowed` edges from `from` to `to` inside component `c`.
    fn path(
        &mut self,
        c: u32,
        from: u32,
        to: u32,
        allowed: fn(Relation) -> bool,
    ) -> Option<Vec<Step>> {
        for &n in &self.touched {
            self.parent[n as usize] = NONE;
        }
        self.touched.clear();
        let mut queue = std::collections::VecDeque::new();
        // The start node is marked visited with a parent that is never followed.
        self.parent[from as usize] = from;
        self.touched.push(from);
        queue.push_back(from);
        while let Some(n) = queue.pop_front() {
            if n == to {
                let mut path = Vec::new();
                let mut at = to;
                while at != from {
                    let parent = self.parent[at as usize];
                    let edge = self.parent_edge[at as usize]?;
                    path.push((parent, at, edge));
                    at = parent;
                }
                path.reverse();
                return Some(path);
            }
            for edge in self.graph.edges(n) {
                let target = edge.target();
                if allowed(edge.weight().relation)
                    && self.component[target as usize] == c
                    && self.parent[target as usize] == NONE
                {
                    self.parent[target as usize] = n;
                    self.parent_edge[target as usize] = Some(*edge.weight());
                    self.touched.push(target);
                    queue.push_back(target);
                }
            }
        }
        None
    }

    /// The cycle made of `step` (u → v) and a path v ⇝ u of `allowed` edges.
    fn close(&mut self, c: u32, step: Step, allowed: fn(Relation) -> bool) -> Option<Vec<Step>> {
        let (u, v, _) = step;
        let mut cycle = vec![step];
        cycle.extend(self.path(c, v, u, allowed)?);
        Some(cycle)
    }
}

fn only_ww(r: Relation) -> bool {
    r == Relation::Ww
}
fn ww_or_wr(r: Relation) -> bool {
    r != Relation::Rw
}
fn any_relation(_: Relation) -> bool {
    true
}

fn classify(
    index: &QueueIndex,
    search: &mut Search<'_>,
    c: u32,
    members: &[u32],
    ww_edges: bool,
    out: &mut Anomalies,
) {
    // Internal edges of this component, by relation.
    let (mut ww_candidate, mut wr_candidate, mut rw_same_wwr) = (None, None, None);
    let mut rw: Vec<Step> = Vec::new();
    for &a in members {
        for edge in search.graph.edges(a) {
            let b = edge.target();
            if search.component[b as usize] != c {
                continue;
            }
            let step = (a, b, *edge.weight());
            let (a, b) = (a as usize, b as usize);
            match edge.weight().relation {
                Relation::Ww
                    if ww_candidate.is_none() && ww_edges && search.ww[a] == search.ww[b] =>
                {
                    ww_candidate = Some(step);
                }
                Relation::Wr if wr_candidate.is_none() && search.wwr[a] == search.wwr[b] => {
                    wr_candidate = Some(step);
                }
                Relation::Rw => {
                    if rw_same_wwr.is_none() && search.wwr[a] == search.wwr[b] {
                        rw_same_wwr = Some(step);
                    }
                    if rw.len() < RW_ATTEMPTS {
                        rw.push(step);
                    }
                }
                _ => {}
            }
        }
    }
    let mut report = |kind, cycle: &[Step]| out.push(cycle_anomaly(index, kind, cycle));
    if let Some(cycle) = ww_candidate.and_then(|e| search.close(c, e, only_ww)) {
        report(AnomalyKind::G0, &cycle);
    }
    if let Some(cycle) = wr_candidate.and_then(|e| search.close(c, e, ww_or_wr)) {
        report(AnomalyKind::G1c, &cycle);
    }
    if rw.is_empty() {
        return;
    }
    // G-single: an rw edge closed by ww/wr edges. Same ww+wr component ⇒ certainly closable.
    let mut single = rw_same_wwr.and_then(|e| search.close(c, e, ww_or_wr));
    if single.is_none() && search.g_single_possible {
        single = rw.iter().find_map(|&e| search.close(c, e, ww_or_wr));
    }
    let mut g2 = None;
    for &e in &rw {
        let Some(cycle) = search.close(c, e, any_relation) else {
            continue;
        };
        let rw_count = cycle
            .iter()
            .filter(|s| s.2.relation == Relation::Rw)
            .count();
        if rw_count >= 2 {
            g2 = Some(cycle);
            break;
        }
        if single.is_none() {
            single = Some(cycle);
        }
    }
    if let Some(cycle) = single {
        report(AnomalyKind::GSingle, &cycle);
    }
    if let Some(cycle) = g2 {
        report(AnomalyKind::G2, &cycle);
    }
}

fn cycle_anomaly(index: &QueueIndex, kind: AnomalyKind, cycle: &[Step]) -> Anomaly {
    let mut steps = Vec::with_capacity(cycle.len());
    let mut chain = Vec::with_capacity(cycle.len() + 1);
    for (n, &(from, to, edge)) in cycle.iter().enumerate() {
        if n == 0 {
            chain.push(format!("op {}", index.op(from).index()));
        }
        if n < CHAIN_SHOWN_MAX || n + 1 == cycle.len() {
            chain.push(format!(
                "-{}-> op {}",
                relation_name(edge.relation),
                index.op(to).index()
            ));
        } else if n == CHAIN_SHOWN_MAX {
            chain.push(format!("... ({} more edges)", cycle.len() - 1 - n));
        }
        steps.push(CycleStep {
            from: index.op(from).index(),
            to: index.op(to).index(),
            relation: edge.relation,
            key: index.key(edge.key),
            explanation: explain_edge(index, from, to, edge),
        });
    }
    let mut anomaly = Anomaly::new(
        kind,
        cycle.first().map(|s| index.key(s.2.key)),
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
    anomaly.ops = cycle.iter().map(|s| index.op_ref(s.0)).collect();
    anomaly.cycle = steps;
    anomaly
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

fn relation_name(r: Relation) -> &'static str {
    match r {
        Relation::Ww => "ww",
        Relation::Wr => "wr",
        Relation::Rw => "rw",
    }
}

fn explain_edge(index: &QueueIndex, from: OpId, to: OpId, edge: Edge) -> String {
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
