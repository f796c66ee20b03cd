//! [`GroupShard`]: the state of one `__consumer_offsets` partition (Kafka's
//! `GroupCoordinatorShard` for that partition: committed offsets and the last written
//! metadata of each group), rebuilt by replaying its `OffsetCommit*`/`GroupMetadata*`
//! records, and the records the coordinator writes.

use std::collections::BTreeMap;
use std::sync::Arc;

use crate::coordinator::group::consumer_group::{ConsumerGroupRecord, ConsumerGroups};
use crate::coordinator::group::record::{self, GroupKey, GroupValue, OffsetValue};
use crate::coordinator::group::txn_offsets::PendingTxnOffsets;
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
    /// The replay position of each committed offset's record.
    pub written_at: BTreeMap<TopicPartition, u64>,
}

/// Every group of one partition of `__consumer_offsets`.
#[derive(Debug, Clone, Default)]
pub struct GroupShard {
    /// Groups by id; values are shared so the runtime's copy of the latest state stays cheap.
    groups: BTreeMap<String, Arc<GroupEntry>>,
    /// Offsets written in transactions not ended yet.
    txn: PendingTxnOffsets,
    /// How many records (and markers) were replayed: a record's position in the log order.
    position: u64,
    /// The KIP-848 consumer groups of the partition (record types 3 to 8).
    consumer: ConsumerGroups,
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

    /// The KIP-848 consumer groups of the partition.
    pub fn consumer(&self) -> &ConsumerGroups {
        &self.consumer
    }

    /// The offsets of open transactions.
    pub fn pending_txn(&self) -> &PendingTxnOffsets {
        &self.txn
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
        self.position += 1;
        if let Some(consumer) = ConsumerGroupRecord::decode(record)? {
            return self.consumer.replay(&consumer);
        }
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
                        let entry = self.entry(group.clone());
                        entry.offsets.remove(&(topic.clone(), partition));
                        entry.written_at.remove(&(topic, partition));
                        self.forget_if_empty(&group);
                    }
                }
                Some(value) => {
                    let value = record::decode_offset_value(value)?;
                    let position = self.position;
                    let entry = self.entry(group);
                    entry.offsets.insert((topic.clone(), partition), value);
                    entry.written_at.insert((topic, partition), position);
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

    /// An offset written by TxnOffsetCommit is staged for its producer; other records of a
    /// transaction replay as usual.
    fn replay_transactional(
        &mut self,
        producer_id: i64,
        record: &CoordinatorRecord,
    ) -> Result<(), String> {
        let key = record
            .key
            .as_ref()
            .ok_or_else(|| "a __consumer_offsets record without a key".to_owned())?;
        let GroupKey::Offset {
            group,
            topic,
            partition,
        } = record::decode_key(key)?
        else {
            return self.replay(record);
        };
        self.position += 1;
        match &record.value {
            None => self.txn.unstage(producer_id, &group, &(topic, partition)),
            Some(value) => {
                let value = record::decode_offset_value(value)?;
                self.txn.stage(
                    producer_id,
                    &group,
                    (topic, partition),
                    value,
                    self.position,
                );
            }
        }
        Ok(())
    }

    /// A COMMIT marker makes the producer's staged offsets committed, each unless an offset
    /// of the same partition was committed after it was written (Kafka's
    /// `replayEndTransactionMarker`); an ABORT drops them.
    fn replay_end_transaction(&mut self, producer_id: i64, commit: bool) -> Result<(), String> {
        self.position += 1;
        let staged = self.txn.end(producer_id);
        if !commit {
            return Ok(());
        }
        for (group, offsets) in staged {
            let entry = self.entry(group);
            for (partition, staged) in offsets {
                if entry
                    .written_at
                    .get(&partition)
                    .is_none_or(|&at| at < staged.at)
                {
                    entry.offsets.insert(partition.clone(), staged.value);
                    entry.written_at.insert(partition, staged.at);
                }
            }
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
    fn transactional_offsets_apply_only_at_a_commit_marker() {
        let tp = ("t".to_owned(), 0);
        let mut shard = GroupShard::default();
        shard
            .replay_transactional(7, &offset_record("g", "t", 0, &offset(5)))
            .unwrap();
        shard
            .replay_transactional(8, &offset_record("g", "t", 1, &offset(50)))
            .unwrap();
        assert!(shard.get("g").is_none());
        assert!(shard.pending_txn().is_pending("g", &tp));
        // Abort: dropped.
        shard.replay_end_transaction(8, false).unwrap();
        assert!(shard.get("g").is_none());
        // Commit: visible.
        shard.replay_end_transaction(7, true).unwrap();
        assert_eq!(shard.get("g").unwrap().offsets[&tp].offset, 5);
        assert!(!shard.pending_txn().is_pending("g", &tp));
        // A plain commit written after the transactional one, before the marker, wins.
        shard
            .replay_transactional(9, &offset_record("g", "t", 0, &offset(6)))
            .unwrap();
        shard
            .replay(&offset_record("g", "t", 0, &offset(20)))
            .unwrap();
        shard.replay_end_transaction(9, true).unwrap();
        assert_eq!(shard.get("g").unwrap().offsets[&tp].offset, 20);
        // A marker for a producer with nothing staged changes nothing.
        shard.replay_end_transaction(9, true).unwrap();
        assert_eq!(shard.get("g").unwrap().offsets.len(), 1);
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
