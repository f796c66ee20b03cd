//! [`QuorumConfig`]: the `controller.quorum.*` settings with Kafka's names and defaults
//! (`raft/src/main/java/org/apache/kafka/raft/QuorumConfig.java`), plus the handful of
//! constants `KafkaRaftClient` hard-codes. Parsing of the property file lives in the node; this
//! module only maps one `key=value` pair at a time.

use std::collections::BTreeSet;

use crate::{Canary, ConfigError, NodeId};

/// Timeouts and limits of one Raft replica. Times are milliseconds on the driver's clock.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct QuorumConfig {
    /// `controller.quorum.voters` (ids only; addresses are the node's business). Fixed for the
    /// life of the quorum: dynamic membership (KIP-853) is not implemented.
    pub voters: BTreeSet<NodeId>,
    /// `controller.quorum.election.timeout.ms` (default 1000). Each election timer is drawn in
    /// `[t, 2t)` using the caller's random word.
    pub election_timeout_ms: u64,
    /// `controller.quorum.fetch.timeout.ms` (default 2000). A follower without a successful
    /// fetch for this long turns Prospective; the leader's check-quorum window is 1.5× this.
    pub fetch_timeout_ms: u64,
    /// `controller.quorum.election.backoff.max.ms` (default 1000): cap of the exponential
    /// backoff after a lost election, and the delay non-preferred voters wait after an
    /// EndQuorumEpoch.
    pub election_backoff_max_ms: u64,
    /// `controller.quorum.request.timeout.ms` (default 2000): an unanswered Fetch or
    /// FetchSnapshot is retried after this long.
    pub request_timeout_ms: u64,
    /// `controller.quorum.retry.backoff.ms` (default 20): wait before retrying a request that
    /// failed with an error response.
    pub retry_backoff_ms: u64,
    /// `controller.quorum.append.linger.ms` (default 25): how long the leader accumulates
    /// proposals before appending them as one batch. Zero appends at once.
    pub append_linger_ms: u64,
    /// `KafkaRaftClient`'s fetch max wait (500 ms, not configurable in Kafka): how long the
    /// leader parks a Fetch that has nothing new before answering it empty.
    pub fetch_max_wait_ms: u64,
    /// `KafkaRaftClient`'s `MAX_FETCH_SIZE_BYTES` (8 MiB): payload bytes per Fetch response
    /// (at least one entry is always returned).
    pub fetch_max_bytes: u64,
    /// `MaxBytes` a follower asks for in each FetchSnapshot request (Kafka also uses 8 MiB).
    pub fetch_snapshot_max_bytes: u64,
    /// `metadata.log.max.record.bytes.between.snapshots` (default 20971520): payload bytes
    /// appended after the latest snapshot before [`crate::Ready::snapshot_suggested`] fires.
    pub max_record_bytes_between_snapshots: u64,
    /// A deliberate bug for checker validation; `None` (the default) in every real deployment.
    pub canary: Option<Canary>,
}

impl QuorumConfig {
    /// Kafka's defaults for the given voter set.
    #[must_use]
    pub fn new(voters: impl IntoIterator<Item = NodeId>) -> QuorumConfig {
        QuorumConfig {
            voters: voters.into_iter().collect(),
            election_timeout_ms: 1000,
            fetch_timeout_ms: 2000,
            election_backoff_max_ms: 1000,
            request_timeout_ms: 2000,
            retry_backoff_ms: 20,
            append_linger_ms: 25,
            fetch_max_wait_ms: 500,
            fetch_max_bytes: 8 * 1024 * 1024,
            fetch_snapshot_max_bytes: 8 * 1024 * 1024,
            max_record_bytes_between_snapshots: 20_971_520,
            canary: None,
        }
    }

    /// The leader's check-quorum window: `1.5 × fetch.timeout.ms`
    /// (`LeaderState.CHECK_QUORUM_TIMEOUT_FACTOR`).
    #[must_use]
    pub fn check_quorum_timeout_ms(&self) -> u64 {
        self.fetch_timeout_ms.saturating_mul(3) / 2
    }

    /// The number of voters that makes a majority.
    #[must_use]
    pub fn majority(&self) -> usize {
        self.voters.len() / 2 + 1
    }

    /// Sets one `controller.quorum.*` property by its Kafka name.
    ///
    /// `controller.quorum.voters` takes Kafka's `id@host:port,…` form; only the ids are kept.
    ///
    /// # Errors
    ///
    /// [`ConfigError::UnknownKey`] for a key this crate does not own, and
    /// [`ConfigError::InvalidValue`] when the value does not parse.
    pub fn set_property(&mut self, key: &str, value: &str) -> Result<(), ConfigError> {
        let invalid = || ConfigError::InvalidValue {
            key: key.to_owned(),
            value: value.to_owned(),
        };
        let millis = || value.trim().parse::<u64>().map_err(|_| invalid());
        match key {
            "controller.quorum.voters" => {
                let mut voters = BTreeSet::new();
                for voter in value.split(',').map(str::trim).filter(|v| !v.is_empty()) {
                    let id = voter.split('@').next().unwrap_or_default();
                    let id = id.parse::<u32>().map_err(|_| invalid())?;
                    let _ = voters.insert(NodeId(id));
                }
                if voters.is_empty() {
                    return Err(invalid());
                }
                self.voters = voters;
            }
            "controller.quorum.election.timeout.ms" => self.election_timeout_ms = millis()?,
            "controller.quorum.fetch.timeout.ms" => self.fetch_timeout_ms = millis()?,
            "controller.quorum.election.backoff.max.ms" => {
                self.election_backoff_max_ms = millis()?;
            }
            "controller.quorum.request.timeout.ms" => self.request_timeout_ms = millis()?,
            "controller.quorum.retry.backoff.ms" => self.retry_backoff_ms = millis()?,
            "controller.quorum.append.linger.ms" => self.append_linger_ms = millis()?,
            "metadata.log.max.record.bytes.between.snapshots" => {
                self.max_record_bytes_between_snapshots = millis()?;
            }
            _ => {
                return Err(ConfigError::UnknownKey {
                    key: key.to_owned(),
                });
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_match_kafka() {
        let config = QuorumConfig::new([NodeId(1)]);
        assert_eq!(config.election_timeout_ms, 1000);
        assert_eq!(config.fetch_timeout_ms, 2000);
        assert_eq!(config.election_backoff_max_ms, 1000);
        assert_eq!(config.request_timeout_ms, 2000);
        assert_eq!(config.retry_backoff_ms, 20);
        assert_eq!(config.append_linger_ms, 25);
        assert_eq!(config.check_quorum_timeout_ms(), 3000);
        assert_eq!(config.canary, None);
    }

    #[test]
    fn properties_parse_by_kafka_name() {
        let mut config = QuorumConfig::new([NodeId(1)]);
        config
            .set_property("controller.quorum.voters", "1@a:9093, 2@b:9093,3@c:9093")
            .unwrap();
        config
            .set_property("controller.quorum.election.timeout.ms", "1500")
            .unwrap();
        assert_eq!(config.voters.len(), 3);
        assert_eq!(config.majority(), 2);
        assert_eq!(config.election_timeout_ms, 1500);
        assert!(matches!(
            config.set_property("controller.quorum.nope", "1"),
            Err(ConfigError::UnknownKey { .. })
        ));
        assert!(matches!(
            config.set_property("controller.quorum.fetch.timeout.ms", "soon"),
            Err(ConfigError::InvalidValue { .. })
        ));
    }
}
