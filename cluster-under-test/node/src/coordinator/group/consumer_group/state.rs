//! The state of the KIP-848 groups of one `__consumer_offsets` partition, rebuilt only by
//! replaying records (Kafka's `GroupMetadataManager.replay` for types 3 to 8, with its
//! tombstone rules), plus what is never written: the last rebalance cause of each group.

use std::collections::{BTreeMap, BTreeSet};

use uuid::Uuid;

use super::cause::RebalanceCause;
use super::record::{
    Assignment, ConsumerGroupRecord, CurrentAssignment, MemberState, MemberSubscription,
    TopicMetadata,
};

/// The member epoch a member leaves with (and a removed member's current assignment).
pub const LEAVE_GROUP_MEMBER_EPOCH: i32 = -1;
/// The member epoch a static member leaves with when it means to come back.
pub const LEAVE_GROUP_STATIC_MEMBER_EPOCH: i32 = -2;

/// One member (Kafka's `ConsumerGroupMember`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Member {
    /// Its id.
    pub member_id: String,
    /// Its subscription and client details (record type 5).
    pub subscription: MemberSubscription,
    /// Its epoch, previous epoch, reconciliation state and partitions (record type 8).
    pub current: CurrentAssignment,
}

impl Member {
    /// A member as Kafka's builder starts one: epoch 0, previous epoch -1, stable, nothing.
    pub fn new(member_id: &str) -> Self {
        Member {
            member_id: member_id.to_string(),
            subscription: MemberSubscription {
                rebalance_timeout_ms: -1,
                ..MemberSubscription::default()
            },
            current: CurrentAssignment {
                member_epoch: 0,
                previous_member_epoch: -1,
                state: MemberState::Stable,
                assigned: Assignment::new(),
                pending_revocation: Assignment::new(),
            },
        }
    }

    /// Whether it is stable at `epoch`.
    pub fn is_reconciled_to(&self, epoch: i32) -> bool {
        self.current.state == MemberState::Stable && self.current.member_epoch == epoch
    }

    /// The subscribed topic names as a set (the record keeps a list).
    pub fn topic_names(&self) -> BTreeSet<&str> {
        self.subscription
            .subscribed_topic_names
            .iter()
            .map(String::as_str)
            .collect()
    }
}

/// The group states of the new protocol (`ConsumerGroup.ConsumerGroupState`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GroupState {
    /// No members.
    Empty,
    /// The group epoch is ahead of the target assignment's.
    Assigning,
    /// Some member is not yet stable at the target epoch.
    Reconciling,
    /// Every member is stable at the target epoch.
    Stable,
}

impl GroupState {
    /// Kafka's name for it (DescribeGroups, ListGroups).
    pub fn name(self) -> &'static str {
        match self {
            GroupState::Empty => "Empty",
            GroupState::Assigning => "Assigning",
            GroupState::Reconciling => "Reconciling",
            GroupState::Stable => "Stable",
        }
    }
}

/// One KIP-848 group.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ConsumerGroup {
    /// Its id.
    pub group_id: String,
    /// The group epoch (record type 3).
    pub group_epoch: i32,
    /// The subscribed topics' metadata at the last computation (record type 4).
    pub subscription_metadata: BTreeMap<String, TopicMetadata>,
    /// Its members by id.
    pub members: BTreeMap<String, Member>,
    /// The target assignment's epoch (record type 6; -1 after its tombstone).
    pub assignment_epoch: i32,
    /// Each member's target assignment (record type 7).
    pub target: BTreeMap<String, Assignment>,
    /// The cause of the last group-epoch bump or membership event, for logs and describe.
    pub last_cause: Option<RebalanceCause>,
}

impl ConsumerGroup {
    /// An empty group at epoch 0.
    pub fn new(group_id: &str) -> Self {
        ConsumerGroup {
            group_id: group_id.to_string(),
            ..ConsumerGroup::default()
        }
    }

    /// Its state, derived as Kafka derives it.
    pub fn state(&self) -> GroupState {
        if self.members.is_empty() {
            GroupState::Empty
        } else if self.group_epoch > self.assignment_epoch {
            GroupState::Assigning
        } else if self
            .members
            .values()
            .all(|m| m.is_reconciled_to(self.assignment_epoch))
        {
            GroupState::Stable
        } else {
            GroupState::Reconciling
        }
    }

    /// The member holding `instance_id`, if any.
    pub fn static_member(&self, instance_id: &str) -> Option<&Member> {
        self.members
            .values()
            .find(|m| m.subscription.instance_id.as_deref() == Some(instance_id))
    }

    /// The partitions owned (assigned or pending revocation) by members other than
    /// `member_id`: a partition in here is not free to give to `member_id`.
    pub fn owned_by_others(&self, member_id: &str) -> BTreeSet<(Uuid, i32)> {
        self.members
            .values()
            .filter(|m| m.member_id != member_id)
            .flat_map(|m| {
                m.current
                    .assigned
                    .iter()
                    .chain(&m.current.pending_revocation)
            })
            .flat_map(|(topic, ids)| ids.iter().map(move |id| (*topic, *id)))
            .collect()
    }

    /// The target assignment of `member_id`, or of the member it replaces as `instance_id`.
    pub fn target_of(&self, member_id: &str, instance_id: Option<&str>) -> Assignment {
        if let Some(target) = self.target.get(member_id) {
            return target.clone();
        }
        instance_id
            .and_then(|id| self.static_member(id))
            .and_then(|m| self.target.get(&m.member_id))
            .cloned()
            .unwrap_or_default()
    }
}

/// Every KIP-848 group of one partition.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ConsumerGroups {
    /// Groups by id.
    pub groups: BTreeMap<String, ConsumerGroup>,
}

impl ConsumerGroup {
    /// The records deleting this group when it has no members (Kafka's
    /// `ConsumerGroup.createGroupTombstoneRecords`): each target assignment, the target
    /// epoch, the subscription metadata and last the group epoch. Never its offsets: those
    /// are the offsets code's (DeleteGroups tombstones them, a classic join keeps them).
    pub fn tombstones(&self) -> Vec<ConsumerGroupRecord> {
        let group_id = &self.group_id;
        self.target
            .keys()
            .map(|member_id| ConsumerGroupRecord::TargetAssignmentMember {
                group_id: group_id.clone(),
                member_id: member_id.clone(),
                partitions: None,
            })
            .chain([
                ConsumerGroupRecord::TargetAssignmentEpoch {
                    group_id: group_id.clone(),
                    epoch: None,
                },
                ConsumerGroupRecord::SubscriptionMetadata {
                    group_id: group_id.clone(),
                    topics: None,
                },
                ConsumerGroupRecord::GroupEpoch {
                    group_id: group_id.clone(),
                    epoch: None,
                },
            ])
            .collect()
    }
}

impl ConsumerGroups {
    /// The group called `group_id`.
    pub fn get(&self, group_id: &str) -> Option<&ConsumerGroup> {
        self.groups.get(group_id)
    }

    /// Sets the last cause of a group (not a record: the shell calls it once the records of
    /// the outcome that named it are written).
    pub fn note_cause(&mut self, group_id: &str, cause: RebalanceCause) {
        if let Some(group) = self.groups.get_mut(group_id) {
            group.last_cause = Some(cause);
        }
    }

    /// Applies one record as Kafka's replay does.
    ///
    /// # Errors
    /// A message when the record contradicts the state (a member record for a group that does
    /// not exist, a member tombstone before its assignment's): the load stops there.
    pub fn replay(&mut self, record: &ConsumerGroupRecord) -> Result<(), String> {
        let group_id = record.group_id();
        let missing = || format!("consumer group {group_id:?} does not exist");
        match record {
            ConsumerGroupRecord::GroupEpoch {
                epoch: Some(epoch), ..
            } => {
                self.create(group_id).group_epoch = *epoch;
            }
            ConsumerGroupRecord::GroupEpoch { epoch: None, .. } => {
                if self
                    .groups
                    .get(group_id)
                    .is_some_and(|group| !group.members.is_empty())
                {
                    return Err(format!("group {group_id:?} deleted with members"));
                }
                self.groups.remove(group_id);
            }
            ConsumerGroupRecord::SubscriptionMetadata { topics, .. } => {
                let group = self.groups.get_mut(group_id).ok_or_else(missing)?;
                group.subscription_metadata = topics.clone().unwrap_or_default();
            }
            ConsumerGroupRecord::MemberSubscription {
                member_id,
                subscription: Some(s),
                ..
            } => {
                let group = self.create(group_id);
                let member = group
                    .members
                    .entry(member_id.clone())
                    .or_insert_with(|| Member::new(member_id));
                member.subscription = s.clone();
            }
            ConsumerGroupRecord::MemberSubscription {
                member_id,
                subscription: None,
                ..
            } => {
                let group = self.groups.get_mut(group_id).ok_or_else(missing)?;
                let member = group
                    .members
                    .get(member_id)
                    .ok_or_else(|| format!("member {member_id:?} is unknown"))?;
                if member.current.member_epoch != LEAVE_GROUP_MEMBER_EPOCH {
                    return Err(format!(
                        "member {member_id:?} deleted before its current assignment"
                    ));
                }
                if group.target.contains_key(member_id) {
                    return Err(format!(
                        "member {member_id:?} deleted before its target assignment"
                    ));
                }
                group.members.remove(member_id);
            }
            ConsumerGroupRecord::TargetAssignmentEpoch { epoch, .. } => {
                let group = self.groups.get_mut(group_id).ok_or_else(missing)?;
                group.assignment_epoch = epoch.unwrap_or(-1);
            }
            ConsumerGroupRecord::TargetAssignmentMember {
                member_id,
                partitions,
                ..
            } => {
                let group = self.groups.get_mut(group_id).ok_or_else(missing)?;
                match partitions {
                    Some(partitions) => group.target.insert(member_id.clone(), partitions.clone()),
                    None => group.target.remove(member_id),
                };
            }
            ConsumerGroupRecord::CurrentAssignment {
                member_id,
                assignment,
                ..
            } => {
                let group = self.groups.get_mut(group_id).ok_or_else(missing)?;
                let member = group
                    .members
                    .get_mut(member_id)
                    .ok_or_else(|| format!("member {member_id:?} is unknown"))?;
                member.current = assignment.clone().unwrap_or(CurrentAssignment {
                    member_epoch: LEAVE_GROUP_MEMBER_EPOCH,
                    previous_member_epoch: LEAVE_GROUP_MEMBER_EPOCH,
                    state: MemberState::Stable,
                    assigned: Assignment::new(),
                    pending_revocation: Assignment::new(),
                });
            }
        }
        Ok(())
    }

    fn create(&mut self, group_id: &str) -> &mut ConsumerGroup {
        self.groups
            .entry(group_id.to_string())
            .or_insert_with(|| ConsumerGroup::new(group_id))
    }
}
