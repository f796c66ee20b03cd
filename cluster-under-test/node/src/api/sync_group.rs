//! SyncGroup (apiKey 14), v0–v5: the leader sends the assignment, every member gets its own
//! (followers wait for the leader's; the generation is written to `__consumer_offsets`
//! before anyone is answered). Errors: `INVALID_GROUP_ID`, `UNKNOWN_MEMBER_ID` (also a sync
//! before any join), `FENCED_INSTANCE_ID`, `ILLEGAL_GENERATION`, `REBALANCE_IN_PROGRESS`,
//! `INCONSISTENT_GROUP_PROTOCOL` (v5 names), `NOT_COORDINATOR`,
//! `COORDINATOR_LOAD_IN_PROGRESS`, `COORDINATOR_NOT_AVAILABLE`.

use kafka_protocol::ResponseError;
use kafka_protocol::messages::{SyncGroupRequest, SyncGroupResponse};
use kafka_protocol::protocol::StrBytes;

use crate::api::offset_commit::valid_group_id;
use crate::coordinator::group::GroupCoordinator;
use crate::coordinator::group::classic::SyncRequest;

/// Answers one SyncGroup request.
pub async fn handle(
    groups: &GroupCoordinator,
    request: &SyncGroupRequest,
    version: i16,
) -> SyncGroupResponse {
    let answer = if !valid_group_id(&request.group_id) {
        Err(ResponseError::InvalidGroupId)
    } else {
        let sync = SyncRequest {
            member_id: request.member_id.to_string(),
            instance_id: request.group_instance_id.as_ref().map(|i| i.to_string()),
            generation: request.generation_id,
            protocol_type: request.protocol_type.as_ref().map(|t| t.to_string()),
            protocol: request.protocol_name.as_ref().map(|p| p.to_string()),
            assignments: request
                .assignments
                .iter()
                .map(|a| (a.member_id.to_string(), a.assignment.clone()))
                .collect(),
        };
        groups.sync(&request.group_id, sync).await
    };
    let response = SyncGroupResponse::default();
    let response = if version >= 5 {
        response
            .with_protocol_type(request.protocol_type.clone())
            .with_protocol_name(request.protocol_name.clone())
    } else {
        response
    };
    match answer {
        Ok(assignment) => response.with_assignment(assignment),
        Err(error) => response
            .with_error_code(error.code())
            .with_protocol_type(None::<StrBytes>)
            .with_protocol_name(None),
    }
}
