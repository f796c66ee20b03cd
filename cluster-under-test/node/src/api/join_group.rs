//! JoinGroup (apiKey 11), v0–v9: a member joins a classic group; the answer waits for the
//! join phase to end (the group's rebalance timeout, or `group.initial.rebalance.delay.ms`
//! for a new group). Errors: `INVALID_GROUP_ID`, `MEMBER_ID_REQUIRED` (v4+, with the member
//! id to use), `INVALID_SESSION_TIMEOUT` (outside `group.min/max.session.timeout.ms`),
//! `INCONSISTENT_GROUP_PROTOCOL`, `INVALID_REQUEST` (an empty or over-249-character
//! instance id, protocol names or type over 249 characters), `UNKNOWN_MEMBER_ID`, `FENCED_INSTANCE_ID`,
//! `NOT_COORDINATOR`, `COORDINATOR_LOAD_IN_PROGRESS`, `COORDINATOR_NOT_AVAILABLE`.

use kafka_protocol::ResponseError;
use kafka_protocol::messages::join_group_response::JoinGroupResponseMember;
use kafka_protocol::messages::{JoinGroupRequest, JoinGroupResponse};
use kafka_protocol::protocol::StrBytes;

use crate::api::offset_commit::valid_group_id;
use crate::coordinator::group::GroupCoordinator;
use crate::coordinator::group::classic::{JoinReply, JoinRequest, MAX_MEMBER_ID_BYTES};

/// Answers one JoinGroup request from (client id, client host).
pub async fn handle(
    groups: &GroupCoordinator,
    (client_id, client_host): (&str, &str),
    request: &JoinGroupRequest,
    version: i16,
) -> JoinGroupResponse {
    let member_id = request.member_id.to_string();
    // What is written to the log's INT16-length strings must fit them; an instance id follows
    // Kafka's rule (at most 249 characters, as a topic name).
    let too_long = request
        .group_instance_id
        .as_ref()
        .is_some_and(|id| id.is_empty() || id.len() > 249)
        || request.protocol_type.len() > 249
        || member_id.len() > MAX_MEMBER_ID_BYTES
        || request.protocols.iter().any(|p| p.name.len() > 249);
    let reply = if !valid_group_id(&request.group_id) {
        JoinReply::error(ResponseError::InvalidGroupId, &member_id)
    } else if too_long {
        JoinReply::error(ResponseError::InvalidRequest, &member_id)
    } else {
        if let Some(reason) = &request.reason {
            tracing::debug!(group = %request.group_id.as_str(), member = %member_id, %reason, "join reason");
        }
        let join = JoinRequest {
            member_id: member_id.clone(),
            instance_id: request.group_instance_id.as_ref().map(|i| i.to_string()),
            protocol_type: request.protocol_type.to_string(),
            protocols: request
                .protocols
                .iter()
                .map(|p| (p.name.to_string(), p.metadata.clone()))
                .collect(),
            session_timeout_ms: request.session_timeout_ms,
            rebalance_timeout_ms: if version == 0 {
                request.session_timeout_ms
            } else {
                request.rebalance_timeout_ms
            },
            client_id: client_id.to_owned(),
            client_host: client_host.to_owned(),
            version,
            fresh_id: uuid::Uuid::new_v4().to_string(),
        };
        groups
            .join(&request.group_id, join)
            .await
            .unwrap_or_else(|error| JoinReply::error(error, &member_id))
    };
    let text = |value: Option<String>| {
        // Before v7 the names are not nullable: "" stands for none.
        match value {
            Some(value) => Some(StrBytes::from_string(value)),
            None if version < 7 => Some(StrBytes::from_static_str("")),
            None => None,
        }
    };
    JoinGroupResponse::default()
        .with_error_code(reply.error.map_or(0, |e| e.code()))
        .with_generation_id(reply.generation)
        .with_protocol_type(if version >= 7 {
            reply.protocol_type.map(StrBytes::from_string)
        } else {
            None
        })
        .with_protocol_name(text(reply.protocol))
        .with_leader(StrBytes::from_string(reply.leader))
        .with_skip_assignment(version >= 9 && reply.skip_assignment)
        .with_member_id(StrBytes::from_string(reply.member_id))
        .with_members(
            reply
                .members
                .into_iter()
                .map(|(id, instance, metadata)| {
                    JoinGroupResponseMember::default()
                        .with_member_id(StrBytes::from_string(id))
                        .with_group_instance_id(instance.map(StrBytes::from_string))
                        .with_metadata(metadata)
                })
                .collect(),
        )
}
