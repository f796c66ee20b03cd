//! KIP-890 verification guards (Kafka's `VerificationStateEntry`): the leader takes a guard
//! for a producer before asking the coordinator whether its first transactional batch may be
//! appended, and the append goes on only if the guard is still the producer's. A marker for
//! the producer (or the append that opened its transaction) clears it, so an ABORT written
//! between the coordinator's answer and the append makes the append fail instead of opening
//! a transaction nothing will close. Transient: never snapshotted, gone on reload.

use std::collections::HashMap;

use super::ProducerId;

/// A guard handed out by [`VerificationGuards::start`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct VerificationGuard(u64);

/// The guards of one partition's producers.
#[derive(Debug, Default)]
pub struct VerificationGuards {
    guards: HashMap<ProducerId, VerificationGuard>,
    next: u64,
}

impl VerificationGuards {
    /// The producer's guard: the one already taken (a verification in flight), else a new
    /// one, never equal to any cleared before.
    pub fn start(&mut self, producer_id: ProducerId) -> VerificationGuard {
        let next = &mut self.next;
        *self.guards.entry(producer_id).or_insert_with(|| {
            *next += 1;
            VerificationGuard(*next)
        })
    }

    /// Whether `guard` is still the producer's.
    pub fn holds(&self, producer_id: ProducerId, guard: VerificationGuard) -> bool {
        self.guards.get(&producer_id) == Some(&guard)
    }

    /// Drops the producer's guard (a marker, or the append that opened its transaction).
    pub fn clear(&mut self, producer_id: ProducerId) {
        self.guards.remove(&producer_id);
    }

    /// Drops every guard (the state was reloaded or truncated).
    pub fn clear_all(&mut self) {
        self.guards.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_guard_holds_until_cleared_and_is_never_handed_out_again() {
        let mut guards = VerificationGuards::default();
        let pid = ProducerId(7);
        let first = guards.start(pid);
        assert_eq!(guards.start(pid), first, "one verification in flight");
        assert!(guards.holds(pid, first));
        assert!(!guards.holds(ProducerId(8), first));
        guards.clear(pid);
        assert!(!guards.holds(pid, first), "a marker came in between");
        let second = guards.start(pid);
        assert_ne!(second, first);
        assert!(!guards.holds(pid, first));
        guards.clear_all();
        assert!(!guards.holds(pid, second));
    }
}
