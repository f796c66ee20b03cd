//! Committed offsets of a group member: OffsetFetch when partitions are assigned (a partition
//! without a committed offset keeps `auto.offset.reset`), and OffsetCommit of the consumer's
//! positions with the member's generation and member id (`commit_sync`, `commit_async`,
//! auto-commit on its interval and before partitions are revoked).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use kafka_protocol::messages::offset_commit_request::{
    OffsetCommitRequestPartition, OffsetCommitRequestTopic,
};
use kafka_protocol::messages::offset_fetch_request::OffsetFetchRequestTopic;
use kafka_protocol::messages::{
    ApiKey, GroupId, OffsetCommitRequest, OffsetFetchRequest, TopicName,
};
use kafka_protocol::protocol::StrBytes;

use super::membership::{Reaction, reaction};
use crate::connection::Connection;
use crate::error::{Error, Result};
use crate::ids::{LeaderEpoch, Offset, TopicPartition};

/// Offsets to commit: partition → (next offset to consume, leader epoch of the last record).
pub type Offsets = BTreeMap<TopicPartition, (Offset, Option<LeaderEpoch>)>;

/// The OffsetCommit request for `offsets` by this member.
pub fn commit_request(
    group_id: &str,
    generation: i32,
    member_id: &str,
    instance_id: Option<&str>,
    offsets: &Offsets,
) -> OffsetCommitRequest {
    let mut topics: Vec<OffsetCommitRequestTopic> = Vec::new();
    for (tp, (offset, epoch)) in offsets {
        let partition = OffsetCommitRequestPartition::default()
            .with_partition_index(tp.partition.0)
            .with_committed_offset(offset.0)
            .with_committed_leader_epoch(epoch.map_or(-1, |e| e.0))
            .with_committed_metadata(Some(StrBytes::from_static_str("")));
        match topics.iter_mut().find(|t| t.name.0.as_str() == &*tp.topic) {
            Some(topic) => topic.partitions.push(partition),
            None => topics.push(
                OffsetCommitRequestTopic::default()
                    .with_name(TopicName(StrBytes::from_string(tp.topic.to_string())))
                    .with_partitions(vec![partition]),
            ),
        }
    }
    OffsetCommitRequest::default()
        .with_group_id(GroupId(StrBytes::from_string(group_id.to_owned())))
        .with_generation_id_or_member_epoch(generation)
        .with_member_id(StrBytes::from_string(member_id.to_owned()))
        .with_group_instance_id(instance_id.map(|i| StrBytes::from_string(i.to_owned())))
        .with_retention_time_ms(-1)
        .with_topics(topics)
}

/// Sends a commit; the first partition error decides. `Ok(Reaction::Ok)` when all committed;
/// otherwise the reaction the member owes (rejoin, reset, rediscover) with the error.
pub async fn commit(
    connection: &Connection,
    request: &OffsetCommitRequest,
    timeout: Duration,
) -> Result<(), (Reaction, Error)> {
    if request.topics.is_empty() {
        return Ok(());
    }
    let response = connection
        .send(ApiKey::OffsetCommit, request, timeout)
        .await
        .map_err(|e| (Reaction::Rediscover, e))?;
    for topic in &response.topics {
        for partition in &topic.partitions {
            if partition.error_code != 0 {
                let error = Error::broker(
                    "OffsetCommit",
                    partition.error_code,
                    Some(format!("{}-{}", topic.name.0, partition.partition_index)),
                );
                return Err((reaction(partition.error_code), error));
            }
        }
    }
    Ok(())
}

/// The committed offsets of `partitions` (absent: none committed). Retries while the
/// coordinator is loading or offsets are unstable (a pending transaction), up to `timeout`.
///
/// # Errors
/// Transport errors, the coordinator moved, and non-retriable codes.
pub async fn fetch_committed(
    connection: &Arc<Connection>,
    group_id: &str,
    partitions: &[TopicPartition],
    timeout: Duration,
    backoff: Duration,
) -> Result<BTreeMap<TopicPartition, Offset>> {
    let mut topics: Vec<OffsetFetchRequestTopic> = Vec::new();
    for tp in partitions {
        match topics.iter_mut().find(|t| t.name.0.as_str() == &*tp.topic) {
            Some(topic) => topic.partition_indexes.push(tp.partition.0),
            None => topics.push(
                OffsetFetchRequestTopic::default()
                    .with_name(TopicName(StrBytes::from_string(tp.topic.to_string())))
                    .with_partition_indexes(vec![tp.partition.0]),
            ),
        }
    }
    let request = OffsetFetchRequest::default()
        .with_group_id(GroupId(StrBytes::from_string(group_id.to_owned())))
        .with_topics(Some(topics))
        .with_require_stable(true);
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        let response = connection
            .send(ApiKey::OffsetFetch, &request, timeout)
            .await?;
        let mut committed = BTreeMap::new();
        let mut codes = vec![response.error_code];
        for topic in &response.topics {
            for partition in &topic.partitions {
                codes.push(partition.error_code);
                if partition.error_code == 0 && partition.committed_offset >= 0 {
                    committed.insert(
                        TopicPartition::new(topic.name.0.to_string(), partition.partition_index),
                        Offset(partition.committed_offset),
                    );
                }
            }
        }
        if let Some(code) = codes.into_iter().find(|c| *c != 0) {
            // 14 COORDINATOR_LOAD_IN_PROGRESS, 88 UNSTABLE_OFFSET_COMMIT: wait and ask again.
            if matches!(code, 14 | 88) && tokio::time::Instant::now() + backoff < deadline {
                tokio::time::sleep(backoff).await;
                continue;
            }
            return Err(Error::broker(
                "OffsetFetch",
                code,
                Some(group_id.to_owned()),
            ));
        }
        return Ok(committed);
    }
}
