//! The topic registry of a single node: names, topic ids, partition counts and topic configs.
//!
//! In Kafka this is part of the metadata image that brokers replay from `__cluster_metadata`.
//! Until the KRaft quorum exists (its own issue), a node keeps the registry in
//! `<data dir>/logjam-topics.json`, written with write-temp, fsync, rename, so a topic created
//! before a crash is still there after it. Validation rules (legal names, topic-level config
//! keys) are Kafka's and stay when the registry moves into the metadata log.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use uuid::Uuid;

/// File name of the registry inside the node's data directory.
pub const REGISTRY_FILE: &str = "logjam-topics.json";

/// Kafka's limit on topic name length.
pub const TOPIC_NAME_MAX_LENGTH: usize = 249;

/// Topic-level configuration keys this node accepts in CreateTopics.
pub const TOPIC_CONFIG_KEYS: &[&str] = &[
    "cleanup.policy",
    "compression.type",
    "flush.messages",
    "flush.ms",
    "index.interval.bytes",
    "max.message.bytes",
    "message.timestamp.type",
    "min.insync.replicas",
    "retention.bytes",
    "retention.ms",
    "segment.bytes",
    "unclean.leader.election.enable",
];

/// One topic as the node knows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TopicInfo {
    /// The topic name.
    pub name: String,
    /// The topic id (Produce v13 and Fetch v13+ address topics by id).
    pub id: Uuid,
    /// Number of partitions, numbered from 0.
    pub partitions: i32,
    /// Replication factor (1 on a single node).
    pub replication_factor: i16,
    /// Topic-level configuration overrides, by Kafka's topic config names.
    pub configs: BTreeMap<String, String>,
}

/// Why a topic name or config is rejected, mapped to Kafka error codes by the handlers.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TopicError {
    /// The name is empty, `.`/`..`, too long or has characters outside `[a-zA-Z0-9._-]`.
    #[error("invalid topic name {name:?}: {reason}")]
    InvalidName {
        /// The name.
        name: String,
        /// Why.
        reason: &'static str,
    },
    /// A config key that is not a topic config, or a value that does not parse.
    #[error("invalid topic config `{key}`={value:?}: {reason}")]
    InvalidConfig {
        /// The key.
        key: String,
        /// The value.
        value: String,
        /// Why.
        reason: &'static str,
    },
}

/// Checks a topic name against Kafka's rules (`Topic.validate`).
///
/// # Errors
/// [`TopicError::InvalidName`] naming the rule broken.
pub fn validate_topic_name(name: &str) -> Result<(), TopicError> {
    let invalid = |reason| {
        Err(TopicError::InvalidName {
            name: name.to_owned(),
            reason,
        })
    };
    if name.is_empty() {
        return invalid("empty");
    }
    if name == "." || name == ".." {
        return invalid("`.` and `..` are not allowed");
    }
    if name.len() > TOPIC_NAME_MAX_LENGTH {
        return invalid("longer than 249 characters");
    }
    if !name
        .bytes()
        .all(|byte| byte.is_ascii_alphanumeric() || b"._-".contains(&byte))
    {
        return invalid("only ASCII letters, digits, '.', '_' and '-' are allowed");
    }
    Ok(())
}

/// Checks one topic-level config entry.
///
/// # Errors
/// [`TopicError::InvalidConfig`] for an unknown key or a value of the wrong shape.
pub fn validate_topic_config(key: &str, value: &str) -> Result<(), TopicError> {
    let invalid = |reason| {
        Err(TopicError::InvalidConfig {
            key: key.to_owned(),
            value: value.to_owned(),
            reason,
        })
    };
    match key {
        "min.insync.replicas"
        | "flush.messages"
        | "flush.ms"
        | "segment.bytes"
        | "max.message.bytes"
        | "index.interval.bytes" => match value.parse::<i64>() {
            Ok(number) if number >= 1 || key == "index.interval.bytes" && number >= 0 => Ok(()),
            _ => invalid("expected a positive integer"),
        },
        "retention.ms" | "retention.bytes" => match value.parse::<i64>() {
            Ok(number) if number >= -1 => Ok(()),
            _ => invalid("expected an integer >= -1"),
        },
        "unclean.leader.election.enable" => match value {
            "true" | "false" => Ok(()),
            _ => invalid("expected `true` or `false`"),
        },
        "cleanup.policy" => match value {
            "delete" => Ok(()),
            _ => invalid("only `delete` is supported (compaction is not built yet)"),
        },
        "compression.type" => match value {
            "producer" | "uncompressed" | "gzip" | "snappy" | "lz4" | "zstd" => Ok(()),
            _ => invalid("unknown compression type"),
        },
        "message.timestamp.type" => match value {
            "CreateTime" => Ok(()),
            _ => invalid("only `CreateTime` is supported"),
        },
        _ => invalid("not a topic configuration key"),
    }
}

/// Why the registry file could not be loaded or saved.
#[derive(Debug, thiserror::Error)]
pub enum RegistryError {
    /// Reading or writing the file failed.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// The file exists but is not a registry.
    #[error("{path}: malformed topic registry: {source}")]
    Malformed {
        /// The file.
        path: PathBuf,
        /// The parse error (it names line and column).
        source: serde_json::Error,
    },
}

/// The set of topics, persisted on every change.
#[derive(Debug)]
pub struct TopicRegistry {
    path: PathBuf,
    topics: BTreeMap<String, TopicInfo>,
}

impl TopicRegistry {
    /// Loads the registry from `data_dir`, or starts an empty one.
    ///
    /// # Errors
    /// [`RegistryError`] when the file exists but cannot be read or parsed.
    pub fn open(data_dir: &Path) -> Result<TopicRegistry, RegistryError> {
        let path = data_dir.join(REGISTRY_FILE);
        let topics = match std::fs::read(&path) {
            Ok(bytes) => serde_json::from_slice::<Vec<TopicInfo>>(&bytes)
                .map_err(|source| RegistryError::Malformed {
                    path: path.clone(),
                    source,
                })?
                .into_iter()
                .map(|topic| (topic.name.clone(), topic))
                .collect(),
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => BTreeMap::new(),
            Err(source) => return Err(RegistryError::Io { path, source }),
        };
        Ok(TopicRegistry { path, topics })
    }

    /// The topic called `name`.
    pub fn by_name(&self, name: &str) -> Option<&TopicInfo> {
        self.topics.get(name)
    }

    /// The topic with id `id`.
    pub fn by_id(&self, id: Uuid) -> Option<&TopicInfo> {
        self.topics.values().find(|topic| topic.id == id)
    }

    /// All topics, by name.
    pub fn iter(&self) -> impl Iterator<Item = &TopicInfo> {
        self.topics.values()
    }

    /// Adds a topic and persists the registry before returning, so an acknowledged
    /// CreateTopics survives a crash.
    ///
    /// # Errors
    /// [`RegistryError::Io`] when the file cannot be written; the topic is then not added.
    pub fn insert(&mut self, topic: TopicInfo) -> Result<(), RegistryError> {
        let mut next = self.topics.clone();
        next.insert(topic.name.clone(), topic);
        self.save(&next)?;
        self.topics = next;
        Ok(())
    }

    fn save(&self, topics: &BTreeMap<String, TopicInfo>) -> Result<(), RegistryError> {
        let io = |source| RegistryError::Io {
            path: self.path.clone(),
            source,
        };
        let list: Vec<&TopicInfo> = topics.values().collect();
        let bytes = serde_json::to_vec_pretty(&list).expect("topic registry serializes");
        let temp = self.path.with_extension("json.tmp");
        let mut file = std::fs::File::create(&temp).map_err(io)?;
        file.write_all(&bytes).map_err(io)?;
        file.sync_all().map_err(io)?;
        std::fs::rename(&temp, &self.path).map_err(io)?;
        if let Some(parent) = self.path.parent() {
            std::fs::File::open(parent)
                .and_then(|dir| dir.sync_all())
                .map_err(io)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn topic_names_follow_kafka_rules() {
        for good in ["a", "queue-0", "A.b_c-1", &"x".repeat(249)] {
            assert_eq!(validate_topic_name(good), Ok(()), "{good}");
        }
        for bad in ["", ".", "..", "a b", "tópic", "a/b", &"x".repeat(250)] {
            assert!(validate_topic_name(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn topic_configs_are_checked() {
        assert_eq!(validate_topic_config("min.insync.replicas", "2"), Ok(()));
        assert!(validate_topic_config("min.insync.replicas", "0").is_err());
        assert!(validate_topic_config("unclean.leader.election.enable", "maybe").is_err());
        assert!(validate_topic_config("no.such.key", "1").is_err());
    }

    #[test]
    fn registry_survives_reopen_and_rejects_garbage() {
        let dir = tempfile::tempdir().unwrap();
        let mut registry = TopicRegistry::open(dir.path()).unwrap();
        let topic = TopicInfo {
            name: "t".into(),
            id: Uuid::new_v4(),
            partitions: 3,
            replication_factor: 1,
            configs: BTreeMap::from([("min.insync.replicas".into(), "1".into())]),
        };
        registry.insert(topic.clone()).unwrap();
        let reopened = TopicRegistry::open(dir.path()).unwrap();
        assert_eq!(reopened.by_name("t"), Some(&topic));
        assert_eq!(reopened.by_id(topic.id), Some(&topic));

        std::fs::write(dir.path().join(REGISTRY_FILE), b"{not json").unwrap();
        let error = TopicRegistry::open(dir.path()).unwrap_err();
        assert!(error.to_string().contains(REGISTRY_FILE), "{error}");
    }
}
