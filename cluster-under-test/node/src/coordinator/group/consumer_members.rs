//! The tokio side of KIP-848 consumer groups (part of [`GroupCoordinator`]): a
//! `ConsumerGroupHeartbeat` decided by the pure core ([`consumer_group::heartbeat()`]) on the
//! partition's latest state, its records appended as one batch through the runtime and
//! answered once replicated (the members' clocks change with the decision: see
//! [`clocks`]); describing, listing and deleting consumer groups.

pub mod clocks;

use std::collections::BTreeMap;

use kafka_protocol::ResponseError;

use crate::clock::now_ms;
use crate::coordinator::group::TOPIC;
use crate::coordinator::group::consumer_group::{
    self, ConsumerGroup, ConsumerGroupRecord, HeartbeatError, HeartbeatRequest, HeartbeatResponse,
    TopicMetadata, TopicsImage,
};
use crate::coordinator::group::shard::{GroupShard, group_record};
use crate::coordinator::group::{GroupCoordinator, WRITE_TIMEOUT};
use crate::coordinator::internal_topic::append_error;

/// A consumer group as ConsumerGroupDescribe shows it.
#[derive(Debug, Clone)]
pub struct DescribedConsumer {
    /// The replayed group.
    pub group: ConsumerGroup,
    /// The server assignor it uses (a member's choice, else the default).
    pub assignor: String,
    /// The cause of its last rebalance, in the seed's terms.
    pub last_cause: Option<&'static str>,
}

/// The group epoch `records` write for `group_id`, if they bump it.
pub(super) fn written_epoch(records: &[ConsumerGroupRecord]) -> Option<i32> {
    records.iter().find_map(|record| match record {
        ConsumerGroupRecord::GroupEpoch { epoch, .. } => *epoch,
        _ => None,
    })
}

fn error(error: ResponseError) -> HeartbeatError {
    HeartbeatError {
        error,
        message: String::new(),
    }
}

impl GroupCoordinator {
    /// The cluster's topics as the new protocol's assignors see them.
    pub(super) fn topics_image(&self) -> TopicsImage {
        self.replicas
            .image()
            .topics
            .iter()
            .map(|(name, topic)| {
                (
                    name.clone(),
                    TopicMetadata {
                        id: topic.id,
                        name: name.clone(),
                        partitions: topic.partitions.len() as i32,
                    },
                )
            })
            .collect()
    }

    /// ConsumerGroupHeartbeat: the decision on the latest state, its records written as one
    /// batch (with the tombstone of an empty classic group of the same id), answered once
    /// replicated.
    ///
    /// # Errors
    /// The decision's error with Kafka's message; `GROUP_ID_NOT_FOUND` when a classic group
    /// with members holds the id; the runtime's and the write's errors.
    pub async fn consumer_heartbeat(
        &self,
        request: HeartbeatRequest,
    ) -> Result<HeartbeatResponse, HeartbeatError> {
        let group_id = request.group_id.clone();
        let index = self.partition_of(&group_id);
        let epoch = self.runtime.loaded_epoch(index).map_err(error)?;
        let not_consumer = || HeartbeatError {
            error: ResponseError::GroupIdNotFound,
            message: format!("Group {group_id} is not a consumer group."),
        };
        let classic_members = self
            .live()
            .get(&group_id)
            .is_some_and(|live| !live.group.members.is_empty() || !live.group.pending.is_empty());
        if classic_members {
            return Err(not_consumer());
        }
        let topics = self.topics_image();
        let now = now_ms();
        let config = &self.settings.consumer;
        let decided = self
            .runtime
            .write_at(index, epoch, WRITE_TIMEOUT, |shard: &GroupShard| {
                let mut records = Vec::new();
                if let Some(meta) = shard.get(&group_id).and_then(|e| e.metadata.as_ref()) {
                    if !meta.members.is_empty() {
                        return Ok((Vec::new(), Err(not_consumer())));
                    }
                    // An empty classic group becomes a consumer group (Kafka's online upgrade).
                    records.push(group_record(&group_id, None));
                }
                match consumer_group::heartbeat(shard.consumer(), &request, now, config, &topics) {
                    Err(failed) => Ok((Vec::new(), Err(failed))),
                    Ok(outcome) => {
                        // The clocks change with the decision, whatever becomes of the write.
                        self.with_clocks(index, epoch, shard.consumer(), |clocks| {
                            clocks.timers.apply(&outcome.timers);
                        });
                        records.extend(outcome.records.iter().map(ConsumerGroupRecord::encode));
                        let epoch = written_epoch(&outcome.records).unwrap_or_else(|| {
                            shard.consumer().get(&group_id).map_or(0, |g| g.group_epoch)
                        });
                        Ok((records, Ok((outcome, epoch))))
                    }
                }
            })
            .await
            .map_err(|e| error(append_error(TOPIC, e)))?;
        let (outcome, group_epoch) = decided?;
        if let Some(cause) = &outcome.cause {
            self.note_cause(index, epoch, &group_id, cause, group_epoch);
        }
        Ok(outcome.response)
    }

    /// The consumer group `group_id` as its committed state has it, `None` when there is
    /// no consumer group of that id.
    ///
    /// # Errors
    /// `NOT_COORDINATOR`, `COORDINATOR_LOAD_IN_PROGRESS`.
    pub fn describe_consumer(
        &self,
        group_id: &str,
    ) -> Result<Option<DescribedConsumer>, ResponseError> {
        let index = self.partition_of(group_id);
        let epoch = self.runtime.loaded_epoch(index)?;
        let group = self
            .runtime
            .read(index, |shard| shard.consumer().get(group_id).cloned())?;
        let Some(group) = group else {
            return Ok(None);
        };
        let assignor = group
            .members
            .values()
            .find_map(|m| m.subscription.server_assignor.clone())
            .or_else(|| self.settings.consumer.assignors.first().cloned())
            .unwrap_or_default();
        let last_cause = self.last_cause(index, epoch, group_id);
        Ok(Some(DescribedConsumer {
            group,
            assignor,
            last_cause,
        }))
    }

    /// Every consumer group of the partitions this node serves: (id, Kafka's state name).
    pub fn list_consumer(&self) -> Vec<(String, &'static str)> {
        let mut listed = Vec::new();
        for index in 0..self.settings.partitions {
            if let Ok(groups) = self.runtime.read(index, |shard| {
                shard
                    .consumer()
                    .groups
                    .values()
                    .map(|g| (g.group_id.clone(), g.state().name()))
                    .collect::<Vec<_>>()
            }) {
                listed.extend(groups);
            }
        }
        listed
    }

    /// Whether `group_id` is a consumer group here: (no members, the topics its members
    /// subscribe to).
    ///
    /// # Errors
    /// The runtime's.
    pub(crate) fn consumer_subscriptions(
        &self,
        group_id: &str,
    ) -> Result<Option<(bool, Vec<String>)>, ResponseError> {
        let index = self.partition_of(group_id);
        self.runtime.read(index, |shard| {
            shard.consumer().get(group_id).map(|group| {
                let topics: std::collections::BTreeSet<String> = group
                    .members
                    .values()
                    .flat_map(|m| m.subscription.subscribed_topic_names.iter().cloned())
                    .collect();
                (group.members.is_empty(), topics.into_iter().collect())
            })
        })
    }

    /// DeleteGroups of a consumer group: only an empty one, its offsets and records
    /// tombstoned in one batch (Kafka's `createGroupTombstoneRecords`).
    ///
    /// # Errors
    /// `NON_EMPTY_GROUP`, `GROUP_ID_NOT_FOUND` (deleted meanwhile), the runtime's and the
    /// write's.
    pub(crate) async fn delete_consumer_group(&self, group_id: &str) -> Result<(), ResponseError> {
        let index = self.partition_of(group_id);
        self.runtime
            .write(index, WRITE_TIMEOUT, |shard: &GroupShard| {
                let group = shard
                    .consumer()
                    .get(group_id)
                    .ok_or(ResponseError::GroupIdNotFound)?;
                if !group.members.is_empty() {
                    return Err(ResponseError::NonEmptyGroup);
                }
                let mut records: Vec<_> = shard
                    .get(group_id)
                    .map(|entry| {
                        entry
                            .offsets
                            .keys()
                            .map(|(topic, partition)| {
                                super::shard::offset_tombstone(group_id, topic, *partition)
                            })
                            .collect()
                    })
                    .unwrap_or_default();
                records.extend(group.tombstones().iter().map(ConsumerGroupRecord::encode));
                Ok((records, ()))
            })
            .await
            .map_err(|error| append_error(TOPIC, error))?;
        tracing::info!(group = group_id, "consumer group deleted");
        Ok(())
    }

    /// Before a classic JoinGroup: an empty consumer group of that id is tombstoned (not its
    /// offsets), decided on the partition's latest state, and answered once replicated.
    ///
    /// # Errors
    /// `INCONSISTENT_GROUP_PROTOCOL` when the consumer group has members; the runtime's and
    /// the write's.
    pub(crate) async fn delete_empty_consumer_group(
        &self,
        group_id: &str,
    ) -> Result<(), ResponseError> {
        let index = self.partition_of(group_id);
        if self
            .runtime
            .read(index, |shard| shard.consumer().get(group_id).is_none())?
        {
            return Ok(());
        }
        let deleted = self
            .runtime
            .write(index, WRITE_TIMEOUT, |shard: &GroupShard| {
                let Some(group) = shard.consumer().get(group_id) else {
                    return Ok((Vec::new(), false));
                };
                if !group.members.is_empty() {
                    return Err(ResponseError::InconsistentGroupProtocol);
                }
                let records = group
                    .tombstones()
                    .iter()
                    .map(ConsumerGroupRecord::encode)
                    .collect();
                Ok((records, true))
            })
            .await
            .map_err(|error| append_error(TOPIC, error))?;
        if deleted {
            tracing::info!(
                group = group_id,
                "empty consumer group deleted for a classic join"
            );
        }
        Ok(())
    }

    /// OffsetFetch v9's check on a consumer group: the member fetches at its epoch. Nothing
    /// to check for a classic group or a group this partition does not have.
    ///
    /// # Errors
    /// `UNKNOWN_MEMBER_ID`, `STALE_MEMBER_EPOCH`, the runtime's.
    pub fn validate_consumer_fetch(
        &self,
        group_id: &str,
        member_id: Option<&str>,
        member_epoch: i32,
    ) -> Result<(), ResponseError> {
        let index = self.partition_of(group_id);
        self.runtime.read(index, |shard| {
            shard.consumer().get(group_id).map_or(Ok(()), |group| {
                group.validate_offset_fetch(member_id, member_epoch)
            })
        })?
    }
}

/// The topic names of the image by id, for answers that name a topic id's topic.
pub fn topic_names(image: &crate::metadata::MetadataImage) -> BTreeMap<uuid::Uuid, String> {
    image
        .topics
        .iter()
        .map(|(name, topic)| (topic.id, name.clone()))
        .collect()
}
