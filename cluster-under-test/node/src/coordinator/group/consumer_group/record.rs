//! The KIP-848 records of `__consumer_offsets` in Kafka 4.0's format: the key is the record
//! type as an INT16 followed by the key fields (INT16-length strings); the value is version 0
//! (INT16) of the flexible value message; a null value is a tombstone. Types:
//! 3 `ConsumerGroupMetadata` (group epoch), 4 `ConsumerGroupPartitionMetadata` (the subscribed
//! topics' metadata, still written by 4.0; its per-partition rack list is deprecated and
//! written empty), 5 `ConsumerGroupMemberMetadata` (a member's subscription),
//! 6 `ConsumerGroupTargetAssignmentMetadata` (assignment epoch), 7
//! `ConsumerGroupTargetAssignmentMember`, 8 `ConsumerGroupCurrentMemberAssignment`. Other
//! record types (offsets, classic groups, regular expressions) are not this module's.

use std::collections::{BTreeMap, BTreeSet};

use bytes::{BufMut, Bytes, BytesMut};
use uuid::Uuid;

use super::wire::{
    Reader, put_array_len, put_compact_nullable_string, put_compact_string, put_no_tags,
    put_string, put_uuid,
};
use crate::coordinator::CoordinatorRecord;

/// Partitions by topic id, in order (Kafka's `Map<Uuid, Set<Integer>>`).
pub type Assignment = BTreeMap<Uuid, BTreeSet<i32>>;

/// A member's reconciliation state (`modern/MemberState.java`, as coded in the log).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MemberState {
    /// Reconciled to its epoch.
    Stable,
    /// Must revoke partitions before moving on.
    UnrevokedPartitions,
    /// Waits for partitions other members still own.
    UnreleasedPartitions,
    /// A state this coordinator does not know (a newer Kafka wrote it).
    Unknown,
}

impl MemberState {
    /// The log's code.
    pub fn code(self) -> i8 {
        match self {
            MemberState::Stable => 0,
            MemberState::UnrevokedPartitions => 1,
            MemberState::UnreleasedPartitions => 2,
            MemberState::Unknown => 127,
        }
    }

    /// From the log's code (any other code is `Unknown`, as Kafka reads it).
    pub fn from_code(code: i8) -> Self {
        match code {
            0 => MemberState::Stable,
            1 => MemberState::UnrevokedPartitions,
            2 => MemberState::UnreleasedPartitions,
            _ => MemberState::Unknown,
        }
    }
}

/// One subscribed topic in `ConsumerGroupPartitionMetadataValue`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TopicMetadata {
    /// `TopicId`.
    pub id: Uuid,
    /// `TopicName`.
    pub name: String,
    /// `NumPartitions`.
    pub partitions: i32,
}

/// `ConsumerGroupMemberMetadataValue` v0.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct MemberSubscription {
    /// `InstanceId` (static membership).
    pub instance_id: Option<String>,
    /// `RackId`.
    pub rack_id: Option<String>,
    /// `ClientId`.
    pub client_id: String,
    /// `ClientHost`.
    pub client_host: String,
    /// `SubscribedTopicNames`.
    pub subscribed_topic_names: Vec<String>,
    /// `SubscribedTopicRegex`.
    pub subscribed_topic_regex: Option<String>,
    /// `RebalanceTimeoutMs` (-1 unknown).
    pub rebalance_timeout_ms: i32,
    /// `ServerAssignor`.
    pub server_assignor: Option<String>,
}

/// `ConsumerGroupCurrentMemberAssignmentValue` v0.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CurrentAssignment {
    /// `MemberEpoch`.
    pub member_epoch: i32,
    /// `PreviousMemberEpoch`.
    pub previous_member_epoch: i32,
    /// `State`.
    pub state: MemberState,
    /// `AssignedPartitions`.
    pub assigned: Assignment,
    /// `PartitionsPendingRevocation`.
    pub pending_revocation: Assignment,
}

/// One consumer-group record; `None` values are tombstones.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ConsumerGroupRecord {
    /// Type 3: the group epoch.
    GroupEpoch {
        /// The group.
        group_id: String,
        /// `Epoch`.
        epoch: Option<i32>,
    },
    /// Type 4: the subscribed topics' metadata, by name.
    SubscriptionMetadata {
        /// The group.
        group_id: String,
        /// `Topics`.
        topics: Option<BTreeMap<String, TopicMetadata>>,
    },
    /// Type 5: a member's subscription.
    MemberSubscription {
        /// The group.
        group_id: String,
        /// The member.
        member_id: String,
        /// The value.
        subscription: Option<MemberSubscription>,
    },
    /// Type 6: the target assignment's epoch.
    TargetAssignmentEpoch {
        /// The group.
        group_id: String,
        /// `AssignmentEpoch`.
        epoch: Option<i32>,
    },
    /// Type 7: a member's target assignment.
    TargetAssignmentMember {
        /// The group.
        group_id: String,
        /// The member.
        member_id: String,
        /// `TopicPartitions`.
        partitions: Option<Assignment>,
    },
    /// Type 8: a member's current assignment.
    CurrentAssignment {
        /// The group.
        group_id: String,
        /// The member.
        member_id: String,
        /// The value.
        assignment: Option<CurrentAssignment>,
    },
}

impl ConsumerGroupRecord {
    /// The group the record is about.
    pub fn group_id(&self) -> &str {
        match self {
            ConsumerGroupRecord::GroupEpoch { group_id, .. }
            | ConsumerGroupRecord::SubscriptionMetadata { group_id, .. }
            | ConsumerGroupRecord::MemberSubscription { group_id, .. }
            | ConsumerGroupRecord::TargetAssignmentEpoch { group_id, .. }
            | ConsumerGroupRecord::TargetAssignmentMember { group_id, .. }
            | ConsumerGroupRecord::CurrentAssignment { group_id, .. } => group_id,
        }
    }

    /// Encodes the record as Kafka writes it.
    pub fn encode(&self) -> CoordinatorRecord {
        let mut key = BytesMut::new();
        let mut value = BytesMut::new();
        value.put_i16(0);
        let (kind, group_id, member_id, has_value) = match self {
            ConsumerGroupRecord::GroupEpoch { group_id, epoch } => {
                epoch.iter().for_each(|epoch| value.put_i32(*epoch));
                (3, group_id, None, epoch.is_some())
            }
            ConsumerGroupRecord::SubscriptionMetadata { group_id, topics } => {
                if let Some(topics) = topics {
                    put_array_len(&mut value, topics.len());
                    for topic in topics.values() {
                        put_uuid(&mut value, topic.id);
                        put_compact_string(&mut value, &topic.name);
                        value.put_i32(topic.partitions);
                        put_array_len(&mut value, 0);
                        put_no_tags(&mut value);
                    }
                }
                (4, group_id, None, topics.is_some())
            }
            ConsumerGroupRecord::MemberSubscription {
                group_id,
                member_id,
                subscription,
            } => {
                if let Some(s) = subscription {
                    put_compact_nullable_string(&mut value, s.instance_id.as_deref());
                    put_compact_nullable_string(&mut value, s.rack_id.as_deref());
                    put_compact_string(&mut value, &s.client_id);
                    put_compact_string(&mut value, &s.client_host);
                    put_array_len(&mut value, s.subscribed_topic_names.len());
                    for name in &s.subscribed_topic_names {
                        put_compact_string(&mut value, name);
                    }
                    put_compact_nullable_string(&mut value, s.subscribed_topic_regex.as_deref());
                    value.put_i32(s.rebalance_timeout_ms);
                    put_compact_nullable_string(&mut value, s.server_assignor.as_deref());
                }
                (5, group_id, Some(member_id), subscription.is_some())
            }
            ConsumerGroupRecord::TargetAssignmentEpoch { group_id, epoch } => {
                epoch.iter().for_each(|epoch| value.put_i32(*epoch));
                (6, group_id, None, epoch.is_some())
            }
            ConsumerGroupRecord::TargetAssignmentMember {
                group_id,
                member_id,
                partitions,
            } => {
                if let Some(partitions) = partitions {
                    put_assignment(&mut value, partitions);
                }
                (7, group_id, Some(member_id), partitions.is_some())
            }
            ConsumerGroupRecord::CurrentAssignment {
                group_id,
                member_id,
                assignment,
            } => {
                if let Some(a) = assignment {
                    value.put_i32(a.member_epoch);
                    value.put_i32(a.previous_member_epoch);
                    value.put_i8(a.state.code());
                    put_assignment(&mut value, &a.assigned);
                    put_assignment(&mut value, &a.pending_revocation);
                }
                (8, group_id, Some(member_id), assignment.is_some())
            }
        };
        key.put_i16(kind);
        put_string(&mut key, group_id);
        if let Some(member_id) = member_id {
            put_string(&mut key, member_id);
        }
        put_no_tags(&mut value);
        CoordinatorRecord {
            key: Some(key.freeze()),
            value: has_value.then(|| value.freeze()),
        }
    }

    /// Decodes a record; `Ok(None)` when its key is not one of the types 3 to 8 (another
    /// owner's record, for the caller to dispatch).
    ///
    /// # Errors
    /// A message naming the record type when the bytes are not what Kafka writes.
    pub fn decode(record: &CoordinatorRecord) -> Result<Option<Self>, String> {
        let Some(key) = &record.key else {
            return Err("consumer offsets record without a key".to_string());
        };
        let mut reader = Reader(key);
        let kind = reader.i16()?;
        if !(3..=8).contains(&kind) {
            return Ok(None);
        }
        let decoded = decode_typed(kind, &mut reader, record.value.as_ref())
            .map_err(|error| format!("consumer group record type {kind}: {error}"))?;
        Ok(Some(decoded))
    }
}

fn decode_typed(
    kind: i16,
    key: &mut Reader<'_>,
    value: Option<&Bytes>,
) -> Result<ConsumerGroupRecord, String> {
    let group_id = key.string()?;
    let member_id = if matches!(kind, 5 | 7 | 8) {
        Some(key.string()?)
    } else {
        None
    };
    key.finish("key")?;
    let mut reader = value.map(|bytes| Reader(bytes));
    if let Some(reader) = &mut reader {
        let version = reader.i16()?;
        if version != 0 {
            return Err(format!("value version {version} is not 0"));
        }
    }
    let member = || member_id.clone().expect("member keys have a member id");
    let record = match kind {
        3 => ConsumerGroupRecord::GroupEpoch {
            group_id,
            epoch: reader.as_mut().map(Reader::i32).transpose()?,
        },
        4 => ConsumerGroupRecord::SubscriptionMetadata {
            group_id,
            topics: reader.as_mut().map(read_topics).transpose()?,
        },
        5 => ConsumerGroupRecord::MemberSubscription {
            group_id,
            member_id: member(),
            subscription: reader.as_mut().map(read_subscription).transpose()?,
        },
        6 => ConsumerGroupRecord::TargetAssignmentEpoch {
            group_id,
            epoch: reader.as_mut().map(Reader::i32).transpose()?,
        },
        7 => ConsumerGroupRecord::TargetAssignmentMember {
            group_id,
            member_id: member(),
            partitions: reader.as_mut().map(read_assignment).transpose()?,
        },
        _ => ConsumerGroupRecord::CurrentAssignment {
            group_id,
            member_id: member(),
            assignment: reader.as_mut().map(read_current).transpose()?,
        },
    };
    if let Some(mut reader) = reader {
        reader.skip_tags()?;
        reader.finish("value")?;
    }
    Ok(record)
}

fn put_assignment(buf: &mut BytesMut, assignment: &Assignment) {
    put_array_len(buf, assignment.len());
    for (topic, partitions) in assignment {
        put_uuid(buf, *topic);
        put_array_len(buf, partitions.len());
        partitions.iter().for_each(|p| buf.put_i32(*p));
        put_no_tags(buf);
    }
}

fn read_assignment(reader: &mut Reader<'_>) -> Result<Assignment, String> {
    let mut assignment = Assignment::new();
    for _ in 0..reader.array_len()? {
        let topic = reader.uuid()?;
        let mut partitions = BTreeSet::new();
        for _ in 0..reader.array_len()? {
            partitions.insert(reader.i32()?);
        }
        reader.skip_tags()?;
        if !partitions.is_empty() {
            assignment.entry(topic).or_default().extend(partitions);
        }
    }
    Ok(assignment)
}

fn read_topics(reader: &mut Reader<'_>) -> Result<BTreeMap<String, TopicMetadata>, String> {
    let mut topics = BTreeMap::new();
    for _ in 0..reader.array_len()? {
        let id = reader.uuid()?;
        let name = reader.compact_string()?;
        let partitions = reader.i32()?;
        // The deprecated racks by partition: read past them.
        for _ in 0..reader.array_len()? {
            reader.i32()?;
            for _ in 0..reader.array_len()? {
                reader.compact_string()?;
            }
            reader.skip_tags()?;
        }
        reader.skip_tags()?;
        topics.insert(
            name.clone(),
            TopicMetadata {
                id,
                name,
                partitions,
            },
        );
    }
    Ok(topics)
}

fn read_subscription(reader: &mut Reader<'_>) -> Result<MemberSubscription, String> {
    let instance_id = reader.compact_nullable_string()?;
    let rack_id = reader.compact_nullable_string()?;
    let client_id = reader.compact_string()?;
    let client_host = reader.compact_string()?;
    let mut subscribed_topic_names = Vec::new();
    for _ in 0..reader.array_len()? {
        subscribed_topic_names.push(reader.compact_string()?);
    }
    Ok(MemberSubscription {
        instance_id,
        rack_id,
        client_id,
        client_host,
        subscribed_topic_names,
        subscribed_topic_regex: reader.compact_nullable_string()?,
        rebalance_timeout_ms: reader.i32()?,
        server_assignor: reader.compact_nullable_string()?,
    })
}

fn read_current(reader: &mut Reader<'_>) -> Result<CurrentAssignment, String> {
    Ok(CurrentAssignment {
        member_epoch: reader.i32()?,
        previous_member_epoch: reader.i32()?,
        state: MemberState::from_code(reader.i8()?),
        assigned: read_assignment(reader)?,
        pending_revocation: read_assignment(reader)?,
    })
}

#[cfg(test)]
mod tests;
