//! The cluster metadata as brokers and controllers see it: the records of the
//! `__cluster_metadata` log ([`MetadataRecord`]) and the image they replay into
//! ([`MetadataImage`]). Pure and synchronous: no I/O, no tokio, no clock.
//!
//! Encoding choice: `kafka-protocol` ships no metadata record types, so one controller
//! operation's records are serialized as **one JSON array** (serde_json) and proposed as a
//! single Raft entry. One entry per operation makes every operation atomic in the log (Kafka
//! gets the same effect with atomic record batches). Snapshots are the JSON of the whole image.
//! The Raft entries themselves travel and rest as Kafka record batches (see
//! `controller/entry_codec.rs`).
//!
//! Neighbours: the controller's decisions are in `controller/` (`election.rs`, `control.rs`);
//! the broker applies the image to its partitions in `replica/manager.rs`.

mod ids;
mod image;
mod record;

pub use ids::{BrokerEpoch, BrokerId};
pub use image::{BrokerRegistration, MetadataImage, PartitionState, TopicImage};
pub use record::{
    LeaderRecoveryState, MetadataRecord, PartitionChangeRecord, PartitionRecord, RecordCodecError,
    decode_records, encode_records,
};
