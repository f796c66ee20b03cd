//! Produce: append record batches as the partition leader and answer according to `acks`.
//!
//! - `acks=0`: append and say nothing; on any error close the connection, Kafka's only signal.
//! - `acks=1`: answer after the leader's own append (page cache, no fsync).
//! - `acks=-1` (all): refuse with `NOT_ENOUGH_REPLICAS` before appending when the ISR is
//!   smaller than the effective `min.insync.replicas`; otherwise append and wait until the high
//!   watermark covers the batch, up to the request's timeout (`REQUEST_TIMED_OUT`, whose
//!   outcome is indeterminate: the data stays in the log).
//! - any other value: `INVALID_REQUIRED_ACKS`, nothing appended.
//!
//! Each partition of a request succeeds or fails independently.

use std::time::Duration;

use kafka_protocol::ResponseError;
use kafka_protocol::messages::produce_response::{PartitionProduceResponse, TopicProduceResponse};
use kafka_protocol::messages::{ProduceRequest, ProduceResponse, ResponseKind};

use crate::broker::{Acks, Broker};
use crate::handlers::Reply;

/// Appends every partition's records and answers once all are settled.
pub async fn handle(broker: &Broker, request: ProduceRequest, version: i16) -> Reply {
    let acks = Acks::from_wire(request.acks);
    let timeout = Duration::from_millis(u64::try_from(request.timeout_ms).unwrap_or(0));
    let mut any_error = false;
    let mut responses = Vec::with_capacity(request.topic_data.len());
    for topic in request.topic_data {
        let resolved = if version >= 13 {
            broker.topic_by_id(topic.topic_id)
        } else {
            broker.topic_by_name(&topic.name)
        };
        let unknown = if version >= 13 {
            ResponseError::UnknownTopicId
        } else {
            ResponseError::UnknownTopicOrPartition
        };
        let mut partitions = Vec::with_capacity(topic.partition_data.len());
        for data in topic.partition_data {
            let answer = PartitionProduceResponse::default()
                .with_index(data.index)
                .with_base_offset(-1)
                .with_log_append_time_ms(-1)
                .with_log_start_offset(-1);
            let outcome = match (&resolved, acks) {
                (_, None) => Err(ResponseError::InvalidRequiredAcks),
                (None, _) => Err(unknown),
                (Some(topic), Some(acks)) => match broker.partition(&topic.name, data.index) {
                    None => Err(broker.missing_partition_error(&topic.name, data.index)),
                    Some(partition) => match data.records {
                        None => Err(ResponseError::CorruptMessage),
                        Some(records) => partition.produce(records, acks, timeout).await,
                    },
                },
            };
            partitions.push(match outcome {
                Ok(appended) => answer
                    .with_base_offset(appended.base_offset)
                    .with_log_start_offset(appended.log_start_offset),
                Err(error) => {
                    any_error = true;
                    answer.with_error_code(error.code())
                }
            });
        }
        responses.push(
            TopicProduceResponse::default()
                .with_name(topic.name)
                .with_topic_id(topic.topic_id)
                .with_partition_responses(partitions),
        );
    }
    if request.acks == 0 {
        return if any_error {
            Reply::Close("acks=0 produce failed")
        } else {
            Reply::Silent
        };
    }
    Reply::Respond(Box::new(ResponseKind::Produce(
        ProduceResponse::default().with_responses(responses),
    )))
}
