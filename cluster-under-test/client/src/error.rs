//! The crate's error type: one `thiserror` enum whose variants carry the context (broker,
//! API, topic-partition, Kafka error code) as fields.
//!
//! Whether an error means "certainly did not happen" is *not* decided here: ask
//! [`crate::outcome::classify_error`] (or [`Error::certainty`], which forwards to it).

use std::time::Duration;

use thiserror::Error;

use crate::config::ConfigError;
use crate::ids::{Offset, TopicPartition};
use crate::outcome::TransportFailure;

/// Everything that can go wrong in the client.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum Error {
    /// The configuration was rejected.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// The bytes did not make a round trip to `address`.
    #[error("{failure:?} talking to {address} ({api})")]
    Transport {
        /// `host:port` of the broker.
        address: String,
        /// The request's API name.
        api: &'static str,
        /// What happened on the wire.
        failure: TransportFailure,
    },
    /// The broker answered with a Kafka error code.
    #[error("{api} failed with {name} ({code}){}", context.as_ref().map(|c| format!(" for {c}")).unwrap_or_default())]
    Broker {
        /// The request's API name.
        api: &'static str,
        /// The Kafka error code.
        code: i16,
        /// Its Kafka name.
        name: String,
        /// The topic, partition or resource it concerns, when known.
        context: Option<String>,
    },
    /// The broker does not serve an API (or no version we speak) that the operation needs.
    #[error("the broker at {address} does not support {api}")]
    UnsupportedApi {
        /// `host:port` of the broker.
        address: String,
        /// The API name.
        api: &'static str,
    },
    /// The idempotent producer needs `InitProducerId`, which the broker does not serve. Kafka's
    /// Java producer fails the same way (`UnsupportedVersionException`), whether idempotence was
    /// explicit or the default; set `enable.idempotence=false` for such a broker.
    #[error(
        "idempotence is enabled{} but the broker at {address} does not support InitProducerId; \
         set enable.idempotence=false",
        if *explicit { "" } else { " (the default)" }
    )]
    IdempotenceUnsupported {
        /// The broker asked.
        address: String,
        /// Whether `enable.idempotence=true` was set explicitly.
        explicit: bool,
    },
    /// `send()` waited `max.block.ms` for buffer memory (Kafka's `BufferExhaustedException`).
    #[error(
        "failed to allocate {requested} bytes within max.block.ms ({waited:?}); buffer.memory is \
         {buffer_memory} bytes"
    )]
    BufferExhausted {
        /// Bytes the new batch needed.
        requested: usize,
        /// How long `send()` blocked.
        waited: Duration,
        /// The configured `buffer.memory`.
        buffer_memory: usize,
    },
    /// Something did not happen within its time bound.
    #[error("{what} did not complete within {after:?}")]
    Timeout {
        /// What was awaited (`metadata for topic T`, `delivery`, ...).
        what: String,
        /// The bound.
        after: Duration,
    },
    /// A record's batch was not acknowledged within `delivery.timeout.ms`.
    #[error(
        "delivery of a batch for {partition} timed out after {attempts} attempt(s){}",
        last_error.as_ref().map_or(String::new(), |error| format!(" (last error: {error})"))
    )]
    DeliveryTimeout {
        /// The batch's partition.
        partition: TopicPartition,
        /// How many produce requests carried it.
        attempts: u32,
        /// The error of the last failed attempt, if any: why it kept being retried.
        last_error: Option<String>,
    },
    /// The record is larger than `max.request.size` or `buffer.memory`.
    #[error("record of {size} bytes exceeds {limit_name} ({limit})")]
    RecordTooLarge {
        /// The record's encoded size estimate.
        size: usize,
        /// The limit's property name.
        limit_name: &'static str,
        /// The limit.
        limit: usize,
    },
    /// The producer or consumer was closed.
    #[error("the client is closed")]
    Closed,
    /// The consumer detected that the log was truncated below its position (KIP-320).
    #[error(
        "log truncation detected for {partition}: position {position} is beyond the divergence \
         point {divergent_offset}"
    )]
    LogTruncation {
        /// The partition.
        partition: TopicPartition,
        /// The consumer's position.
        position: Offset,
        /// The end offset of the last epoch the consumer and leader agree on.
        divergent_offset: Offset,
    },
    /// Offset out of range with `auto.offset.reset=none`.
    #[error("offset {offset} is out of range for {partition} and auto.offset.reset is none")]
    OffsetOutOfRange {
        /// The partition.
        partition: TopicPartition,
        /// The fetch offset.
        offset: Offset,
    },
    /// The operation concerns a partition the consumer is not assigned.
    #[error("{partition} is not assigned to this consumer")]
    NotAssigned {
        /// The partition.
        partition: TopicPartition,
    },
    /// A transactional operation was called in a state that does not allow it (Kafka's
    /// `IllegalStateException`, e.g. `send` outside a transaction, commit after an abortable
    /// error is handled by returning that error instead).
    #[error("cannot {operation} in transaction state {state}")]
    IllegalTransactionState {
        /// The operation attempted.
        operation: &'static str,
        /// The transaction manager's state.
        state: String,
    },
    /// A record of a transaction that is being aborted (or cannot commit) was failed before it
    /// was ever sent (Kafka's `TransactionAbortedException`).
    #[error("the transaction was aborted before the record was sent{}", cause.as_ref().map(|c| format!(" ({c})")).unwrap_or_default())]
    TransactionAborted {
        /// The error that made the transaction abort, if any.
        cause: Option<String>,
    },
    /// The broker's response broke the protocol (bad correlation id, undecodable body).
    #[error("protocol violation from {address}: {detail}")]
    Protocol {
        /// `host:port` of the broker.
        address: String,
        /// What was wrong.
        detail: String,
    },
}

/// Result with the crate's error.
pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    /// Builds [`Error::Broker`] from a Kafka error code.
    pub fn broker(api: &'static str, code: i16, context: Option<String>) -> Error {
        Error::Broker {
            api,
            code,
            name: crate::outcome::error_name(code),
            context,
        }
    }

    /// Whether this error certainly means "did not take effect" (see [`crate::outcome`]).
    pub fn certainty(&self) -> crate::outcome::Certainty {
        crate::outcome::classify_error(self).certainty
    }

    /// Whether a client would retry after this error.
    pub fn is_retriable(&self) -> bool {
        crate::outcome::classify_error(self).retriable
    }
}
