//! `logjam-node`: the built-in Kafka-compatible node that logjam tests.
//!
//! It speaks the Kafka wire protocol (through the `kafka-protocol` crate), so real Kafka
//! clients work against it, and it must behave like Apache Kafka 4.x, dangerous defaults
//! included: showing their consequences is what logjam is for.
//!
//! # Layout
//!
//! ```text
//!   TCP ──► server.rs ──frame──► frame.rs ──request──► handlers.rs ──► handlers/<api>.rs
//!           (connections,        (decode, version      (dispatch)       (one file per API)
//!            flusher,             checks, encode)                            │
//!            shutdown)                                                       ▼
//!                                                      broker.rs: topics, partitions ──► logjam-storage
//! ```
//!
//! - [`config`]: `server.properties` with Kafka's names and defaults; unknown keys are errors.
//! - [`server`]: the listener, per-connection loops, periodic flush/checkpoint, clean shutdown.
//! - [`frame`]: untrusted bytes to requests and responses back; never panics on any input.
//! - [`versions`]: the APIs and version ranges each listener serves and advertises.
//! - [`handlers`]: ApiVersions, Metadata, CreateTopics, Produce, Fetch, ListOffsets,
//!   InitProducerId.
//! - [`broker`]: shared state; the partition as leader (acks, ISR, high watermark).
//! - [`topics`]: Kafka's naming and topic-config rules.
//! - [`metadata`]: metadata records and the image brokers replay (pure).
//! - [`producer_state`]: the idempotent producer's per-partition state and checks (pure);
//!   [`producer_ids`]: the broker's block of producer ids for InitProducerId (pure).
//! - [`replication`]: pure replication decisions (ISR shrink/expand, high watermark, acks=all,
//!   divergence truncation); [`replica_fetcher`]: the follower fetchers and ISR changes (tokio).
//! - [`canary`]: deliberate, named bugs (`logjam.canaries`, off by default) that prove the
//!   checkers catch what they claim to; each is a branch marked `// CANARY(name)`.
//! - [`controller`]: the KRaft quorum driver, the active controller's decisions, the metadata
//!   log on disk, the controller listener, broker registration and heartbeats.
//!
//! Roles: `process.roles=broker,controller` (combined, the default of the lab),
//! `broker` (an observer of the quorum that serves clients) or `controller` (no client
//! listener). Without `controller.quorum.voters` a combined node is a one-voter quorum by
//! itself, with no controller listener needed: that is single-node mode.

pub mod broker;
pub mod canary;
pub mod config;
pub mod controller;
pub mod frame;
pub mod handlers;
pub mod metadata;
pub mod producer_ids;
pub mod producer_state;
pub mod replica_fetcher;
pub mod replication;
pub mod server;
pub mod topics;
pub mod versions;
