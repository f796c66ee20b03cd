//! ConsumerGroupHeartbeat (apiKey 68), v0–v1: a member of a KIP-848 consumer group joins,
//! heartbeats, acknowledges its reconciliation and leaves (epoch -1, or -2 for a static
//! member coming back). The decision is the pure core's (`coordinator::group::consumer_group`), its
//! records replicated before the answer. Errors: `INVALID_GROUP_ID`, `INVALID_REQUEST`,
//! `GROUP_ID_NOT_FOUND` (also a classic group with members holding the id),
//! `UNKNOWN_MEMBER_ID`, `FENCED_MEMBER_EPOCH`, `UNRELEASED_INSTANCE_ID`,
//! `UNSUPPORTED_ASSIGNOR`, `GROUP_MAX_SIZE_REACHED`, `NOT_COORDINATOR`,
//! `COORDINATOR_LOAD_IN_PROGRESS`, `COORDINATOR_NOT_AVAILABLE`, each with Kafka's message.

use kafka_protocol::ResponseError;
use kafka_protocol::messages::consumer_group_heartbeat_response::{Assignment, TopicPartitions};
use kafka_protocol::messages::{ConsumerGroupHeartbeatRequest, ConsumerGroupHeartbeatResponse};
use kafka_protocol::protocol::StrBytes;

use crate::api::offset_commit::valid_group_id;
use crate::coordinator::group::GroupCoordinator;
use crate::coordinator::group::consumer_group::{self, HeartbeatError, HeartbeatRequest};

/// Answers one ConsumerGroupHeartbeat request from (client id, client host).
pub async fn handle(
    groups: &GroupCoordinator,
    (client_id, client_host): (&str, &str),
    request: &ConsumerGroupHeartbeatRequest,
    version: i16,
) -> ConsumerGroupHeartbeatResponse {
    let answer = if valid_group_id(&request.group_id) {
        let owned = request.topic_partitions.as_ref().map(|topics| {
            let mut owned = consumer_group::Assignment::new();
            for topic in topics {
                owned
                    .entry(topic.topic_id)
                    .or_default()
                    .extend(topic.partitions.iter().copied());
            }
            owned
        });
        let decision = HeartbeatRequest {
            api_version: version,
            group_id: request.group_id.to_string(),
            member_id: request.member_id.to_string(),
            member_epoch: request.member_epoch,
            instance_id: request.instance_id.as_ref().map(|id| id.to_string()),
            rack_id: request.rack_id.as_ref().map(|id| id.to_string()),
            rebalance_timeout_ms: request.rebalance_timeout_ms,
            subscribed_topic_names: request
                .subscribed_topic_names
                .as_ref()
                .map(|names| names.iter().map(|n| n.to_string()).collect()),
            // librdkafka (2.16) sends an empty regex with a list of names; Kafka takes an
            // empty regex for none (`hasSubscribedTopicRegex`).
            subscribed_topic_regex: request
                .subscribed_topic_regex
                .as_ref()
                .filter(|r| !r.is_empty())
                .map(|r| r.to_string()),
            server_assignor: request.server_assignor.as_ref().map(|a| a.to_string()),
            owned,
            client_id: client_id.to_owned(),
            client_host: client_host.to_owned(),
            generated_member_id: uuid::Uuid::new_v4().to_string(),
        };
        groups.consumer_heartbeat(decision).await
    } else {
        Err(HeartbeatError {
            error: ResponseError::InvalidGroupId,
            message: "The group id must not be empty.".to_owned(),
        })
    };
    match answer {
        Err(failed) => ConsumerGroupHeartbeatResponse::default()
            .with_error_code(failed.error.code())
            .with_error_message(
                (!failed.message.is_empty()).then(|| StrBytes::from_string(failed.message)),
            )
            .with_member_id(None)
            .with_member_epoch(0)
            .with_heartbeat_interval_ms(0),
        Ok(response) => ConsumerGroupHeartbeatResponse::default()
            .with_member_id(Some(StrBytes::from_string(response.member_id)))
            .with_member_epoch(response.member_epoch)
            .with_heartbeat_interval_ms(response.heartbeat_interval_ms)
            .with_assignment(response.assignment.map(|assignment| {
                Assignment::default().with_topic_partitions(
                    assignment
                        .into_iter()
                        .map(|(topic_id, partitions)| {
                            TopicPartitions::default()
                                .with_topic_id(topic_id)
                                .with_partitions(partitions.into_iter().collect())
                        })
                        .collect(),
                )
            })),
    }
}
