//! The broker settings of the new consumer protocol (`group.consumer.*`, Kafka's
//! `GroupCoordinatorConfig`): session timeout and heartbeat interval with their bounds, the
//! server-side assignors (the first is the default), and the group size cap; a bad setting
//! is an error naming its key. Read here, with the rest of the configuration; the KIP-848
//! core (`coordinator/group/consumer_group`) decides with it.

use std::collections::BTreeMap;

/// The `uniform` assignor's name.
pub const UNIFORM: &str = "uniform";
/// The `range` assignor's name.
pub const RANGE: &str = "range";

/// Whether `name` is a server-side assignor this node has.
pub fn is_known_assignor(name: &str) -> bool {
    name == UNIFORM || name == RANGE
}

/// The settings a heartbeat decision reads.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Config {
    /// `group.consumer.session.timeout.ms` (45000).
    pub session_timeout_ms: i32,
    /// `group.consumer.min.session.timeout.ms` (45000).
    pub min_session_timeout_ms: i32,
    /// `group.consumer.max.session.timeout.ms` (60000).
    pub max_session_timeout_ms: i32,
    /// `group.consumer.heartbeat.interval.ms` (5000).
    pub heartbeat_interval_ms: i32,
    /// `group.consumer.min.heartbeat.interval.ms` (5000).
    pub min_heartbeat_interval_ms: i32,
    /// `group.consumer.max.heartbeat.interval.ms` (15000).
    pub max_heartbeat_interval_ms: i32,
    /// `group.consumer.assignors` (`uniform,range`; the first is the default).
    pub assignors: Vec<String>,
    /// `group.consumer.max.size` (unbounded).
    pub max_size: usize,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            session_timeout_ms: 45_000,
            min_session_timeout_ms: 45_000,
            max_session_timeout_ms: 60_000,
            heartbeat_interval_ms: 5_000,
            min_heartbeat_interval_ms: 5_000,
            max_heartbeat_interval_ms: 15_000,
            assignors: vec![UNIFORM.to_string(), RANGE.to_string()],
            max_size: i32::MAX as usize,
        }
    }
}

impl Config {
    /// The settings in `raw`, as the node's configuration holds them.
    pub fn from_raw(raw: &BTreeMap<String, String>) -> Config {
        let defaults = Config::default();
        let int = |key: &str, default: i32| {
            raw.get(key)
                .and_then(|value| value.trim().parse::<i32>().ok())
                .unwrap_or(default)
        };
        Config {
            session_timeout_ms: int(
                "group.consumer.session.timeout.ms",
                defaults.session_timeout_ms,
            ),
            min_session_timeout_ms: int(
                "group.consumer.min.session.timeout.ms",
                defaults.min_session_timeout_ms,
            ),
            max_session_timeout_ms: int(
                "group.consumer.max.session.timeout.ms",
                defaults.max_session_timeout_ms,
            ),
            heartbeat_interval_ms: int(
                "group.consumer.heartbeat.interval.ms",
                defaults.heartbeat_interval_ms,
            ),
            min_heartbeat_interval_ms: int(
                "group.consumer.min.heartbeat.interval.ms",
                defaults.min_heartbeat_interval_ms,
            ),
            max_heartbeat_interval_ms: int(
                "group.consumer.max.heartbeat.interval.ms",
                defaults.max_heartbeat_interval_ms,
            ),
            assignors: raw
                .get("group.consumer.assignors")
                .map(|list| {
                    list.split(',')
                        .map(|name| name.trim().to_owned())
                        .filter(|name| !name.is_empty())
                        .collect()
                })
                .unwrap_or(defaults.assignors),
            max_size: raw
                .get("group.consumer.max.size")
                .and_then(|value| value.trim().parse::<usize>().ok())
                .unwrap_or(defaults.max_size),
        }
    }

    /// Checks the settings as Kafka does at startup.
    ///
    /// # Errors
    /// A message naming the key that is out of its bounds or unknown.
    pub fn validate(&self) -> Result<(), String> {
        let within = |key: &str, value: i32, min: i32, max: i32| {
            if value < min || value > max {
                Err(format!("{key} is {value}, outside [{min}, {max}]"))
            } else {
                Ok(())
            }
        };
        if self.min_session_timeout_ms > self.max_session_timeout_ms {
            return Err("group.consumer.min.session.timeout.ms is above group.consumer.max.session.timeout.ms".to_string());
        }
        if self.min_heartbeat_interval_ms > self.max_heartbeat_interval_ms {
            return Err("group.consumer.min.heartbeat.interval.ms is above group.consumer.max.heartbeat.interval.ms".to_string());
        }
        within(
            "group.consumer.session.timeout.ms",
            self.session_timeout_ms,
            self.min_session_timeout_ms,
            self.max_session_timeout_ms,
        )?;
        within(
            "group.consumer.heartbeat.interval.ms",
            self.heartbeat_interval_ms,
            self.min_heartbeat_interval_ms,
            self.max_heartbeat_interval_ms,
        )?;
        if self.heartbeat_interval_ms >= self.session_timeout_ms {
            return Err("group.consumer.heartbeat.interval.ms must be below group.consumer.session.timeout.ms".to_string());
        }
        if self.assignors.is_empty() {
            return Err("group.consumer.assignors is empty".to_string());
        }
        if let Some(unknown) = self.assignors.iter().find(|name| !is_known_assignor(name)) {
            return Err(format!(
                "group.consumer.assignors names unknown assignor {unknown:?}"
            ));
        }
        if self.max_size == 0 {
            return Err("group.consumer.max.size must be at least 1".to_string());
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_kafkas_and_valid() {
        let config = Config::default();
        assert_eq!(
            (config.session_timeout_ms, config.heartbeat_interval_ms),
            (45_000, 5_000)
        );
        assert_eq!(config.assignors, ["uniform", "range"]);
        assert_eq!(config.validate(), Ok(()));
    }

    #[test]
    fn each_bad_setting_is_named() {
        let cases: Vec<(Config, &str)> = vec![
            (
                Config {
                    session_timeout_ms: 30_000,
                    ..Config::default()
                },
                "group.consumer.session.timeout.ms",
            ),
            (
                Config {
                    session_timeout_ms: 61_000,
                    ..Config::default()
                },
                "group.consumer.session.timeout.ms",
            ),
            (
                Config {
                    heartbeat_interval_ms: 4_000,
                    ..Config::default()
                },
                "group.consumer.heartbeat.interval.ms",
            ),
            (
                Config {
                    heartbeat_interval_ms: 16_000,
                    ..Config::default()
                },
                "group.consumer.heartbeat.interval.ms",
            ),
            (
                Config {
                    assignors: vec![],
                    ..Config::default()
                },
                "group.consumer.assignors",
            ),
            (
                Config {
                    assignors: vec!["sticky".into()],
                    ..Config::default()
                },
                "sticky",
            ),
            (
                Config {
                    max_size: 0,
                    ..Config::default()
                },
                "group.consumer.max.size",
            ),
        ];
        for (config, key) in cases {
            let error = config.validate().unwrap_err();
            assert!(error.contains(key), "{error} should name {key}");
        }
    }
}
