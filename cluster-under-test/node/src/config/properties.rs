//! The property table: every key the node accepts ([`KEYS`]) with its type and Kafka 4.x
//! default, and the check of one value against its key's type and range.

use super::{CANARIES_KEY, ConfigError};

/// The type of a configuration value, as Kafka's `ConfigDef` types them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// A 32-bit integer.
    Int,
    /// A 64-bit integer.
    Long,
    /// `true` or `false`.
    Bool,
    /// Free text.
    Str,
    /// A comma-separated list.
    List,
}

/// One configuration key the node understands.
#[derive(Debug)]
pub struct KeySpec {
    /// Kafka's property name.
    pub name: &'static str,
    /// Its type.
    pub kind: Kind,
    /// Kafka's default, as it would be written in the file; `None` means the key is required
    /// or has no value by default (see [`KeySpec::required`]).
    pub default: Option<&'static str>,
    /// Whether loading fails when the key is not set.
    pub required: bool,
    /// Smallest accepted value for numeric kinds.
    pub min: i64,
}

const fn key(name: &'static str, kind: Kind, default: &'static str) -> KeySpec {
    KeySpec {
        name,
        kind,
        default: Some(default),
        required: false,
        min: i64::MIN,
    }
}

const fn key_min(name: &'static str, kind: Kind, default: &'static str, min: i64) -> KeySpec {
    KeySpec {
        name,
        kind,
        default: Some(default),
        required: false,
        min,
    }
}

const fn optional(name: &'static str, kind: Kind) -> KeySpec {
    KeySpec {
        name,
        kind,
        default: None,
        required: false,
        min: i64::MIN,
    }
}

const fn required(name: &'static str, kind: Kind) -> KeySpec {
    KeySpec {
        name,
        kind,
        default: None,
        required: true,
        min: i64::MIN,
    }
}

/// `Long.MAX_VALUE`, Kafka's "never" for the flush settings.
const LONG_MAX: &str = "9223372036854775807";

/// Every key the node accepts, with Kafka 4.x defaults.
pub static KEYS: &[KeySpec] = &[
    // Identity and roles.
    required("node.id", Kind::Int),
    required("process.roles", Kind::List),
    optional("controller.quorum.voters", Kind::List),
    optional("controller.quorum.bootstrap.servers", Kind::List),
    optional("controller.listener.names", Kind::List),
    // Listeners.
    key("listeners", Kind::List, "PLAINTEXT://:9092"),
    optional("advertised.listeners", Kind::List),
    optional("listener.security.protocol.map", Kind::List),
    optional("inter.broker.listener.name", Kind::Str),
    key_min("socket.request.max.bytes", Kind::Int, "104857600", 1),
    key_min("num.network.threads", Kind::Int, "3", 1),
    key_min("num.io.threads", Kind::Int, "8", 1),
    // Storage.
    key("log.dir", Kind::Str, "/tmp/kafka-logs"),
    optional("log.dirs", Kind::List),
    optional("metadata.log.dir", Kind::Str),
    key_min("log.segment.bytes", Kind::Int, "1073741824", 14),
    key_min("log.index.interval.bytes", Kind::Int, "4096", 0),
    key_min("log.index.size.max.bytes", Kind::Int, "10485760", 4),
    key_min("log.flush.interval.messages", Kind::Long, LONG_MAX, 1),
    optional("log.flush.interval.ms", Kind::Long),
    key_min("log.flush.scheduler.interval.ms", Kind::Long, LONG_MAX, 0),
    key_min(
        "log.flush.offset.checkpoint.interval.ms",
        Kind::Int,
        "60000",
        0,
    ),
    key_min("log.retention.hours", Kind::Int, "168", -1),
    key("log.retention.bytes", Kind::Long, "-1"),
    key("log.message.timestamp.type", Kind::Str, "CreateTime"),
    key_min("message.max.bytes", Kind::Int, "1048588", 0),
    key_min("num.recovery.threads.per.data.dir", Kind::Int, "2", 1),
    // Topics.
    key_min("num.partitions", Kind::Int, "1", 1),
    key_min("default.replication.factor", Kind::Int, "1", 1),
    key_min("min.insync.replicas", Kind::Int, "1", 1),
    key("unclean.leader.election.enable", Kind::Bool, "false"),
    key("auto.create.topics.enable", Kind::Bool, "true"),
    // Replication.
    key_min("replica.lag.time.max.ms", Kind::Long, "30000", 0),
    key_min("replica.fetch.wait.max.ms", Kind::Int, "500", 0),
    key_min("replica.fetch.min.bytes", Kind::Int, "1", 1),
    key_min("replica.fetch.max.bytes", Kind::Int, "1048576", 0),
    key_min("replica.fetch.response.max.bytes", Kind::Int, "10485760", 0),
    key_min("replica.socket.timeout.ms", Kind::Int, "30000", 0),
    key_min(
        "replica.high.watermark.checkpoint.interval.ms",
        Kind::Long,
        "5000",
        1,
    ),
    // KRaft.
    key_min(
        "controller.quorum.election.timeout.ms",
        Kind::Int,
        "1000",
        1,
    ),
    key_min("controller.quorum.fetch.timeout.ms", Kind::Int, "2000", 1),
    key_min(
        "controller.quorum.election.backoff.max.ms",
        Kind::Int,
        "1000",
        1,
    ),
    key_min("controller.quorum.append.linger.ms", Kind::Int, "25", 0),
    key_min("controller.quorum.request.timeout.ms", Kind::Int, "2000", 1),
    key_min("controller.quorum.retry.backoff.ms", Kind::Int, "20", 0),
    key_min("broker.heartbeat.interval.ms", Kind::Int, "2000", 1),
    key_min("broker.session.timeout.ms", Kind::Int, "9000", 1),
    key_min(
        "metadata.log.max.record.bytes.between.snapshots",
        Kind::Long,
        "20971520",
        1,
    ),
    key_min("metadata.max.idle.interval.ms", Kind::Int, "500", 0),
    // KIP-966's switch (Kafka 4.0: feature `eligible.leader.replicas.version`, default off).
    key("eligible.leader.replicas.enable", Kind::Bool, "false"),
    // Groups and transactions.
    key_min("offsets.topic.replication.factor", Kind::Int, "3", 1),
    key_min("offsets.topic.num.partitions", Kind::Int, "50", 1),
    key_min(
        "transaction.state.log.replication.factor",
        Kind::Int,
        "3",
        1,
    ),
    key_min("transaction.state.log.min.isr", Kind::Int, "2", 1),
    key_min("transaction.state.log.num.partitions", Kind::Int, "50", 1),
    key_min("transaction.max.timeout.ms", Kind::Int, "900000", 1),
    // Kafka 4.0's `transaction.version` feature (with a 4.0 metadata version it is 2): 2 is
    // KIP-890 part 2 (an EndTxn v5+ bumps the producer epoch), 1 the original protocol.
    key_min("transaction.version", Kind::Int, "2", 1),
    // KIP-890 part 1: partition leaders ask the coordinator before the first transactional
    // batch of a transaction (Kafka 3.6+ default on; a TV2 client's produce is checked anyway).
    key(
        "transaction.partition.verification.enable",
        Kind::Bool,
        "true",
    ),
    key_min("group.initial.rebalance.delay.ms", Kind::Int, "3000", 0),
    key_min("group.min.session.timeout.ms", Kind::Int, "6000", 1),
    key_min("group.max.session.timeout.ms", Kind::Int, "1800000", 1),
    // The new consumer protocol (KIP-848), bounds checked together at startup.
    key_min("group.consumer.session.timeout.ms", Kind::Int, "45000", 1),
    key_min(
        "group.consumer.min.session.timeout.ms",
        Kind::Int,
        "45000",
        1,
    ),
    key_min(
        "group.consumer.max.session.timeout.ms",
        Kind::Int,
        "60000",
        1,
    ),
    key_min("group.consumer.heartbeat.interval.ms", Kind::Int, "5000", 1),
    key_min(
        "group.consumer.min.heartbeat.interval.ms",
        Kind::Int,
        "5000",
        1,
    ),
    key_min(
        "group.consumer.max.heartbeat.interval.ms",
        Kind::Int,
        "15000",
        1,
    ),
    key("group.consumer.assignors", Kind::List, "uniform,range"),
    key_min("group.consumer.max.size", Kind::Int, "2147483647", 1),
    // logjam's own: deliberate bugs for testing the checkers (crate::canary). Never by default.
    key(CANARIES_KEY, Kind::List, ""),
];

/// Checks `value` against the type and range of its key.
pub(super) fn validate(spec: &KeySpec, line: usize, value: &str) -> Result<(), ConfigError> {
    let invalid = |reason| ConfigError::InvalidValue {
        line,
        key: spec.name.to_owned(),
        value: value.to_owned(),
        reason,
    };
    match spec.kind {
        Kind::Int | Kind::Long => {
            let number: i64 = value
                .trim()
                .parse()
                .map_err(|_| invalid("not an integer"))?;
            if spec.kind == Kind::Int && i32::try_from(number).is_err() {
                return Err(invalid("does not fit in a 32-bit integer"));
            }
            if number < spec.min {
                return Err(invalid("below the smallest accepted value"));
            }
        }
        Kind::Bool => {
            if value != "true" && value != "false" {
                return Err(invalid("expected `true` or `false`"));
            }
        }
        Kind::Str | Kind::List => {}
    }
    Ok(())
}
