//! OffsetFetch (apiKey 9), v1–v9: a group's committed offsets as replicated in
//! `__consumer_offsets` (-1 with empty metadata where none is committed). v2+ fetch every
//! committed offset when `topics` is null; v7+ `require_stable` answers only after the
//! group's earlier writes are committed; v8+ batch groups, each with its own error. Errors:
//! `INVALID_GROUP_ID` (empty id), `NOT_COORDINATOR`, `COORDINATOR_LOAD_IN_PROGRESS`,
//! `COORDINATOR_NOT_AVAILABLE` at the group level (v1: on every partition, it has no group
//! error field); v9 on a KIP-848 consumer group: `UNKNOWN_MEMBER_ID`, `STALE_MEMBER_EPOCH`.

use kafka_protocol::ResponseError;
use kafka_protocol::messages::offset_fetch_response::{
    OffsetFetchResponseGroup, OffsetFetchResponsePartition, OffsetFetchResponsePartitions,
    OffsetFetchResponseTopic, OffsetFetchResponseTopics,
};
use kafka_protocol::messages::{OffsetFetchRequest, OffsetFetchResponse, TopicName};
use kafka_protocol::protocol::StrBytes;

use crate::api::offset_commit::valid_group_id;
use crate::coordinator::group::GroupCoordinator;
use crate::coordinator::group::offsets::FetchedOffset;

type Asked = Option<Vec<(String, Vec<i32>)>>;
type Answer = Result<Vec<(String, Vec<FetchedOffset>)>, ResponseError>;

/// Answers one OffsetFetch request.
pub async fn handle(
    groups: &GroupCoordinator,
    request: &OffsetFetchRequest,
    version: i16,
) -> OffsetFetchResponse {
    if version >= 8 {
        let mut answered = Vec::with_capacity(request.groups.len());
        for group in &request.groups {
            let asked: Asked = group.topics.as_ref().map(|topics| {
                topics
                    .iter()
                    .map(|t| (t.name.to_string(), t.partition_indexes.clone()))
                    .collect()
            });
            // v9 (KIP-848): a consumer group's member fetches at its current epoch.
            let member = (version >= 9).then_some((group.member_id.as_deref(), group.member_epoch));
            let answer = fetch_one(
                groups,
                &group.group_id,
                asked,
                request.require_stable,
                member,
            )
            .await;
            let (topics, error) = match answer {
                Ok(topics) => (topics, 0),
                Err(error) => (Vec::new(), error.code()),
            };
            answered.push(
                OffsetFetchResponseGroup::default()
                    .with_group_id(group.group_id.clone())
                    .with_error_code(error)
                    .with_topics(
                        topics
                            .into_iter()
                            .map(|(topic, partitions)| {
                                OffsetFetchResponseTopics::default()
                                    .with_name(TopicName(StrBytes::from_string(topic)))
                                    .with_partitions(
                                        partitions.into_iter().map(partitions_v8).collect(),
                                    )
                            })
                            .collect(),
                    ),
            );
        }
        return OffsetFetchResponse::default().with_groups(answered);
    }
    let asked: Asked = request.topics.as_ref().map(|topics| {
        topics
            .iter()
            .map(|t| (t.name.to_string(), t.partition_indexes.clone()))
            .collect()
    });
    let answer = fetch_one(
        groups,
        &request.group_id,
        asked.clone(),
        request.require_stable,
        None,
    )
    .await;
    let topics = match (&answer, version) {
        (Ok(topics), _) => topics.clone(),
        // v1 has no group error: every asked partition carries it.
        (Err(error), 1) => asked
            .unwrap_or_default()
            .into_iter()
            .map(|(topic, partitions)| {
                let failed = partitions
                    .into_iter()
                    .map(|partition| FetchedOffset {
                        partition,
                        offset: -1,
                        leader_epoch: -1,
                        metadata: String::new(),
                        error: Some(*error),
                    })
                    .collect();
                (topic, failed)
            })
            .collect(),
        (Err(_), _) => Vec::new(),
    };
    OffsetFetchResponse::default()
        .with_error_code(answer.err().map_or(0, |e| e.code()))
        .with_topics(
            topics
                .into_iter()
                .map(|(topic, partitions)| {
                    OffsetFetchResponseTopic::default()
                        .with_name(TopicName(StrBytes::from_string(topic)))
                        .with_partitions(partitions.into_iter().map(partition_v0).collect())
                })
                .collect(),
        )
}

async fn fetch_one(
    groups: &GroupCoordinator,
    group: &str,
    asked: Asked,
    require_stable: bool,
    member: Option<(Option<&str>, i32)>,
) -> Answer {
    if !valid_group_id(group) {
        return Err(ResponseError::InvalidGroupId);
    }
    if let Some((member_id, member_epoch)) = member {
        groups.validate_consumer_fetch(group, member_id, member_epoch)?;
    }
    groups
        .fetch_offsets(group, asked.as_deref(), require_stable)
        .await
}

fn partition_v0(fetched: FetchedOffset) -> OffsetFetchResponsePartition {
    OffsetFetchResponsePartition::default()
        .with_partition_index(fetched.partition)
        .with_committed_offset(fetched.offset)
        .with_committed_leader_epoch(fetched.leader_epoch)
        .with_metadata(Some(StrBytes::from_string(fetched.metadata)))
        .with_error_code(fetched.error.map_or(0, |e| e.code()))
}

fn partitions_v8(fetched: FetchedOffset) -> OffsetFetchResponsePartitions {
    OffsetFetchResponsePartitions::default()
        .with_partition_index(fetched.partition)
        .with_committed_offset(fetched.offset)
        .with_committed_leader_epoch(fetched.leader_epoch)
        .with_metadata(Some(StrBytes::from_string(fetched.metadata)))
        .with_error_code(fetched.error.map_or(0, |e| e.code()))
}
