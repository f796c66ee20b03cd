//! Fetch: read record batches, with Kafka's long poll.
//!
//! The request waits until at least `min_bytes` are available or `max_wait_ms` has passed,
//! whichever comes first; an error in any partition answers at once. Consumers read up to the
//! high watermark (`isolation_level` 0), or up to the last stable offset with the aborted
//! transactions overlapping the records (1, read_committed); every answer carries the last
//! stable offset, the aborted list only read_committed ones (Kafka's). Sizes follow KIP-74: `partition_max_bytes` per partition and `max_bytes` for
//! the whole response, except that the first batch found is returned even when it is larger,
//! so a consumer can always make progress.
//!
//! A fetch with a replica id (`ReplicaId`, or `ReplicaState.ReplicaId` from v15) comes from a
//! follower: it reads up to the log end instead of the high watermark, is answered a
//! `DivergingEpoch` when the follower's log diverges (KIP-595), and feeds the leader's follower
//! bookkeeping once per request (ISR expansion, high watermark).
//!
//! Fetch sessions (KIP-227) are declined by answering session id 0: every request is treated
//! as a full fetch, which the protocol allows.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use kafka_protocol::ResponseError;
use kafka_protocol::messages::fetch_response::{
    AbortedTransaction, EpochEndOffset, FetchableTopicResponse, PartitionData,
};
use kafka_protocol::messages::{BrokerId, FetchRequest, FetchResponse};
use tokio::time::Instant;

use crate::replica::{ConsumerRead, Isolation, ReplicaManager};

/// Answers the fetch, waiting for data as the request allows.
pub async fn handle(
    replicas: &ReplicaManager,
    request: &FetchRequest,
    version: i16,
) -> FetchResponse {
    let max_wait = Duration::from_millis(u64::try_from(request.max_wait_ms).unwrap_or(0));
    let deadline = Instant::now() + max_wait;
    let mut appends = replicas.subscribe_appends();
    let replica_id = if version >= 15 {
        request.replica_state.replica_id.0
    } else {
        request.replica_id.0
    };
    let follower = (replica_id >= 0).then_some(crate::metadata::BrokerId(replica_id));
    if let Some(follower) = follower {
        record_follower_fetch(replicas, request, version, follower);
    }
    loop {
        appends.borrow_and_update();
        let (response, bytes, any_error) = read_once(replicas, request, version, follower);
        let min_bytes = usize::try_from(request.min_bytes).unwrap_or(0);
        if bytes >= min_bytes || any_error || Instant::now() >= deadline {
            return response;
        }
        // Wake on the next append anywhere on this node, or give up at the deadline.
        tokio::select! {
            changed = appends.changed() => if changed.is_err() { return response },
            () = tokio::time::sleep_until(deadline) => {}
        }
    }
}

/// The leader's bookkeeping of a follower fetch, for every partition whose log does not diverge
/// from the follower's; proposed ISR expansions go to the replication task.
fn record_follower_fetch(
    replicas: &ReplicaManager,
    request: &FetchRequest,
    version: i16,
    follower: crate::metadata::BrokerId,
) {
    let image = replicas.image();
    let eligible = image.is_unfenced(follower);
    for topic in &request.topics {
        let resolved = if version >= 13 {
            replicas.topic_by_id(topic.topic_id)
        } else {
            replicas.topic_by_name(&topic.topic)
        };
        let Some(resolved) = resolved else { continue };
        for asked in &topic.partitions {
            let Some(partition) = replicas.partition(&resolved.name, asked.partition) else {
                continue;
            };
            if partition
                .check_leader_epoch(asked.current_leader_epoch)
                .is_err()
            {
                continue;
            }
            let diverges = partition
                .read_for_follower(asked.fetch_offset, asked.last_fetched_epoch, 0, false)
                .map_or(true, |read| read.diverging.is_some());
            if diverges {
                continue;
            }
            if let Some(change) =
                partition.record_follower_fetch(follower, asked.fetch_offset, eligible)
            {
                replicas.submit_isr_change(Arc::clone(&partition), change);
            }
        }
    }
}

/// One pass over every requested partition: the response, its record bytes, and whether any
/// partition failed. `follower` is the replica id of a follower fetch.
fn read_once(
    replicas: &ReplicaManager,
    request: &FetchRequest,
    version: i16,
    follower: Option<crate::metadata::BrokerId>,
) -> (FetchResponse, usize, bool) {
    let mut remaining = usize::try_from(request.max_bytes).unwrap_or(0);
    let mut total = 0usize;
    let mut any_error = false;
    let isolation = Isolation::from_wire(request.isolation_level);
    let read_committed = isolation == Isolation::ReadCommitted;
    let mut topics = Vec::with_capacity(request.topics.len());
    for topic in &request.topics {
        let resolved = if version >= 13 {
            replicas.topic_by_id(topic.topic_id)
        } else {
            replicas.topic_by_name(&topic.topic)
        };
        let unknown = if version >= 13 {
            ResponseError::UnknownTopicId
        } else {
            ResponseError::UnknownTopicOrPartition
        };
        let mut partitions = Vec::with_capacity(topic.partitions.len());
        for asked in &topic.partitions {
            let answer = PartitionData::default()
                .with_partition_index(asked.partition)
                .with_high_watermark(-1)
                .with_last_stable_offset(-1)
                .with_log_start_offset(-1)
                .with_preferred_read_replica(BrokerId(-1))
                .with_aborted_transactions(read_committed.then(Vec::new))
                .with_records(Some(Bytes::new()));
            let partition = match &resolved {
                None => Err(unknown),
                Some(topic) => replicas
                    .partition(&topic.name, asked.partition)
                    .ok_or_else(|| replicas.missing_partition_error(&topic.name, asked.partition)),
            };
            let read = partition.and_then(|partition| {
                partition.check_leader_epoch(asked.current_leader_epoch)?;
                let limit = usize::try_from(asked.partition_max_bytes)
                    .unwrap_or(0)
                    .min(remaining);
                if follower.is_some() {
                    let read = partition.read_for_follower(
                        asked.fetch_offset,
                        asked.last_fetched_epoch,
                        limit,
                        total == 0,
                    )?;
                    return Ok((
                        ConsumerRead {
                            records: read.records,
                            high_watermark: read.high_watermark,
                            last_stable_offset: read.last_stable_offset,
                            log_start_offset: read.log_start_offset,
                            aborted: None,
                        },
                        read.diverging,
                    ));
                }
                partition
                    .read_for_consumer(asked.fetch_offset, limit, total == 0, isolation)
                    .map(|read| (read, None))
            });
            partitions.push(match read {
                Ok((read, diverging)) => {
                    total += read.records.len();
                    remaining = remaining.saturating_sub(read.records.len());
                    let answer = match diverging {
                        Some(diverging) => {
                            // A diverging epoch must reach the follower at once.
                            any_error = true;
                            answer.with_diverging_epoch(
                                EpochEndOffset::default()
                                    .with_epoch(diverging.leader_epoch.0)
                                    .with_end_offset(diverging.end_offset.0),
                            )
                        }
                        None => answer,
                    };
                    let answer = match read.aborted {
                        Some(aborted) => answer.with_aborted_transactions(Some(
                            aborted
                                .iter()
                                .map(|txn| {
                                    AbortedTransaction::default()
                                        .with_producer_id(txn.producer_id.0.into())
                                        .with_first_offset(txn.first_offset.0)
                                })
                                .collect(),
                        )),
                        None => answer,
                    };
                    answer
                        .with_high_watermark(read.high_watermark)
                        .with_last_stable_offset(read.last_stable_offset)
                        .with_log_start_offset(read.log_start_offset)
                        .with_records(Some(read.records))
                }
                Err(error) => {
                    any_error = true;
                    answer.with_error_code(error.code())
                }
            });
        }
        topics.push(
            FetchableTopicResponse::default()
                .with_topic(topic.topic.clone())
                .with_topic_id(topic.topic_id)
                .with_partitions(partitions),
        );
    }
    (
        FetchResponse::default()
            .with_session_id(0)
            .with_responses(topics),
        total,
        any_error,
    )
}
