//! The header line of a history (line 1): schema version, workload, seed, start time, nodes and
//! the run's full configuration, plus the optional key → topic-partition map the durability
//! report uses. Version checks live here so every reader rejects unknown majors the same way.

use std::fmt;

use serde::{Deserialize, Serialize};

use crate::ids::Key;

/// The schema major version this crate writes and reads.
pub const SCHEMA_VERSION: u32 = 1;

/// Line 1 of every history file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Header {
    /// Schema major version; readers reject majors they do not know.
    pub schema_version: u32,
    /// Workload name (`queue`, `register`, ...); selects the checker policy.
    pub workload: String,
    /// The one seed that drove generators and the fault schedule.
    pub seed: u64,
    /// RFC 3339 wall-clock time at which op time 0 was taken.
    pub start_time: String,
    /// Names of the cluster's nodes, as nemesis targets refer to them.
    #[serde(default)]
    pub nodes: Vec<String>,
    /// Full run configuration, free-form. Keys the checkers read are listed in the crate doc.
    #[serde(default)]
    pub config: serde_json::Value,
}

/// A Kafka topic-partition, as the header's `key_topic_partitions` map names it.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct TopicPartition {
    /// Topic name.
    pub topic: String,
    /// Partition number within the topic.
    pub partition: i32,
}

impl fmt::Display for TopicPartition {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}-{}", self.topic, self.partition)
    }
}

impl Header {
    /// A header for the current schema version with an empty configuration.
    pub fn new(workload: impl Into<String>, seed: u64, start_time: impl Into<String>) -> Header {
        Header {
            schema_version: SCHEMA_VERSION,
            workload: workload.into(),
            seed,
            start_time: start_time.into(),
            nodes: Vec::new(),
            config: serde_json::Value::Object(serde_json::Map::new()),
        }
    }

    /// The topic-partition of `key`, from `config.key_topic_partitions` when present.
    pub fn topic_partition(&self, key: Key) -> Option<TopicPartition> {
        let entry = self
            .config
            .get("key_topic_partitions")?
            .get(key.0.to_string())?;
        serde_json::from_value(entry.clone()).ok()
    }

    /// A boolean setting from `config`, e.g. `ww_deps`.
    pub fn config_bool(&self, name: &str) -> Option<bool> {
        self.config.get(name)?.as_bool()
    }
}

/// Only the version field, parsed first so an unknown major gets a clear message even when
/// the rest of its header would not parse.
#[derive(Deserialize)]
pub(crate) struct VersionProbe {
    pub(crate) schema_version: serde_json::Value,
}
