//! LeaveGroup (apiKey 13), v0–v5: members leave a classic group (v3+ batched, with instance
//! ids; v5 with a reason, which names the rebalance's cause: a client whose
//! `max.poll.interval.ms` expired says so and the cause is `poll-timeout`). Errors per member:
//! `UNKNOWN_MEMBER_ID`, `FENCED_INSTANCE_ID`; for the request: `INVALID_GROUP_ID`,
//! `NOT_COORDINATOR`, `COORDINATOR_LOAD_IN_PROGRESS`, `COORDINATOR_NOT_AVAILABLE` (v0–v2: the
//! one member's error is the request's).

use kafka_protocol::ResponseError;
use kafka_protocol::messages::leave_group_response::MemberResponse;
use kafka_protocol::messages::{LeaveGroupRequest, LeaveGroupResponse};
use kafka_protocol::protocol::StrBytes;

use crate::api::offset_commit::valid_group_id;
use crate::coordinator::group::GroupCoordinator;

/// Answers one LeaveGroup request.
pub async fn handle(
    groups: &GroupCoordinator,
    request: &LeaveGroupRequest,
    version: i16,
) -> LeaveGroupResponse {
    let members: Vec<(String, Option<String>, Option<String>)> = if version >= 3 {
        request
            .members
            .iter()
            .map(|m| {
                (
                    m.member_id.to_string(),
                    m.group_instance_id.as_ref().map(|i| i.to_string()),
                    m.reason.as_ref().map(|r| r.to_string()),
                )
            })
            .collect()
    } else {
        vec![(request.member_id.to_string(), None, None)]
    };
    let answer = if valid_group_id(&request.group_id) {
        groups.leave(&request.group_id, &members).await
    } else {
        Err(ResponseError::InvalidGroupId)
    };
    match answer {
        Err(error) => LeaveGroupResponse::default().with_error_code(error.code()),
        Ok(outcomes) if version < 3 => LeaveGroupResponse::default()
            .with_error_code(outcomes.first().and_then(|o| o.2).map_or(0, |e| e.code())),
        Ok(outcomes) => LeaveGroupResponse::default().with_members(
            outcomes
                .into_iter()
                .map(|(member_id, instance, error)| {
                    MemberResponse::default()
                        .with_member_id(StrBytes::from_string(member_id))
                        .with_group_instance_id(instance.map(StrBytes::from_string))
                        .with_error_code(error.map_or(0, |e| e.code()))
                })
                .collect(),
        ),
    }
}
