//! The decisions of `ConsumerGroupHeartbeat` (Kafka 4.x `GroupMetadataManager`): request
//! validation, join / rejoin / leave, static membership, member-epoch fencing, the group-epoch
//! bump on a subscription or topic-metadata change, the target assignment recomputed when the
//! group epoch passes the assignment epoch, and the member's reconciliation; plus the fencing
//! of a member whose clock fired. Each decision returns the response, the records to append
//! (already checked by replaying them on a copy) and the clock changes.

use std::collections::{BTreeMap, BTreeSet};

use kafka_protocol::ResponseError;

use super::assignor::{self, MemberSpec};
use super::cause::RebalanceCause;
use super::config::Config;
use super::reconcile::reconcile;
use super::record::{Assignment, ConsumerGroupRecord, MemberState, TopicMetadata};
use super::state::{
    ConsumerGroup, ConsumerGroups, LEAVE_GROUP_MEMBER_EPOCH, LEAVE_GROUP_STATIC_MEMBER_EPOCH,
    Member,
};
use super::timers::{Expiry, TimerOp};

/// The cluster's topics by name, as the metadata image has them.
pub type TopicsImage = BTreeMap<String, TopicMetadata>;

/// The fields of a `ConsumerGroupHeartbeat` request the decision needs.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct HeartbeatRequest {
    /// The request's version: from 1 (Kafka 4.0, KIP-1082) the client names itself.
    pub api_version: i16,
    /// `GroupId`.
    pub group_id: String,
    /// `MemberId`.
    pub member_id: String,
    /// `MemberEpoch`.
    pub member_epoch: i32,
    /// `InstanceId`.
    pub instance_id: Option<String>,
    /// `RackId`.
    pub rack_id: Option<String>,
    /// `RebalanceTimeoutMs` (-1: unchanged).
    pub rebalance_timeout_ms: i32,
    /// `SubscribedTopicNames` (`None`: unchanged).
    pub subscribed_topic_names: Option<Vec<String>>,
    /// `SubscribedTopicRegex`.
    pub subscribed_topic_regex: Option<String>,
    /// `ServerAssignor` (`None`: unchanged).
    pub server_assignor: Option<String>,
    /// `TopicPartitions`: what the member owns (`None`: not reported).
    pub owned: Option<Assignment>,
    /// The request header's client id.
    pub client_id: String,
    /// The connection's client host.
    pub client_host: String,
    /// A fresh id, used only for a version-0 join without a member id.
    pub generated_member_id: String,
}

/// A successful response's fields.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HeartbeatResponse {
    /// `MemberId`.
    pub member_id: String,
    /// `MemberEpoch`.
    pub member_epoch: i32,
    /// `HeartbeatIntervalMs` (0 in a leave's response).
    pub heartbeat_interval_ms: i32,
    /// `Assignment`, when the request was full or the assignment changed.
    pub assignment: Option<Assignment>,
}

/// An error response: the code and Kafka's message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HeartbeatError {
    /// The error code.
    pub error: ResponseError,
    /// The message.
    pub message: String,
}

fn fail<T>(error: ResponseError, message: impl Into<String>) -> Result<T, HeartbeatError> {
    Err(HeartbeatError {
        error,
        message: message.into(),
    })
}

/// What a decision produced.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Outcome<R> {
    /// The response to send once the records are committed.
    pub response: R,
    /// The records to append, in order.
    pub records: Vec<ConsumerGroupRecord>,
    /// The clock changes to apply once the records are written.
    pub timers: Vec<TimerOp>,
    /// The rebalance cause, to log and to note on the group.
    pub cause: Option<RebalanceCause>,
}

/// A working copy of one group that replays every record it emits, so the records and the
/// decision cannot disagree.
struct Scratch {
    groups: ConsumerGroups,
    group_id: String,
    records: Vec<ConsumerGroupRecord>,
}

impl Scratch {
    fn new(groups: &ConsumerGroups, group_id: &str) -> Self {
        let mut copy = ConsumerGroups::default();
        if let Some(group) = groups.get(group_id) {
            copy.groups.insert(group_id.to_string(), group.clone());
        }
        Scratch {
            groups: copy,
            group_id: group_id.to_string(),
            records: Vec::new(),
        }
    }

    fn group(&self) -> ConsumerGroup {
        self.groups
            .get(&self.group_id)
            .cloned()
            .unwrap_or_else(|| ConsumerGroup::new(&self.group_id))
    }

    fn emit(&mut self, record: ConsumerGroupRecord) -> Result<(), HeartbeatError> {
        self.groups
            .replay(&record)
            .map_err(|error| HeartbeatError {
                error: ResponseError::UnknownServerError,
                message: format!("internal: a record would not replay: {error}"),
            })?;
        self.records.push(record);
        Ok(())
    }

    /// Removes a member: its current assignment, target and subscription, in Kafka's order.
    fn remove_member(&mut self, member_id: &str) -> Result<(), HeartbeatError> {
        let (group_id, member_id) = (self.group_id.clone(), member_id.to_string());
        self.emit(ConsumerGroupRecord::CurrentAssignment {
            group_id: group_id.clone(),
            member_id: member_id.clone(),
            assignment: None,
        })?;
        self.emit(ConsumerGroupRecord::TargetAssignmentMember {
            group_id: group_id.clone(),
            member_id: member_id.clone(),
            partitions: None,
        })?;
        self.emit(ConsumerGroupRecord::MemberSubscription {
            group_id,
            member_id,
            subscription: None,
        })
    }

    /// Writes the subscription metadata when it differs from the group's; true if it did.
    fn refresh_metadata(&mut self, topics: &TopicsImage) -> Result<bool, HeartbeatError> {
        let group = self.group();
        let names: BTreeSet<String> = group
            .members
            .values()
            .flat_map(|m| m.subscription.subscribed_topic_names.iter().cloned())
            .collect();
        let metadata: BTreeMap<String, TopicMetadata> = names
            .into_iter()
            .filter_map(|name| topics.get(&name).map(|t| (name, t.clone())))
            .collect();
        if metadata == group.subscription_metadata {
            return Ok(false);
        }
        self.emit(ConsumerGroupRecord::SubscriptionMetadata {
            group_id: self.group_id.clone(),
            topics: Some(metadata),
        })?;
        Ok(true)
    }

    fn bump_epoch(&mut self) -> Result<i32, HeartbeatError> {
        let epoch = self.group().group_epoch + 1;
        self.emit(ConsumerGroupRecord::GroupEpoch {
            group_id: self.group_id.clone(),
            epoch: Some(epoch),
        })?;
        Ok(epoch)
    }
}

/// Checks the request's fields as Kafka 4.x does.
fn validate(request: &HeartbeatRequest, config: &Config) -> Result<(), HeartbeatError> {
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
fn check_epoch(
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
                cause = Some(RebalanceCause::StaticMemberReplaced {
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
    let is_new = !scratch.group().members.contains_key(&member_id);

    // 1. The member's subscription; a change of topics bumps the group epoch.
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
            cause = cause.or_else(|| {
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
        cause = cause.or_else(|| {
            Some(RebalanceCause::MetadataChange {
                detail: "the subscribed topics' metadata changed".to_string(),
            })
        });
    }
    if bump {
        scratch.bump_epoch()?;
    }

    // 2. A new target assignment when the group epoch passed the assignment epoch.
    let group = scratch.group();
    if group.group_epoch > group.assignment_epoch {
        compute_target(&mut scratch, config)?;
    }

    // 3. The member's step toward its target.
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

/// The preferred assignor (the most common among members, ties to the earlier configured)
/// computes every member's target; changed targets and the new epoch are written.
fn compute_target(scratch: &mut Scratch, config: &Config) -> Result<(), HeartbeatError> {
    let group = scratch.group();
    let mut counts: BTreeMap<&str, usize> = BTreeMap::new();
    for member in group.members.values() {
        if let Some(name) = &member.subscription.server_assignor {
            *counts.entry(name).or_default() += 1;
        }
    }
    let rank = |name: &str| {
        config
            .assignors
            .iter()
            .position(|n| n == name)
            .unwrap_or(usize::MAX)
    };
    let name = counts
        .iter()
        .max_by(|(a, x), (b, y)| x.cmp(y).then(rank(b).cmp(&rank(a))))
        .map_or(config.assignors[0].as_str(), |(name, _)| name);
    let ids: BTreeMap<&str, uuid::Uuid> = group
        .subscription_metadata
        .values()
        .map(|t| (t.name.as_str(), t.id))
        .collect();
    let partitions = group
        .subscription_metadata
        .values()
        .map(|t| (t.id, t.partitions))
        .collect();
    let members: BTreeMap<String, MemberSpec> = group
        .members
        .values()
        .map(|m| {
            let subscribed = m
                .subscription
                .subscribed_topic_names
                .iter()
                .filter_map(|n| ids.get(n.as_str()).copied())
                .collect();
            let spec = MemberSpec {
                instance_id: m.subscription.instance_id.clone(),
                subscribed,
                current: group.target.get(&m.member_id).cloned().unwrap_or_default(),
            };
            (m.member_id.clone(), spec)
        })
        .collect();
    let result = assignor::assign(name, &members, &partitions).or_else(|error| {
        fail(
            ResponseError::UnknownServerError,
            format!(
                "Failed to compute a new target assignment for epoch {}: {error}",
                group.group_epoch
            ),
        )
    })?;
    for (member_id, assignment) in result {
        if group.target.get(&member_id) != Some(&assignment) {
            scratch.emit(ConsumerGroupRecord::TargetAssignmentMember {
                group_id: group.group_id.clone(),
                member_id,
                partitions: Some(assignment),
            })?;
        }
    }
    scratch.emit(ConsumerGroupRecord::TargetAssignmentEpoch {
        group_id: group.group_id.clone(),
        epoch: Some(group.group_epoch),
    })
}

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

fn leave(
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
#[path = "heartbeat_tests.rs"]
mod tests;
