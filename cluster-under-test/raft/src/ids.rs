//! Newtypes for every id and position that crosses a module boundary: [`NodeId`], [`Epoch`],
//! [`Offset`] and [`CorrelationId`]. They are plain wrappers; arithmetic lives on the types that
//! need it so that a node id can never be added to an offset by mistake.

use std::fmt;

/// A node's `node.id`: the Kafka `ReplicaId`, `CandidateId`, `LeaderId` and `VoterId` fields.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct NodeId(pub u32);

/// A leader epoch (Raft's term): the Kafka `LeaderEpoch`, `CandidateEpoch`/`ReplicaEpoch` and
/// `LastOffsetEpoch` fields. Epoch 0 is the epoch before any election; no leader ever holds it,
/// so an entry of epoch 0 never exists and `Epoch::ZERO` also means "no epoch".
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Epoch(pub u32);

/// A position in the metadata log: the Kafka `FetchOffset`, `LastOffset`, `HighWatermark` and
/// `EndOffset` fields. Like Kafka, end offsets and the high watermark are exclusive: a log whose
/// end offset is 5 holds offsets 0..=4.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Offset(pub u64);

/// The Kafka request header's correlation id. Requests carry a fresh one; a response echoes the
/// id of the request it answers, so a node can drop stale, duplicated or unexpected responses the
/// way `RaftRequestManager` does.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct CorrelationId(pub u32);

impl Epoch {
    /// The epoch before the first election.
    pub const ZERO: Epoch = Epoch(0);

    /// The next epoch, as a candidate bumps to it.
    ///
    /// # Panics
    ///
    /// Panics if the epoch would overflow `u32` (four billion elections: a bug, not a workload).
    #[must_use]
    pub fn next(self) -> Epoch {
        Epoch(self.0.checked_add(1).expect("epoch overflow"))
    }
}

impl Offset {
    /// The first offset of every log.
    pub const ZERO: Offset = Offset(0);

    /// The offset `count` positions later.
    ///
    /// # Panics
    ///
    /// Panics on `u64` overflow.
    #[must_use]
    pub fn plus(self, count: u64) -> Offset {
        Offset(self.0.checked_add(count).expect("offset overflow"))
    }

    /// The offset just before this one, or `None` at offset 0.
    #[must_use]
    pub fn previous(self) -> Option<Offset> {
        self.0.checked_sub(1).map(Offset)
    }

    /// The number of offsets in `[start, self)`; zero when `start >= self`.
    #[must_use]
    pub fn distance_from(self, start: Offset) -> u64 {
        self.0.saturating_sub(start.0)
    }
}

impl CorrelationId {
    /// The id after this one, wrapping like Kafka's `int32` correlation ids.
    #[must_use]
    pub fn next(self) -> CorrelationId {
        CorrelationId(self.0.wrapping_add(1))
    }
}

impl fmt::Display for NodeId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "node{}", self.0)
    }
}

impl fmt::Display for Epoch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "e{}", self.0)
    }
}

impl fmt::Display for Offset {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "@{}", self.0)
    }
}
