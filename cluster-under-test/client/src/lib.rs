//! `logjam-client`: the async Kafka-protocol client that logjam's workloads drive the cluster
//! through: a producer built as Kafka's batching engine, a consumer with manual assignment,
//! and an admin client. It speaks to any Kafka-compatible cluster (ours, Apache Kafka).
//!
//! "send() is not a send": [`producer::Producer::send`] appends to a per-partition
//! accumulator and returns a future; a background sender decides when bytes hit a socket.
//! Every outcome is classified in one place, [`outcome`], as definitely failed or possibly
//! applied, so workloads can record Jepsen's `fail` versus `info` honestly.
//!
//! # Layout
//!
//! - [`config`]: Kafka property names and Kafka 4 defaults; unknown keys are errors.
//! - [`ids`]: newtypes (`Offset`, `Partition`, `LeaderEpoch`, `ProducerId`, ...).
//! - [`outcome`]: the one classification of error codes and transport failures.
//! - [`error`]: the crate's error enum.
//! - [`connection`]: one pipelined TCP connection: correlation ids, ApiVersions, timeouts.
//! - [`metadata`]: the pure metadata cache (leaders, epochs, ISR).
//! - [`cluster`]: bootstrap, connection per broker, metadata refresh.
//! - [`producer`]: the front door (`send`, `flush`, `close`), with
//!   [`producer::partitioner`] (murmur2 / uniform sticky), [`producer::accumulator`]
//!   (readiness and drain decisions, pure), [`producer::batch`] (v2 batch encoding),
//!   [`producer::idempotence`] (producer id, epoch, sequences, pure),
//!   [`producer::transaction`] (the transaction state machine, fatal versus abortable, pure),
//!   [`producer::transactional`] (init/begin/commit/abort, coordinator requests) and
//!   [`producer::sender`] (the background task).
//! - [`consumer`]: assign, seek, poll, positions, truncation detection, with
//!   [`consumer::isolation`] (`isolation.level`: read_committed's aborted-transaction
//!   filtering, pure) and [`consumer::group`] (`subscribe`: classic groups, assignors,
//!   heartbeats, the poll clock, committed offsets, rebalance events).
//! - [`admin`]: create/describe topics, describe the quorum.
//!
//! ```text
//!  send(record) ──► partitioner ──► accumulator (per-partition batch queues, buffer.memory)
//!      │ returns DeliveryFuture            │ ready? (full | linger.ms | memory | flush)
//!      ▼                                   ▼
//!  await result ◄── completion ◄── sender task ──drain──► Produce request
//!                      ▲              │ retries, backoff,        │ max.in.flight per broker
//!                      │              │ idempotent sequences     ▼
//!                      └── outcome.rs ◄── response / timeout ◄── connection (pipelined TCP)
//! ```
//!
//! Pure parts (partitioner, accumulator decisions, idempotence state, outcome
//! classification, metadata cache, config) are synchronous and unit-tested; tokio appears only
//! in the connection, cluster, sender, consumer and admin shells. Logging uses `tracing`
//! (set `RUST_LOG=logjam_client=debug` in a binary that installs a subscriber).

pub mod admin;
pub mod cluster;
pub mod config;
pub mod connection;
pub mod consumer;
pub mod error;
pub mod ids;
pub mod metadata;
pub mod outcome;
pub mod producer;

pub use admin::{Admin, NewTopic};
pub use config::{Acks, AdminConfig, ConsumerConfig, ProducerConfig};
pub use consumer::group::{RebalanceCause, RebalanceEvent};
pub use consumer::{Consumer, ConsumerRecord, SeekTo};
pub use error::{Error, Result};
pub use ids::{
    BrokerId, LeaderEpoch, Offset, Partition, ProducerEpoch, ProducerId, Sequence, TopicPartition,
};
pub use outcome::{Certainty, HistoryType};
pub use producer::transaction::TxnState;
pub use producer::transactional::{ConsumerGroupMetadata, TransactionError};
pub use producer::{DeliveryFuture, ProduceError, Producer, ProducerRecord, RecordMetadata};
