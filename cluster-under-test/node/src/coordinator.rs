//! Coordinators: state a broker keeps for clients beyond the log itself. Today the producer-id
//! blocks InitProducerId hands ids out of ([`producer_ids`], [`ProducerIdManager`]).

pub mod producer_id_manager;
pub mod producer_ids;

pub use producer_id_manager::ProducerIdManager;
