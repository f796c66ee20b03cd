//! Coordinators: state a broker keeps for clients beyond the log itself. The producer-id
//! blocks InitProducerId hands ids out of ([`producer_ids`], [`ProducerIdManager`]), and the
//! runtime for coordinators whose state lives on internal-topic partitions ([`runtime`]: load
//! on becoming leader, unload on losing it, append and wait for the high watermark), with the
//! pure state machine it drives ([`shard`]), the internal topics it lives on
//! ([`internal_topic`]: created on first use, a key's coordinator found), and the
//! transaction coordinator on it ([`txn`]);
//! the group coordinator, classic protocol, with transactional offset commits, on
//! `__consumer_offsets` ([`group`]); the pure core
//! of the new consumer protocol (KIP-848, [`consumer_group`]), served by the same group
//! coordinator (`group/consumer.rs`).

pub mod consumer_group;
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
