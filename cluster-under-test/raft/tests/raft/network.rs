//! `Network`: the simulated links between nodes. Messages are delayed by a random amount (which
//! reorders them), lost and duplicated with seeded probabilities, and cut by directed link
//! blocks (partitions, including one-way ones). Verb pairs: `partition`/`heal`.

use std::collections::BTreeSet;

use logjam_raft::{Envelope, NodeId};

use crate::prng::Prng;

/// Fault rates of the network, per mille.
#[derive(Clone, Copy, Debug)]
pub struct NetworkFaults {
    pub loss_per_mille: u64,
    pub duplicate_per_mille: u64,
    pub delay_ms_max: u64,
}

impl NetworkFaults {
    pub const CLEAN: NetworkFaults = NetworkFaults {
        loss_per_mille: 0,
        duplicate_per_mille: 0,
        delay_ms_max: 10,
    };
}

struct InFlight {
    deliver_at_ms: u64,
    sequence: u64,
    envelope: Envelope,
}

pub struct Network {
    in_flight: Vec<InFlight>,
    /// Blocked directed links `(from, to)`.
    blocked: BTreeSet<(NodeId, NodeId)>,
    pub faults: NetworkFaults,
    sequence: u64,
    rng: Prng,
    pub sent: u64,
    pub dropped: u64,
    pub duplicated: u64,
}

impl Network {
    pub fn new(faults: NetworkFaults, rng: Prng) -> Network {
        Network {
            in_flight: Vec::new(),
            blocked: BTreeSet::new(),
            faults,
            sequence: 0,
            rng,
            sent: 0,
            dropped: 0,
            duplicated: 0,
        }
    }

    pub fn send(&mut self, now_ms: u64, envelope: Envelope) {
        self.sent += 1;
        if self.blocked.contains(&(envelope.from, envelope.to))
            || self.rng.chance(self.faults.loss_per_mille)
        {
            self.dropped += 1;
            return;
        }
        let copies = if self.rng.chance(self.faults.duplicate_per_mille) {
            self.duplicated += 1;
            2
        } else {
            1
        };
        for _ in 0..copies {
            let delay = self.rng.between(1, self.faults.delay_ms_max.max(1));
            self.sequence += 1;
            self.in_flight.push(InFlight {
                deliver_at_ms: now_ms + delay,
                sequence: self.sequence,
                envelope: envelope.clone(),
            });
        }
    }

    /// Removes and returns the messages due by `now_ms`, in delivery order. A partition
    /// installed while a message was in flight cuts it too.
    pub fn due(&mut self, now_ms: u64) -> Vec<Envelope> {
        let (mut due, rest): (Vec<InFlight>, Vec<InFlight>) = self
            .in_flight
            .drain(..)
            .partition(|m| m.deliver_at_ms <= now_ms);
        self.in_flight = rest;
        due.sort_by_key(|m| (m.deliver_at_ms, m.sequence));
        due.into_iter()
            .map(|m| m.envelope)
            .filter(|e| !self.blocked.contains(&(e.from, e.to)))
            .collect()
    }

    /// Blocks both directions between `side` and everyone else in `all`.
    pub fn partition(&mut self, side: &[NodeId], all: &[NodeId]) {
        for a in side {
            for b in all.iter().filter(|b| !side.contains(b)) {
                let _ = self.blocked.insert((*a, *b));
                let _ = self.blocked.insert((*b, *a));
            }
        }
    }

    /// Blocks `from → to` only.
    pub fn partition_one_way(&mut self, from: NodeId, to: NodeId) {
        let _ = self.blocked.insert((from, to));
    }

    pub fn heal(&mut self) {
        self.blocked.clear();
    }

    pub fn is_partitioned(&self) -> bool {
        !self.blocked.is_empty()
    }
}
