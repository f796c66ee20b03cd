//! KRaft-flavoured Raft as a pure, deterministic state machine: no I/O, no tokio, no clock,
//! no RNG. Time and randomness come in with every call as a [`Moment`]; effects go out as a
//! [`Ready`] the driver (the `logjam-node` tokio shell) executes.
//!
//! The protocol is Kafka's (KIP-595, KIP-996, KIP-630): epochs; Vote with pre-vote;
//! BeginQuorumEpoch and EndQuorumEpoch; replication pulled by followers' Fetch requests (the
//! leader never pushes); divergence found from `LastFetchedEpoch` and answered with
//! `DivergingEpoch`, followed by truncation; a high watermark that only moves over an entry of
//! the leader's own epoch; check quorum; snapshots, FetchSnapshot, and log trimming below a
//! snapshot. Settings carry Kafka's `controller.quorum.*` names and defaults ([`QuorumConfig`]).
//!
//! ```text
//!                 events in                                   commands out
//!   tick(Moment) ─────────────┐                     ┌──▶ 1. quorum_state  (persist + fsync)
//!   step(Moment, Envelope) ───┤                     ├──▶ 2. log_ops       (append/truncate/
//!   propose(Moment, payloads)─┼──▶  RaftNode  ──────┤                        snapshot + fsync)
//!   create_snapshot(end, data)┤   (RoleState,       ├──▶ 3. messages      (send; may be lost)
//!   resign(Moment) ───────────┘    RaftLog,         ├──▶ 4. load_snapshot, apply (state machine)
//!                                  QuorumState)     └──▶    role, high_watermark,
//!                                                           snapshot_suggested (information)
//! ```
//!
//! # The driver loop
//!
//! ```
//! use logjam_raft::{Moment, NodeId, QuorumConfig, RaftNode, Role};
//!
//! // A one-voter quorum elects itself as soon as its election timer fires.
//! let config = QuorumConfig::new([NodeId(1)]);
//! let mut node = RaftNode::new(NodeId(1), config, Moment::new(0, 42));
//! let mut now_ms = 0;
//! while node.role() != Role::Leader && now_ms < 10_000 {
//!     // Sleep until the next timer (or until a message arrives, in a real driver).
//!     now_ms = node.next_deadline_ms().max(now_ms + 1);
//!     node.tick(Moment::new(now_ms, now_ms.wrapping_mul(0x9E37_79B9)));
//!     let ready = node.take_ready();
//!     // 1. persist ready.quorum_state, 2. apply ready.log_ops and fsync,
//!     // 3. send ready.messages, 4. apply ready.load_snapshot / ready.apply.
//!     let _ = ready;
//! }
//! assert_eq!(node.role(), Role::Leader);
//! let offsets = node.propose(Moment::new(now_ms, 7), vec![b"record".to_vec()]).unwrap();
//! // The proposal lingers for `controller.quorum.append.linger.ms`, then commits at once
//! // (a single voter is its own majority).
//! node.tick(Moment::new(now_ms + node.config().append_linger_ms, 8));
//! let ready = node.take_ready();
//! assert_eq!(ready.apply.last().map(|entry| entry.offset), Some(offsets.start));
//! ```
//!
//! Restart: rebuild the [`RaftLog`] by applying the persisted [`LogOp`]s (or an equivalent
//! on-disk reader), load the last [`QuorumState`], and call [`RaftNode::restart`].
//!
//! # Layout
//!
//! - `node` ([`RaftNode`]): public API and transitions; `node/election.rs` (Vote,
//!   BeginQuorumEpoch, EndQuorumEpoch, Prospective/Candidate rounds), `node/leader.rs`
//!   (serving Fetch/FetchSnapshot, high watermark, check quorum, linger),
//!   `node/follower.rs` (fetching, truncation, snapshot download), `node/role_state.rs`
//!   (volatile per-state data).
//! - `log` ([`RaftLog`]): entries, leader-epoch cache, latest snapshot; the reference
//!   semantics of [`LogOp`] (`log_op`).
//! - `message` ([`Message`], [`Envelope`]) and [`rpc`]: one file per KRaft RPC, fields named
//!   after Kafka's.
//! - `ready` ([`Ready`]): the commands and their required order.
//! - `config` ([`QuorumConfig`]), `canary` ([`Canary`]), `moment` ([`Moment`]),
//!   `quorum_state` ([`QuorumState`]), `role` ([`Role`]), `entry` ([`Entry`]),
//!   `snapshot` ([`Snapshot`]), `ids` (newtypes), `error` / `error_code`.
//!
//! The deterministic simulator and its invariant checkers live in `tests/raft/`.

#![deny(missing_docs)]

mod canary;
mod config;
mod entry;
mod error;
mod error_code;
mod ids;
mod log;
mod log_op;
mod message;
mod moment;
mod node;
mod quorum_state;
mod ready;
mod role;
pub mod rpc;
mod snapshot;

pub use canary::Canary;
pub use config::QuorumConfig;
pub use entry::{Entry, EntryKind};
pub use error::{ConfigError, Error};
pub use error_code::ErrorCode;
pub use ids::{CorrelationId, Epoch, NodeId, Offset};
pub use log::RaftLog;
pub use log_op::LogOp;
pub use message::{Envelope, Message};
pub use moment::Moment;
pub use node::RaftNode;
pub use quorum_state::QuorumState;
pub use ready::Ready;
pub use role::Role;
pub use snapshot::{Snapshot, SnapshotId};
