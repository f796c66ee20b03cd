//! ListOffsets: the earliest and latest offsets of partitions.
//!
//! `-2` (earliest) and `-4` (earliest local) answer the log start offset; `-1` (latest) answers
//! the end of what the consumer may read: the high watermark for `isolation_level` 0, the last
//! stable offset for 1 (read_committed), as Kafka's `fetchOffsetForTimestamp`. Lookups by timestamp need the time index, which is
//! not built yet: they are answered `INVALID_REQUEST` rather than with a made-up offset.

use kafka_protocol::ResponseError;
use kafka_protocol::messages::list_offsets_response::{
    ListOffsetsPartitionResponse, ListOffsetsTopicResponse,
};
use kafka_protocol::messages::{ListOffsetsRequest, ListOffsetsResponse};

use crate::replica::ReplicaManager;

const LATEST: i64 = -1;
const EARLIEST: i64 = -2;
const EARLIEST_LOCAL: i64 = -4;

/// Answers every partition of the request independently.
pub fn handle(replicas: &ReplicaManager, request: &ListOffsetsRequest) -> ListOffsetsResponse {
    let topics = request
        .topics
        .iter()
        .map(|topic| {
            let partitions = topic
                .partitions
                .iter()
                .map(|asked| {
                    let answer = ListOffsetsPartitionResponse::default()
                        .with_partition_index(asked.partition_index)
                        .with_timestamp(-1)
                        .with_offset(-1)
                        .with_leader_epoch(-1);
                    let Some(partition) = replicas.partition(&topic.name, asked.partition_index)
                    else {
                        return answer.with_error_code(
                            replicas
                                .missing_partition_error(&topic.name, asked.partition_index)
                                .code(),
                        );
                    };
                    if let Err(error) = partition.check_leader_epoch(asked.current_leader_epoch) {
                        return answer.with_error_code(error.code());
                    }
                    let offsets = partition.offsets();
                    let offset = match asked.timestamp {
                        LATEST if request.isolation_level == 1 => offsets.last_stable_offset,
                        LATEST => offsets.high_watermark,
                        EARLIEST | EARLIEST_LOCAL => offsets.log_start_offset,
                        _ => return answer.with_error_code(ResponseError::InvalidRequest.code()),
                    };
                    answer
                        .with_offset(offset)
                        .with_leader_epoch(partition.leader_epoch())
                })
                .collect();
            ListOffsetsTopicResponse::default()
                .with_name(topic.name.clone())
                .with_partitions(partitions)
        })
        .collect();
    ListOffsetsResponse::default().with_topics(topics)
}
