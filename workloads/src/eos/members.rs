//! The pipeline group's member pool, shared by an eos run's processes: each pipeline op
//! borrows a member (its consumer and transactional producer) and returns it.

use logjam_client::consumer::Consumer;
use logjam_client::producer::Producer;

/// One member slot of the pipeline's group.
enum Slot {
    /// No member: the next op to take the slot creates one (joins, InitProducerId).
    Fresh,
    /// A member between ops: its consumer and transactional producer.
    Idle(Box<(Consumer, Producer)>),
    /// An op is running on it.
    Busy,
}

/// The pipeline's group members, shared by the run's processes: a fixed number of members
/// (Kafka Streams' stream threads), each op borrowing one. Without the pool every fresh
/// harness process would join the group and its idle close leave it again, so the group
/// rebalanced without pause and, under faults, never settled long enough to process anything.
/// A member whose op failed or crashed is closed and its slot started afresh (same
/// `transactional.id`, so the new producer fences the old one).
pub struct Members {
    slots: std::sync::Mutex<Vec<Slot>>,
    /// A zombie is paused now (one at a time, so the pool keeps members to take over).
    zombie: std::sync::atomic::AtomicBool,
}

impl std::fmt::Debug for Members {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Members").finish_non_exhaustive()
    }
}

impl Members {
    /// `count` empty slots (at least one).
    pub fn new(count: u32) -> Members {
        Members {
            slots: std::sync::Mutex::new((0..count.max(1)).map(|_| Slot::Fresh).collect()),
            zombie: std::sync::atomic::AtomicBool::new(false),
        }
    }

    /// An idle member, else a fresh slot; `None` when every slot is busy.
    pub(super) fn checkout(&self) -> Option<(usize, Option<(Consumer, Producer)>)> {
        let mut slots = self.slots.lock().expect("members");
        if let Some(i) = slots.iter().position(|s| matches!(s, Slot::Idle(_))) {
            let Slot::Idle(clients) = std::mem::replace(&mut slots[i], Slot::Busy) else {
                unreachable!("just found idle");
            };
            return Some((i, Some(*clients)));
        }
        let i = slots.iter().position(|s| matches!(s, Slot::Fresh))?;
        slots[i] = Slot::Busy;
        Some((i, None))
    }

    pub(super) fn checkin(&self, slot: usize, clients: Option<(Consumer, Producer)>) {
        let mut slots = self.slots.lock().expect("members");
        slots[slot] = match clients {
            Some(clients) => Slot::Idle(Box::new(clients)),
            None => Slot::Fresh,
        };
    }

    /// Claims the one zombie place: true when no other zombie is paused now.
    pub(super) fn start_zombie(&self) -> bool {
        !self.zombie.swap(true, std::sync::atomic::Ordering::SeqCst)
    }

    /// Frees the zombie place.
    pub(super) fn end_zombie(&self) {
        self.zombie
            .store(false, std::sync::atomic::Ordering::SeqCst);
    }
}
