//! The consumer's group settings (`group.id`, the liveness clocks, auto-commit, assignors,
//! `group.protocol`, `group.remote.assignor`) with Kafka 4's defaults, parsed and validated
//! with errors naming the key.
//!
//! With `group.protocol=consumer` (KIP-848) the coordinator runs the session clock and the
//! assignor, so `session.timeout.ms`, `heartbeat.interval.ms` and
//! `partition.assignment.strategy` are refused as Java's `ConsumerConfig` refuses them, and
//! `group.remote.assignor` names the server's assignor; with `classic` the reverse holds.

use std::time::Duration;

use super::{ConfigError, Result, invalid, parse_bool, parse_ms};

/// A partition assignor the group leader can run (`partition.assignment.strategy`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AssignmentStrategy {
    /// Java's `RangeAssignor`: per topic, consecutive ranges to members sorted by id (eager).
    Range,
    /// Java's `CooperativeStickyAssignor`: balanced, sticky, incremental (cooperative).
    CooperativeSticky,
}

impl AssignmentStrategy {
    /// The protocol name sent in JoinGroup, as Kafka's assignors name themselves.
    pub fn name(self) -> &'static str {
        match self {
            AssignmentStrategy::Range => "range",
            AssignmentStrategy::CooperativeSticky => "cooperative-sticky",
        }
    }

    /// Parses a protocol name or a Java class name.
    pub fn parse(value: &str) -> Option<AssignmentStrategy> {
        match value.trim() {
            "range" | "org.apache.kafka.clients.consumer.RangeAssignor" => {
                Some(AssignmentStrategy::Range)
            }
            "cooperative-sticky"
            | "org.apache.kafka.clients.consumer.CooperativeStickyAssignor" => {
                Some(AssignmentStrategy::CooperativeSticky)
            }
            _ => None,
        }
    }

    /// Whether the strategy revokes only moved partitions (COOPERATIVE) instead of all of
    /// them before every rejoin (EAGER).
    pub fn is_cooperative(self) -> bool {
        self == AssignmentStrategy::CooperativeSticky
    }

    /// The name of the strategy `name`, if this client knows it.
    pub fn from_name(name: &str) -> Option<AssignmentStrategy> {
        AssignmentStrategy::parse(name)
    }
}

/// `group.protocol`: which rebalance protocol the consumer speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GroupProtocol {
    /// JoinGroup/SyncGroup/Heartbeat, client-side assignment (Kafka 4's default).
    Classic,
    /// KIP-848: ConsumerGroupHeartbeat, server-side assignment, member epochs.
    Consumer,
}

/// Group settings of [`super::ConsumerConfig`].
#[derive(Debug, Clone, PartialEq)]
pub struct GroupConfig {
    /// `group.id`; without it the consumer can only `assign`.
    pub group_id: Option<String>,
    /// `group.instance.id`: static membership (no LeaveGroup on close, no rebalance on a
    /// restart within the session timeout).
    pub group_instance_id: Option<String>,
    /// `session.timeout.ms`, default 45 s: the heartbeat clock the coordinator runs.
    pub session_timeout: Duration,
    /// `heartbeat.interval.ms`, default 3 s.
    pub heartbeat_interval: Duration,
    /// `max.poll.interval.ms`, default 5 min: the poll clock the client runs (and the
    /// rebalance timeout it sends).
    pub max_poll_interval: Duration,
    /// `enable.auto.commit`, default true (false without a group id, as Java does).
    pub enable_auto_commit: bool,
    /// `auto.commit.interval.ms`, default 5 s.
    pub auto_commit_interval: Duration,
    /// `partition.assignment.strategy`, in preference order; default range, cooperative-sticky.
    pub assignment_strategies: Vec<AssignmentStrategy>,
    /// `group.protocol`, default classic.
    pub group_protocol: GroupProtocol,
    /// `group.remote.assignor` (KIP-848 only): the server assignor to ask for; default none,
    /// the coordinator's first of `group.consumer.assignors`.
    pub remote_assignor: Option<String>,
}

impl Default for GroupConfig {
    fn default() -> Self {
        GroupConfig {
            group_id: None,
            group_instance_id: None,
            session_timeout: Duration::from_millis(45_000),
            heartbeat_interval: Duration::from_millis(3_000),
            max_poll_interval: Duration::from_millis(300_000),
            enable_auto_commit: true,
            auto_commit_interval: Duration::from_millis(5_000),
            assignment_strategies: vec![
                AssignmentStrategy::Range,
                AssignmentStrategy::CooperativeSticky,
            ],
            group_protocol: GroupProtocol::Classic,
            remote_assignor: None,
        }
    }
}

/// What [`GroupConfig::set`] saw, for the checks that need the whole configuration.
#[derive(Debug, Default)]
pub(crate) struct Explicit {
    auto_commit: bool,
    /// The classic-only keys set explicitly, in the order seen.
    classic_only: Vec<&'static str>,
}

impl GroupConfig {
    /// Applies one property if it is a group property; `Ok(false)` when the key is not one.
    pub(crate) fn set(&mut self, seen: &mut Explicit, key: &str, value: &str) -> Result<bool> {
        match key {
            "group.id" => self.group_id = Some(value.to_owned()).filter(|v| !v.is_empty()),
            "group.instance.id" => {
                if value.trim().is_empty() {
                    return Err(invalid(key, value, "a non-empty instance id"));
                }
                self.group_instance_id = Some(value.to_owned());
            }
            "session.timeout.ms" => {
                self.session_timeout = positive_ms(key, value)?;
                seen.classic_only.push("session.timeout.ms");
            }
            "heartbeat.interval.ms" => {
                self.heartbeat_interval = positive_ms(key, value)?;
                seen.classic_only.push("heartbeat.interval.ms");
            }
            "max.poll.interval.ms" => self.max_poll_interval = positive_ms(key, value)?,
            "enable.auto.commit" => {
                self.enable_auto_commit = parse_bool(key, value)?;
                seen.auto_commit = true;
            }
            "auto.commit.interval.ms" => self.auto_commit_interval = parse_ms(key, value)?,
            "partition.assignment.strategy" => {
                let mut strategies = Vec::new();
                for name in value.split(',').map(str::trim).filter(|n| !n.is_empty()) {
                    match AssignmentStrategy::parse(name) {
                        Some(s) if !strategies.contains(&s) => strategies.push(s),
                        Some(_) => {}
                        None if matches!(name, "roundrobin" | "sticky")
                            || name.starts_with("org.apache.kafka.") =>
                        {
                            return Err(ConfigError::Unsupported {
                                key: "partition.assignment.strategy",
                                value: value.to_owned(),
                                reason: "only range and cooperative-sticky are implemented",
                            });
                        }
                        None => {
                            return Err(invalid(key, value, "range and/or cooperative-sticky"));
                        }
                    }
                }
                if strategies.is_empty() {
                    return Err(invalid(key, value, "at least one assignor"));
                }
                self.assignment_strategies = strategies;
                seen.classic_only.push("partition.assignment.strategy");
            }
            "group.remote.assignor" => {
                self.remote_assignor = Some(value.trim().to_owned()).filter(|v| !v.is_empty());
            }
            "group.protocol" => match value.trim().to_ascii_lowercase().as_str() {
                "classic" => self.group_protocol = GroupProtocol::Classic,
                "consumer" => self.group_protocol = GroupProtocol::Consumer,
                _ => return Err(invalid(key, value, "classic or consumer")),
            },
            _ => return Ok(false),
        }
        Ok(true)
    }

    /// The checks across properties (Java's `ConsumerConfig` and `GroupRebalanceConfig`).
    pub(crate) fn validate(&mut self, seen: &Explicit) -> Result<()> {
        if self.group_id.is_none() {
            if self.enable_auto_commit && seen.auto_commit {
                return Err(ConfigError::Conflict {
                    key: "enable.auto.commit",
                    reason: "auto-commit needs a group.id",
                });
            }
            self.enable_auto_commit = false;
            if self.group_instance_id.is_some() {
                return Err(ConfigError::Conflict {
                    key: "group.instance.id",
                    reason: "static membership needs a group.id",
                });
            }
        }
        match self.group_protocol {
            GroupProtocol::Consumer => {
                if let Some(&key) = seen.classic_only.first() {
                    return Err(ConfigError::Conflict {
                        key,
                        reason: "not supported with group.protocol=consumer: the coordinator \
                                 runs the session clock (group.consumer.session.timeout.ms) \
                                 and the assignor (group.remote.assignor)",
                    });
                }
            }
            GroupProtocol::Classic => {
                if self.remote_assignor.is_some() {
                    return Err(ConfigError::Conflict {
                        key: "group.remote.assignor",
                        reason: "only used with group.protocol=consumer",
                    });
                }
            }
        }
        if self.heartbeat_interval >= self.session_timeout {
            return Err(ConfigError::Conflict {
                key: "heartbeat.interval.ms",
                reason: "must be lower than session.timeout.ms",
            });
        }
        for (key, value) in [
            ("session.timeout.ms", self.session_timeout),
            ("max.poll.interval.ms", self.max_poll_interval),
        ] {
            if value.as_millis() > i32::MAX as u128 {
                return Err(invalid(
                    key,
                    &value.as_millis().to_string(),
                    "at most 2147483647",
                ));
            }
        }
        Ok(())
    }
}

fn positive_ms(key: &str, value: &str) -> Result<Duration> {
    let duration = parse_ms(key, value)?;
    if duration.is_zero() {
        return Err(invalid(key, value, "a positive number of milliseconds"));
    }
    Ok(duration)
}

#[cfg(test)]
mod tests {
    use super::super::ConsumerConfig;
    use super::*;

    const BOOT: (&str, &str) = ("bootstrap.servers", "127.0.0.1:9092");

    #[test]
    fn group_defaults_are_kafka_4s() {
        let config = ConsumerConfig::from_properties([BOOT, ("group.id", "g")]).unwrap();
        let group = &config.group;
        assert_eq!(group.group_id.as_deref(), Some("g"));
        assert_eq!(group.session_timeout, Duration::from_secs(45));
        assert_eq!(group.heartbeat_interval, Duration::from_secs(3));
        assert_eq!(group.max_poll_interval, Duration::from_secs(300));
        assert!(group.enable_auto_commit);
        assert_eq!(group.auto_commit_interval, Duration::from_secs(5));
        assert_eq!(
            group.assignment_strategies,
            vec![
                AssignmentStrategy::Range,
                AssignmentStrategy::CooperativeSticky
            ]
        );
        assert_eq!(group.group_protocol, GroupProtocol::Classic);
        assert_eq!(config.max_poll_records, 500);
    }

    #[test]
    fn the_consumer_protocol_refuses_the_classic_only_keys() {
        let config = ConsumerConfig::from_properties([
            BOOT,
            ("group.id", "g"),
            ("group.protocol", "CONSUMER"),
            ("group.remote.assignor", "range"),
        ])
        .unwrap();
        assert_eq!(config.group.group_protocol, GroupProtocol::Consumer);
        assert_eq!(config.group.remote_assignor.as_deref(), Some("range"));
        for key in [
            "session.timeout.ms",
            "heartbeat.interval.ms",
            "partition.assignment.strategy",
        ] {
            let value = if key.ends_with("strategy") {
                "range"
            } else {
                "1000"
            };
            let error = ConsumerConfig::from_properties([
                BOOT,
                ("group.id", "g"),
                ("group.protocol", "consumer"),
                (key, value),
            ])
            .unwrap_err();
            assert!(
                matches!(error, ConfigError::Conflict { key: k, .. } if k == key),
                "{error}"
            );
        }
        let error = ConsumerConfig::from_properties([
            BOOT,
            ("group.id", "g"),
            ("group.remote.assignor", "uniform"),
        ])
        .unwrap_err();
        assert!(
            error.to_string().contains("group.remote.assignor"),
            "{error}"
        );
        let error =
            ConsumerConfig::from_properties([BOOT, ("group.protocol", "kip848")]).unwrap_err();
        assert!(error.to_string().contains("group.protocol"), "{error}");
    }

    #[test]
    fn strategies_parse_names_and_class_names_in_order() {
        let config = ConsumerConfig::from_properties([
            BOOT,
            ("group.id", "g"),
            (
                "partition.assignment.strategy",
                "org.apache.kafka.clients.consumer.CooperativeStickyAssignor, range",
            ),
        ])
        .unwrap();
        assert_eq!(
            config.group.assignment_strategies,
            vec![
                AssignmentStrategy::CooperativeSticky,
                AssignmentStrategy::Range
            ]
        );
        let error = ConsumerConfig::from_properties([
            BOOT,
            ("partition.assignment.strategy", "roundrobin"),
        ])
        .unwrap_err();
        assert!(matches!(
            error,
            ConfigError::Unsupported {
                key: "partition.assignment.strategy",
                ..
            }
        ));
        let error =
            ConsumerConfig::from_properties([BOOT, ("partition.assignment.strategy", "rnage")])
                .unwrap_err();
        assert!(error.to_string().contains("partition.assignment.strategy"));
    }

    #[test]
    fn cross_property_rules_name_the_key() {
        let error = ConsumerConfig::from_properties([
            BOOT,
            ("group.id", "g"),
            ("session.timeout.ms", "3000"),
            ("heartbeat.interval.ms", "3000"),
        ])
        .unwrap_err();
        assert!(error.to_string().contains("heartbeat.interval.ms"));
        // Without a group auto-commit is off by default and an error when asked for.
        let config = ConsumerConfig::from_properties([BOOT]).unwrap();
        assert!(!config.group.enable_auto_commit);
        let error =
            ConsumerConfig::from_properties([BOOT, ("enable.auto.commit", "true")]).unwrap_err();
        assert!(error.to_string().contains("enable.auto.commit"));
        let error =
            ConsumerConfig::from_properties([BOOT, ("session.timeout.ms", "0")]).unwrap_err();
        assert!(error.to_string().contains("session.timeout.ms"));
        let error =
            ConsumerConfig::from_properties([BOOT, ("group.instance.id", "i")]).unwrap_err();
        assert!(error.to_string().contains("group.instance.id"));
        let error =
            ConsumerConfig::from_properties([BOOT, ("enable.auto.commit", "yes")]).unwrap_err();
        assert!(error.to_string().contains("enable.auto.commit"));
    }
}
