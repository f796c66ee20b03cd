//! Canaries: deliberate, named bugs of the node, switched on by `logjam.canaries` in
//! `server.properties`, so that tests can prove logjam's checkers catch what they claim to
//! catch (design.md). Off by default: the key defaults to empty, an unknown name is a
//! configuration error, and a node with any canary on says so loudly at startup
//! ([`announce`]).
//!
//! Each canary is one small branch marked `// CANARY(name)` at the place the real logic lives;
//! `grep -rn 'CANARY(' src` lists them all. The set is threaded through as [`Canaries`] (in
//! [`crate::config::Config`] and each partition), never a global.

use std::fmt;
use std::str::FromStr;

/// One deliberately broken behaviour. Never switch one on outside a test: each breaks a
/// guarantee on purpose.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Canary {
    /// `hw-before-replication`: the leader advances the high watermark to its own log end
    /// right after its append, before any follower confirms (and regardless of
    /// `min.insync.replicas`). Consumers may read, and acks=all may acknowledge, records that
    /// a failover later loses. Lives in `Partition::maybe_advance_high_watermark`.
    HwBeforeReplication,
    /// `ack-before-replication`: acks=all is answered right after the leader's own append,
    /// without waiting for the ISR (the `NOT_ENOUGH_REPLICAS` check before the append still
    /// applies). Lives in `api/produce.rs`, where an acks=all append is parked.
    AckBeforeReplication,
    /// `skip-idempotent-dedupe`: an idempotent producer's retried batch is appended again
    /// instead of being answered with its original offsets. Lives in `Partition::append`.
    SkipIdempotentDedupe,
    /// `skip-follower-truncation`: a follower told of a diverging epoch does not truncate; it
    /// keeps its divergent suffix and from then on fetches without `LastFetchedEpoch` (so the
    /// leader no longer checks it), appending the leader's records after the suffix. Replicas
    /// then disagree on what is at an offset. Lives in `Partition::apply_fetched` and
    /// `Partition::follower_fetch_position`.
    SkipFollowerTruncation,
    /// `read-above-high-watermark`: consumer fetches (replica id -1) read up to the log end
    /// instead of the high watermark. Lives in `Partition::read_for_consumer`.
    ReadAboveHighWatermark,
    /// `read-committed-ignores-lso`: read_committed fetches read up to the high watermark
    /// instead of the last stable offset, so records of still-open transactions (later
    /// committed or aborted) reach read_committed consumers. Lives in
    /// `Partition::read_for_consumer`.
    ReadCommittedIgnoresLso,
    /// `no-zombie-fence`: InitProducerId with a transactional id does not bump the producer
    /// epoch (neither for a new producer nor when fencing an open transaction), so a zombie
    /// producer of the same transactional id keeps writing and committing. Lives in
    /// `coordinator/txn/transitions.rs` (`init_producer_id`).
    NoZombieFence,
    /// `commit-before-markers`: the coordinator writes CompleteCommit before any commit
    /// marker is written, and sends the markers once without retrying: a marker lost to a
    /// leader change is never written, and the transaction's records are never committed on
    /// that partition. Lives in `coordinator/txn/markers.rs`.
    CommitBeforeMarkers,
    /// `skip-abort-marker`: an aborted transaction is completed without writing its abort
    /// markers, so its records stay open on their partitions. Lives in
    /// `coordinator/txn/markers.rs`.
    SkipAbortMarker,
    /// `skip-offset-fence`: an OffsetCommit from a member of another generation is accepted
    /// instead of `ILLEGAL_GENERATION`, so a zombie consumer's commit moves the group's
    /// position. Lives in `coordinator/group/offsets.rs` (`validate_commit`).
    SkipOffsetFence,
    /// `double-assign`: when the leader's SyncGroup completes a generation, the coordinator
    /// gives one other member the leader's own assignment instead of its own, so two members
    /// consume the same partitions for that generation. Lives in
    /// `coordinator/group/classic/ops.rs` (`ClassicGroup::sync`).
    DoubleAssign,
}

impl Canary {
    /// Every canary, in the order they are listed to users.
    pub const ALL: [Canary; 11] = [
        Canary::HwBeforeReplication,
        Canary::AckBeforeReplication,
        Canary::SkipIdempotentDedupe,
        Canary::SkipFollowerTruncation,
        Canary::ReadAboveHighWatermark,
        Canary::ReadCommittedIgnoresLso,
        Canary::NoZombieFence,
        Canary::CommitBeforeMarkers,
        Canary::SkipAbortMarker,
        Canary::SkipOffsetFence,
        Canary::DoubleAssign,
    ];

    /// The name used in `logjam.canaries`.
    pub fn name(self) -> &'static str {
        match self {
            Canary::HwBeforeReplication => "hw-before-replication",
            Canary::AckBeforeReplication => "ack-before-replication",
            Canary::SkipIdempotentDedupe => "skip-idempotent-dedupe",
            Canary::SkipFollowerTruncation => "skip-follower-truncation",
            Canary::ReadAboveHighWatermark => "read-above-high-watermark",
            Canary::ReadCommittedIgnoresLso => "read-committed-ignores-lso",
            Canary::NoZombieFence => "no-zombie-fence",
            Canary::CommitBeforeMarkers => "commit-before-markers",
            Canary::SkipAbortMarker => "skip-abort-marker",
            Canary::SkipOffsetFence => "skip-offset-fence",
            Canary::DoubleAssign => "double-assign",
        }
    }

    /// Every name, comma-separated, for error messages.
    pub fn known_names() -> String {
        Canary::ALL.map(Canary::name).join(", ")
    }

    fn bit(self) -> u32 {
        1 << (self as u32)
    }
}

impl fmt::Display for Canary {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A name that is not a canary.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown canary {name:?} (known: {known})", known = Canary::known_names())]
pub struct UnknownCanary {
    /// The name as written.
    pub name: String,
}

impl FromStr for Canary {
    type Err = UnknownCanary;

    fn from_str(name: &str) -> Result<Canary, UnknownCanary> {
        Canary::ALL
            .into_iter()
            .find(|canary| canary.name() == name)
            .ok_or_else(|| UnknownCanary {
                name: name.to_owned(),
            })
    }
}

/// The set of canaries switched on; empty by default.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct Canaries(u32);

impl Canaries {
    /// No canary: the node as it should behave.
    pub const NONE: Canaries = Canaries(0);

    /// This set with `canary` switched on as well.
    #[must_use]
    pub fn with(self, canary: Canary) -> Canaries {
        Canaries(self.0 | canary.bit())
    }

    /// Whether `canary` is switched on.
    pub fn is_on(self, canary: Canary) -> bool {
        self.0 & canary.bit() != 0
    }

    /// Whether no canary is on.
    pub fn is_empty(self) -> bool {
        self.0 == 0
    }

    /// The canaries switched on, in [`Canary::ALL`] order.
    pub fn iter(self) -> impl Iterator<Item = Canary> {
        Canary::ALL
            .into_iter()
            .filter(move |canary| self.is_on(*canary))
    }
}

impl FromStr for Canaries {
    type Err = UnknownCanary;

    /// Parses a comma-separated list of names; blanks around names and empty items are
    /// ignored, so the empty string is the empty set.
    fn from_str(list: &str) -> Result<Canaries, UnknownCanary> {
        list.split(',')
            .map(str::trim)
            .filter(|name| !name.is_empty())
            .try_fold(Canaries::NONE, |set, name| Ok(set.with(name.parse()?)))
    }
}

impl fmt::Display for Canaries {
    /// The names, comma-separated, or `none`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.is_empty() {
            return f.write_str("none");
        }
        let names: Vec<&str> = self.iter().map(Canary::name).collect();
        f.write_str(&names.join(","))
    }
}

/// Says loudly, in the log and on stderr, which canaries are on; silent when none is.
pub fn announce(canaries: Canaries) {
    if canaries.is_empty() {
        return;
    }
    tracing::warn!(%canaries, "CANARIES ON: this node has deliberate bugs switched on (logjam.canaries); never use it for a real test run");
    eprintln!(
        "WARNING: CANARIES ON: {canaries}: this node has deliberate bugs switched on \
         (logjam.canaries); never use it for a real test run"
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for canary in Canary::ALL {
            assert_eq!(canary.name().parse::<Canary>(), Ok(canary));
            assert_eq!(canary.to_string(), canary.name());
        }
    }

    #[test]
    fn lists_parse_to_sets() {
        let set: Canaries = " hw-before-replication ,, read-above-high-watermark "
            .parse()
            .unwrap();
        assert!(set.is_on(Canary::HwBeforeReplication));
        assert!(set.is_on(Canary::ReadAboveHighWatermark));
        assert!(!set.is_on(Canary::SkipIdempotentDedupe));
        assert_eq!(
            set.to_string(),
            "hw-before-replication,read-above-high-watermark"
        );
        assert_eq!("".parse::<Canaries>(), Ok(Canaries::NONE));
        assert_eq!(Canaries::NONE.to_string(), "none");
        let all = Canary::known_names().parse::<Canaries>().unwrap();
        assert_eq!(all.iter().collect::<Vec<_>>(), Canary::ALL);
    }

    #[test]
    fn unknown_names_are_refused_with_the_known_ones() {
        let error = "hw-before-replication,skip-dedupe"
            .parse::<Canaries>()
            .unwrap_err();
        assert_eq!(error.name, "skip-dedupe");
        let message = error.to_string();
        for canary in Canary::ALL {
            assert!(message.contains(canary.name()), "{message}");
        }
        // Names are exact: no case folding.
        assert!("HW-before-replication".parse::<Canary>().is_err());
    }
}
