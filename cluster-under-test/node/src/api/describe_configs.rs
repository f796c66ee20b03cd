//! DescribeConfigs (v1-v4): a topic's effective configuration and this broker's, as Kafka's
//! `ConfigHelper.describeConfigs` reports them, so an operator (or `kafka-configs
//! --describe`, an admin client, a test suite) can check what `min.insync.replicas` or
//! `unclean.leader.election.enable` a topic really runs with.
//!
//! - A topic (resource type 2) lists every topic config this node knows (`TOPIC_CONFIG_KEYS`):
//!   the topic's override (`TOPIC_CONFIG`), else the broker setting it falls back to when the
//!   file set it (`STATIC_BROKER_CONFIG`), else the default (`DEFAULT_CONFIG`). Synonyms, when
//!   asked, list those candidates in that order, broker values as written (`log.retention.hours`
//!   stays in hours; the config's value is in its own unit). An unknown topic is
//!   `UNKNOWN_TOPIC_OR_PARTITION`, an illegal name `INVALID_TOPIC_EXCEPTION`.
//! - A broker (type 4) named by this node's id lists every key of the node's property table,
//!   read-only (nothing is dynamically updatable here). The empty name (the cluster-wide
//!   dynamic defaults) lists nothing: there are none. Another id or a non-number is
//!   `INVALID_REQUEST`, as in Kafka.
//! - Other resource types (broker loggers, client metrics, groups) are `INVALID_REQUEST`.
//!
//! `ConfigurationKeys` filters the list (null or empty: all); documentation is not served
//! (null).

use std::collections::BTreeMap;

use kafka_protocol::ResponseError;
use kafka_protocol::messages::describe_configs_response::{
    DescribeConfigsResourceResult, DescribeConfigsResult, DescribeConfigsSynonym,
};
use kafka_protocol::messages::{DescribeConfigsRequest, DescribeConfigsResponse};
use kafka_protocol::protocol::StrBytes;

use crate::config::{Config, KEYS, Kind};
use crate::replica::ReplicaManager;
use crate::topics::validate_topic_name;

const TOPIC: i8 = 2;
const BROKER: i8 = 4;

/// Kafka's `ConfigSource`.
const TOPIC_CONFIG: i8 = 1;
const STATIC_BROKER_CONFIG: i8 = 4;
const DEFAULT_CONFIG: i8 = 5;

/// Kafka's `ConfigType`.
const BOOLEAN: i8 = 1;
const STRING: i8 = 2;
const INT: i8 = 3;
const LONG: i8 = 5;
const LIST: i8 = 7;

/// A topic config: its type, the broker settings it falls back to (Kafka's
/// `ServerTopicConfigSynonyms`) with the factor from each one's unit to the topic's, and its
/// default when no broker key of this node's table holds one.
struct TopicConfig {
    name: &'static str,
    config_type: i8,
    synonyms: &'static [(&'static str, i64)],
    default: &'static str,
}

const fn topic(
    name: &'static str,
    config_type: i8,
    synonyms: &'static [(&'static str, i64)],
    default: &'static str,
) -> TopicConfig {
    TopicConfig {
        name,
        config_type,
        synonyms,
        default,
    }
}

const TOPIC_CONFIGS: &[TopicConfig] = &[
    topic(
        "cleanup.policy",
        LIST,
        &[("log.cleanup.policy", 1)],
        "delete",
    ),
    topic(
        "compression.type",
        STRING,
        &[("compression.type", 1)],
        "producer",
    ),
    topic(
        "flush.messages",
        LONG,
        &[("log.flush.interval.messages", 1)],
        "",
    ),
    topic(
        "flush.ms",
        LONG,
        &[
            ("log.flush.interval.ms", 1),
            ("log.flush.scheduler.interval.ms", 1),
        ],
        "",
    ),
    topic(
        "index.interval.bytes",
        INT,
        &[("log.index.interval.bytes", 1)],
        "",
    ),
    topic("max.message.bytes", INT, &[("message.max.bytes", 1)], ""),
    topic(
        "message.timestamp.type",
        STRING,
        &[("log.message.timestamp.type", 1)],
        "CreateTime",
    ),
    topic(
        "min.insync.replicas",
        INT,
        &[("min.insync.replicas", 1)],
        "",
    ),
    topic("retention.bytes", LONG, &[("log.retention.bytes", 1)], ""),
    topic(
        "retention.ms",
        LONG,
        &[
            ("log.retention.ms", 1),
            ("log.retention.minutes", 60_000),
            ("log.retention.hours", 3_600_000),
        ],
        "",
    ),
    topic("segment.bytes", INT, &[("log.segment.bytes", 1)], ""),
    topic(
        "unclean.leader.election.enable",
        BOOLEAN,
        &[("unclean.leader.election.enable", 1)],
        "",
    ),
];

/// One described config, before encoding.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Entry {
    name: String,
    value: Option<String>,
    source: i8,
    read_only: bool,
    config_type: i8,
    /// (name, value, source), most specific first.
    synonyms: Vec<(String, Option<String>, i8)>,
}

/// Answers every resource of the request independently.
pub fn handle(
    config: &Config,
    replicas: &ReplicaManager,
    request: &DescribeConfigsRequest,
) -> DescribeConfigsResponse {
    let results = request
        .resources
        .iter()
        .map(|resource| {
            let name = resource.resource_name.as_str();
            let described = match resource.resource_type {
                TOPIC => match validate_topic_name(name) {
                    Err(error) => Err((ResponseError::InvalidTopicException, error.to_string())),
                    Ok(()) => replicas
                        .topic_by_name(name)
                        .map(|topic| topic_entries(&topic.configs, config))
                        .ok_or((
                            ResponseError::UnknownTopicOrPartition,
                            format!("topic {name} does not exist"),
                        )),
                },
                BROKER => broker_entries(name, config),
                other => Err((
                    ResponseError::InvalidRequest,
                    format!("unsupported resource type {other}"),
                )),
            };
            let result = DescribeConfigsResult::default()
                .with_resource_type(resource.resource_type)
                .with_resource_name(resource.resource_name.clone());
            match described {
                Err((error, message)) => result
                    .with_error_code(error.code())
                    .with_error_message(Some(StrBytes::from_string(message))),
                Ok(entries) => result.with_configs(
                    entries
                        .into_iter()
                        .filter(|entry| {
                            // Null or empty: every config (Kafka's ConfigHelper).
                            resource.configuration_keys.as_ref().is_none_or(|keys| {
                                keys.is_empty() || keys.iter().any(|key| key.as_str() == entry.name)
                            })
                        })
                        .map(|entry| encode(entry, request.include_synonyms))
                        .collect(),
                ),
            }
        })
        .collect();
    DescribeConfigsResponse::default().with_results(results)
}

fn encode(entry: Entry, include_synonyms: bool) -> DescribeConfigsResourceResult {
    let text = |value: Option<String>| value.map(StrBytes::from_string);
    let synonyms = if include_synonyms {
        entry
            .synonyms
            .into_iter()
            .map(|(name, value, source)| {
                DescribeConfigsSynonym::default()
                    .with_name(StrBytes::from_string(name))
                    .with_value(text(value))
                    .with_source(source)
            })
            .collect()
    } else {
        Vec::new()
    };
    DescribeConfigsResourceResult::default()
        .with_name(StrBytes::from_string(entry.name))
        .with_value(text(entry.value))
        .with_read_only(entry.read_only)
        .with_config_source(entry.source)
        .with_is_sensitive(false)
        .with_synonyms(synonyms)
        .with_config_type(entry.config_type)
        .with_documentation(None)
}

/// A topic's configs: its overrides, else the broker's settings, else the defaults.
fn topic_entries(overrides: &BTreeMap<String, String>, broker: &Config) -> Vec<Entry> {
    TOPIC_CONFIGS
        .iter()
        .map(|topic| {
            let mut synonyms = Vec::new();
            if let Some(value) = overrides.get(topic.name) {
                synonyms.push((topic.name.to_owned(), Some(value.clone()), TOPIC_CONFIG));
            }
            // The broker keys the file set, then the first one with a default.
            let mut effective: Option<String> = None;
            for &(key, factor) in topic.synonyms {
                if broker.set.contains(key)
                    && let Some(value) = broker.raw.get(key)
                {
                    synonyms.push((key.to_owned(), Some(value.clone()), STATIC_BROKER_CONFIG));
                    effective = effective.or_else(|| Some(scaled(value, factor)));
                }
            }
            let default = topic.synonyms.iter().find_map(|&(key, factor)| {
                let value = broker.raw.get(key).filter(|_| !broker.set.contains(key))?;
                Some((key, value.clone(), scaled(value, factor)))
            });
            let default = default.or_else(|| {
                let (key, _) = topic.synonyms.first()?;
                (!topic.default.is_empty())
                    .then(|| (*key, topic.default.to_owned(), topic.default.to_owned()))
            });
            if let Some((key, value, _)) = &default {
                synonyms.push(((*key).to_owned(), Some(value.clone()), DEFAULT_CONFIG));
            }
            let (value, source) = match (overrides.get(topic.name), effective, default) {
                (Some(value), _, _) => (Some(value.clone()), TOPIC_CONFIG),
                (None, Some(value), _) => (Some(value), STATIC_BROKER_CONFIG),
                (None, None, Some((_, _, value))) => (Some(value), DEFAULT_CONFIG),
                (None, None, None) => (None, DEFAULT_CONFIG),
            };
            Entry {
                name: topic.name.to_owned(),
                value,
                source,
                read_only: false,
                config_type: topic.config_type,
                synonyms,
            }
        })
        .collect()
}

/// A broker value in its own unit, in the topic config's (hours and minutes to milliseconds).
fn scaled(value: &str, factor: i64) -> String {
    match (factor, value.trim().parse::<i64>()) {
        (1, _) | (_, Err(_)) => value.to_owned(),
        // -1 (unlimited) stays -1 whatever the unit.
        (_, Ok(number)) if number < 0 => number.to_string(),
        (_, Ok(number)) => number.saturating_mul(factor).to_string(),
    }
}

/// This broker's configs when `name` is its id; none for the cluster-wide defaults ("").
fn broker_entries(name: &str, config: &Config) -> Result<Vec<Entry>, (ResponseError, String)> {
    if name.is_empty() {
        return Ok(Vec::new());
    }
    let id = config.node_id;
    match name.parse::<i32>() {
        Err(_) => Err((
            ResponseError::InvalidRequest,
            format!("broker id must be an integer, but it is: {name}"),
        )),
        Ok(asked) if asked != id => Err((
            ResponseError::InvalidRequest,
            format!("unexpected broker id, expected {id} or empty string, but received {asked}"),
        )),
        Ok(_) => Ok(KEYS
            .iter()
            .map(|spec| {
                let value = config.raw.get(spec.name).cloned();
                let source = if config.set.contains(spec.name) {
                    STATIC_BROKER_CONFIG
                } else {
                    DEFAULT_CONFIG
                };
                Entry {
                    name: spec.name.to_owned(),
                    synonyms: vec![(spec.name.to_owned(), value.clone(), source)],
                    value,
                    source,
                    read_only: true,
                    config_type: match spec.kind {
                        Kind::Int => INT,
                        Kind::Long => LONG,
                        Kind::Bool => BOOLEAN,
                        Kind::Str => STRING,
                        Kind::List => LIST,
                    },
                }
            })
            .collect()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::topics::TOPIC_CONFIG_KEYS;

    fn broker(text: &str) -> Config {
        Config::parse(
            &format!("node.id=1\nprocess.roles=broker,controller\n{text}"),
            &[],
        )
        .unwrap()
    }

    fn entry<'a>(entries: &'a [Entry], name: &str) -> &'a Entry {
        entries.iter().find(|e| e.name == name).unwrap()
    }

    #[test]
    fn every_topic_config_the_node_accepts_is_described() {
        let names: Vec<&str> = TOPIC_CONFIGS.iter().map(|t| t.name).collect();
        assert_eq!(names, TOPIC_CONFIG_KEYS);
    }

    #[test]
    fn a_topic_config_comes_from_its_override_else_the_brokers_file_else_the_default() {
        let config = broker("min.insync.replicas=2\nlog.retention.hours=1");
        let overrides = BTreeMap::from([(
            "unclean.leader.election.enable".to_owned(),
            "true".to_owned(),
        )]);
        let entries = topic_entries(&overrides, &config);
        let unclean = entry(&entries, "unclean.leader.election.enable");
        assert_eq!(
            (unclean.value.as_deref(), unclean.source),
            (Some("true"), TOPIC_CONFIG)
        );
        assert_eq!(
            unclean.synonyms[0],
            (
                "unclean.leader.election.enable".to_owned(),
                Some("true".to_owned()),
                TOPIC_CONFIG
            )
        );
        let min_isr = entry(&entries, "min.insync.replicas");
        assert_eq!(
            (min_isr.value.as_deref(), min_isr.source),
            (Some("2"), STATIC_BROKER_CONFIG)
        );
        let retention = entry(&entries, "retention.ms");
        assert_eq!(
            (retention.value.as_deref(), retention.source),
            (Some("3600000"), STATIC_BROKER_CONFIG),
            "hours become milliseconds"
        );
        assert_eq!(
            retention.synonyms[0],
            (
                "log.retention.hours".to_owned(),
                Some("1".to_owned()),
                STATIC_BROKER_CONFIG
            )
        );
        let segment = entry(&entries, "segment.bytes");
        assert_eq!(
            (segment.value.as_deref(), segment.source),
            (Some("1073741824"), DEFAULT_CONFIG)
        );
        let cleanup = entry(&entries, "cleanup.policy");
        assert_eq!(
            (cleanup.value.as_deref(), cleanup.source),
            (Some("delete"), DEFAULT_CONFIG)
        );
        let appended = topic_entries(
            &BTreeMap::new(),
            &broker("log.message.timestamp.type=LogAppendTime"),
        );
        let stamp = entry(&appended, "message.timestamp.type");
        assert_eq!(
            (stamp.value.as_deref(), stamp.source),
            (Some("LogAppendTime"), STATIC_BROKER_CONFIG)
        );
        let defaults = topic_entries(&BTreeMap::new(), &broker(""));
        let retention = entry(&defaults, "retention.ms");
        assert_eq!(
            (retention.value.as_deref(), retention.source),
            (Some("604800000"), DEFAULT_CONFIG),
            "168 hours"
        );
    }

    #[test]
    fn a_broker_is_described_by_its_own_id_only() {
        let config = broker("min.insync.replicas=2");
        let entries = broker_entries("1", &config).unwrap();
        let min_isr = entry(&entries, "min.insync.replicas");
        assert_eq!(
            (min_isr.value.as_deref(), min_isr.source, min_isr.read_only),
            (Some("2"), STATIC_BROKER_CONFIG, true)
        );
        let lag = entry(&entries, "replica.lag.time.max.ms");
        assert_eq!(
            (lag.value.as_deref(), lag.source, lag.config_type),
            (Some("30000"), DEFAULT_CONFIG, LONG)
        );
        assert_eq!(broker_entries("", &config).unwrap(), Vec::new());
        for other in ["2", "one"] {
            let (error, _) = broker_entries(other, &config).unwrap_err();
            assert_eq!(error, ResponseError::InvalidRequest);
        }
    }
}
