//! Coordinators: state a broker keeps for clients beyond the log itself.
//!
//! - The shell they share: [`runtime`] (load a partition's state when this node becomes its
//!   leader, unload on losing it, append a write's records and answer once the high
//!   watermark passes them) driving a pure [`shard`]; [`internal_topic`], the topics their
//!   state lives on (created on first use, a key's partition and coordinator, what a failed
//!   write answers).
//! - [`txn`]: the transaction coordinator, on `__transaction_state`.
//! - [`group`]: the group coordinator (classic groups, KIP-848 consumer groups, committed
//!   and transactional offsets), on `__consumer_offsets`.
//! - The producer-id blocks InitProducerId hands ids out of ([`producer_ids`],
//!   [`ProducerIdManager`]).
//!
//! A new coordinator (share groups, the log cleaner's state) is a pure shard plus a thin
//! shell over the runtime and an internal topic, as these two are.

pub mod group;
pub mod internal_topic;
pub mod producer_id_manager;
pub mod producer_ids;
pub mod runtime;
pub mod shard;
pub mod txn;

pub use producer_id_manager::ProducerIdManager;
pub use runtime::{CoordinatorRuntime, Load, Loaded};
pub use shard::{CoordinatorRecord, CoordinatorShard};
