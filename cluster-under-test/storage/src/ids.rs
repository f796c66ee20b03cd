//! Newtypes for the numbers that cross module boundaries: log offsets, leader epochs and byte
//! positions inside a segment file. Nothing here does I/O; `topic_partition.rs` owns the
//! partition name.

use std::fmt;

/// A position in a partition's log (Kafka's `offset`, an `int64` on the wire).
///
/// Offsets are dense for batches this crate assigns (leader appends), but a follower may append
/// batches with gaps (compacted topics), so code never assumes `next == last + 1` across batches.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Offset(pub i64);

impl Offset {
    /// The first offset of a brand-new log.
    pub const ZERO: Offset = Offset(0);
    /// Kafka's "no offset" sentinel (`-1`), e.g. `UNDEFINED_EPOCH_OFFSET`.
    pub const UNDEFINED: Offset = Offset(-1);

    /// The raw wire value.
    pub fn value(self) -> i64 {
        self.0
    }

    /// The offset after this one.
    pub fn next(self) -> Offset {
        Offset(self.0 + 1)
    }

    /// This offset moved forward by `delta` (may be negative).
    pub fn plus(self, delta: i64) -> Offset {
        Offset(self.0 + delta)
    }

    /// Number of offsets from `earlier` up to (excluding) `self`; negative when `earlier` is later.
    pub fn distance_from(self, earlier: Offset) -> i64 {
        self.0 - earlier.0
    }
}

impl fmt::Display for Offset {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

/// A partition leader epoch (Kafka's `int32` `PartitionLeaderEpoch`), bumped by the controller on
/// every leader change and stamped by the leader into every batch header it appends.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct LeaderEpoch(pub i32);

impl LeaderEpoch {
    /// Kafka's `UNDEFINED_EPOCH` (`-1`): no epoch known.
    pub const UNDEFINED: LeaderEpoch = LeaderEpoch(-1);

    /// The raw wire value.
    pub fn value(self) -> i32 {
        self.0
    }

    /// Whether this is a real epoch (`>= 0`) rather than the undefined sentinel.
    pub fn is_defined(self) -> bool {
        self.0 >= 0
    }
}

impl fmt::Display for LeaderEpoch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

/// A byte position inside one segment's `.log` file. Kafka stores these as `int32` in the offset
/// index, which is why a segment can never exceed `i32::MAX` bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct FilePosition(pub u32);

impl FilePosition {
    /// The start of a file.
    pub const START: FilePosition = FilePosition(0);

    /// The position as a `u64`, for file APIs.
    pub fn as_u64(self) -> u64 {
        u64::from(self.0)
    }

    /// The position as a `usize`, for buffer arithmetic.
    pub fn as_usize(self) -> usize {
        self.0 as usize
    }
}

impl fmt::Display for FilePosition {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}
