//! The one wait for the high watermark (Kafka's `DelayedProduce`): an acks=all append is
//! answered when its partition's high watermark covers it, or earlier when the maximal ISR
//! fell below the effective `min.insync.replicas` (`NOT_ENOUGH_REPLICAS_AFTER_APPEND`) or this
//! broker stopped leading the partition in the append's epoch (`NOT_LEADER_OR_FOLLOWER`), or
//! at the deadline (`REQUEST_TIMED_OUT`, whose outcome is indeterminate: the data stays in the
//! log). Produce and WriteTxnMarkers wait here; the decision for one append is the pure
//! [`acks_outcome`](super::replication::acks_outcome) behind [`Partition::acks_status`].
//!
//! The coordinators' writes do not wait here: their runtime must replay each batch into its
//! committed state in log order as the high watermark passes it (`coordinator/runtime.rs`'s
//! `advance_commits`, woken by the same signal), and a lost leadership unloads the partition,
//! which fails the waiting writes with `NOT_COORDINATOR`.

use kafka_protocol::ResponseError;
use tokio::sync::watch;
use tokio::time::Instant;

use super::replication::AcksOutcome;
use super::{Appended, Partition};

/// Waits until each of `appends` is decided and returns each one's answer, in order.
///
/// `wakeups` is the node's append signal ([`super::ReplicaManager::subscribe_appends`]),
/// which changes on every append, high-watermark advance and state change; every append is
/// checked once before the first wait, so a change between the append and the subscription
/// is not missed. At `deadline` the undecided ones are `REQUEST_TIMED_OUT`.
pub async fn until_replicated(
    mut wakeups: watch::Receiver<u64>,
    appends: &[(&Partition, &Appended)],
    deadline: Instant,
) -> Vec<Result<(), ResponseError>> {
    let mut answers: Vec<Option<Result<(), ResponseError>>> = vec![None; appends.len()];
    loop {
        wakeups.borrow_and_update();
        settle(appends, &mut answers);
        if answers.iter().all(Option::is_some) {
            break;
        }
        match tokio::time::timeout_at(deadline, wakeups.changed()).await {
            Ok(Ok(())) => continue,
            // The node is shutting down: nothing will wake this wait again.
            Ok(Err(_)) => tokio::time::sleep_until(deadline).await,
            Err(_) => {}
        }
        settle(appends, &mut answers);
        break;
    }
    answers
        .into_iter()
        .map(|answer| answer.unwrap_or(Err(ResponseError::RequestTimedOut)))
        .collect()
}

/// Decides every undecided append that its partition's state now decides.
fn settle(appends: &[(&Partition, &Appended)], answers: &mut [Option<Result<(), ResponseError>>]) {
    for ((partition, appended), answer) in appends.iter().zip(answers.iter_mut()) {
        if answer.is_none() {
            *answer = match partition.acks_status(appended) {
                AcksOutcome::Waiting => None,
                AcksOutcome::Satisfied => Some(Ok(())),
                AcksOutcome::NotEnoughReplicasAfterAppend => {
                    Some(Err(ResponseError::NotEnoughReplicasAfterAppend))
                }
                AcksOutcome::NotLeader => Some(Err(ResponseError::NotLeaderOrFollower)),
            };
        }
    }
}
