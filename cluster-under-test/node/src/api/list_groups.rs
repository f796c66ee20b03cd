//! ListGroups (apiKey 16), v0–v5: every group this node coordinates (of the
//! `__consumer_offsets` partitions it leads), with its protocol type, v4+ its state (filtered
//! by `StatesFilter`, case-insensitive as Kafka), v5 its type ("classic"; a `TypesFilter`
//! without "classic" lists none).

use kafka_protocol::messages::list_groups_response::ListedGroup;
use kafka_protocol::messages::{GroupId, ListGroupsRequest, ListGroupsResponse};
use kafka_protocol::protocol::StrBytes;

use crate::coordinator::group::GroupCoordinator;

/// Answers one ListGroups request.
pub fn handle(
    groups: &GroupCoordinator,
    request: &ListGroupsRequest,
    version: i16,
) -> ListGroupsResponse {
    let states: Vec<String> = request
        .states_filter
        .iter()
        .map(|s| s.to_ascii_lowercase())
        .collect();
    let types_ok = version < 5
        || request.types_filter.is_empty()
        || request
            .types_filter
            .iter()
            .any(|t| t.eq_ignore_ascii_case("classic"));
    let listed = groups
        .list()
        .into_iter()
        .filter(|_| types_ok)
        .filter(|(_, _, state)| {
            version < 4 || states.is_empty() || states.contains(&state.to_ascii_lowercase())
        })
        .map(|(id, protocol_type, state)| {
            ListedGroup::default()
                .with_group_id(GroupId(StrBytes::from_string(id)))
                .with_protocol_type(StrBytes::from_string(protocol_type))
                .with_group_state(StrBytes::from_static_str(state))
                .with_group_type(StrBytes::from_static_str("classic"))
        })
        .collect();
    ListGroupsResponse::default().with_groups(listed)
}
