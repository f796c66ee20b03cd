//! OffsetDelete (apiKey 47), v0: deletes a group's committed offsets of topics its members do
//! not subscribe to. Errors: for the group `INVALID_GROUP_ID`, `GROUP_ID_NOT_FOUND`,
//! `NOT_COORDINATOR`, `COORDINATOR_LOAD_IN_PROGRESS`, `COORDINATOR_NOT_AVAILABLE`; per
//! partition `GROUP_SUBSCRIBED_TO_TOPIC`, `UNKNOWN_TOPIC_OR_PARTITION` (a topic the metadata
//! does not know).

use kafka_protocol::ResponseError;
use kafka_protocol::messages::offset_delete_response::{
    OffsetDeleteResponsePartition, OffsetDeleteResponseTopic,
};
use kafka_protocol::messages::{OffsetDeleteRequest, OffsetDeleteResponse};

use crate::api::offset_commit::valid_group_id;
use crate::coordinator::group::GroupCoordinator;
use crate::metadata::MetadataImage;

/// Answers one OffsetDelete request.
pub async fn handle(
    groups: &GroupCoordinator,
    image: &MetadataImage,
    request: &OffsetDeleteRequest,
) -> OffsetDeleteResponse {
    if !valid_group_id(&request.group_id) {
        return OffsetDeleteResponse::default()
            .with_error_code(ResponseError::InvalidGroupId.code());
    }
    let mut asked = Vec::new();
    for topic in &request.topics {
        if image.topics.contains_key(topic.name.as_str()) {
            for partition in &topic.partitions {
                asked.push((topic.name.to_string(), partition.partition_index));
            }
        }
    }
    let errors = match groups.delete_offsets(&request.group_id, &asked).await {
        Ok(errors) => errors,
        Err(error) => return OffsetDeleteResponse::default().with_error_code(error.code()),
    };
    let mut errors = errors.into_iter();
    let topics = request
        .topics
        .iter()
        .map(|topic| {
            let known = image.topics.contains_key(topic.name.as_str());
            OffsetDeleteResponseTopic::default()
                .with_name(topic.name.clone())
                .with_partitions(
                    topic
                        .partitions
                        .iter()
                        .map(|p| {
                            let error = if known {
                                errors.next().flatten()
                            } else {
                                Some(ResponseError::UnknownTopicOrPartition)
                            };
                            partition_answer(p.partition_index, error)
                        })
                        .collect(),
                )
        })
        .collect();
    OffsetDeleteResponse::default().with_topics(topics)
}

fn partition_answer(partition: i32, error: Option<ResponseError>) -> OffsetDeleteResponsePartition {
    OffsetDeleteResponsePartition::default()
        .with_partition_index(partition)
        .with_error_code(error.map_or(0, |e| e.code()))
}
