//! A working copy of one group for a decision: every record the decision emits is replayed
//! on it at once, so the records and the decision cannot disagree; and the target
//! assignment's computation on it (Kafka's `TargetAssignmentBuilder` with the preferred
//! assignor).

use std::collections::{BTreeMap, BTreeSet};

use kafka_protocol::ResponseError;

use super::Config;
use super::assignor::{self, MemberSpec};
use super::decision::{HeartbeatError, TopicsImage, fail};
use super::record::{ConsumerGroupRecord, TopicMetadata};
use super::state::{ConsumerGroup, ConsumerGroups};

/// A working copy of one group that replays every record it emits, so the records and the
/// decision cannot disagree.
pub(super) struct Scratch {
    pub(super) groups: ConsumerGroups,
    pub(super) group_id: String,
    pub(super) records: Vec<ConsumerGroupRecord>,
}

impl Scratch {
    pub(super) fn new(groups: &ConsumerGroups, group_id: &str) -> Self {
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

    pub(super) fn group(&self) -> ConsumerGroup {
        self.groups
            .get(&self.group_id)
            .cloned()
            .unwrap_or_else(|| ConsumerGroup::new(&self.group_id))
    }

    pub(super) fn emit(&mut self, record: ConsumerGroupRecord) -> Result<(), HeartbeatError> {
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
    pub(super) fn remove_member(&mut self, member_id: &str) -> Result<(), HeartbeatError> {
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
    pub(super) fn refresh_metadata(
        &mut self,
        topics: &TopicsImage,
    ) -> Result<bool, HeartbeatError> {
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

    pub(super) fn bump_epoch(&mut self) -> Result<i32, HeartbeatError> {
        let epoch = self.group().group_epoch + 1;
        self.emit(ConsumerGroupRecord::GroupEpoch {
            group_id: self.group_id.clone(),
            epoch: Some(epoch),
        })?;
        Ok(epoch)
    }
}

/// The preferred assignor (the most common among members, ties to the earlier configured)
/// computes every member's target; changed targets and the new epoch are written.
pub(super) fn compute_target(scratch: &mut Scratch, config: &Config) -> Result<(), HeartbeatError> {
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
