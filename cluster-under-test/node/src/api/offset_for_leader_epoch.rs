//! OffsetForLeaderEpoch (KIP-101, KIP-320): where a leader epoch ends in the leader's log, so
//! a consumer can tell whether the log was truncated under its position (an unclean election)
//! and where the logs diverged. Kafka's `Partition.lastOffsetForLeaderEpoch`: only the leader
//! answers (`NOT_LEADER_OR_FOLLOWER` elsewhere), `CurrentLeaderEpoch` fences as in Fetch
//! (`FENCED_LEADER_EPOCH`, `UNKNOWN_LEADER_EPOCH`), and the answer is the leader-epoch cache's
//! `endOffsetFor`: the largest epoch at or below the asked one and the start of the next, the
//! log end for the latest epoch, `-1`/`-1` with no error when the cache knows nothing. The end
//! offset is not capped at the high watermark, as in Kafka.

use kafka_protocol::messages::offset_for_leader_epoch_response::{
    EpochEndOffset, OffsetForLeaderTopicResult,
};
use kafka_protocol::messages::{OffsetForLeaderEpochRequest, OffsetForLeaderEpochResponse};

use crate::replica::ReplicaManager;

/// Answers every partition of the request independently.
pub fn handle(
    replicas: &ReplicaManager,
    request: &OffsetForLeaderEpochRequest,
) -> OffsetForLeaderEpochResponse {
    let topics = request
        .topics
        .iter()
        .map(|topic| {
            let partitions = topic
                .partitions
                .iter()
                .map(|asked| {
                    let answer = EpochEndOffset::default()
                        .with_partition(asked.partition)
                        .with_leader_epoch(-1)
                        .with_end_offset(-1);
                    let partition = match replicas.leader_partition(
                        &topic.topic,
                        asked.partition,
                        asked.current_leader_epoch,
                    ) {
                        Ok(partition) => partition,
                        Err(error) => return answer.with_error_code(error.code()),
                    };
                    match partition.end_offset_for_epoch(asked.leader_epoch) {
                        Some((epoch, end_offset)) => {
                            answer.with_leader_epoch(epoch).with_end_offset(end_offset)
                        }
                        None => answer,
                    }
                })
                .collect();
            OffsetForLeaderTopicResult::default()
                .with_topic(topic.topic.clone())
                .with_partitions(partitions)
        })
        .collect();
    OffsetForLeaderEpochResponse::default().with_topics(topics)
}
