//! The invariants of replication state, checked where that state changes: the high watermark
//! never passes the log end, never moves back on a leader, the ISR is a subset of the
//! replicas, and a partition's leader epoch never decreases. A broken invariant means this
//! node's view of the partition is wrong, and serving from it could hand out or acknowledge
//! wrong data: the node stops at once, loudly, naming the partition, instead.
//!
//! The checks stay on with canaries too: no canary breaks one of them (each canary breaks a
//! guarantee the checkers look for, such as committed data surviving, not this node's own
//! bookkeeping), so a canary run that tripped one would be a real bug in the node.

use logjam_storage::{Offset, TopicPartition};

use crate::metadata::PartitionState;

/// Stops the process: logs, prints to stderr, and aborts (no unwinding a tokio task could
/// swallow).
#[cold]
pub fn broken(partition: &TopicPartition, what: &str) -> ! {
    tracing::error!(%partition, what, "replication invariant broken; stopping the node");
    eprintln!(
        "FATAL: replication invariant broken on {partition}: {what}; stopping the node rather \
         than serving wrong data"
    );
    std::process::abort();
}

/// A new high watermark: at most the log end, and on a leader not below the current one.
pub fn check_high_watermark(
    partition: &TopicPartition,
    current: Offset,
    new: Offset,
    log_end: Offset,
    as_leader: bool,
) {
    if new > log_end {
        broken(
            partition,
            &format!("high watermark {} above the log end {}", new.0, log_end.0),
        );
    }
    if as_leader && new < current {
        broken(
            partition,
            &format!(
                "high watermark moved back on the leader from {} to {}",
                current.0, new.0
            ),
        );
    }
}

/// A new partition state from the metadata image: the ISR within the replicas, and the
/// leader epoch not below the one applied before.
pub fn check_partition_state(
    partition: &TopicPartition,
    current: &PartitionState,
    new: &PartitionState,
) {
    if let Some(outsider) = new.isr.iter().find(|id| !new.replicas.contains(id)) {
        broken(
            partition,
            &format!(
                "ISR {:?} names broker {} outside the replicas {:?}",
                new.isr, outsider.0, new.replicas
            ),
        );
    }
    if new.leader_epoch < current.leader_epoch {
        broken(
            partition,
            &format!(
                "leader epoch went back from {} to {}",
                current.leader_epoch, new.leader_epoch
            ),
        );
    }
}
