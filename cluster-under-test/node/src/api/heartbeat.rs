//! Heartbeat (apiKey 12), v0–v4: keeps a member's session alive. Errors: `INVALID_GROUP_ID`,
//! `UNKNOWN_MEMBER_ID`, `FENCED_INSTANCE_ID`, `ILLEGAL_GENERATION`, `REBALANCE_IN_PROGRESS`
//! (rejoin), `NOT_COORDINATOR`, `COORDINATOR_NOT_AVAILABLE`; a group still loading is
//! answered NONE, as Kafka answers it.

use kafka_protocol::ResponseError;
use kafka_protocol::messages::{HeartbeatRequest, HeartbeatResponse};

use crate::api::offset_commit::valid_group_id;
use crate::coordinator::group::GroupCoordinator;

/// Answers one Heartbeat request.
pub fn handle(groups: &GroupCoordinator, request: &HeartbeatRequest) -> HeartbeatResponse {
    let answer = if valid_group_id(&request.group_id) {
        groups.heartbeat(
            &request.group_id,
            &request.member_id,
            request.group_instance_id.as_deref(),
            request.generation_id,
        )
    } else {
        Err(ResponseError::InvalidGroupId)
    };
    // A group still loading is answered NONE, as Kafka's GroupCoordinatorService does
    // ("blindly respond"): the member's session is not at stake while the coordinator loads.
    let code = match answer {
        Ok(()) | Err(ResponseError::CoordinatorLoadInProgress) => 0,
        Err(error) => error.code(),
    };
    HeartbeatResponse::default().with_error_code(code)
}
