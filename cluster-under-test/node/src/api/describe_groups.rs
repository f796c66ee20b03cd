//! DescribeGroups (apiKey 15), v0–v5: each group's Kafka state, protocol and members (with
//! metadata and assignment outside a join phase). A group the coordinator does not have is
//! `Dead` with no error, as Kafka answers it, a KIP-848 consumer group included (Kafka's
//! classic describe does not see one); `INVALID_GROUP_ID` for an empty id,
//! `NOT_COORDINATOR` / `COORDINATOR_LOAD_IN_PROGRESS` per group.
//!
//! logjam's addition: the cause of the group's last rebalance, in the seed's terms
//! (`session-timeout`, `poll-timeout`, `join`, `leave`, `static-member-replaced`,
//! `metadata-change`, `coordinator-moved`, and `write-failed` when a generation's assignment
//! could not be written), in the tagged field [`CAUSE_TAG`] of the described
//! group (flexible versions, v5): Kafka clients skip unknown tags; a logjam admin call reads it.

use bytes::Bytes;
use kafka_protocol::ResponseError;
use kafka_protocol::messages::describe_groups_response::{DescribedGroup, DescribedGroupMember};
use kafka_protocol::messages::{DescribeGroupsRequest, DescribeGroupsResponse};
use kafka_protocol::protocol::StrBytes;

use crate::api::offset_commit::valid_group_id;
use crate::coordinator::group::GroupCoordinator;

/// The tag of the last rebalance's cause in a `DescribedGroup` (v5).
pub const CAUSE_TAG: i32 = 10_000;

/// Answers one DescribeGroups request.
pub fn handle(
    groups: &GroupCoordinator,
    request: &DescribeGroupsRequest,
    version: i16,
) -> DescribeGroupsResponse {
    let described = request
        .groups
        .iter()
        .map(|group_id| {
            let base = DescribedGroup::default()
                .with_group_id(group_id.clone())
                .with_authorized_operations(i32::MIN);
            let answer = if valid_group_id(group_id) {
                groups.describe(group_id)
            } else {
                Err(ResponseError::InvalidGroupId)
            };
            match answer {
                Err(error) => base
                    .with_error_code(error.code())
                    .with_group_state(StrBytes::from_static_str("")),
                Ok(None) => base.with_group_state(StrBytes::from_static_str("Dead")),
                Ok(Some(group)) => {
                    let mut described = base
                        .with_group_state(StrBytes::from_static_str(group.state))
                        .with_protocol_type(StrBytes::from_string(group.protocol_type))
                        .with_protocol_data(StrBytes::from_string(group.protocol))
                        .with_members(
                            group
                                .members
                                .into_iter()
                                .map(|(id, instance, client_id, host, metadata, assignment)| {
                                    DescribedGroupMember::default()
                                        .with_member_id(StrBytes::from_string(id))
                                        .with_group_instance_id(instance.map(StrBytes::from_string))
                                        .with_client_id(StrBytes::from_string(client_id))
                                        .with_client_host(StrBytes::from_string(host))
                                        .with_member_metadata(metadata)
                                        .with_member_assignment(assignment)
                                })
                                .collect(),
                        );
                    if let (Some(cause), true) = (group.last_cause, version >= 5) {
                        described
                            .unknown_tagged_fields
                            .insert(CAUSE_TAG, Bytes::from_static(cause.as_bytes()));
                    }
                    described
                }
            }
        })
        .collect();
    DescribeGroupsResponse::default().with_groups(described)
}
