//! The node's configuration: a `server.properties` file with Kafka's property names and defaults.
//!
//! Every key the node understands is listed once in [`KEYS`] with its type and Kafka's default.
//! A key not in the table, a value of the wrong type or out of range, and a required key left
//! unset are errors that name the key (and the line it came from), never silently ignored:
//! a misspelt `min.insync.replicas` must not quietly run a test with the default of 1.
//!
//! Keys that later parts of the cluster will honour (replication, KRaft, transactions) are
//! already accepted so that lab configuration files do not change as features land; the doc
//! of each says whether this node honours it yet.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use crate::canary::{Canaries, Canary, UnknownCanary};

pub mod group_consumer;
mod properties;

use properties::validate;
pub use properties::{KEYS, KeySpec, Kind};

/// Why a configuration could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The file could not be read.
    #[error("cannot read {path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// A line is neither a comment nor `key=value`.
    #[error("line {line}: expected `key=value`, found {text:?}")]
    Syntax {
        /// 1-based line number.
        line: usize,
        /// The offending text.
        text: String,
    },
    /// A key that Kafka (or this node) does not know.
    #[error("line {line}: unknown configuration key `{key}`")]
    UnknownKey {
        /// 1-based line number (0 for overrides given on the command line).
        line: usize,
        /// The key.
        key: String,
    },
    /// A value that does not parse or is out of range for its key.
    #[error("line {line}: invalid value {value:?} for `{key}`: {reason}")]
    InvalidValue {
        /// 1-based line number (0 for overrides given on the command line).
        line: usize,
        /// The key.
        key: String,
        /// The value as written.
        value: String,
        /// What is wrong with it.
        reason: &'static str,
    },
    /// A name in `logjam.canaries` that is not a canary.
    #[error("line {line}: unknown canary {name:?} in `{key}`; known canaries: {known}")]
    UnknownCanary {
        /// 1-based line number (0 for overrides given on the command line).
        line: usize,
        /// The key (`logjam.canaries`).
        key: &'static str,
        /// The unknown name.
        name: String,
        /// Every known name, comma-separated.
        known: String,
    },
    /// A key without a default was not set.
    #[error("missing required configuration key `{key}`")]
    Missing {
        /// The key.
        key: &'static str,
    },
}

/// The key naming the canaries switched on.
pub const CANARIES_KEY: &str = "logjam.canaries";

/// A loaded, validated node configuration.
///
/// The typed fields are the settings this node honours today; [`Config::raw`] keeps every
/// resolved value (including defaults) so it can be logged and shown to users.
#[derive(Debug, Clone)]
pub struct Config {
    /// `node.id`.
    pub node_id: i32,
    /// `process.roles`.
    pub process_roles: Vec<String>,
    /// The client listener's address: the first entry of `listeners` that is not a
    /// controller listener (the controller listener itself on a controller-only node).
    pub listen_address: SocketAddr,
    /// The controller listener (named in `controller.listener.names`, default `CONTROLLER`),
    /// if one is configured.
    pub controller_listen_address: Option<SocketAddr>,
    /// `controller.quorum.voters` as `node.id → address`. Empty when unset: the node is then
    /// a one-voter quorum by itself (it must have the controller role).
    pub voters: BTreeMap<i32, SocketAddr>,
    /// `broker.heartbeat.interval.ms`.
    pub broker_heartbeat_interval_ms: u64,
    /// `broker.session.timeout.ms`.
    pub broker_session_timeout_ms: u64,
    /// `eligible.leader.replicas.enable` (KIP-966).
    pub eligible_leader_replicas_enable: bool,
    /// `metadata.log.dir`, else the first of `log.dirs`.
    pub metadata_log_dir: PathBuf,
    /// The host and port given to clients in Metadata, from `advertised.listeners` or the
    /// listener itself.
    pub advertised_host: String,
    /// See [`Config::advertised_host`].
    pub advertised_port: u16,
    /// `log.dirs`, or `log.dir` when unset. The first entry holds this node's data.
    pub log_dirs: Vec<PathBuf>,
    /// `socket.request.max.bytes`: a larger request closes the connection.
    pub socket_request_max_bytes: usize,
    /// `log.segment.bytes`.
    pub log_segment_bytes: u64,
    /// `log.index.interval.bytes`.
    pub log_index_interval_bytes: u64,
    /// `log.flush.interval.messages` (`i64::MAX` = never).
    pub log_flush_interval_messages: u64,
    /// `log.flush.interval.ms` (`None` = never, Kafka's default).
    pub log_flush_interval_ms: Option<u64>,
    /// `log.flush.scheduler.interval.ms`: how often the flusher looks at the logs.
    pub log_flush_scheduler_interval_ms: u64,
    /// `log.flush.offset.checkpoint.interval.ms`: how often recovery points are checkpointed.
    pub log_flush_offset_checkpoint_interval_ms: u64,
    /// `message.max.bytes`.
    pub message_max_bytes: usize,
    /// `num.partitions`: partitions of an auto-created topic or a CreateTopics with -1.
    pub num_partitions: i32,
    /// `default.replication.factor`.
    pub default_replication_factor: i16,
    /// `min.insync.replicas`.
    pub min_insync_replicas: i32,
    /// `unclean.leader.election.enable`.
    pub unclean_leader_election_enable: bool,
    /// `auto.create.topics.enable`.
    pub auto_create_topics_enable: bool,
    /// `logjam.canaries`: the deliberate bugs switched on (none by default).
    pub canaries: Canaries,
    /// `transaction.version` (1 or 2; default 2, as Kafka 4.0 with a 4.0 metadata version):
    /// with 2, the transaction coordinator bumps the producer epoch on every EndTxn v5+
    /// (KIP-890) and the produce path verifies partitions implicitly.
    pub transaction_version: i16,
    /// `transaction.partition.verification.enable` (default true, as Kafka 3.6+): whether a
    /// partition leader checks a transactional produce with the coordinator (KIP-890 part 1)
    /// before the transaction's first batch on the partition. It governs TV1 produces only:
    /// under TV2 a Produce v12+ client's partition is added by that check, so it always runs
    /// (Kafka's `ReplicaManager` tests `verificationEnabled || supportsEpochBump`).
    pub transaction_partition_verification_enable: bool,
    /// Every key with its resolved value, defaults included.
    pub raw: BTreeMap<String, String>,
    /// The keys the file or an override set (DescribeConfigs' `STATIC_BROKER_CONFIG`); the
    /// rest of `raw` holds defaults.
    pub set: std::collections::BTreeSet<String>,
}

impl Config {
    /// Loads a `server.properties` file, then applies `overrides` (`key=value`, as given with
    /// `--override` on the command line; they report line 0).
    ///
    /// # Errors
    /// Any [`ConfigError`]: unreadable file, bad syntax, unknown key, invalid or missing value.
    pub fn load(path: &Path, overrides: &[String]) -> Result<Config, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
            path: path.to_owned(),
            source,
        })?;
        Config::parse(&text, overrides)
    }

    /// Parses the text of a properties file; see [`Config::load`].
    ///
    /// # Errors
    /// As [`Config::load`], except for reading.
    pub fn parse(text: &str, overrides: &[String]) -> Result<Config, ConfigError> {
        let mut set: BTreeMap<String, (usize, String)> = BTreeMap::new();
        for (index, line) in text.lines().enumerate() {
            if let Some((key, value)) = parse_line(index + 1, line)? {
                set.insert(key, (index + 1, value));
            }
        }
        for text in overrides {
            let (key, value) = parse_line(0, text)?.ok_or_else(|| ConfigError::Syntax {
                line: 0,
                text: text.clone(),
            })?;
            set.insert(key, (0, value));
        }
        let mut raw = BTreeMap::new();
        for (key, (line, value)) in &set {
            let spec = KEYS.iter().find(|spec| spec.name == key).ok_or_else(|| {
                ConfigError::UnknownKey {
                    line: *line,
                    key: key.clone(),
                }
            })?;
            validate(spec, *line, value)?;
            raw.insert(key.clone(), value.clone());
        }
        for spec in KEYS {
            if raw.contains_key(spec.name) {
                continue;
            }
            match spec.default {
                Some(default) => {
                    raw.insert(spec.name.to_owned(), default.to_owned());
                }
                None if spec.required => return Err(ConfigError::Missing { key: spec.name }),
                None => {}
            }
        }
        Config::from_raw(raw, &set)
    }

    fn from_raw(
        raw: BTreeMap<String, String>,
        set: &BTreeMap<String, (usize, String)>,
    ) -> Result<Config, ConfigError> {
        let keys = Keys { raw: &raw, set };
        let int = |key: &str| keys.int(key);
        let invalid = |key: &str, reason: &'static str| keys.invalid(key, reason);
        check_consumer_protocol(&keys)?;
        let process_roles = roles(&keys)?;
        let is_controller = process_roles.iter().any(|role| role == "controller");
        let Listeners {
            listen_address,
            controller_listen_address,
            host,
            port,
        } = listeners(&keys)?;
        let node_id = int("node.id") as i32;
        let voters = voters(
            &keys,
            node_id,
            is_controller,
            controller_listen_address.is_some(),
        )?;
        let (advertised_host, advertised_port) = advertised(&keys, host, port)?;
        let (log_dirs, log_flush_interval_ms) = logs(&keys)?;
        let replication_factor = int("default.replication.factor");
        let metadata_log_dir = raw
            .get("metadata.log.dir")
            .map_or_else(|| log_dirs[0].clone(), PathBuf::from);
        let canaries = canaries(&keys)?;
        Ok(Config {
            node_id,
            process_roles,
            listen_address,
            controller_listen_address,
            voters,
            broker_heartbeat_interval_ms: int("broker.heartbeat.interval.ms") as u64,
            broker_session_timeout_ms: int("broker.session.timeout.ms") as u64,
            eligible_leader_replicas_enable: raw["eligible.leader.replicas.enable"] == "true",
            metadata_log_dir,
            advertised_host,
            advertised_port,
            log_dirs,
            socket_request_max_bytes: int("socket.request.max.bytes") as usize,
            log_segment_bytes: int("log.segment.bytes") as u64,
            log_index_interval_bytes: int("log.index.interval.bytes") as u64,
            log_flush_interval_messages: int("log.flush.interval.messages") as u64,
            log_flush_interval_ms,
            log_flush_scheduler_interval_ms: int("log.flush.scheduler.interval.ms") as u64,
            log_flush_offset_checkpoint_interval_ms: int("log.flush.offset.checkpoint.interval.ms")
                as u64,
            message_max_bytes: int("message.max.bytes") as usize,
            num_partitions: int("num.partitions") as i32,
            default_replication_factor: i16::try_from(replication_factor)
                .map_err(|_| invalid("default.replication.factor", "too large"))?,
            min_insync_replicas: int("min.insync.replicas") as i32,
            unclean_leader_election_enable: raw["unclean.leader.election.enable"] == "true",
            auto_create_topics_enable: raw["auto.create.topics.enable"] == "true",
            canaries,
            transaction_version: match int("transaction.version") {
                1 => 1,
                2 => 2,
                _ => return Err(invalid("transaction.version", "must be 1 or 2")),
            },
            transaction_partition_verification_enable: raw["transaction.partition.verification.enable"]
                == "true",
            raw,
            set: set.keys().cloned().collect(),
        })
    }

    /// An integer key's resolved value: what was set, or the table's default (the config
    /// validated it). Panics on a key the table does not give an integer: a programming error.
    pub fn int(&self, key: &str) -> i64 {
        self.raw
            .get(key)
            .and_then(|value| value.trim().parse().ok())
            .unwrap_or_else(|| panic!("{key} is not an integer key of the table"))
    }

    /// A string key's resolved value: what was set, or the table's default. Panics on a key
    /// the table does not have: a programming error.
    pub fn string(&self, key: &str) -> &str {
        self.raw
            .get(key)
            .map(String::as_str)
            .unwrap_or_else(|| panic!("{key} is not a key of the table"))
    }

    /// Whether this node runs the broker role.
    pub fn is_broker(&self) -> bool {
        self.process_roles.iter().any(|role| role == "broker")
    }

    /// Whether this node runs the controller role.
    pub fn is_controller(&self) -> bool {
        self.process_roles.iter().any(|role| role == "controller")
    }

    /// The Raft settings: `controller.quorum.*` and
    /// `metadata.log.max.record.bytes.between.snapshots`. Without `controller.quorum.voters`
    /// the quorum is this node alone.
    pub fn quorum_config(&self) -> logjam_raft::QuorumConfig {
        let voters: Vec<logjam_raft::NodeId> = if self.voters.is_empty() {
            vec![logjam_raft::NodeId(self.node_id as u32)]
        } else {
            self.voters
                .keys()
                .map(|id| logjam_raft::NodeId(*id as u32))
                .collect()
        };
        let mut quorum = logjam_raft::QuorumConfig::new(voters);
        for key in [
            "controller.quorum.election.timeout.ms",
            "controller.quorum.fetch.timeout.ms",
            "controller.quorum.election.backoff.max.ms",
            "controller.quorum.request.timeout.ms",
            "controller.quorum.retry.backoff.ms",
            "controller.quorum.append.linger.ms",
            "metadata.log.max.record.bytes.between.snapshots",
        ] {
            if let Some(value) = self.raw.get(key) {
                quorum
                    .set_property(key, value)
                    .expect("validated as a non-negative integer");
            }
        }
        quorum
    }

    /// The directory holding this node's partitions (the first of `log.dirs`).
    pub fn data_dir(&self) -> &Path {
        &self.log_dirs[0]
    }
}

/// Splits one properties line into a key and value; `None` for blank lines and comments.
fn parse_line(line: usize, text: &str) -> Result<Option<(String, String)>, ConfigError> {
    let trimmed = text.trim();
    if trimmed.is_empty() || trimmed.starts_with('#') || trimmed.starts_with('!') {
        return Ok(None);
    }
    let split = trimmed
        .find(['=', ':'])
        .ok_or_else(|| ConfigError::Syntax {
            line,
            text: text.to_owned(),
        })?;
    let key = trimmed[..split].trim();
    if key.is_empty() {
        return Err(ConfigError::Syntax {
            line,
            text: text.to_owned(),
        });
    }
    Ok(Some((
        key.to_owned(),
        trimmed[split + 1..].trim().to_owned(),
    )))
}

/// The resolved keys while they are read, with where each set one came from (for errors).
struct Keys<'a> {
    raw: &'a BTreeMap<String, String>,
    set: &'a BTreeMap<String, (usize, String)>,
}

impl Keys<'_> {
    /// The line that set `key` (0: a default or an override).
    fn line_of(&self, key: &str) -> usize {
        self.set.get(key).map_or(0, |(line, _)| *line)
    }

    /// An integer key the table validated.
    fn int(&self, key: &str) -> i64 {
        self.raw[key].trim().parse().expect("validated")
    }

    /// `key`'s value refused for `reason`, naming its line.
    fn invalid(&self, key: &str, reason: &'static str) -> ConfigError {
        ConfigError::InvalidValue {
            line: self.line_of(key),
            key: key.to_owned(),
            value: self.raw.get(key).cloned().unwrap_or_default(),
            reason,
        }
    }
}

/// The `group.consumer.*` keys together, as the new consumer protocol checks them; the error
/// names the key its message starts with.
fn check_consumer_protocol(keys: &Keys<'_>) -> Result<(), ConfigError> {
    let Err(reason) = group_consumer::Config::from_raw(keys.raw).validate() else {
        return Ok(());
    };
    let key = reason
        .split_whitespace()
        .next()
        .unwrap_or_default()
        .to_owned();
    Err(ConfigError::InvalidValue {
        line: keys.line_of(&key),
        value: keys.raw.get(&key).cloned().unwrap_or_default(),
        key,
        reason: "refused by the new consumer protocol's checks (bounds set by the other group.consumer.* keys, known assignors)",
    })
}

/// `process.roles`: `broker`, `controller` or both.
fn roles(keys: &Keys<'_>) -> Result<Vec<String>, ConfigError> {
    let process_roles = list(&keys.raw["process.roles"]);
    if process_roles.is_empty()
        || process_roles
            .iter()
            .any(|role| role != "broker" && role != "controller")
    {
        return Err(keys.invalid("process.roles", "expected `broker`, `controller` or both"));
    }
    Ok(process_roles)
}

/// Where the node listens: the client listener (the first that is not a controller
/// listener, else the first) and the controller listener, if any.
struct Listeners {
    listen_address: SocketAddr,
    controller_listen_address: Option<SocketAddr>,
    host: String,
    port: u16,
}

/// `listeners`, split by `controller.listener.names`.
fn listeners(keys: &Keys<'_>) -> Result<Listeners, ConfigError> {
    let invalid = |key: &str, reason: &'static str| keys.invalid(key, reason);
    let listeners = list(&keys.raw["listeners"]);
    if listeners.is_empty() {
        return Err(invalid("listeners", "no listener given"));
    }
    let controller_names = keys
        .raw
        .get("controller.listener.names")
        .map_or_else(|| vec!["CONTROLLER".to_owned()], |names| list(names));
    let is_controller_listener = |listener: &str| {
        listener
            .split_once("://")
            .is_some_and(|(name, _)| controller_names.iter().any(|n| n == name))
    };
    let bind = |listener: &str| -> Result<(String, u16, SocketAddr), ConfigError> {
        let (host, port) = parse_listener(listener)
            .ok_or_else(|| invalid("listeners", "expected NAME://host:port"))?;
        let bind_host = if host.is_empty() {
            "0.0.0.0"
        } else {
            host.as_str()
        };
        let address: SocketAddr = format!("{bind_host}:{port}")
            .parse()
            .map_err(|_| invalid("listeners", "the host must be an IP address"))?;
        Ok((host, port, address))
    };
    let controller_listen_address = listeners
        .iter()
        .find(|l| is_controller_listener(l))
        .map(|l| bind(l).map(|(_, _, address)| address))
        .transpose()?;
    let client = listeners
        .iter()
        .find(|l| !is_controller_listener(l))
        .unwrap_or(&listeners[0]);
    let (host, port, listen_address) = bind(client)?;
    Ok(Listeners {
        listen_address,
        controller_listen_address,
        host,
        port,
    })
}

/// `controller.quorum.voters` (`id@host:port,...`), checked against this node's roles: a
/// broker-only node needs them, a controller must be one of them, and a controller of a
/// multi-voter quorum needs a controller listener.
fn voters(
    keys: &Keys<'_>,
    node_id: i32,
    is_controller: bool,
    has_controller_listener: bool,
) -> Result<BTreeMap<i32, SocketAddr>, ConfigError> {
    let invalid = |key: &str, reason: &'static str| keys.invalid(key, reason);
    let mut voters = BTreeMap::new();
    if let Some(value) = keys.raw.get("controller.quorum.voters") {
        for voter in list(value) {
            let parsed = voter.split_once('@').and_then(|(id, address)| {
                let id: i32 = id.trim().parse().ok()?;
                let address = std::net::ToSocketAddrs::to_socket_addrs(address.trim())
                    .ok()?
                    .next()?;
                Some((id, address))
            });
            let (id, address) = parsed
                .ok_or_else(|| invalid("controller.quorum.voters", "expected id@host:port,..."))?;
            voters.insert(id, address);
        }
    }
    if voters.is_empty() && !is_controller {
        return Err(invalid(
            "controller.quorum.voters",
            "a broker-only node needs the controller voters",
        ));
    }
    if is_controller && !voters.is_empty() && !voters.contains_key(&node_id) {
        return Err(invalid(
            "controller.quorum.voters",
            "a controller must be one of the voters",
        ));
    }
    if is_controller && voters.len() > 1 && !has_controller_listener {
        return Err(invalid(
            "listeners",
            "a controller of a multi-voter quorum needs a controller listener",
        ));
    }
    Ok(voters)
}

/// The address clients are told: the first `advertised.listeners` entry, else the client
/// listener's (with `localhost` for a wildcard host).
fn advertised(keys: &Keys<'_>, host: String, port: u16) -> Result<(String, u16), ConfigError> {
    Ok(match keys.raw.get("advertised.listeners") {
        Some(value) => {
            let first = list(value).into_iter().next().unwrap_or_default();
            parse_listener(&first)
                .ok_or_else(|| keys.invalid("advertised.listeners", "expected NAME://host:port"))?
        }
        None if host.is_empty() || host == "0.0.0.0" => ("localhost".to_owned(), port),
        None => (host, port),
    })
}

/// The log directories (`log.dirs`, else `log.dir`), the time-based flush interval (none for
/// Kafka's `Long.MAX_VALUE`), and a known `log.message.timestamp.type`.
fn logs(keys: &Keys<'_>) -> Result<(Vec<PathBuf>, Option<u64>), ConfigError> {
    let invalid = |key: &str, reason: &'static str| keys.invalid(key, reason);
    let log_dirs: Vec<PathBuf> = match keys.raw.get("log.dirs") {
        Some(value) => list(value).into_iter().map(PathBuf::from).collect(),
        None => vec![PathBuf::from(&keys.raw["log.dir"])],
    };
    if log_dirs.is_empty() {
        return Err(invalid("log.dirs", "no directory given"));
    }
    let log_flush_interval_ms = keys
        .raw
        .get("log.flush.interval.ms")
        .map(|value| value.trim().parse::<i64>().expect("validated"))
        .filter(|ms| *ms != i64::MAX)
        .map(|ms| u64::try_from(ms).map_err(|_| invalid("log.flush.interval.ms", "negative")))
        .transpose()?;
    if !matches!(
        keys.raw["log.message.timestamp.type"].as_str(),
        "CreateTime" | "LogAppendTime"
    ) {
        return Err(invalid(
            "log.message.timestamp.type",
            "expected `CreateTime` or `LogAppendTime`",
        ));
    }
    Ok((log_dirs, log_flush_interval_ms))
}

/// `logjam.canaries`: known names only.
fn canaries(keys: &Keys<'_>) -> Result<Canaries, ConfigError> {
    keys.raw[CANARIES_KEY]
        .parse()
        .map_err(|unknown: UnknownCanary| ConfigError::UnknownCanary {
            line: keys.line_of(CANARIES_KEY),
            key: CANARIES_KEY,
            name: unknown.name,
            known: Canary::known_names(),
        })
}

fn list(value: &str) -> Vec<String> {
    value
        .split(',')
        .map(str::trim)
        .filter(|item| !item.is_empty())
        .map(str::to_owned)
        .collect()
}

/// Parses `NAME://host:port` into host and port; the host may be empty (all interfaces).
fn parse_listener(listener: &str) -> Option<(String, u16)> {
    let (_, address) = listener.split_once("://")?;
    let (host, port) = address.rsplit_once(':')?;
    Some((host.trim_matches(['[', ']']).to_owned(), port.parse().ok()?))
}

#[cfg(test)]
mod tests;
