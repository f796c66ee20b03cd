//! DeleteGroups and OffsetDelete on the group coordinator (part of [`GroupCoordinator`]):
//! a group is deleted only when it has no members (its offsets and metadata tombstoned in
//! `__consumer_offsets`, its live state dropped); an offset is deleted only for a topic the
//! group's members are not subscribed to. Both answer once the tombstones are replicated. A
//! KIP-848 group is deleted by tombstoning its records (`consumer_members.rs`).

use kafka_protocol::ResponseError;

use crate::coordinator::group::TOPIC;
use crate::coordinator::group::classic_members::write_in_turn;
use crate::coordinator::group::shard::{GroupShard, group_record, offset_tombstone};
use crate::coordinator::group::view::GroupState;
use crate::coordinator::group::{GroupCoordinator, WRITE_TIMEOUT};
use crate::coordinator::internal_topic::append_error;

/// The topics of a `ConsumerProtocolSubscription` (every version starts with its version and
/// the topic array); `None` when the metadata is not one.
pub fn subscribed_topics(metadata: &[u8]) -> Option<Vec<String>> {
    let mut rest = metadata.get(2..)?;
    let count = i32::from_be_bytes(rest.get(..4)?.try_into().ok()?);
    rest = &rest[4..];
    let mut topics = Vec::new();
    for _ in 0..count.max(0) {
        let len = i16::from_be_bytes(rest.get(..2)?.try_into().ok()?);
        let len = usize::try_from(len).ok()?;
        topics.push(String::from_utf8(rest.get(2..2 + len)?.to_vec()).ok()?);
        rest = &rest[2 + len..];
    }
    Some(topics)
}

impl GroupCoordinator {
    /// The live state (or the written one) of `group_id`: its state and the topics its
    /// members subscribe to; `None` when the group does not exist.
    fn group_facts(
        &self,
        group_id: &str,
    ) -> Result<Option<(GroupState, Vec<String>)>, ResponseError> {
        let index = self.partition_of(group_id);
        let known = self
            .runtime
            .read(index, |shard| shard.get(group_id).is_some())?;
        if !known && !self.live().contains_key(group_id) {
            return Ok(None);
        }
        self.with_group(group_id, |live, _| {
            let group = &live.group;
            let consumer = group.protocol_type.as_deref() == Some("consumer");
            let topics = group
                .members
                .values()
                .flat_map(|m| m.protocols.iter().map(|(_, meta)| meta.clone()))
                .filter(|_| consumer)
                .flat_map(|meta| subscribed_topics(&meta).unwrap_or_default())
                .collect();
            let exists = group.state != GroupState::Empty || known;
            exists.then_some((group.state, topics))
        })
    }

    /// DeleteGroups of one group.
    ///
    /// # Errors
    /// `GROUP_ID_NOT_FOUND`, `NON_EMPTY_GROUP`, the runtime's and the write's.
    pub async fn delete_group(&self, group_id: &str) -> Result<(), ResponseError> {
        if self.consumer_subscriptions(group_id)?.is_some() {
            return self.delete_consumer_group(group_id).await;
        }
        let Some((state, _)) = self.group_facts(group_id)? else {
            return Err(ResponseError::GroupIdNotFound);
        };
        if state != GroupState::Empty {
            return Err(ResponseError::NonEmptyGroup);
        }
        // Checked and marked Dead in one step, so no JoinGroup slips in between "the group is
        // empty" and its tombstones; its turn puts the tombstones after every write of the
        // group decided before.
        let turn = self.with_group(group_id, |live, _| {
            live.group.begin_delete().map(|()| live.take_turn())
        })??;
        let index = self.partition_of(group_id);
        let id = group_id.to_owned();
        let records = move |shard: &GroupShard| {
            let mut records: Vec<_> = shard
                .get(&id)
                .map(|entry| {
                    entry
                        .offsets
                        .keys()
                        .map(|(topic, partition)| offset_tombstone(&id, topic, *partition))
                        .collect()
                })
                .unwrap_or_default();
            records.push(group_record(&id, None));
            records
        };
        if let Err(error) = write_in_turn(&self.runtime, index, turn, records).await {
            let _ = self.with_group(group_id, |live, _| live.group.abort_delete());
            return Err(error);
        }
        self.live().remove(group_id);
        tracing::info!(group = group_id, "group deleted");
        Ok(())
    }

    /// OffsetDelete: deletes the offsets of `partitions` whose topic no member subscribes to;
    /// the others answer `GROUP_SUBSCRIBED_TO_TOPIC`.
    ///
    /// # Errors
    /// `GROUP_ID_NOT_FOUND`, the runtime's and the write's.
    pub async fn delete_offsets(
        &self,
        group_id: &str,
        partitions: &[(String, i32)],
    ) -> Result<Vec<Option<ResponseError>>, ResponseError> {
        let subscribed = match self.consumer_subscriptions(group_id)? {
            Some((_, topics)) => topics,
            None => match self.group_facts(group_id)? {
                Some((_, topics)) => topics,
                None => return Err(ResponseError::GroupIdNotFound),
            },
        };
        let errors: Vec<Option<ResponseError>> = partitions
            .iter()
            .map(|(topic, _)| {
                subscribed
                    .contains(topic)
                    .then_some(ResponseError::GroupSubscribedToTopic)
            })
            .collect();
        let index = self.partition_of(group_id);
        self.runtime
            .write(index, WRITE_TIMEOUT, |shard| {
                let entry = shard.get(group_id);
                let records = partitions
                    .iter()
                    .zip(&errors)
                    .filter(|(_, error)| error.is_none())
                    .filter(|((topic, partition), _)| {
                        entry.is_some_and(|e| e.offsets.contains_key(&(topic.clone(), *partition)))
                    })
                    .map(|((topic, partition), _)| offset_tombstone(group_id, topic, *partition))
                    .collect();
                Ok((records, ()))
            })
            .await
            .map_err(|error| append_error(TOPIC, error))?;
        Ok(errors)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn subscriptions_name_their_topics() {
        // ConsumerProtocolSubscription v1: version, topics ["a", "bc"], user data, owned.
        let metadata =
            b"\x00\x01\x00\x00\x00\x02\x00\x01a\x00\x02bc\xff\xff\xff\xff\x00\x00\x00\x00";
        assert_eq!(
            subscribed_topics(metadata),
            Some(vec!["a".to_owned(), "bc".to_owned()])
        );
        assert_eq!(
            subscribed_topics(b"\x00\x01\x00\x00\x00\x02\x00\x01a"),
            None
        );
        assert_eq!(subscribed_topics(b""), None);
    }
}
