//! The bodies of the KRaft RPCs, one file per RPC (request and response together), each field
//! named after and mapping 1:1 onto the Kafka message field. [`crate::Message`] wraps them.
//!
//! Wire-only fields (cluster id, topic name `__cluster_metadata`, partition 0, directory ids,
//! endpoints) are the node's to fill in; they carry no Raft decision.

pub mod begin_quorum_epoch;
pub mod describe_quorum;
pub mod end_quorum_epoch;
pub mod fetch;
pub mod fetch_snapshot;
pub mod vote;
