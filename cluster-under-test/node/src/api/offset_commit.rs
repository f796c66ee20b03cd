//! OffsetCommit (apiKey 8), v2–v9: commits a group's offsets through `__consumer_offsets`
//! (the coordinator answers once they are replicated). Errors, per partition as Kafka answers
//! them: `INVALID_GROUP_ID` (empty group id, or longer than a key's INT16 length), `UNKNOWN_TOPIC_OR_PARTITION` (a topic the
//! metadata does not know), `OFFSET_METADATA_TOO_LARGE` (metadata over 4096 bytes), and the
//! group's own for every partition: `NOT_COORDINATOR`, `COORDINATOR_LOAD_IN_PROGRESS`,
//! `COORDINATOR_NOT_AVAILABLE`, `ILLEGAL_GENERATION`, `UNKNOWN_MEMBER_ID`,
//! `FENCED_INSTANCE_ID`, `REBALANCE_IN_PROGRESS`, `GROUP_ID_NOT_FOUND` (v9+).

use kafka_protocol::ResponseError;
use kafka_protocol::messages::offset_commit_response::{
    OffsetCommitResponsePartition, OffsetCommitResponseTopic,
};
use kafka_protocol::messages::{OffsetCommitRequest, OffsetCommitResponse};

use crate::coordinator::group::offsets::check_metadata;
use crate::coordinator::group::view::CommitMember;
use crate::coordinator::group::{CommitPartition, GroupCoordinator};
use crate::metadata::MetadataImage;

/// Whether `group` can be a key of `__consumer_offsets`: not empty (Kafka's
/// `isGroupIdNotEmpty`), and short enough for the key's INT16 length (a longer id would wrap
/// and could decode as another group).
pub fn valid_group_id(group: &str) -> bool {
    !group.is_empty() && group.len() <= i16::MAX as usize
}

/// One partition of an OffsetCommit or a TxnOffsetCommit, as the shared checks read it.
pub struct PartitionCommit<'a> {
    /// `PartitionIndex`.
    pub index: i32,
    /// `CommittedOffset`.
    pub offset: i64,
    /// `CommittedLeaderEpoch`.
    pub leader_epoch: i32,
    /// `CommittedMetadata`.
    pub metadata: Option<&'a str>,
}

/// The per-partition checks OffsetCommit and TxnOffsetCommit share, before the group's:
/// `INVALID_GROUP_ID` for a group id that cannot be a key, `UNKNOWN_TOPIC_OR_PARTITION` for a
/// topic the image does not have, [`check_metadata`]'s for metadata too long. Returns each
/// topic's partitions' errors, in request order, and the partitions that passed.
pub fn check_partitions<'a>(
    group_id: &str,
    image: &MetadataImage,
    topics: impl IntoIterator<Item = (&'a str, Vec<PartitionCommit<'a>>)>,
) -> (Vec<Vec<Option<ResponseError>>>, Vec<CommitPartition>) {
    let mut errors = Vec::new();
    let mut accepted = Vec::new();
    for (name, partitions) in topics {
        let known = image.topics.contains_key(name);
        let mut topic_errors = Vec::with_capacity(partitions.len());
        for partition in partitions {
            let error = if !valid_group_id(group_id) {
                Some(ResponseError::InvalidGroupId)
            } else if !known {
                Some(ResponseError::UnknownTopicOrPartition)
            } else {
                check_metadata(partition.metadata)
            };
            if error.is_none() {
                accepted.push(CommitPartition {
                    topic: name.to_owned(),
                    partition: partition.index,
                    offset: partition.offset,
                    leader_epoch: partition.leader_epoch,
                    metadata: partition.metadata.map(str::to_owned),
                });
            }
            topic_errors.push(error);
        }
        errors.push(topic_errors);
    }
    (errors, accepted)
}

/// Answers one OffsetCommit request.
pub async fn handle(
    groups: &GroupCoordinator,
    image: &MetadataImage,
    request: &OffsetCommitRequest,
    version: i16,
) -> OffsetCommitResponse {
    let (errors, accepted) = check_partitions(
        &request.group_id,
        image,
        request.topics.iter().map(|topic| {
            let partitions = topic.partitions.iter().map(|p| PartitionCommit {
                index: p.partition_index,
                offset: p.committed_offset,
                leader_epoch: p.committed_leader_epoch,
                metadata: p.committed_metadata.as_deref(),
            });
            (topic.name.as_str(), partitions.collect())
        }),
    );
    let group_error = if accepted.is_empty() {
        None
    } else {
        let member = CommitMember {
            generation_id: request.generation_id_or_member_epoch,
            member_id: &request.member_id,
            group_instance_id: request.group_instance_id.as_deref(),
        };
        groups
            .commit_offsets(&request.group_id, &member, version, &accepted)
            .await
            .err()
    };
    let topics = request
        .topics
        .iter()
        .zip(errors)
        .map(|(topic, topic_errors)| {
            OffsetCommitResponseTopic::default()
                .with_name(topic.name.clone())
                .with_partitions(
                    topic
                        .partitions
                        .iter()
                        .zip(topic_errors)
                        .map(|(partition, error)| {
                            OffsetCommitResponsePartition::default()
                                .with_partition_index(partition.partition_index)
                                .with_error_code(error.or(group_error).map_or(0, |e| e.code()))
                        })
                        .collect(),
                )
        })
        .collect();
    OffsetCommitResponse::default().with_topics(topics)
}
