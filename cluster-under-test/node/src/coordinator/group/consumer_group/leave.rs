//! Members going away: a leave (`-1`, or `-2` for a static member stepping out), and the
//! fencing of a member whose session or revocation clock fired (Kafka's
//! `consumerGroupFenceMember`: remove its records, refresh the metadata, bump the epoch).

use kafka_protocol::ResponseError;

use super::Config;
use super::cause::RebalanceCause;
use super::decision::{
    HeartbeatError, HeartbeatRequest, HeartbeatResponse, Outcome, TopicsImage, fail,
};
use super::record::{Assignment, ConsumerGroupRecord};
use super::scratch::Scratch;
use super::state::{ConsumerGroups, LEAVE_GROUP_STATIC_MEMBER_EPOCH};
use super::timers::{Expiry, TimerOp};

/// Removes a member and bumps the group epoch (Kafka's `consumerGroupFenceMember`).
fn fence<R>(
    scratch: &mut Scratch,
    member_id: &str,
    response: R,
    cause: RebalanceCause,
    topics: &TopicsImage,
) -> Result<Outcome<R>, HeartbeatError> {
    scratch.remove_member(member_id)?;
    scratch.refresh_metadata(topics)?;
    scratch.bump_epoch()?;
    Ok(Outcome {
        response,
        records: std::mem::take(&mut scratch.records),
        timers: vec![TimerOp::CancelAll {
            group_id: scratch.group_id.clone(),
            member_id: member_id.to_string(),
        }],
        cause: Some(cause),
    })
}

pub(super) fn leave(
    groups: &ConsumerGroups,
    request: &HeartbeatRequest,
    member_id: &str,
    config: &Config,
    topics: &TopicsImage,
) -> Result<Outcome<HeartbeatResponse>, HeartbeatError> {
    let _ = config;
    let Some(group) = groups.get(&request.group_id) else {
        return fail(
            ResponseError::GroupIdNotFound,
            format!("Consumer group {} not found.", request.group_id),
        );
    };
    let member = match &request.instance_id {
        None => group.members.get(member_id).ok_or_else(|| HeartbeatError {
            error: ResponseError::UnknownMemberId,
            message: format!(
                "Member {member_id} is not a member of group {}.",
                request.group_id
            ),
        })?,
        Some(instance_id) => {
            let member = group
                .static_member(instance_id)
                .ok_or_else(|| HeartbeatError {
                    error: ResponseError::UnknownMemberId,
                    message: format!("Instance id {instance_id} is unknown."),
                })?;
            if member.member_id != member_id {
                return fail(
                    ResponseError::FencedInstanceId,
                    format!(
                        "Static member {member_id} with instance id {instance_id} was fenced by member {}.",
                        member.member_id
                    ),
                );
            }
            member
        }
    };
    let response = HeartbeatResponse {
        member_id: member_id.to_string(),
        member_epoch: request.member_epoch,
        heartbeat_interval_ms: 0,
        assignment: None,
    };
    let mut scratch = Scratch::new(groups, &request.group_id);
    if request.member_epoch == LEAVE_GROUP_STATIC_MEMBER_EPOCH {
        // A static member steps out without a rebalance; its partitions stay its own until
        // it comes back or its session expires.
        let mut current = member.current.clone();
        current.member_epoch = LEAVE_GROUP_STATIC_MEMBER_EPOCH;
        current.pending_revocation = Assignment::new();
        scratch.emit(ConsumerGroupRecord::CurrentAssignment {
            group_id: request.group_id.clone(),
            member_id: member_id.to_string(),
            assignment: Some(current),
        })?;
        return Ok(Outcome {
            response,
            records: scratch.records,
            timers: Vec::new(),
            cause: None,
        });
    }
    fence(
        &mut scratch,
        member_id,
        response,
        RebalanceCause::Leave {
            member_id: member_id.to_string(),
        },
        topics,
    )
}

/// Fences the member whose clock fired, if the clock still applies: the member is still
/// there and, for a revocation deadline, still at the epoch it was armed for.
pub fn expire(
    groups: &ConsumerGroups,
    expiry: &Expiry,
    topics: &TopicsImage,
) -> Option<Outcome<()>> {
    let (group_id, member_id, cause) = match expiry {
        Expiry::Session {
            group_id,
            member_id,
            ..
        } => (
            group_id,
            member_id,
            RebalanceCause::SessionTimeout {
                member_id: member_id.clone(),
            },
        ),
        Expiry::Rebalance {
            group_id,
            member_id,
            member_epoch,
        } => {
            let member = groups.get(group_id)?.members.get(member_id)?;
            if member.current.member_epoch != *member_epoch {
                return None;
            }
            (
                group_id,
                member_id,
                RebalanceCause::PollTimeout {
                    member_id: member_id.clone(),
                },
            )
        }
    };
    groups.get(group_id)?.members.get(member_id)?;
    let mut scratch = Scratch::new(groups, group_id);
    fence(&mut scratch, member_id, (), cause, topics).ok()
}

#[cfg(test)]
mod tests;
