//! Newtypes for every id and position that crosses a module boundary: offsets, partitions,
//! leader epochs, broker ids, producer ids/epochs and sequences, and `TopicPartition`.
//!
//! Wire values stay `i32`/`i64` inside `kafka-protocol` messages; these types exist so that an
//! offset can never be passed where a sequence was meant. Conversions happen at the edges
//! (`connection.rs` users: `metadata.rs`, `producer/sender.rs`, `consumer.rs`, `admin.rs`).

use std::fmt;
use std::sync::Arc;

macro_rules! newtype {
    ($(#[$doc:meta])* $name:ident($inner:ty)) => {
        $(#[$doc])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
        pub struct $name(pub $inner);

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                self.0.fmt(f)
            }
        }
    };
}

newtype!(
    /// A record's position in a partition's log.
    Offset(i64)
);
newtype!(
    /// A partition index within a topic.
    Partition(i32)
);
newtype!(
    /// The epoch of a partition's leadership (KIP-101); -1 when unknown.
    LeaderEpoch(i32)
);
newtype!(
    /// A broker's `node.id`.
    BrokerId(i32)
);
newtype!(
    /// A producer id handed out by `InitProducerId`; -1 when there is none.
    ProducerId(i64)
);
newtype!(
    /// The epoch of a producer id; -1 when there is none.
    ProducerEpoch(i16)
);
newtype!(
    /// A record batch's base sequence for the idempotent producer; -1 when not idempotent.
    Sequence(i32)
);

impl LeaderEpoch {
    /// The wire value meaning "no epoch known".
    pub const UNKNOWN: LeaderEpoch = LeaderEpoch(-1);
}

impl ProducerId {
    /// The wire value meaning "no producer id" (non-idempotent batches).
    pub const NONE: ProducerId = ProducerId(-1);
}

impl ProducerEpoch {
    /// The wire value meaning "no producer epoch" (non-idempotent batches).
    pub const NONE: ProducerEpoch = ProducerEpoch(-1);
}

impl Sequence {
    /// The wire value meaning "no sequence" (non-idempotent batches).
    pub const NONE: Sequence = Sequence(-1);

    /// The sequence `count` records after this one, wrapping at `i32::MAX` to 0 as Kafka does.
    pub fn advance(self, count: i32) -> Sequence {
        debug_assert!(self.0 >= 0 && count >= 0);
        let next = i64::from(self.0) + i64::from(count);
        Sequence((next % (i64::from(i32::MAX) + 1)) as i32)
    }
}

/// A topic name and a partition index: Kafka's unit of ordering.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct TopicPartition {
    /// The topic name, shared: every record a poll returns carries its partition, so cloning
    /// this must not allocate (Java's `ConsumerRecord` likewise holds a reference to one
    /// `String`).
    pub topic: Arc<str>,
    /// The partition index within the topic.
    pub partition: Partition,
}

impl TopicPartition {
    /// Builds a topic-partition.
    pub fn new(topic: impl Into<Arc<str>>, partition: i32) -> TopicPartition {
        TopicPartition {
            topic: topic.into(),
            partition: Partition(partition),
        }
    }
}

impl fmt::Display for TopicPartition {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}-{}", self.topic, self.partition)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sequence_wraps_to_zero_after_i32_max() {
        assert_eq!(Sequence(5).advance(3), Sequence(8));
        assert_eq!(Sequence(i32::MAX).advance(1), Sequence(0));
        assert_eq!(Sequence(i32::MAX - 1).advance(3), Sequence(1));
    }
}
