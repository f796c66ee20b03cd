//! The dependency graph any checker can use, built as Elle is: an *analyzer* (each checker's
//! own, e.g. `queue::cycles`) infers ww/wr/rw edges between ops; this module finds and
//! classifies cycles; the *explainer* (`explain`) turns a cycle into a witness in words.
//!
//! Cycle classes (Adya; Elle's names): **G0** ww edges only; **G1c** ww and wr with at least
//! one wr; **G-single** exactly one rw; **G2** two or more rw.
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

pub(crate) mod explain;

use petgraph::Directed;
use petgraph::algo::TarjanScc;
use petgraph::csr::Csr;
use petgraph::visit::EdgeRef;

use crate::anomaly::{AnomalyKind, Relation};

/// rw edges tried per component when closing G-single/G2 cycles.
pub(crate) const RW_ATTEMPTS: usize = 4;

/// Marker for "no component / no node".
const NONE: u32 = u32::MAX;

/// Stack reserved per graph node for the recursive SCC search (a frame is ~100 bytes), plus a
/// fixed floor. Only the pages actually touched count towards memory.
const SCC_STACK_BYTES_PER_NODE: usize = 256;
const SCC_STACK_BYTES_MIN: usize = 16 << 20;

/// One dependency edge (the strongest relation between its two ops, see the module doc).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Edge {
    /// Why the edge exists.
    pub relation: Relation,
    /// What the edge is about, for the explainer only (the queue: a key id and a dense index
    /// in its log; ww v_i→v_(i+1) and rw "read up to i" carry i, wr the index read).
    pub key: u32,
    pub index: u32,
}

type Graph = Csr<(), Edge, Directed, u32>;

/// A cycle step: (from node, to node, edge).
pub(crate) type Step = (u32, u32, Edge);

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

/// What the analyzer knows about its graph that rules cycle classes out, so the search can
/// skip them (the queue's fast path for plain send/poll histories).
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Hints {
    /// The ww-only subgraph has no cycle.
    pub ww_acyclic: bool,
    /// The ww+wr subgraph has no cycle (G0, G1c and G-single are impossible).
    pub wwr_acyclic: bool,
}

/// A cycle found, with its class; one per class per strongly connected component.
pub(crate) type Cycle = (AnomalyKind, Vec<Step>);

/// Builds the graph of `edges` over nodes `0..node_count`, finds cycles and classifies them.
/// `ww_edges` says whether ww edges were inferred (G0 is only looked for then). Fills the
/// node and component counts of `stats`; the analyzer counts edges by relation.
pub(crate) fn find_cycles(
    mut edges: Vec<Step>,
    node_count: usize,
    ww_edges: bool,
    hints: Hints,
    stats: &mut GraphStats,
) -> Vec<Cycle> {
    let mut found = Vec::new();
    let mut has_edge = vec![false; node_count];
    for &(a, b, _) in &edges {
        has_edge[a as usize] = true;
        has_edge[b as usize] = true;
    }
    stats.nodes = has_edge.iter().filter(|&&h| h).count() as u64;
    let Some(graph) = csr(&mut edges, node_count) else {
        return found;
    };
    drop(edges);
    let cyclic = cyclic_components(&graph, node_count, |_| true);
    stats.cyclic_components = cyclic.len() as u64;
    if cyclic.is_empty() {
        return found;
    }
    let mut component = vec![NONE; node_count];
    for (c, members) in cyclic.iter().enumerate() {
        for &n in members {
            component[n as usize] = c as u32;
        }
    }
    let ww_acyclic = !ww_edges || hints.ww_acyclic;
    let wwr_acyclic = ww_acyclic && hints.wwr_acyclic;
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
        classify(&mut search, c as u32, members, ww_edges, &mut found);
    }
    found
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
    /// False when the hints rule G-single out.
    g_single_possible: bool,
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
    search: &mut Search<'_>,
    c: u32,
    members: &[u32],
    ww_edges: bool,
    found: &mut Vec<Cycle>,
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
    let mut report = |kind, cycle: &[Step]| found.push((kind, cycle.to_vec()));
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
