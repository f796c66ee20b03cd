//! The KRaft controller and the metadata quorum shell.
//!
//! - `election.rs`: leader election order, ISR and ELR changes (pure, table-tested).
//! - `control.rs` ([`QuorumController`]): registration (with KIP-966 unclean-shutdown
//!   detection from `PreviousBrokerEpoch`), heartbeats and fencing, topic creation and replica
//!   placement, AlterPartition validation (pure, unit-tested).
//! - `entry_codec.rs`: Raft entries as Kafka record batches.
//! - `metadata_log.rs` ([`MetadataLogStore`]): `__cluster_metadata-0` on disk, fsynced on every
//!   append, the `quorum-state` file and snapshot checkpoints.
//! - `wire.rs`: Raft messages as kafka-protocol Vote/BeginQuorumEpoch/EndQuorumEpoch/Fetch/
//!   FetchSnapshot requests and responses.
//! - `quorum.rs` ([`Quorum`]): the tokio driver on its own thread: timers, sockets, ready
//!   handling, the controller listener, forwarding to the active controller, and the broker's
//!   registration and heartbeats.
//!
//! The records and the image they build are in [`crate::metadata`].

pub mod control;
pub mod election;
pub mod entry_codec;
pub mod metadata_log;
pub mod quorum;
pub mod wire;

pub use control::{ControllerConfig, QuorumController};
pub use metadata_log::MetadataLogStore;
pub use quorum::{BrokerLifecycleSettings, BrokerStatus, Quorum, QuorumSettings, QuorumStartError};
