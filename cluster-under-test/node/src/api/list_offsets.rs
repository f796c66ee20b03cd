//! ListOffsets: the offsets of partitions by position or by timestamp, as Kafka 4's
//! `Partition.fetchOffsetForTimestamp` and `UnifiedLog.fetchOffsetByTimestamp` answer.
//!
//! | timestamp | answer |
//! |---|---|
//! | `-1` latest | the last fetchable offset, with the current leader epoch |
//! | `-2` earliest, `-4` earliest local | the log start, with its epoch |
//! | `-3` max timestamp (KIP-734) | the first record holding the largest timestamp |
//! | `-5` latest tiered (KIP-1005) | offset -1: no tiered storage here |
//! | any other value | the first record whose timestamp is at least it |
//!
//! The last fetchable offset is the high watermark for a consumer (`replica_id` -1) reading
//! uncommitted, the last stable offset for read_committed, the log end for anyone else. A record
//! found at or beyond it is not answered (offset and timestamp -1). A new leader whose high
//! watermark still lags the start of its epoch answers `latest`, and any lookup it cannot
//! answer, with `OFFSET_NOT_AVAILABLE` (`LEADER_NOT_AVAILABLE` before v5), so a client retries
//! instead of seeking to a stale end (KIP-207). A partition named twice in one request is
//! answered `INVALID_REQUEST` each time. A timestamp lookup skips segments by their largest
//! timestamp and reads batch headers inside one (no time index yet: see `logjam_storage`'s
//! `log/timestamps.rs`); a stored batch whose records do not decode is `CORRUPT_MESSAGE`.

use std::collections::HashMap;

use kafka_protocol::ResponseError;
use kafka_protocol::messages::list_offsets_response::{
    ListOffsetsPartitionResponse, ListOffsetsTopicResponse,
};
use kafka_protocol::messages::{ListOffsetsRequest, ListOffsetsResponse};

use crate::replica::partition::TimestampOffset;
use crate::replica::{Partition, ReplicaManager};

const LATEST: i64 = -1;
const EARLIEST: i64 = -2;
const MAX_TIMESTAMP: i64 = -3;
const EARLIEST_LOCAL: i64 = -4;
const LATEST_TIERED: i64 = -5;

/// Answers every partition of the request independently.
pub fn handle(
    replicas: &ReplicaManager,
    request: &ListOffsetsRequest,
    version: i16,
) -> ListOffsetsResponse {
    let mut named: HashMap<(&str, i32), usize> = HashMap::new();
    for topic in &request.topics {
        for asked in &topic.partitions {
            *named
                .entry((topic.name.0.as_str(), asked.partition_index))
                .or_default() += 1;
        }
    }
    let topics = request
        .topics
        .iter()
        .map(|topic| {
            let partitions = topic
                .partitions
                .iter()
                .map(|asked| {
                    let unknown = ListOffsetsPartitionResponse::default()
                        .with_partition_index(asked.partition_index)
                        .with_timestamp(-1)
                        .with_offset(-1)
                        .with_leader_epoch(-1);
                    let duplicate = named[&(topic.name.0.as_str(), asked.partition_index)] > 1;
                    let answer = if duplicate {
                        Err(ResponseError::InvalidRequest)
                    } else {
                        replicas
                            .leader_partition(
                                &topic.name,
                                asked.partition_index,
                                asked.current_leader_epoch,
                            )
                            .and_then(|partition| {
                                answer(&partition, request, asked.timestamp, version)
                            })
                    };
                    match answer {
                        Err(error) => unknown.with_error_code(error.code()),
                        Ok(None) => unknown,
                        Ok(Some(found)) => unknown
                            .with_timestamp(found.timestamp)
                            .with_offset(found.offset)
                            .with_leader_epoch(found.leader_epoch),
                    }
                })
                .collect();
            ListOffsetsTopicResponse::default()
                .with_name(topic.name.clone())
                .with_partitions(partitions)
        })
        .collect();
    ListOffsetsResponse::default().with_topics(topics)
}

/// One partition's answer: a found record (timestamp -1 for positions), none, or an error.
fn answer(
    partition: &Partition,
    request: &ListOffsetsRequest,
    timestamp: i64,
    version: i16,
) -> Result<Option<TimestampOffset>, ResponseError> {
    let client = request.replica_id.0 == -1;
    let offsets = partition.offsets();
    let last_fetchable = match (client, request.isolation_level) {
        (false, _) => offsets.log_end_offset,
        (true, 1) => offsets.last_stable_offset,
        (true, _) => offsets.high_watermark,
    };
    // KIP-207: only a client's request, and only while the high watermark lags the epoch start.
    let lagging = client
        && partition
            .leader_epoch_start_offset()
            .is_some_and(|start| start > offsets.high_watermark);
    let lagging_error = if version >= 5 {
        ResponseError::OffsetNotAvailable
    } else {
        ResponseError::LeaderNotAvailable
    };
    let position = |offset, leader_epoch| {
        Some(TimestampOffset {
            timestamp: -1,
            offset,
            leader_epoch,
        })
    };
    match timestamp {
        LATEST if lagging => Err(lagging_error),
        LATEST => Ok(position(last_fetchable, partition.leader_epoch())),
        EARLIEST | EARLIEST_LOCAL => Ok(position(
            offsets.log_start_offset,
            partition.log_start_epoch(),
        )),
        LATEST_TIERED => Ok(position(-1, -1)),
        MAX_TIMESTAMP => settle(
            partition.offset_of_max_timestamp()?,
            last_fetchable,
            lagging.then_some(lagging_error),
        ),
        target => settle(
            partition.offset_for_timestamp(target)?,
            last_fetchable,
            lagging.then_some(lagging_error),
        ),
    }
}

/// A lookup's answer: the record if it lies below the last fetchable offset; otherwise nothing,
/// or the lagging leader's error when there is one.
fn settle(
    found: Option<TimestampOffset>,
    last_fetchable: i64,
    lagging: Option<ResponseError>,
) -> Result<Option<TimestampOffset>, ResponseError> {
    match (found, lagging) {
        (Some(found), _) if found.offset < last_fetchable => Ok(Some(found)),
        (_, Some(error)) => Err(error),
        (_, None) => Ok(None),
    }
}

#[cfg(test)]
mod tests {
    use super::{ResponseError, TimestampOffset, settle};

    #[test]
    fn a_lookup_answers_only_below_the_last_fetchable_offset_and_a_lagging_leader_says_so() {
        let at = |offset| TimestampOffset {
            timestamp: 1_000,
            offset,
            leader_epoch: 3,
        };
        let lagging = Some(ResponseError::OffsetNotAvailable);
        let cases = [
            // (found, last fetchable, lagging error, answer)
            (Some(at(4)), 5, None, Ok(Some(at(4)))),
            (Some(at(5)), 5, None, Ok(None)),
            (Some(at(9)), 5, None, Ok(None)),
            (None, 5, None, Ok(None)),
            (Some(at(4)), 5, lagging, Ok(Some(at(4)))),
            (
                Some(at(5)),
                5,
                lagging,
                Err(ResponseError::OffsetNotAvailable),
            ),
            (None, 5, lagging, Err(ResponseError::OffsetNotAvailable)),
        ];
        for (found, last_fetchable, lagging, expected) in cases {
            assert_eq!(
                settle(found, last_fetchable, lagging),
                expected,
                "{found:?} below {last_fetchable}, lagging {lagging:?}"
            );
        }
    }
}
