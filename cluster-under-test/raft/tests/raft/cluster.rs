//! `Cluster`: N simulated hosts, each a `RaftNode` plus the durable state a real node would
//! keep (quorum-state file, metadata log and snapshot, rebuilt from the `LogOp`s it was told to
//! persist) and a toy state machine (the list of applied entries, serialized as the snapshot).
//! Every `Ready` is executed in the documented order and fed to the invariant `Checker`.
//! Verb pairs: `crash`/`restart`; the network's `partition`/`heal`.

use logjam_raft::{
    Entry, EntryKind, Epoch, Moment, NodeId, Offset, QuorumConfig, QuorumState, RaftLog, RaftNode,
    Ready, Role,
};

use crate::invariants::{Checker, Violation};
use crate::network::{Network, NetworkFaults};
use crate::prng::Prng;

/// What survives a crash: the fsynced quorum state and log (KRaft fsyncs the metadata log on
/// every append, so there is no unflushed tail to lose).
#[derive(Clone, Default)]
pub struct Disk {
    pub quorum: QuorumState,
    pub log: RaftLog,
}

/// The toy state machine: the entries applied so far, in offset order.
#[derive(Clone, Default)]
pub struct StateMachine {
    pub entries: Vec<Entry>,
    /// Exclusive end of what was applied (snapshot end when the snapshot was loaded).
    pub applied_end: Offset,
}

pub struct Host {
    pub node: Option<RaftNode>,
    pub disk: Disk,
    pub state_machine: StateMachine,
}

pub struct Cluster {
    pub ids: Vec<NodeId>,
    pub hosts: Vec<Host>,
    pub network: Network,
    pub checker: Checker,
    pub config: QuorumConfig,
    pub now_ms: u64,
    pub rng: Prng,
    pub snapshots_taken: u64,
    pub snapshots_installed: u64,
    pub crashes: u64,
    /// Set while a node's own `create_snapshot` is processed, to tell installs apart.
    creating_snapshot: bool,
}

impl Cluster {
    pub fn new(
        voters: usize,
        config_for: impl Fn(QuorumConfig) -> QuorumConfig,
        seed: u64,
    ) -> Cluster {
        let mut rng = Prng::new(seed);
        let ids: Vec<NodeId> = (1..=voters as u32).map(NodeId).collect();
        let config = config_for(QuorumConfig::new(ids.iter().copied()));
        let hosts = ids
            .iter()
            .map(|id| Host {
                node: Some(RaftNode::new(
                    *id,
                    config.clone(),
                    Moment::new(0, rng.next_u64()),
                )),
                disk: Disk::default(),
                state_machine: StateMachine::default(),
            })
            .collect();
        let network = Network::new(NetworkFaults::CLEAN, rng.fork());
        Cluster {
            ids,
            hosts,
            network,
            checker: Checker::default(),
            config,
            now_ms: 0,
            rng,
            snapshots_taken: 0,
            snapshots_installed: 0,
            crashes: 0,
            creating_snapshot: false,
        }
    }

    fn index(&self, id: NodeId) -> usize {
        (id.0 - 1) as usize
    }

    pub fn moment(&mut self) -> Moment {
        Moment::new(self.now_ms, self.rng.next_u64())
    }

    pub fn node(&self, id: NodeId) -> Option<&RaftNode> {
        self.hosts[self.index(id)].node.as_ref()
    }

    pub fn live_nodes(&self) -> impl Iterator<Item = &RaftNode> {
        self.hosts.iter().filter_map(|host| host.node.as_ref())
    }

    /// The unique live leader of the highest epoch, if any.
    pub fn leader(&self) -> Option<NodeId> {
        self.live_nodes()
            .filter(|node| node.role() == Role::Leader)
            .max_by_key(|node| node.epoch())
            .map(RaftNode::id)
    }

    /// Executes one node's `Ready` in the contract's order and checks what it shows.
    pub fn process_ready(&mut self, id: NodeId) -> Result<(), Violation> {
        let index = self.index(id);
        let Some(node) = self.hosts[index].node.as_mut() else {
            return Ok(());
        };
        let ready: Ready = node.take_ready();
        let host = &mut self.hosts[index];
        let node = host.node.as_ref().expect("live");
        // 1. quorum state, fsynced.
        if let Some(quorum) = ready.quorum_state {
            host.disk.quorum = quorum;
        }
        // 2. log ops, fsynced; the disk copy must end equal to the node's working copy.
        for op in &ready.log_ops {
            self.checker.observe_log_op(id, &host.disk.log, op)?;
            host.disk.log.apply(op);
            if matches!(op, logjam_raft::LogOp::Snapshot(_)) && !self.creating_snapshot {
                self.snapshots_installed += 1;
            }
        }
        let log = node.log();
        assert_eq!(
            host.disk.log.end_offset(),
            log.end_offset(),
            "{id}: disk and node logs disagree"
        );
        assert_eq!(
            host.disk.log.start_offset(),
            log.start_offset(),
            "{id}: log starts disagree"
        );
        assert_eq!(
            host.disk.log.last_epoch(),
            log.last_epoch(),
            "{id}: last epochs disagree"
        );
        assert_eq!(
            host.disk.quorum,
            node.quorum_state(),
            "{id}: quorum state not persisted"
        );
        // Commits are recorded when the leader's Ready is processed, before its messages can
        // carry the new high watermark to anyone.
        if node.leader() == Some(id)
            && let Some(high_watermark) = ready.high_watermark
        {
            self.checker.observe_commit(node, high_watermark)?;
        }
        // 3. messages.
        for envelope in ready.messages {
            self.network.send(self.now_ms, envelope);
        }
        // 4. state machine: snapshot first, then entries.
        let state_machine = &mut host.state_machine;
        if let Some(snapshot) = ready.load_snapshot {
            let entries = decode_snapshot(&snapshot.data);
            for entry in &entries {
                self.checker.observe_apply(id, entry)?;
            }
            assert_eq!(
                entries.last().map_or(Offset::ZERO, |e| e.offset.plus(1)),
                snapshot.id.end_offset,
                "{id}: snapshot data does not end at its id"
            );
            state_machine.entries = entries;
            state_machine.applied_end = snapshot.id.end_offset;
        }
        for entry in &ready.apply {
            if entry.offset != state_machine.applied_end {
                return Err(Violation::ApplyGap {
                    node: id,
                    expected: state_machine.applied_end,
                    got: entry.offset,
                });
            }
            self.checker.observe_apply(id, entry)?;
            state_machine.entries.push(entry.clone());
            state_machine.applied_end = entry.offset.plus(1);
        }
        Ok(())
    }

    pub fn tick(&mut self, id: NodeId) -> Result<(), Violation> {
        let moment = self.moment();
        let index = self.index(id);
        if let Some(node) = self.hosts[index].node.as_mut() {
            node.tick(moment);
        }
        self.process_ready(id)
    }

    pub fn tick_all(&mut self) -> Result<(), Violation> {
        for id in self.ids.clone() {
            self.tick(id)?;
        }
        Ok(())
    }

    /// Delivers every message due now.
    pub fn deliver_due(&mut self) -> Result<(), Violation> {
        for envelope in self.network.due(self.now_ms) {
            let to = envelope.to;
            let moment = self.moment();
            let index = self.index(to);
            if let Some(node) = self.hosts[index].node.as_mut() {
                node.step(moment, envelope);
                self.process_ready(to)?;
            }
        }
        Ok(())
    }

    /// Proposes `payload` to the current leader, if any; returns whether it was accepted.
    pub fn propose(&mut self, payload: Vec<u8>) -> Result<bool, Violation> {
        let Some(leader) = self.leader() else {
            return Ok(false);
        };
        let moment = self.moment();
        let index = self.index(leader);
        let accepted = self.hosts[index]
            .node
            .as_mut()
            .is_some_and(|node| node.propose(moment, vec![payload]).is_ok());
        self.process_ready(leader)?;
        Ok(accepted)
    }

    /// The node snapshots its state machine at what it has applied, if that is past its log
    /// start.
    pub fn snapshot(&mut self, id: NodeId) -> Result<(), Violation> {
        let index = self.index(id);
        let host = &mut self.hosts[index];
        let Some(node) = host.node.as_mut() else {
            return Ok(());
        };
        let end = host.state_machine.applied_end;
        if end <= node.log().start_offset() {
            return Ok(());
        }
        let data = encode_snapshot(&host.state_machine.entries);
        node.create_snapshot(end, data)
            .expect("snapshot at the applied end is valid");
        self.snapshots_taken += 1;
        self.creating_snapshot = true;
        let result = self.process_ready(id);
        self.creating_snapshot = false;
        result
    }

    /// Kills the process: volatile state (role, timers, high watermark, state machine) is lost;
    /// the disk survives.
    pub fn crash(&mut self, id: NodeId) {
        let index = self.index(id);
        let host = &mut self.hosts[index];
        if let Some(node) = host.node.take() {
            // Assert twice: the whole disk log equals the node's working copy.
            assert_eq!(
                &host.disk.log,
                node.log(),
                "{id}: disk log diverged from the node's"
            );
            self.crashes += 1;
        }
        host.state_machine = StateMachine::default();
    }

    pub fn restart(&mut self, id: NodeId) -> Result<(), Violation> {
        let index = self.index(id);
        if self.hosts[index].node.is_some() {
            return Ok(());
        }
        let moment = self.moment();
        let host = &mut self.hosts[index];
        let node = RaftNode::restart(
            id,
            self.config.clone(),
            host.disk.quorum,
            host.disk.log.clone(),
            moment,
        );
        host.node = Some(node);
        self.process_ready(id)
    }

    pub fn is_alive(&self, id: NodeId) -> bool {
        self.node(id).is_some()
    }

    pub fn check_roles(&mut self) -> Result<(), Violation> {
        let nodes: Vec<&RaftNode> = self.hosts.iter().filter_map(|h| h.node.as_ref()).collect();
        self.checker.observe_roles(nodes.into_iter())
    }

    pub fn max_epoch(&self) -> Epoch {
        self.checker.max_epoch
    }
}

/// Snapshot bytes: the applied entries, `offset u64 | epoch u32 | tag u8 | len u32 | bytes`.
pub fn encode_snapshot(entries: &[Entry]) -> Vec<u8> {
    let mut out = Vec::new();
    for entry in entries {
        out.extend_from_slice(&entry.offset.0.to_be_bytes());
        out.extend_from_slice(&entry.epoch.0.to_be_bytes());
        let (tag, bytes): (u8, Vec<u8>) = match &entry.kind {
            EntryKind::LeaderChange {
                leader_id,
                granting_voters,
            } => {
                let mut bytes = leader_id.0.to_be_bytes().to_vec();
                for voter in granting_voters {
                    bytes.extend_from_slice(&voter.0.to_be_bytes());
                }
                (0, bytes)
            }
            EntryKind::Data(data) => (1, data.clone()),
        };
        out.push(tag);
        out.extend_from_slice(&(bytes.len() as u32).to_be_bytes());
        out.extend_from_slice(&bytes);
    }
    out
}

pub fn decode_snapshot(mut data: &[u8]) -> Vec<Entry> {
    fn take<'a>(data: &mut &'a [u8], n: usize) -> &'a [u8] {
        let (head, tail) = data.split_at(n);
        *data = tail;
        head
    }
    let mut entries = Vec::new();
    while !data.is_empty() {
        let offset = u64::from_be_bytes(take(&mut data, 8).try_into().unwrap());
        let epoch = u32::from_be_bytes(take(&mut data, 4).try_into().unwrap());
        let tag = take(&mut data, 1)[0];
        let len = u32::from_be_bytes(take(&mut data, 4).try_into().unwrap()) as usize;
        let bytes = take(&mut data, len);
        let kind = if tag == 0 {
            let ids: Vec<NodeId> = bytes
                .chunks(4)
                .map(|c| NodeId(u32::from_be_bytes(c.try_into().unwrap())))
                .collect();
            EntryKind::LeaderChange {
                leader_id: ids[0],
                granting_voters: ids[1..].to_vec(),
            }
        } else {
            EntryKind::Data(bytes.to_vec())
        };
        entries.push(Entry {
            offset: Offset(offset),
            epoch: Epoch(epoch),
            kind,
        });
    }
    entries
}
