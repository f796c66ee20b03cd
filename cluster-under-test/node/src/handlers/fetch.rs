//! Fetch: read record batches, with Kafka's long poll.
//!
//! The request waits until at least `min_bytes` are available or `max_wait_ms` has passed,
//! whichever comes first; an error in any partition answers at once. Consumers read up to the
//! high watermark. Sizes follow KIP-74: `partition_max_bytes` per partition and `max_bytes` for
//! the whole response, except that the first batch found is returned even when it is larger,
//! so a consumer can always make progress.
//!
//! Fetch sessions (KIP-227) are declined by answering session id 0: every request is treated
//! as a full fetch, which the protocol allows.

use std::time::Duration;

use bytes::Bytes;
use kafka_protocol::ResponseError;
use kafka_protocol::messages::fetch_response::{FetchableTopicResponse, PartitionData};
use kafka_protocol::messages::{BrokerId, FetchRequest, FetchResponse};
use tokio::time::Instant;

use crate::broker::Broker;

/// Answers the fetch, waiting for data as the request allows.
pub async fn handle(broker: &Broker, request: &FetchRequest, version: i16) -> FetchResponse {
    let max_wait = Duration::from_millis(u64::try_from(request.max_wait_ms).unwrap_or(0));
    let deadline = Instant::now() + max_wait;
    let mut appends = broker.subscribe_appends();
    loop {
        appends.borrow_and_update();
        let (response, bytes, any_error) = read_once(broker, request, version);
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

/// One pass over every requested partition: the response, its record bytes, and whether any
/// partition failed.
fn read_once(
    broker: &Broker,
    request: &FetchRequest,
    version: i16,
) -> (FetchResponse, usize, bool) {
    let mut remaining = usize::try_from(request.max_bytes).unwrap_or(0);
    let mut total = 0usize;
    let mut any_error = false;
    let read_committed = request.isolation_level == 1;
    let mut topics = Vec::with_capacity(request.topics.len());
    for topic in &request.topics {
        let resolved = if version >= 13 {
            broker.topic_by_id(topic.topic_id)
        } else {
            broker.topic_by_name(&topic.topic)
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
                Some(topic) => broker
                    .partition(&topic.name, asked.partition)
                    .ok_or_else(|| broker.missing_partition_error(&topic.name, asked.partition)),
            };
            let read = partition.and_then(|partition| {
                partition.check_leader_epoch(asked.current_leader_epoch)?;
                let limit = usize::try_from(asked.partition_max_bytes)
                    .unwrap_or(0)
                    .min(remaining);
                partition.read_for_consumer(asked.fetch_offset, limit, total == 0)
            });
            partitions.push(match read {
                Ok(read) => {
                    total += read.records.len();
                    remaining = remaining.saturating_sub(read.records.len());
                    answer
                        .with_high_watermark(read.high_watermark)
                        .with_last_stable_offset(read.high_watermark)
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
