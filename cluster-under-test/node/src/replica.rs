//! The replica layer (Kafka's `ReplicaManager` and `Partition`): the partitions this broker
//! hosts and their logs ([`manager`]), each partition as leader or follower ([`partition`]),
//! the pure high-watermark and ISR decisions ([`replication`]), the one wait of an acks=all
//! append for the high watermark ([`delayed_produce`]), the follower fetchers
//! ([`fetcher`]), the AlterPartition sender ([`alter_partition`]) and the KIP-890 check of
//! transactional produces with their coordinator ([`txn_verify`]).

pub mod alter_partition;
pub mod delayed_produce;
pub mod fetcher;
pub mod invariants;
pub mod manager;
pub mod partition;
pub mod replication;
pub mod txn_verify;

pub use manager::{IsrChangeReceiver, ReplicaManager};
pub use partition::{
    Acks, Appended, Ask, ConsumerRead, Fetched, FollowerRead, Isolation, IsrChange, Partition,
    PartitionOffsets, TxnCheck, Verified,
};
