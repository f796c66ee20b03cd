//! `logjam-node`: the built-in Kafka-compatible node that logjam tests.
//!
//! It speaks the Kafka wire protocol (through the `kafka-protocol` crate), so real Kafka
//! clients work against it, and it must behave like Apache Kafka 4.x, dangerous defaults
//! included: showing their consequences is what logjam is for.
//!
//! # Layout
//!
//! Layered as Kafka's broker is (`SocketServer`, `KafkaApis`, `ReplicaManager`, the
//! coordinators, the controller):
//!
//! ```text
//!   TCP ──► network/server ──frame──► network/framing ──request──► api (dispatch by key)
//!                  (network/codec: decode,                              │  one module per API,
//!                   version checks, encode)                             │  narrow handles
//!                                                                       ▼
//!   replica/ReplicaManager ◄── Produce, Fetch, ListOffsets     topics/TopicCreator ◄── CreateTopics,
//!     Partition (leader/follower) ──► logjam-storage            coordinator/ (txn, group)   Metadata
//!     fetcher, AlterPartition ──► network/NodeClient ──► other nodes ◄── controller/quorum (Raft RPCs,
//!                                                                         forwarding, heartbeats)
//! ```
//!
//! - [`network`]: the client listener and connections ([`network::server`]), the wire codec
//!   ([`network::codec`]: untrusted bytes to requests, never panics), a client frame's
//!   dispatch ([`network::framing`]), and [`network::NodeClient`], the one client of every
//!   node-to-node request: it notices a closed connection and reconnects; a request gets its
//!   response or an error, never silence.
//! - [`api`]: dispatch by API key, one module per API, each given only the handles it needs.
//! - [`broker`]: the node's lifecycle (open, registration wait, clean shutdown) and its
//!   handles.
//! - [`replica`]: [`replica::ReplicaManager`] (hosted partitions, logs, the metadata image
//!   applied explicitly when it changes), [`replica::Partition`] (follower side;
//!   `partition/leader.rs`: high watermark, ISR, appends), the pure decisions
//!   ([`replica::replication`]: ISR shrink/expand, high watermark, acks=all, divergence
//!   truncation), the one wait of an acks=all append for the high watermark
//!   ([`replica::delayed_produce`], Kafka's `DelayedProduce`, used by Produce and
//!   WriteTxnMarkers), the follower fetchers, AlterPartition, and the invariants of
//!   replication state ([`replica::invariants`]: a broken one stops the node loudly).
//! - [`coordinator`]: state kept for clients beyond the log. The shell every coordinator
//!   shares: [`coordinator::CoordinatorRuntime`] replays a partition of an internal topic
//!   into a pure [`coordinator::CoordinatorShard`] when this node becomes its leader
//!   (`COORDINATOR_LOAD_IN_PROGRESS` meanwhile, `NOT_COORDINATOR` elsewhere), appends a
//!   write's records as leader and answers it once the high watermark passes them;
//!   [`coordinator::internal_topic`] creates the topics, routes a key to its partition and
//!   maps a failed write to what the client is told. On it: [`coordinator::txn`], the
//!   transaction coordinator (`__transaction_state`; pure table-tested transitions; the
//!   marker sender and the timeout abort in `txn/markers.rs`), and [`coordinator::group`],
//!   the group coordinator (`__consumer_offsets`; its module doc has the table of what
//!   serves classic members, KIP-848 consumer members, offsets and admin).
//! - [`controller`]: the KRaft quorum driver, the active controller's decisions split into
//!   cluster (registration, fencing), replication (topics, AlterPartition) and producer-id
//!   control, the metadata log on disk, the controller listener.
//! - [`versions`]: the APIs and version ranges each listener serves and advertises.
//! - [`metadata`]: metadata records and the image brokers replay (pure).
//! - [`config`]: `server.properties` with Kafka's names and defaults (the property table in
//!   `config/properties.rs`, the new consumer protocol's settings in
//!   `config/group_consumer.rs`); unknown keys are errors.
//! - [`topics`]: Kafka's naming and topic-config rules, [`topics::CreateTopicError`], and
//!   [`topics::TopicCreator`]: topic creation through the active controller.
//! - [`clock`]: the wall clock stamped into logs and records.
//! - The idempotent producer's per-partition state lives beside the log in `logjam-storage`
//!   (`producer_state`, with Kafka's `.snapshot` files).
//! - [`canary`]: deliberate, named bugs (`logjam.canaries`, off by default) that prove the
//!   checkers catch what they claim to; each is a branch marked `// CANARY(name)`.
//!
//! Roles: `process.roles=broker,controller` (combined, the default of the lab),
//! `broker` (an observer of the quorum that serves clients) or `controller` (no client
//! listener). Without `controller.quorum.voters` a combined node is a one-voter quorum by
//! itself, with no controller listener needed: that is single-node mode.

pub mod api;
pub mod broker;
pub mod canary;
pub mod clock;
pub mod config;
pub mod controller;
pub mod coordinator;
pub mod metadata;
pub mod network;
pub mod replica;
pub mod topics;
pub mod versions;
