//! [`GroupShard`]: the state of one `__consumer_offsets` partition (Kafka's
//! `GroupCoordinatorShard` for that partition: committed offsets and the last written
//! metadata of each group), rebuilt by replaying its `OffsetCommit*`/`GroupMetadata*`
//! records, and the records the coordinator writes.

use std::collections::BTreeMap;
use std::sync::Arc;

use crate::coordinator::group::record::{self, GroupKey, GroupValue, OffsetValue};
use crate::coordinator::shard::{CoordinatorRecord, CoordinatorShard};

/// A partition, as (topic, index).
pub type TopicPartition = (String, i32);

/// What one partition knows of a group.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct GroupEntry {
    /// Committed offsets.
    pub offsets: BTreeMap<TopicPartition, OffsetValue>,
    /// The last generation written (None: never written, or deleted).
    pub metadata: Option<GroupValue>,
}

/// Every group of one partition of `__consumer_offsets`.
#[derive(Debug, Clone, Default)]
pub struct GroupShard {
    /// Groups by id; values are shared so the runtime's copy of the latest state stays cheap.
    groups: BTreeMap<String, Arc<GroupEntry>>,
}

impl GroupShard {
    /// What this partition knows of `group`.
    pub fn get(&self, group: &str) -> Option<&GroupEntry> {
        self.groups.get(group).map(Arc::as_ref)
    }

    /// Every group with its entry, in id order.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &GroupEntry)> {
        self.groups
            .iter()
            .map(|(id, entry)| (id.as_str(), entry.as_ref()))
    }

    fn entry(&mut self, group: String) -> &mut GroupEntry {
        Arc::make_mut(self.groups.entry(group).or_default())
    }

    fn forget_if_empty(&mut self, group: &str) {
        if self
            .groups
            .get(group)
            .is_some_and(|entry| entry.offsets.is_empty() && entry.metadata.is_none())
        {
            self.groups.remove(group);
        }
    }
}

/// The record committing `value` for (group, topic, partition).
pub fn offset_record(
    group: &str,
    topic: &str,
    partition: i32,
    value: &OffsetValue,
) -> CoordinatorRecord {
    CoordinatorRecord {
        key: Some(record::encode_offset_key(group, topic, partition)),
        value: Some(record::encode_offset_value(value)),
    }
}

/// The tombstone deleting the offset of (group, topic, partition).
pub fn offset_tombstone(group: &str, topic: &str, partition: i32) -> CoordinatorRecord {
    CoordinatorRecord {
        key: Some(record::encode_offset_key(group, topic, partition)),
        value: None,
    }
}

/// The record setting `group`'s metadata (`None`: the tombstone of a deleted group).
pub fn group_record(group: &str, value: Option<&GroupValue>) -> CoordinatorRecord {
    CoordinatorRecord {
        key: Some(record::encode_group_key(group)),
        value: value.map(record::encode_group_value),
    }
}

impl CoordinatorShard for GroupShard {
    fn replay(&mut self, record: &CoordinatorRecord) -> Result<(), String> {
        let key = record
            .key
            .as_ref()
            .ok_or_else(|| "a __consumer_offsets record without a key".to_owned())?;
        match record::decode_key(key)? {
            GroupKey::Offset {
                group,
                topic,
                partition,
            } => match &record.value {
                None => {
                    if self.groups.contains_key(&group) {
                        self.entry(group.clone())
                            .offsets
                            .remove(&(topic, partition));
                        self.forget_if_empty(&group);
                    }
                }
                Some(value) => {
                    let value = record::decode_offset_value(value)?;
                    self.entry(group).offsets.insert((topic, partition), value);
                }
            },
            GroupKey::Group(group) => match &record.value {
                None => {
                    if self.groups.contains_key(&group) {
                        self.entry(group.clone()).metadata = None;
                        self.forget_if_empty(&group);
                    }
                }
                Some(value) => {
                    let value = record::decode_group_value(value)?;
                    self.entry(group).metadata = Some(value);
                }
            },
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn offset(offset: i64) -> OffsetValue {
        OffsetValue {
            offset,
            leader_epoch: -1,
            metadata: String::new(),
            commit_timestamp: 1,
        }
    }

    #[test]
    fn replay_keeps_the_last_offset_and_tombstones_forget() {
        let mut shard = GroupShard::default();
        shard
            .replay(&offset_record("g", "t", 0, &offset(5)))
            .unwrap();
        shard
            .replay(&offset_record("g", "t", 0, &offset(9)))
            .unwrap();
        shard
            .replay(&offset_record("g", "t", 1, &offset(2)))
            .unwrap();
        let entry = shard.get("g").unwrap();
        assert_eq!(entry.offsets[&("t".to_owned(), 0)].offset, 9);
        assert_eq!(entry.offsets.len(), 2);
        let meta = GroupValue {
            protocol_type: "consumer".into(),
            generation: 3,
            protocol: Some("range".into()),
            leader: Some("m".into()),
            current_state_timestamp: 1,
            members: vec![],
        };
        shard.replay(&group_record("g", Some(&meta))).unwrap();
        assert_eq!(shard.get("g").unwrap().metadata.as_ref(), Some(&meta));
        shard.replay(&offset_tombstone("g", "t", 0)).unwrap();
        shard.replay(&offset_tombstone("g", "t", 1)).unwrap();
        assert!(shard.get("g").unwrap().offsets.is_empty());
        shard.replay(&group_record("g", None)).unwrap();
        assert!(shard.get("g").is_none());
        // Tombstones for what is not there change nothing.
        shard.replay(&offset_tombstone("x", "t", 0)).unwrap();
        assert!(shard.get("x").is_none());
        assert!(
            shard
                .replay(&CoordinatorRecord {
                    key: None,
                    value: None
                })
                .is_err()
        );
    }
}
