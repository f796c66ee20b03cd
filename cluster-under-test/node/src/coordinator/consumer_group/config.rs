//! The broker settings of the new protocol (`GroupCoordinatorConfig`): session timeout and
//! heartbeat interval with their bounds, the server-side assignors (the first is the
//! default), and the group size cap; a bad setting is an error naming its key.

use super::assignor;

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
            assignors: vec![assignor::UNIFORM.to_string(), assignor::RANGE.to_string()],
            max_size: i32::MAX as usize,
        }
    }
}

impl Config {
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
        if let Some(unknown) = self.assignors.iter().find(|name| !assignor::is_known(name)) {
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
