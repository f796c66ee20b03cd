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
    if let Some(what) = high_watermark_violation(current, new, log_end, as_leader) {
        broken(partition, &what);
    }
}

/// A new partition state from the metadata image: the ISR within the replicas, and the
/// leader epoch not below the one applied before.
pub fn check_partition_state(
    partition: &TopicPartition,
    current: &PartitionState,
    new: &PartitionState,
) {
    if let Some(what) = partition_state_violation(current, new) {
        broken(partition, &what);
    }
}

/// What is wrong with moving the high watermark from `current` to `new`, if anything.
pub fn high_watermark_violation(
    current: Offset,
    new: Offset,
    log_end: Offset,
    as_leader: bool,
) -> Option<String> {
    if new > log_end {
        return Some(format!(
            "high watermark {} above the log end {}",
            new.0, log_end.0
        ));
    }
    (as_leader && new < current).then(|| {
        format!(
            "high watermark moved back on the leader from {} to {}",
            current.0, new.0
        )
    })
}

/// What is wrong with going from partition state `current` to `new`, if anything.
pub fn partition_state_violation(current: &PartitionState, new: &PartitionState) -> Option<String> {
    if let Some(outsider) = new.isr.iter().find(|id| !new.replicas.contains(id)) {
        return Some(format!(
            "ISR {:?} names broker {} outside the replicas {:?}",
            new.isr, outsider.0, new.replicas
        ));
    }
    (new.leader_epoch < current.leader_epoch).then(|| {
        format!(
            "leader epoch went back from {} to {}",
            current.leader_epoch, new.leader_epoch
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metadata::{BrokerId, LeaderRecoveryState};

    #[test]
    fn high_watermark_rules() {
        let hw = |current, new, end, leader| {
            high_watermark_violation(Offset(current), Offset(new), Offset(end), leader)
        };
        assert_eq!(hw(5, 7, 10, true), None);
        assert_eq!(hw(5, 10, 10, true), None);
        assert!(
            hw(5, 11, 10, true)
                .unwrap()
                .contains("above the log end 10")
        );
        assert!(
            hw(5, 11, 10, false).is_some(),
            "a follower's is bounded too"
        );
        assert!(hw(5, 4, 10, true).unwrap().contains("moved back"));
        assert_eq!(
            hw(5, 4, 10, false),
            None,
            "a follower's may go back (truncation)"
        );
    }

    #[test]
    fn partition_state_rules() {
        let state = |epoch, replicas: &[i32], isr: &[i32]| PartitionState {
            replicas: replicas.iter().copied().map(BrokerId).collect(),
            isr: isr.iter().copied().map(BrokerId).collect(),
            elr: Vec::new(),
            last_known_elr: Vec::new(),
            leader: BrokerId(1),
            leader_epoch: epoch,
            partition_epoch: epoch,
            leader_recovery_state: LeaderRecoveryState::Recovered,
        };
        let current = state(3, &[1, 2, 3], &[1, 2]);
        assert_eq!(
            partition_state_violation(&current, &state(3, &[1, 2, 3], &[1])),
            None
        );
        assert_eq!(
            partition_state_violation(&current, &state(4, &[1, 2, 3], &[1, 2, 3])),
            None
        );
        assert!(
            partition_state_violation(&current, &state(2, &[1, 2, 3], &[1]))
                .unwrap()
                .contains("went back from 3 to 2")
        );
        assert!(
            partition_state_violation(&current, &state(4, &[1, 2], &[1, 4]))
                .unwrap()
                .contains("outside the replicas")
        );
    }
}
