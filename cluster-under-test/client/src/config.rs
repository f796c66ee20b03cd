//! Client configuration with Kafka's property names and Kafka 4's defaults: one struct each for
//! the producer, the consumer and the admin client, parsed from `key=value` pairs.
//!
//! Unknown keys are errors naming the key (a typo must not silently keep a default). The
//! producer's idempotence rules follow Kafka 4 (`ProducerConfig.postProcessAndValidate...`,
//! KAFKA-13673): idempotence needs `acks=all`, `retries > 0` and
//! `max.in.flight.requests.per.connection <= 5`; when `enable.idempotence=true` was set
//! explicitly a conflict is an error, when it is only the default a conflict quietly turns
//! idempotence off. `delivery.timeout.ms` must be at least `linger.ms + request.timeout.ms`:
//! an explicit smaller value is an error, an implicit one is raised.
//!
//! This module only parses and validates; the producer, consumer and admin read the structs.

use std::time::Duration;

use thiserror::Error;

mod group;

pub use group::{AssignmentStrategy, GroupConfig, GroupProtocol};

/// A configuration problem, naming the property.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum ConfigError {
    /// The key is not a property this client knows.
    #[error("unknown configuration key `{key}`")]
    UnknownKey {
        /// The key as given.
        key: String,
    },
    /// The value does not parse or is out of range.
    #[error("invalid value `{value}` for `{key}`: expected {expected}")]
    InvalidValue {
        /// The property.
        key: String,
        /// The value as given.
        value: String,
        /// What would have been accepted.
        expected: &'static str,
    },
    /// A required property is missing.
    #[error("missing required configuration `{key}`")]
    Missing {
        /// The property.
        key: &'static str,
    },
    /// Two properties conflict.
    #[error("`{key}` conflicts with other settings: {reason}")]
    Conflict {
        /// The property that was set explicitly.
        key: &'static str,
        /// Why.
        reason: &'static str,
    },
    /// A value Kafka accepts but this client does not implement yet.
    #[error("`{key}={value}` is not supported by this client yet: {reason}")]
    Unsupported {
        /// The property.
        key: &'static str,
        /// The value.
        value: String,
        /// What is missing.
        reason: &'static str,
    },
}

/// Result of parsing a configuration.
pub type Result<T, E = ConfigError> = std::result::Result<T, E>;

/// `acks`: how many replicas must have the batch before the leader answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Acks {
    /// `acks=0`: no response at all; the broker closes the connection on error.
    None,
    /// `acks=1`: the leader's own append.
    Leader,
    /// `acks=all` (or -1): the whole current ISR, bounded below by `min.insync.replicas`.
    All,
}

impl Acks {
    /// The wire value of the produce request's `acks` field.
    pub fn to_wire(self) -> i16 {
        match self {
            Acks::None => 0,
            Acks::Leader => 1,
            Acks::All => -1,
        }
    }

    /// Parses Kafka's spellings: `0`, `1`, `all`, `-1`.
    pub fn parse(value: &str) -> Option<Acks> {
        match value.trim() {
            "0" => Some(Acks::None),
            "1" => Some(Acks::Leader),
            "all" | "-1" => Some(Acks::All),
            _ => None,
        }
    }
}

impl std::fmt::Display for Acks {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Acks::None => "0",
            Acks::Leader => "1",
            Acks::All => "all",
        })
    }
}

/// Producer configuration (`ProducerConfig`), Kafka 4 defaults.
#[derive(Debug, Clone, PartialEq)]
pub struct ProducerConfig {
    /// `bootstrap.servers`: `host:port` list; any one node is enough.
    pub bootstrap_servers: Vec<String>,
    /// `client.id`.
    pub client_id: String,
    /// `acks`, default all.
    pub acks: Acks,
    /// `linger.ms`, default 5 (KIP-1030, Kafka 4.0; it was 0).
    pub linger: Duration,
    /// `batch.size`, default 16384 bytes.
    pub batch_size: usize,
    /// `buffer.memory`, default 32 MiB: the bound on bytes waiting in the accumulator.
    pub buffer_memory: usize,
    /// `max.block.ms`, default 60 s: how long `send()` may wait for metadata or memory.
    pub max_block: Duration,
    /// `request.timeout.ms`, default 30 s.
    pub request_timeout: Duration,
    /// `delivery.timeout.ms`, default 120 s: the bound on a record's whole life after `send()`.
    pub delivery_timeout: Duration,
    /// `retries`, default `i32::MAX`.
    pub retries: i32,
    /// `retry.backoff.ms`, default 100.
    pub retry_backoff: Duration,
    /// `retry.backoff.max.ms`, default 1000 (exponential backoff cap).
    pub retry_backoff_max: Duration,
    /// `max.in.flight.requests.per.connection`, default 5.
    pub max_in_flight_per_connection: usize,
    /// `max.request.size`, default 1 MiB.
    pub max_request_size: usize,
    /// Effective idempotence after Kafka's rules (see module doc).
    pub enable_idempotence: bool,
    /// Whether `enable.idempotence` was set explicitly (then conflicts and an unsupporting
    /// broker are errors rather than silent downgrades of config).
    pub idempotence_explicit: bool,
    /// `partitioner.ignore.keys`, default false: when true, keyed records are spread stickily.
    pub partitioner_ignore_keys: bool,
    /// `metadata.max.age.ms`, default 5 min.
    pub metadata_max_age: Duration,
    /// `transactional.id`, default none: set, the producer is transactional (and needs
    /// idempotence).
    pub transactional_id: Option<String>,
    /// `transaction.timeout.ms`, default 60 s: sent with InitProducerId; the coordinator aborts
    /// a transaction open longer than this.
    pub transaction_timeout: Duration,
    /// `logjam.kip360` (this client's own key, not Kafka's), default true. False makes the
    /// transactional producer behave as Kafka's clients before 2.5, from before KIP-360: it
    /// sends InitProducerId at v2 and never asks the coordinator for an epoch bump, so under
    /// transactions V1 the abort after a timed-out batch keeps the epoch, and a late batch of
    /// the aborted transaction is still in sequence. The lab uses it to show what KIP-360
    /// and KIP-890 each defend against.
    pub kip360: bool,
}

impl Default for ProducerConfig {
    fn default() -> Self {
        ProducerConfig {
            bootstrap_servers: Vec::new(),
            client_id: "logjam-producer".to_owned(),
            acks: Acks::All,
            linger: Duration::from_millis(5),
            batch_size: 16384,
            buffer_memory: 33_554_432,
            max_block: Duration::from_millis(60_000),
            request_timeout: Duration::from_millis(30_000),
            delivery_timeout: Duration::from_millis(120_000),
            retries: i32::MAX,
            retry_backoff: Duration::from_millis(100),
            retry_backoff_max: Duration::from_millis(1000),
            max_in_flight_per_connection: 5,
            max_request_size: 1_048_576,
            enable_idempotence: true,
            idempotence_explicit: false,
            partitioner_ignore_keys: false,
            metadata_max_age: Duration::from_millis(300_000),
            transactional_id: None,
            transaction_timeout: Duration::from_millis(60_000),
            kip360: true,
        }
    }
}

fn invalid(key: &str, value: &str, expected: &'static str) -> ConfigError {
    ConfigError::InvalidValue {
        key: key.to_owned(),
        value: value.to_owned(),
        expected,
    }
}

fn parse_u64(key: &str, value: &str) -> Result<u64> {
    value
        .trim()
        .parse()
        .map_err(|_| invalid(key, value, "a non-negative integer"))
}

fn parse_ms(key: &str, value: &str) -> Result<Duration> {
    parse_u64(key, value).map(Duration::from_millis)
}

fn parse_bool(key: &str, value: &str) -> Result<bool> {
    match value.trim() {
        "true" => Ok(true),
        "false" => Ok(false),
        _ => Err(invalid(key, value, "true or false")),
    }
}

fn parse_servers(key: &str, value: &str) -> Result<Vec<String>> {
    let servers: Vec<String> = value
        .split(',')
        .map(|s| s.trim().to_owned())
        .filter(|s| !s.is_empty())
        .collect();
    if servers.is_empty() || servers.iter().any(|s| !s.contains(':')) {
        return Err(invalid(key, value, "a comma-separated list of host:port"));
    }
    Ok(servers)
}

fn parse_positive(key: &str, value: &str) -> Result<usize> {
    match parse_u64(key, value)? {
        0 => Err(invalid(key, value, "a positive integer")),
        n => usize::try_from(n).map_err(|_| invalid(key, value, "a positive integer")),
    }
}

impl ProducerConfig {
    /// Parses `key=value` properties over the defaults and applies Kafka's idempotence and
    /// delivery-timeout rules.
    ///
    /// # Errors
    /// Unknown keys, bad values, a missing `bootstrap.servers`, and the explicit conflicts
    /// described in the module doc.
    pub fn from_properties<'a>(
        properties: impl IntoIterator<Item = (&'a str, &'a str)>,
    ) -> Result<ProducerConfig> {
        let mut config = ProducerConfig::default();
        let mut explicit_retries = false;
        let mut explicit_acks = false;
        let mut explicit_in_flight = false;
        let mut explicit_delivery_timeout = false;
        for (key, value) in properties {
            match key {
                "bootstrap.servers" => config.bootstrap_servers = parse_servers(key, value)?,
                "client.id" => config.client_id = value.to_owned(),
                "acks" => {
                    config.acks =
                        Acks::parse(value).ok_or_else(|| invalid(key, value, "0, 1, all or -1"))?;
                    explicit_acks = true;
                }
                "linger.ms" => config.linger = parse_ms(key, value)?,
                "batch.size" => config.batch_size = parse_positive(key, value)?,
                "buffer.memory" => config.buffer_memory = parse_positive(key, value)?,
                "max.block.ms" => config.max_block = parse_ms(key, value)?,
                "request.timeout.ms" => config.request_timeout = parse_ms(key, value)?,
                "delivery.timeout.ms" => {
                    config.delivery_timeout = parse_ms(key, value)?;
                    explicit_delivery_timeout = true;
                }
                "retries" => {
                    config.retries = value
                        .trim()
                        .parse::<i32>()
                        .ok()
                        .filter(|r| *r >= 0)
                        .ok_or_else(|| invalid(key, value, "an integer in 0..=2147483647"))?;
                    explicit_retries = true;
                }
                "retry.backoff.ms" => config.retry_backoff = parse_ms(key, value)?,
                "retry.backoff.max.ms" => config.retry_backoff_max = parse_ms(key, value)?,
                "max.in.flight.requests.per.connection" => {
                    config.max_in_flight_per_connection = parse_positive(key, value)?;
                    explicit_in_flight = true;
                }
                "max.request.size" => config.max_request_size = parse_positive(key, value)?,
                "enable.idempotence" => {
                    config.enable_idempotence = parse_bool(key, value)?;
                    config.idempotence_explicit = true;
                }
                "partitioner.ignore.keys" => {
                    config.partitioner_ignore_keys = parse_bool(key, value)?
                }
                "metadata.max.age.ms" => config.metadata_max_age = parse_ms(key, value)?,
                "transactional.id" => {
                    if value.is_empty() {
                        return Err(invalid(key, value, "a non-empty transactional id"));
                    }
                    config.transactional_id = Some(value.to_owned());
                }
                "transaction.timeout.ms" => {
                    config.transaction_timeout = parse_ms(key, value)?;
                    if config.transaction_timeout.as_millis() > i32::MAX as u128 {
                        return Err(invalid(key, value, "at most 2147483647"));
                    }
                }
                "logjam.kip360" => config.kip360 = parse_bool(key, value)?,
                "compression.type" => {
                    if value.trim() != "none" {
                        return Err(ConfigError::Unsupported {
                            key: "compression.type",
                            value: value.to_owned(),
                            reason: "the producer only writes uncompressed batches",
                        });
                    }
                }
                _ => {
                    return Err(ConfigError::UnknownKey {
                        key: key.to_owned(),
                    });
                }
            }
        }
        if config.bootstrap_servers.is_empty() {
            return Err(ConfigError::Missing {
                key: "bootstrap.servers",
            });
        }
        config.apply_idempotence_rules(explicit_acks, explicit_retries, explicit_in_flight)?;
        if config.transactional_id.is_some() && !config.enable_idempotence {
            // Kafka: "Cannot set a transactional.id without also enabling idempotence."
            return Err(ConfigError::Conflict {
                key: "transactional.id",
                reason: "a transactional producer needs idempotence (acks=all, retries > 0, \
                         max.in.flight.requests.per.connection <= 5, enable.idempotence not false)",
            });
        }
        let floor = config.linger + config.request_timeout;
        if config.delivery_timeout < floor {
            if explicit_delivery_timeout {
                return Err(ConfigError::Conflict {
                    key: "delivery.timeout.ms",
                    reason: "must be at least linger.ms + request.timeout.ms",
                });
            }
            config.delivery_timeout = floor;
        }
        Ok(config)
    }

    fn apply_idempotence_rules(
        &mut self,
        explicit_acks: bool,
        explicit_retries: bool,
        explicit_in_flight: bool,
    ) -> Result<()> {
        if !self.enable_idempotence {
            return Ok(());
        }
        let conflict = if explicit_acks && self.acks != Acks::All {
            Some((
                "acks",
                "idempotence requires acks=all; set enable.idempotence=false",
            ))
        } else if explicit_retries && self.retries == 0 {
            Some((
                "retries",
                "idempotence requires retries > 0; set enable.idempotence=false",
            ))
        } else if explicit_in_flight && self.max_in_flight_per_connection > 5 {
            Some((
                "max.in.flight.requests.per.connection",
                "idempotence requires at most 5; set enable.idempotence=false",
            ))
        } else {
            None
        };
        match conflict {
            Some((key, reason)) if self.idempotence_explicit => {
                Err(ConfigError::Conflict { key, reason })
            }
            Some((key, _)) => {
                tracing::info!(
                    key,
                    "enable.idempotence disabled: it conflicts with `{key}`"
                );
                self.enable_idempotence = false;
                Ok(())
            }
            None => Ok(()),
        }
    }
}

/// `auto.offset.reset`: where a consumer goes when it has no valid position.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AutoOffsetReset {
    /// The log start offset.
    Earliest,
    /// The log end offset (Kafka's default).
    Latest,
    /// Report an error instead of moving.
    None,
}

/// Consumer configuration (`ConsumerConfig`); the group part is [`GroupConfig`].
#[derive(Debug, Clone, PartialEq)]
pub struct ConsumerConfig {
    /// `bootstrap.servers`.
    pub bootstrap_servers: Vec<String>,
    /// `client.id`.
    pub client_id: String,
    /// `auto.offset.reset`, default latest.
    pub auto_offset_reset: AutoOffsetReset,
    /// `fetch.max.wait.ms`, default 500: the broker's long-poll bound.
    pub fetch_max_wait: Duration,
    /// `fetch.min.bytes`, default 1.
    pub fetch_min_bytes: i32,
    /// `fetch.max.bytes`, default 50 MiB.
    pub fetch_max_bytes: i32,
    /// `max.partition.fetch.bytes`, default 1 MiB.
    pub max_partition_fetch_bytes: i32,
    /// `max.poll.records`, default 500.
    pub max_poll_records: usize,
    /// `request.timeout.ms`, default 30 s.
    pub request_timeout: Duration,
    /// `retry.backoff.ms`, default 100.
    pub retry_backoff: Duration,
    /// `isolation.level`, default read_uncommitted.
    pub isolation_level: crate::consumer::isolation::IsolationLevel,
    /// `metadata.max.age.ms`, default 5 min: how stale the partition counts of subscribed
    /// topics may get before a group leader looks again (a partition added to a topic is
    /// noticed, and rebalanced, within this time).
    pub metadata_max_age: Duration,
    /// Group membership, liveness clocks, auto-commit and assignors ([`GroupConfig`]).
    pub group: GroupConfig,
}

impl Default for ConsumerConfig {
    fn default() -> Self {
        ConsumerConfig {
            bootstrap_servers: Vec::new(),
            client_id: "logjam-consumer".to_owned(),
            auto_offset_reset: AutoOffsetReset::Latest,
            fetch_max_wait: Duration::from_millis(500),
            fetch_min_bytes: 1,
            fetch_max_bytes: 52_428_800,
            max_partition_fetch_bytes: 1_048_576,
            max_poll_records: 500,
            request_timeout: Duration::from_millis(30_000),
            retry_backoff: Duration::from_millis(100),
            isolation_level: crate::consumer::isolation::IsolationLevel::ReadUncommitted,
            metadata_max_age: Duration::from_millis(300_000),
            group: GroupConfig::default(),
        }
    }
}

fn parse_i32(key: &str, value: &str) -> Result<i32> {
    value
        .trim()
        .parse::<i32>()
        .ok()
        .filter(|v| *v >= 0)
        .ok_or_else(|| invalid(key, value, "an integer in 0..=2147483647"))
}

impl ConsumerConfig {
    /// Parses `key=value` properties over the defaults.
    ///
    /// # Errors
    /// Unknown keys, bad values, a missing `bootstrap.servers`.
    pub fn from_properties<'a>(
        properties: impl IntoIterator<Item = (&'a str, &'a str)>,
    ) -> Result<ConsumerConfig> {
        let mut config = ConsumerConfig::default();
        let mut seen = group::Explicit::default();
        for (key, value) in properties {
            if config.group.set(&mut seen, key, value)? {
                continue;
            }
            match key {
                "bootstrap.servers" => config.bootstrap_servers = parse_servers(key, value)?,
                "client.id" => config.client_id = value.to_owned(),
                "auto.offset.reset" => {
                    config.auto_offset_reset = match value.trim() {
                        "earliest" => AutoOffsetReset::Earliest,
                        "latest" => AutoOffsetReset::Latest,
                        "none" => AutoOffsetReset::None,
                        _ => return Err(invalid(key, value, "earliest, latest or none")),
                    }
                }
                "isolation.level" => {
                    config.isolation_level = crate::consumer::isolation::IsolationLevel::parse(
                        value,
                    )
                    .ok_or_else(|| invalid(key, value, "read_uncommitted or read_committed"))?
                }
                "fetch.max.wait.ms" => config.fetch_max_wait = parse_ms(key, value)?,
                "fetch.min.bytes" => config.fetch_min_bytes = parse_i32(key, value)?,
                "fetch.max.bytes" => config.fetch_max_bytes = parse_i32(key, value)?,
                "max.partition.fetch.bytes" => {
                    config.max_partition_fetch_bytes = parse_i32(key, value)?
                }
                "max.poll.records" => config.max_poll_records = parse_positive(key, value)?,
                "request.timeout.ms" => config.request_timeout = parse_ms(key, value)?,
                "retry.backoff.ms" => config.retry_backoff = parse_ms(key, value)?,
                "metadata.max.age.ms" => config.metadata_max_age = parse_ms(key, value)?,
                _ => {
                    return Err(ConfigError::UnknownKey {
                        key: key.to_owned(),
                    });
                }
            }
        }
        if config.bootstrap_servers.is_empty() {
            return Err(ConfigError::Missing {
                key: "bootstrap.servers",
            });
        }
        config.group.validate(&seen)?;
        Ok(config)
    }
}

/// Admin client configuration.
#[derive(Debug, Clone, PartialEq)]
pub struct AdminConfig {
    /// `bootstrap.servers`.
    pub bootstrap_servers: Vec<String>,
    /// `client.id`.
    pub client_id: String,
    /// `request.timeout.ms`, default 30 s.
    pub request_timeout: Duration,
    /// `default.api.timeout.ms`, default 60 s: the bound on one admin call, retries included.
    pub default_api_timeout: Duration,
    /// `retry.backoff.ms`, default 100.
    pub retry_backoff: Duration,
}

impl Default for AdminConfig {
    fn default() -> Self {
        AdminConfig {
            bootstrap_servers: Vec::new(),
            client_id: "logjam-admin".to_owned(),
            request_timeout: Duration::from_millis(30_000),
            default_api_timeout: Duration::from_millis(60_000),
            retry_backoff: Duration::from_millis(100),
        }
    }
}

impl AdminConfig {
    /// Parses `key=value` properties over the defaults.
    ///
    /// # Errors
    /// Unknown keys, bad values, a missing `bootstrap.servers`.
    pub fn from_properties<'a>(
        properties: impl IntoIterator<Item = (&'a str, &'a str)>,
    ) -> Result<AdminConfig> {
        let mut config = AdminConfig::default();
        for (key, value) in properties {
            match key {
                "bootstrap.servers" => config.bootstrap_servers = parse_servers(key, value)?,
                "client.id" => config.client_id = value.to_owned(),
                "request.timeout.ms" => config.request_timeout = parse_ms(key, value)?,
                "default.api.timeout.ms" => config.default_api_timeout = parse_ms(key, value)?,
                "retry.backoff.ms" => config.retry_backoff = parse_ms(key, value)?,
                _ => {
                    return Err(ConfigError::UnknownKey {
                        key: key.to_owned(),
                    });
                }
            }
        }
        if config.bootstrap_servers.is_empty() {
            return Err(ConfigError::Missing {
                key: "bootstrap.servers",
            });
        }
        Ok(config)
    }
}

#[cfg(test)]
mod tests;
