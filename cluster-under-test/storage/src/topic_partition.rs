//! `TopicPartition`: the name of one partition, and its on-disk directory name
//! (`<topic>-<partition>`). The log directory layout itself lives in `manager.rs`.

use std::fmt;
use std::str::FromStr;

use crate::error::{Error, Result};

/// One partition of one topic, displayed (and named on disk) as `topic-partition`.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct TopicPartition {
    /// Topic name. May itself contain `-`, which is why parsing splits at the last `-`.
    pub topic: String,
    /// Partition index within the topic (`>= 0`).
    pub partition: i32,
}

impl TopicPartition {
    /// A partition of `topic`.
    pub fn new(topic: impl Into<String>, partition: i32) -> Self {
        TopicPartition {
            topic: topic.into(),
            partition,
        }
    }

    /// The partition directory name inside a log dir, e.g. `orders-3`.
    pub fn dir_name(&self) -> String {
        self.to_string()
    }

    /// Parses a partition directory name, splitting at the **last** `-` so that topics such as
    /// `my-topic` round-trip.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidPartitionDirName`] when there is no `-`, the topic is empty, or the
    /// partition is not a non-negative integer.
    pub fn from_dir_name(name: &str) -> Result<Self> {
        let invalid = || Error::InvalidPartitionDirName {
            name: name.to_owned(),
        };
        let (topic, partition) = name.rsplit_once('-').ok_or_else(invalid)?;
        if topic.is_empty()
            || partition.is_empty()
            || !partition.bytes().all(|b| b.is_ascii_digit())
        {
            return Err(invalid());
        }
        let partition: i32 = partition.parse().map_err(|_| invalid())?;
        Ok(TopicPartition::new(topic, partition))
    }
}

impl fmt::Display for TopicPartition {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}-{}", self.topic, self.partition)
    }
}

impl FromStr for TopicPartition {
    type Err = Error;

    fn from_str(s: &str) -> Result<Self> {
        TopicPartition::from_dir_name(s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dir_name_round_trips_topics_with_dashes() {
        let tp = TopicPartition::new("my-long-topic", 12);
        assert_eq!(tp.dir_name(), "my-long-topic-12");
        assert_eq!(
            TopicPartition::from_dir_name("my-long-topic-12").unwrap(),
            tp
        );
    }

    #[test]
    fn dir_name_without_partition_is_rejected() {
        for bad in ["orders", "orders-", "-3", "orders-x", "lost+found"] {
            assert!(
                TopicPartition::from_dir_name(bad).is_err(),
                "{bad} accepted"
            );
        }
    }
}
