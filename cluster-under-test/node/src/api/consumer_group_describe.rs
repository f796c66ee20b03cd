//! ConsumerGroupDescribe (apiKey 69), v0–v1: each KIP-848 group's state, group and
//! assignment epochs, assignor, and members with their subscription, current assignment and
//! target. Errors per group: `INVALID_GROUP_ID`, `GROUP_ID_NOT_FOUND` (no such group, or a
//! classic group: "Group g is not a consumer group."), `NOT_COORDINATOR`,
//! `COORDINATOR_LOAD_IN_PROGRESS`.
//!
//! logjam's addition: the cause of the group's last rebalance in the seed's terms, in the
//! tagged field [`CAUSE_TAG`] of the described group, as DescribeGroups carries it.

use std::collections::BTreeMap;

use bytes::Bytes;
use kafka_protocol::ResponseError;
use kafka_protocol::messages::consumer_group_describe_response::{
    Assignment, DescribedGroup, Member, TopicPartitions,
};
use kafka_protocol::messages::{
    ConsumerGroupDescribeRequest, ConsumerGroupDescribeResponse, TopicName,
};
use kafka_protocol::protocol::StrBytes;
use uuid::Uuid;

use crate::api::describe_groups::CAUSE_TAG;
use crate::api::offset_commit::valid_group_id;
use crate::coordinator::group::GroupCoordinator;
use crate::coordinator::group::consumer_group;
use crate::coordinator::group::consumer_members::topic_names;
use crate::metadata::MetadataImage;

/// An assignment as described: only the topics the metadata image still names (Kafka's
/// `ConsumerGroupMember.topicPartitionsFromMap` drops a topic id it cannot resolve, e.g. a
/// topic deleted since the assignment was written).
fn assignment(
    partitions: &consumer_group::Assignment,
    names: &BTreeMap<Uuid, String>,
) -> Assignment {
    Assignment::default().with_topic_partitions(
        partitions
            .iter()
            .filter_map(|(id, partitions)| {
                let name = names.get(id)?;
                Some(
                    TopicPartitions::default()
                        .with_topic_id(*id)
                        .with_topic_name(TopicName(StrBytes::from_string(name.clone())))
                        .with_partitions(partitions.iter().copied().collect()),
                )
            })
            .collect(),
    )
}

/// Answers one ConsumerGroupDescribe request.
pub fn handle(
    groups: &GroupCoordinator,
    image: &MetadataImage,
    request: &ConsumerGroupDescribeRequest,
    version: i16,
) -> ConsumerGroupDescribeResponse {
    let names = topic_names(image);
    let described = request
        .group_ids
        .iter()
        .map(|group_id| {
            let base = DescribedGroup::default()
                .with_group_id(group_id.clone())
                .with_authorized_operations(i32::MIN);
            let answer = if valid_group_id(group_id) {
                groups.describe_consumer(group_id)
            } else {
                Err(ResponseError::InvalidGroupId)
            };
            let not_found = |message: String| {
                base.clone()
                    .with_error_code(ResponseError::GroupIdNotFound.code())
                    .with_error_message(Some(StrBytes::from_string(message)))
            };
            match answer {
                Err(error) => base.clone().with_error_code(error.code()),
                Ok(None) => match groups.describe(group_id) {
                    Ok(Some(_)) => not_found(format!(
                        "Group {} is not a consumer group.",
                        group_id.as_str()
                    )),
                    _ => not_found(format!("Group {} not found.", group_id.as_str())),
                },
                Ok(Some(found)) => {
                    let group = &found.group;
                    let members = group
                        .members
                        .values()
                        .map(|m| {
                            let empty = consumer_group::Assignment::new();
                            let target = group.target.get(&m.member_id).unwrap_or(&empty);
                            Member::default()
                                .with_member_id(StrBytes::from_string(m.member_id.clone()))
                                .with_instance_id(
                                    m.subscription
                                        .instance_id
                                        .clone()
                                        .map(StrBytes::from_string),
                                )
                                .with_rack_id(
                                    m.subscription.rack_id.clone().map(StrBytes::from_string),
                                )
                                .with_member_epoch(m.current.member_epoch)
                                .with_client_id(StrBytes::from_string(
                                    m.subscription.client_id.clone(),
                                ))
                                .with_client_host(StrBytes::from_string(
                                    m.subscription.client_host.clone(),
                                ))
                                .with_subscribed_topic_names(
                                    m.subscription
                                        .subscribed_topic_names
                                        .iter()
                                        .map(|n| TopicName(StrBytes::from_string(n.clone())))
                                        .collect(),
                                )
                                .with_subscribed_topic_regex(
                                    m.subscription
                                        .subscribed_topic_regex
                                        .clone()
                                        .map(StrBytes::from_string),
                                )
                                .with_assignment(assignment(&m.current.assigned, &names))
                                .with_target_assignment(assignment(target, &names))
                                // v1 (KIP-1099): 1 is a consumer-protocol member.
                                .with_member_type(if version >= 1 { 1 } else { -1 })
                        })
                        .collect();
                    let mut described = base
                        .clone()
                        .with_group_state(StrBytes::from_static_str(group.state().name()))
                        .with_group_epoch(group.group_epoch)
                        .with_assignment_epoch(group.assignment_epoch)
                        .with_assignor_name(StrBytes::from_string(found.assignor.clone()))
                        .with_members(members);
                    if let Some(cause) = found.last_cause {
                        described
                            .unknown_tagged_fields
                            .insert(CAUSE_TAG, Bytes::from_static(cause.as_bytes()));
                    }
                    described
                }
            }
        })
        .collect();
    ConsumerGroupDescribeResponse::default().with_groups(described)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Regression test: a topic id the metadata image no longer has was described with the
    /// topic name ""; Kafka leaves such a topic out of the described assignment.
    #[test]
    fn assignments_leave_out_topics_the_image_does_not_name() {
        let (known, deleted) = (Uuid::from_u128(1), Uuid::from_u128(2));
        let names = BTreeMap::from([(known, "orders".to_owned())]);
        let partitions: consumer_group::Assignment = [
            (known, [0, 2].into_iter().collect()),
            (deleted, [1].into_iter().collect()),
        ]
        .into_iter()
        .collect();
        let described = assignment(&partitions, &names);
        let topics: Vec<_> = described
            .topic_partitions
            .iter()
            .map(|t| (t.topic_id, t.topic_name.0.to_string(), t.partitions.clone()))
            .collect();
        assert_eq!(topics, [(known, "orders".to_owned(), vec![0, 2])]);
    }
}
