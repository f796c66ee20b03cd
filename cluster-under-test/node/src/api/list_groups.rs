//! ListGroups (apiKey 16), v0–v5: every group this node coordinates (of the
//! `__consumer_offsets` partitions it leads), with its protocol type, v4+ its state (filtered
//! by `StatesFilter`, case-insensitive as Kafka), v5 its type ("classic", or "consumer" for a
//! KIP-848 group, whose protocol type is "consumer"; filtered by `TypesFilter`).

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
    let type_ok = |group_type: &str| {
        version < 5
            || request.types_filter.is_empty()
            || request
                .types_filter
                .iter()
                .any(|t| t.eq_ignore_ascii_case(group_type))
    };
    let consumer = groups.list_consumer();
    let classic = groups
        .list()
        .into_iter()
        .filter(|(id, _, _)| !consumer.iter().any(|(c, _)| c == id))
        .map(|(id, protocol_type, state)| (id, protocol_type, state, "classic"));
    let consumer = consumer
        .iter()
        .map(|(id, state)| (id.clone(), "consumer".to_owned(), *state, "consumer"));
    let listed = classic
        .chain(consumer)
        .filter(|(_, _, _, group_type)| type_ok(group_type))
        .filter(|(_, _, state, _)| {
            version < 4 || states.is_empty() || states.contains(&state.to_ascii_lowercase())
        })
        .map(|(id, protocol_type, state, group_type)| {
            ListedGroup::default()
                .with_group_id(GroupId(StrBytes::from_string(id)))
                .with_protocol_type(StrBytes::from_string(protocol_type))
                .with_group_state(StrBytes::from_static_str(state))
                .with_group_type(StrBytes::from_static_str(group_type))
        })
        .collect();
    ListGroupsResponse::default().with_groups(listed)
}
