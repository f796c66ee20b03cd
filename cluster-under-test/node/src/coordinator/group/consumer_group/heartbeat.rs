//! The decisions of `ConsumerGroupHeartbeat` (Kafka 4.x `GroupMetadataManager`): request
//! validation, join / rejoin / leave, static membership, member-epoch fencing, the group-epoch
//! bump on a subscription or topic-metadata change, the target assignment recomputed when the
//! group epoch passes the assignment epoch, and the member's reconciliation (leaves and
//! fencing are in [`super::leave`]). Each decision returns the response, the records to
//! append (already checked by replaying them on a copy) and the clock changes.

use std::collections::BTreeSet;

use kafka_protocol::ResponseError;

use super::Config;
use super::cause::RebalanceCause;
use super::decision::{
    HeartbeatError, HeartbeatRequest, HeartbeatResponse, Outcome, TopicsImage, fail,
};
use super::leave::leave;
use super::reconcile::reconcile;
use super::record::{ConsumerGroupRecord, CurrentAssignment, MemberState};
use super::scratch::{Scratch, compute_target};
use super::state::{ConsumerGroups, LEAVE_GROUP_STATIC_MEMBER_EPOCH, Member};
use super::timers::TimerOp;
use super::validate::{check_epoch, validate};

/// Decides one heartbeat at `now_ms` against the committed-or-latest state `groups`.
///
/// # Errors
/// The error response Kafka would send; nothing is to be written then.
pub fn heartbeat(
    groups: &ConsumerGroups,
    request: &HeartbeatRequest,
    now_ms: i64,
    config: &Config,
    topics: &TopicsImage,
) -> Result<Outcome<HeartbeatResponse>, HeartbeatError> {
    validate(request, config)?;
    let member_id = if request.member_id.is_empty() {
        request.generated_member_id.clone()
    } else {
        request.member_id.clone()
    };
    if request.member_epoch < 0 {
        return leave(groups, request, &member_id, config, topics);
    }
    let joining = request.member_epoch == 0;
    if groups.get(&request.group_id).is_none() && !joining {
        return fail(
            ResponseError::GroupIdNotFound,
            format!("Consumer group {} not found.", request.group_id),
        );
    }
    let mut scratch = Scratch::new(groups, &request.group_id);
    let group = scratch.group();
    if group.members.len() >= config.max_size && !group.members.contains_key(&member_id) {
        return fail(
            ResponseError::GroupMaxSizeReached,
            format!(
                "The consumer group has reached its maximum capacity of {} members.",
                config.max_size
            ),
        );
    }
    let owned = request.owned.as_ref();
    let mut cause = None;
    // 0. Who is asking; 1. their subscription.
    let member = member_of(&mut scratch, request, &member_id, joining, &mut cause)?;
    let is_new = !scratch.group().members.contains_key(&member_id);
    let updated = update_subscription(
        &mut scratch,
        request,
        &member_id,
        &member,
        is_new,
        topics,
        &mut cause,
    )?;
    // 2. A new target assignment when the group epoch passed the assignment epoch.
    let group = scratch.group();
    if group.group_epoch > group.assignment_epoch {
        compute_target(&mut scratch, config)?;
    }
    // 3. The member's step toward its target, and its session clock.
    let (current, mut timers) =
        step_toward_target(&mut scratch, request, &member_id, &updated, now_ms)?;
    timers.push(TimerOp::Session {
        group_id: request.group_id.clone(),
        member_id: member_id.clone(),
        deadline_ms: now_ms + i64::from(config.session_timeout_ms),
    });
    let full = joining
        || (request.rebalance_timeout_ms != -1
            && request.subscribed_topic_names.is_some()
            && owned.is_some());
    let response = HeartbeatResponse {
        member_id,
        member_epoch: current.member_epoch,
        heartbeat_interval_ms: config.heartbeat_interval_ms,
        assignment: (full || current.assigned != member.current.assigned)
            .then(|| current.assigned.clone()),
    };
    Ok(Outcome {
        response,
        records: scratch.records,
        timers,
        cause,
    })
}

/// Step 0: who is asking. A dynamic member by its id (a new one only when joining); a static
/// member by its instance id, whose rejoin under a new member id takes over the old id's
/// assignment (`StaticMemberReplaced`) once the old one left with the static leave epoch.
///
/// # Errors
/// `UNKNOWN_MEMBER_ID`, `UNRELEASED_INSTANCE_ID`, `FENCED_INSTANCE_ID`, or the epoch check's.
fn member_of(
    scratch: &mut Scratch,
    request: &HeartbeatRequest,
    member_id: &str,
    joining: bool,
    cause: &mut Option<RebalanceCause>,
) -> Result<Member, HeartbeatError> {
    let member_id = member_id.to_owned();
    let owned = request.owned.as_ref();
    let group = scratch.group();
    let member = match &request.instance_id {
        None => match group.members.get(&member_id) {
            Some(member) => {
                check_epoch(member, request.member_epoch, owned)?;
                member.clone()
            }
            None if joining => Member::new(&member_id),
            None => {
                return fail(
                    ResponseError::UnknownMemberId,
                    format!(
                        "Member {member_id} is not a member of group {}.",
                        request.group_id
                    ),
                );
            }
        },
        Some(instance_id) => match (group.static_member(instance_id), joining) {
            (None, true) => group
                .members
                .get(&member_id)
                .cloned()
                .unwrap_or_else(|| Member::new(&member_id)),
            (Some(old), true) => {
                if old.current.member_epoch != LEAVE_GROUP_STATIC_MEMBER_EPOCH {
                    return fail(
                        ResponseError::UnreleasedInstanceId,
                        format!(
                            "Static member {member_id} with instance id {instance_id} cannot join the group because the instance id is owned by {} member.",
                            old.member_id
                        ),
                    );
                }
                let mut new = old.clone();
                new.member_id = member_id.clone();
                new.current.member_epoch = 0;
                new.current.previous_member_epoch = 0;
                let old_target = group
                    .target
                    .get(&old.member_id)
                    .cloned()
                    .unwrap_or_default();
                scratch.remove_member(&old.member_id)?;
                let group_id = request.group_id.clone();
                scratch.emit(ConsumerGroupRecord::MemberSubscription {
                    group_id: group_id.clone(),
                    member_id: member_id.clone(),
                    subscription: Some(new.subscription.clone()),
                })?;
                scratch.emit(ConsumerGroupRecord::TargetAssignmentMember {
                    group_id: group_id.clone(),
                    member_id: member_id.clone(),
                    partitions: Some(old_target),
                })?;
                scratch.emit(ConsumerGroupRecord::CurrentAssignment {
                    group_id,
                    member_id: member_id.clone(),
                    assignment: Some(new.current.clone()),
                })?;
                *cause = Some(RebalanceCause::StaticMemberReplaced {
                    instance_id: instance_id.clone(),
                    old_member_id: old.member_id.clone(),
                    new_member_id: member_id.clone(),
                });
                new
            }
            (None, false) => {
                return fail(
                    ResponseError::UnknownMemberId,
                    format!("Instance id {instance_id} is unknown."),
                );
            }
            (Some(old), false) => {
                if old.member_id != member_id {
                    return fail(
                        ResponseError::FencedInstanceId,
                        format!(
                            "Static member {member_id} with instance id {instance_id} was fenced by member {}.",
                            old.member_id
                        ),
                    );
                }
                check_epoch(old, request.member_epoch, owned)?;
                old.clone()
            }
        },
    };
    Ok(member)
}

/// Step 1: the member's subscription and client details as the request updates them; a change
/// of subscribed topics (or of their metadata) bumps the group epoch. Returns the updated
/// member.
///
/// # Errors
/// A record that does not replay.
fn update_subscription(
    scratch: &mut Scratch,
    request: &HeartbeatRequest,
    member_id: &str,
    member: &Member,
    is_new: bool,
    topics: &TopicsImage,
    cause: &mut Option<RebalanceCause>,
) -> Result<Member, HeartbeatError> {
    let member_id = member_id.to_owned();
    let mut updated = member.clone();
    let s = &mut updated.subscription;
    if request.instance_id.is_some() {
        s.instance_id.clone_from(&request.instance_id);
    }
    if request.rack_id.is_some() {
        s.rack_id.clone_from(&request.rack_id);
    }
    if request.rebalance_timeout_ms != -1 {
        s.rebalance_timeout_ms = request.rebalance_timeout_ms;
    }
    if request.server_assignor.is_some() {
        s.server_assignor.clone_from(&request.server_assignor);
    }
    if let Some(names) = &request.subscribed_topic_names {
        s.subscribed_topic_names = names
            .iter()
            .cloned()
            .collect::<BTreeSet<_>>()
            .into_iter()
            .collect();
    }
    s.client_id.clone_from(&request.client_id);
    s.client_host.clone_from(&request.client_host);
    let mut bump = false;
    if is_new || updated.subscription != member.subscription {
        scratch.emit(ConsumerGroupRecord::MemberSubscription {
            group_id: request.group_id.clone(),
            member_id: member_id.clone(),
            subscription: Some(updated.subscription.clone()),
        })?;
        if updated.subscription.subscribed_topic_names != member.subscription.subscribed_topic_names
        {
            bump = true;
            *cause = cause.take().or_else(|| {
                Some(if is_new {
                    RebalanceCause::Join {
                        member_id: member_id.clone(),
                    }
                } else {
                    RebalanceCause::MetadataChange {
                        detail: format!(
                            "member {member_id} subscribed to {:?}",
                            updated.subscription.subscribed_topic_names
                        ),
                    }
                })
            });
        }
    }
    if scratch.refresh_metadata(topics)? {
        bump = true;
        *cause = cause.take().or_else(|| {
            Some(RebalanceCause::MetadataChange {
                detail: "the subscribed topics' metadata changed".to_string(),
            })
        });
    }
    if bump {
        scratch.bump_epoch()?;
    }
    Ok(updated)
}

/// Step 3: the member's step toward its target assignment (revoke first, then assign, as
/// `reconcile` decides), with the rebalance clock armed while partitions are unrevoked.
/// Returns the member's current assignment and the clock changes.
///
/// # Errors
/// `FENCED_MEMBER_EPOCH` when the member's state cannot be reconciled; a record that does not
/// replay.
fn step_toward_target(
    scratch: &mut Scratch,
    request: &HeartbeatRequest,
    member_id: &str,
    updated: &Member,
    now_ms: i64,
) -> Result<(CurrentAssignment, Vec<TimerOp>), HeartbeatError> {
    let member_id = member_id.to_owned();
    let owned = request.owned.as_ref();
    let group = scratch.group();
    let before = group
        .members
        .get(&member_id)
        .cloned()
        .unwrap_or_else(|| updated.clone());
    let mut timers = Vec::new();
    let mut current = before.current.clone();
    if !before.is_reconciled_to(group.assignment_epoch) {
        let target = group.target_of(&member_id, request.instance_id.as_deref());
        current = reconcile(&before.current, group.assignment_epoch, &target, owned, &group.owned_by_others(&member_id))
            .or_else(|_| fail(ResponseError::FencedMemberEpoch, "The consumer group member is in a unknown state. The member must abandon all its partitions and rejoin."))?;
        if current != before.current {
            scratch.emit(ConsumerGroupRecord::CurrentAssignment {
                group_id: request.group_id.clone(),
                member_id: member_id.clone(),
                assignment: Some(current.clone()),
            })?;
            let (group_id, member_id) = (request.group_id.clone(), member_id.clone());
            timers.push(if current.state == MemberState::UnrevokedPartitions {
                TimerOp::Rebalance {
                    group_id,
                    member_id,
                    member_epoch: current.member_epoch,
                    deadline_ms: now_ms
                        + i64::from(updated.subscription.rebalance_timeout_ms.max(0)),
                }
            } else {
                TimerOp::CancelRebalance {
                    group_id,
                    member_id,
                }
            });
        }
    }
    Ok((current, timers))
}

#[cfg(test)]
pub(super) mod tests;
