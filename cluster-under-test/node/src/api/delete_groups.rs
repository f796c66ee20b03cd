//! DeleteGroups (apiKey 42), v0–v2: deletes groups without members, with their offsets.
//! Errors per group: `INVALID_GROUP_ID`, `GROUP_ID_NOT_FOUND`, `NON_EMPTY_GROUP`,
//! `NOT_COORDINATOR`, `COORDINATOR_LOAD_IN_PROGRESS`, `COORDINATOR_NOT_AVAILABLE`.

use kafka_protocol::ResponseError;
use kafka_protocol::messages::delete_groups_response::DeletableGroupResult;
use kafka_protocol::messages::{DeleteGroupsRequest, DeleteGroupsResponse};

use crate::api::offset_commit::valid_group_id;
use crate::coordinator::group::GroupCoordinator;

/// Answers one DeleteGroups request.
pub async fn handle(
    groups: &GroupCoordinator,
    request: &DeleteGroupsRequest,
) -> DeleteGroupsResponse {
    let mut results = Vec::with_capacity(request.groups_names.len());
    for group_id in &request.groups_names {
        let answer = if valid_group_id(group_id) {
            groups.delete_group(group_id).await
        } else {
            Err(ResponseError::InvalidGroupId)
        };
        results.push(
            DeletableGroupResult::default()
                .with_group_id(group_id.clone())
                .with_error_code(answer.err().map_or(0, |e| e.code())),
        );
    }
    DeleteGroupsResponse::default().with_results(results)
}
