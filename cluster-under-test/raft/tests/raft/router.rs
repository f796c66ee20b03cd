//! `Router`: a tiny synchronous driver for focused scenarios. It delivers messages in FIFO
//! order, lets a test drop messages by predicate or cut nodes off, and advances a shared
//! clock. No randomness beyond a fixed counter; every scenario is fully scripted.

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use logjam_raft::{Envelope, Message, Moment, NodeId, QuorumConfig, RaftNode, Ready, Role};

pub struct Router {
    pub nodes: BTreeMap<NodeId, RaftNode>,
    pub queue: VecDeque<Envelope>,
    pub now_ms: u64,
    /// Nodes whose traffic (both ways) is dropped.
    pub isolated: BTreeSet<NodeId>,
    /// The last `Ready` of each node (for assertions).
    pub readies: BTreeMap<NodeId, Vec<Ready>>,
    counter: u64,
}

impl Router {
    pub fn new(voters: u32, tweak: impl Fn(&mut QuorumConfig)) -> Router {
        let ids: Vec<NodeId> = (1..=voters).map(NodeId).collect();
        let mut config = QuorumConfig::new(ids.iter().copied());
        config.append_linger_ms = 0;
        tweak(&mut config);
        let nodes = ids
            .iter()
            .map(|id| {
                (
                    *id,
                    RaftNode::new(*id, config.clone(), Moment::new(0, u64::from(id.0))),
                )
            })
            .collect();
        Router {
            nodes,
            queue: VecDeque::new(),
            now_ms: 0,
            isolated: BTreeSet::new(),
            readies: BTreeMap::new(),
            counter: 0,
        }
    }

    pub fn moment(&mut self) -> Moment {
        self.counter += 1;
        Moment::new(
            self.now_ms,
            self.counter.wrapping_mul(0x9E37_79B9_7F4A_7C15),
        )
    }

    pub fn node(&self, id: u32) -> &RaftNode {
        &self.nodes[&NodeId(id)]
    }

    pub fn node_mut(&mut self, id: u32) -> &mut RaftNode {
        self.nodes.get_mut(&NodeId(id)).expect("node")
    }

    /// Collects a node's commands: messages go to the queue.
    pub fn collect(&mut self, id: NodeId) {
        let ready = self.nodes.get_mut(&id).expect("node").take_ready();
        self.queue.extend(ready.messages.iter().cloned());
        self.readies.entry(id).or_default().push(ready);
    }

    /// Delivers queued messages (and the ones they trigger) until none is left, dropping those
    /// `drop` selects and any to or from an isolated node.
    pub fn deliver_all(&mut self, drop: impl Fn(&Envelope) -> bool) {
        let mut budget = 100_000;
        while let Some(envelope) = self.queue.pop_front() {
            budget -= 1;
            assert!(budget > 0, "message storm");
            if drop(&envelope)
                || self.isolated.contains(&envelope.from)
                || self.isolated.contains(&envelope.to)
            {
                continue;
            }
            let to = envelope.to;
            let moment = self.moment();
            self.nodes
                .get_mut(&to)
                .expect("node")
                .step(moment, envelope);
            self.collect(to);
        }
    }

    /// Advances the clock by `ms` in steps of `step_ms`, ticking every node and delivering
    /// everything after each step.
    pub fn advance(&mut self, ms: u64, step_ms: u64, drop: impl Fn(&Envelope) -> bool + Copy) {
        let end = self.now_ms + ms;
        while self.now_ms < end {
            self.now_ms = (self.now_ms + step_ms).min(end);
            let ids: Vec<NodeId> = self.nodes.keys().copied().collect();
            for id in ids {
                let moment = self.moment();
                self.nodes.get_mut(&id).expect("node").tick(moment);
                self.collect(id);
            }
            self.deliver_all(drop);
        }
    }

    /// Ticks until some node leads (at most `ms_max`), returning it.
    pub fn elect(&mut self, ms_max: u64) -> NodeId {
        let end = self.now_ms + ms_max;
        while self.now_ms < end {
            self.advance(10, 10, |_| false);
            if let Some(leader) = self.leader() {
                return leader;
            }
        }
        panic!("no leader within {ms_max} ms");
    }

    pub fn leader(&self) -> Option<NodeId> {
        self.nodes
            .values()
            .filter(|n| n.role() == Role::Leader && !self.isolated.contains(&n.id()))
            .max_by_key(|n| n.epoch())
            .map(RaftNode::id)
    }

    pub fn propose(&mut self, leader: NodeId, payload: &[u8]) {
        let moment = self.moment();
        let _ = self
            .nodes
            .get_mut(&leader)
            .expect("node")
            .propose(moment, vec![payload.to_vec()])
            .expect("leader accepts");
        self.collect(leader);
    }
}

/// Whether a message is a Fetch request (for drop filters).
pub fn is_fetch(envelope: &Envelope) -> bool {
    matches!(envelope.message, Message::Fetch(_))
}
