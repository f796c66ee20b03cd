//! Kafka's topic rules (legal names, topic-level config keys and values) and [`TopicInfo`], the
//! summary of a topic that handlers work with. The topics themselves live in the metadata
//! image replayed from `__cluster_metadata` (see [`crate::metadata`]); the controller applies
//! these rules before it writes a `TopicRecord`.

pub mod creator;

use std::collections::BTreeMap;

use kafka_protocol::ResponseError;
use serde::{Deserialize, Serialize};
use uuid::Uuid;

pub use creator::TopicCreator;

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
            "CreateTime" | "LogAppendTime" => Ok(()),
            _ => invalid("`CreateTime` or `LogAppendTime`"),
        },
        _ => invalid("not a topic configuration key"),
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
}

/// The most partitions one topic creation may ask for. Kafka's controller refuses to generate
/// more than 10,000 records for one request (`MAX_RECORDS_PER_USER_OP`); without a bound, one
/// CreateTopics asking for two billion partitions would make a node try to open them all.
pub const MAX_PARTITIONS_PER_TOPIC: i32 = 10_000;

/// Why a topic could not be created; each maps to a Kafka error code.
#[derive(Debug, thiserror::Error)]
pub enum CreateTopicError {
    /// A topic with that name exists.
    #[error("the topic already exists")]
    AlreadyExists,
    /// The name breaks Kafka's naming rules.
    #[error(transparent)]
    InvalidName(TopicError),
    /// A topic config key or value is not acceptable.
    #[error(transparent)]
    InvalidConfig(TopicError),
    /// The partition count is below 1 or above [`MAX_PARTITIONS_PER_TOPIC`].
    #[error("the number of partitions must be between 1 and 10000, got {requested}")]
    InvalidPartitions {
        /// What was asked for.
        requested: i32,
    },
    /// The replication factor is below 1 or above the number of brokers.
    #[error("replication factor {requested} is not between 1 and the {brokers} available brokers")]
    InvalidReplicationFactor {
        /// What was asked for.
        requested: i16,
        /// Brokers available.
        brokers: i16,
    },
    /// A manual assignment names a broker that does not exist.
    #[error("the replica assignment names an unknown broker")]
    InvalidReplicaAssignment,
    /// The request contradicts itself.
    #[error("{0}")]
    InvalidRequest(&'static str),
    /// Creating a log failed.
    #[error("storage error: {0}")]
    Storage(String),
    /// The controller answered with another error, or did not answer.
    #[error("the controller refused the topic: {0:?}")]
    Controller(ResponseError),
}

impl CreateTopicError {
    /// The Kafka error code for this failure.
    pub fn response_error(&self) -> ResponseError {
        match self {
            CreateTopicError::AlreadyExists => ResponseError::TopicAlreadyExists,
            CreateTopicError::InvalidName(_) => ResponseError::InvalidTopicException,
            CreateTopicError::InvalidConfig(_) => ResponseError::InvalidConfig,
            CreateTopicError::InvalidPartitions { .. } => ResponseError::InvalidPartitions,
            CreateTopicError::InvalidReplicationFactor { .. } => {
                ResponseError::InvalidReplicationFactor
            }
            CreateTopicError::InvalidReplicaAssignment => ResponseError::InvalidReplicaAssignment,
            CreateTopicError::InvalidRequest(_) => ResponseError::InvalidRequest,
            CreateTopicError::Storage(_) => ResponseError::KafkaStorageError,
            CreateTopicError::Controller(error) => *error,
        }
    }
}

impl TopicInfo {
    /// The summary of a topic of the metadata image.
    pub fn from_image(topic: &crate::metadata::TopicImage) -> TopicInfo {
        TopicInfo {
            name: topic.name.clone(),
            id: topic.id,
            partitions: topic.partitions.len() as i32,
            replication_factor: topic
                .partitions
                .values()
                .next()
                .map_or(0, |p| p.replicas.len() as i16),
            configs: topic.configs.clone(),
        }
    }
}
