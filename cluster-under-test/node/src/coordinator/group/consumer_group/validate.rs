//! The checks of a `ConsumerGroupHeartbeat` before any decision: the request's fields as
//! Kafka 4.x validates them, and the member epoch against the one the coordinator knows.

use kafka_protocol::ResponseError;

use super::Config;
use super::decision::{HeartbeatError, HeartbeatRequest, fail};
use super::record::Assignment;
use super::state::{LEAVE_GROUP_MEMBER_EPOCH, LEAVE_GROUP_STATIC_MEMBER_EPOCH, Member};

/// Checks the request's fields as Kafka 4.x does.
pub(super) fn validate(request: &HeartbeatRequest, config: &Config) -> Result<(), HeartbeatError> {
    use ResponseError::InvalidRequest;
    if request.group_id.is_empty() {
        return fail(InvalidRequest, "GroupId can't be empty.");
    }
    if request.instance_id.as_deref() == Some("") {
        return fail(InvalidRequest, "InstanceId can't be empty.");
    }
    if request.rack_id.as_deref() == Some("") {
        return fail(InvalidRequest, "RackId can't be empty.");
    }
    if request.api_version >= 1 && request.member_id.is_empty() {
        return fail(InvalidRequest, "MemberId can't be empty.");
    }
    if request.subscribed_topic_regex.is_some() {
        return fail(
            InvalidRequest,
            "SubscribedTopicRegex is not supported by this coordinator.",
        );
    }
    match request.member_epoch {
        0 => {
            if request.rebalance_timeout_ms == -1 {
                return fail(
                    InvalidRequest,
                    "RebalanceTimeoutMs must be provided in first request.",
                );
            }
            if request.owned.as_ref().is_none_or(|owned| !owned.is_empty()) {
                return fail(
                    InvalidRequest,
                    "TopicPartitions must be empty when (re-)joining.",
                );
            }
            if request
                .subscribed_topic_names
                .as_ref()
                .is_none_or(Vec::is_empty)
            {
                return fail(
                    InvalidRequest,
                    "SubscribedTopicNames must be set in first request.",
                );
            }
        }
        epoch if epoch > 0 || epoch == LEAVE_GROUP_MEMBER_EPOCH => {
            if request.member_id.is_empty() {
                return fail(InvalidRequest, "MemberId can't be empty.");
            }
        }
        LEAVE_GROUP_STATIC_MEMBER_EPOCH => {
            if request.member_id.is_empty() {
                return fail(InvalidRequest, "MemberId can't be empty.");
            }
            if request.instance_id.is_none() {
                return fail(InvalidRequest, "InstanceId can't be null.");
            }
        }
        _ => return fail(InvalidRequest, "MemberEpoch is invalid."),
    }
    if let Some(name) = &request.server_assignor
        && !config.assignors.contains(name)
    {
        return fail(
            ResponseError::UnsupportedAssignor,
            format!(
                "ServerAssignor {name} is not supported. Supported assignors: {}.",
                config.assignors.join(", ")
            ),
        );
    }
    Ok(())
}

/// Kafka's `throwIfConsumerGroupMemberEpochIsInvalid` (with KAFKA-19233: epoch 0 rejoins).
pub(super) fn check_epoch(
    member: &Member,
    received: i32,
    owned: Option<&Assignment>,
) -> Result<(), HeartbeatError> {
    let known = member.current.member_epoch;
    let fenced = |which| {
        fail(
            ResponseError::FencedMemberEpoch,
            format!(
                "The consumer group member has a {which} member epoch ({received}) than the one known by the group coordinator ({known}). The member must abandon all its partitions and rejoin."
            ),
        )
    };
    if received == 0 || received == known {
        return Ok(());
    }
    if received > known {
        return fenced("greater");
    }
    let subset = owned.is_some_and(|owned| {
        owned.iter().all(|(topic, ids)| {
            member
                .current
                .assigned
                .get(topic)
                .is_some_and(|have| ids.is_subset(have))
        })
    });
    if received != member.current.previous_member_epoch || !subset {
        return fenced("smaller");
    }
    Ok(())
}
