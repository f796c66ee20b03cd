//! The replica layer (Kafka's `ReplicaManager` and `Partition`): the partitions this broker
//! hosts and their logs ([`manager`]), each partition as leader or follower ([`partition`]),
//! the pure high-watermark and ISR decisions ([`replication`]), the follower fetchers
//! ([`fetcher`]), the AlterPartition sender ([`alter_partition`]) and the KIP-890 check of
//! transactional produces with their coordinator ([`txn_verify`]).

pub mod alter_partition;
pub mod fetcher;
pub mod invariants;
pub mod manager;
pub mod partition;
pub mod replication;
pub mod txn_verify;

use std::time::{SystemTime, UNIX_EPOCH};

pub use manager::{IsrChangeReceiver, ReplicaManager};
pub use partition::{
    Acks, Appended, Ask, ConsumerRead, Fetched, FollowerRead, Isolation, IsrChange, Partition,
    PartitionOffsets, TxnCheck, Verified,
};

/// Milliseconds since the Unix epoch, the clock Kafka stamps into logs.
pub fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |elapsed| elapsed.as_millis() as i64)
}
