//! The tokio side of KIP-848 consumer groups (part of [`GroupCoordinator`]): a
//! `ConsumerGroupHeartbeat` decided by the pure core ([`consumer_group::heartbeat`]) on the
//! partition's latest state, its records appended as one batch through the runtime and
//! answered once replicated; the members' clocks ([`Timers`]) of each loaded partition,
//! armed from its committed state when it loads in a leader epoch and checked every 100 ms,
//! an expired member fenced through the same write path ([`consumer_group::expire`]); and the
//! last rebalance cause of each group (never in the log: kept per partition and epoch, logged
//! as `group=.. cause=.. epoch=..`).

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use kafka_protocol::ResponseError;

use crate::coordinator::consumer_group::{
    self, ConsumerGroup, ConsumerGroupRecord, Expiry, HeartbeatError, HeartbeatRequest,
    HeartbeatResponse, TimerOp, Timers, TopicMetadata, TopicsImage,
};
use crate::coordinator::group::shard::{GroupShard, group_record};
use crate::coordinator::group::{GroupCoordinator, WRITE_TIMEOUT};
use crate::coordinator::txn::append_error;
use crate::replica::now_ms;

/// How often the clocks are checked.
const TICK: Duration = Duration::from_millis(100);

/// The clocks and last causes of one loaded partition, valid in one leader epoch.
#[derive(Debug, Default)]
pub struct PartitionClocks {
    epoch: i32,
    timers: Timers,
    causes: HashMap<String, &'static str>,
}

/// Every loaded partition's clocks, by partition index.
#[derive(Debug, Default)]
pub struct Clocks(Mutex<HashMap<i32, PartitionClocks>>);

impl Clocks {
    fn lock(&self) -> MutexGuard<'_, HashMap<i32, PartitionClocks>> {
        self.0
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

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
fn written_epoch(records: &[ConsumerGroupRecord]) -> Option<i32> {
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

/// What a written outcome leaves for the shell: its clock changes and its cause.
struct Written {
    timers: Vec<TimerOp>,
    cause: Option<consumer_group::RebalanceCause>,
    epoch: i32,
}

impl GroupCoordinator {
    /// The cluster's topics as the new protocol's assignors see them.
    fn topics_image(&self) -> TopicsImage {
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

    /// Applies a written outcome of partition `index` (loaded in `epoch`): its clock changes
    /// and, with a cause, the group's last cause and the log line naming it.
    fn apply_written(&self, index: i32, epoch: i32, group_id: &str, written: Written) {
        let mut clocks = self.clocks.lock();
        let Some(partition) = clocks.get_mut(&index).filter(|c| c.epoch == epoch) else {
            // Not armed yet in this epoch: the clock task arms every member from the
            // committed state, which holds this outcome's records.
            if let Some(cause) = &written.cause {
                tracing::info!(group = %group_id, cause = %cause.name(), epoch = written.epoch,
                    "consumer group rebalance");
            }
            return;
        };
        partition.timers.apply(&written.timers);
        if let Some(cause) = written.cause {
            tracing::info!(group = %group_id, cause = %cause.name(), epoch = written.epoch,
                "consumer group rebalance");
            partition.causes.insert(group_id.to_owned(), cause.name());
        }
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
            .write(index, WRITE_TIMEOUT, |shard: &GroupShard| {
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
                        records.extend(outcome.records.iter().map(ConsumerGroupRecord::encode));
                        let epoch = written_epoch(&outcome.records).unwrap_or_else(|| {
                            shard.consumer().get(&group_id).map_or(0, |g| g.group_epoch)
                        });
                        Ok((records, Ok((outcome, epoch))))
                    }
                }
            })
            .await
            .map_err(|e| error(append_error(e)))?;
        let (outcome, group_epoch) = decided?;
        self.apply_written(
            index,
            epoch,
            &group_id,
            Written {
                timers: outcome.timers,
                cause: outcome.cause,
                epoch: group_epoch,
            },
        );
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
        let last_cause = self
            .clocks
            .lock()
            .get(&index)
            .filter(|c| c.epoch == epoch)
            .and_then(|c| c.causes.get(group_id).copied());
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
            .map_err(append_error)?;
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
            .map_err(append_error)?;
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

    /// The new protocol's clocks: every 100 ms, arms the clocks of each partition newly
    /// loaded (every member's session from now, as Kafka does; its groups with members are
    /// logged `coordinator-moved`), drops those of partitions no longer served, and fences
    /// every member whose clock fired.
    pub(crate) async fn run_consumer_clocks(self: Arc<Self>) {
        let mut interval = tokio::time::interval(TICK);
        loop {
            interval.tick().await;
            let now = now_ms();
            let mut fired = Vec::new();
            for index in 0..self.settings.partitions {
                let Ok(epoch) = self.runtime.loaded_epoch(index) else {
                    self.clocks.lock().remove(&index);
                    continue;
                };
                let armed = self
                    .clocks
                    .lock()
                    .get(&index)
                    .is_some_and(|c| c.epoch == epoch);
                if !armed {
                    let session = self.settings.consumer.session_timeout_ms;
                    let Ok((timers, moved)) = self.runtime.read(index, |shard| {
                        let mut timers = Timers::default();
                        timers.on_loaded(shard.consumer(), now, session);
                        let moved: Vec<(String, i32)> = shard
                            .consumer()
                            .groups
                            .values()
                            .filter(|g| !g.members.is_empty())
                            .map(|g| (g.group_id.clone(), g.group_epoch))
                            .collect();
                        (timers, moved)
                    }) else {
                        continue;
                    };
                    let mut causes = HashMap::new();
                    for (group, group_epoch) in moved {
                        tracing::info!(group = %group, cause = %"coordinator-moved",
                            epoch = group_epoch, leader_epoch = epoch,
                            "consumer group loaded by a new coordinator");
                        causes.insert(group, "coordinator-moved");
                    }
                    self.clocks.lock().insert(
                        index,
                        PartitionClocks {
                            epoch,
                            timers,
                            causes,
                        },
                    );
                }
                let mut clocks = self.clocks.lock();
                if let Some(partition) = clocks.get_mut(&index)
                    && partition.timers.next_deadline().is_some_and(|d| d <= now)
                {
                    for expiry in partition.timers.take_expired(now) {
                        fired.push((index, epoch, expiry));
                    }
                }
            }
            for (index, epoch, expiry) in fired {
                let coordinator = Arc::clone(&self);
                tokio::spawn(async move { coordinator.fence_expired(index, epoch, expiry).await });
            }
        }
    }

    /// Fences the member whose clock fired, if the clock still applies; a failed write
    /// re-arms the clock a second later.
    async fn fence_expired(&self, index: i32, epoch: i32, expiry: Expiry) {
        let topics = self.topics_image();
        let written = self
            .runtime
            .write(index, WRITE_TIMEOUT, |shard: &GroupShard| {
                let Some(outcome) = consumer_group::expire(shard.consumer(), &expiry, &topics)
                else {
                    return Ok((Vec::new(), None));
                };
                let records = outcome
                    .records
                    .iter()
                    .map(ConsumerGroupRecord::encode)
                    .collect();
                let epoch = written_epoch(&outcome.records).unwrap_or_default();
                Ok((records, Some((outcome.timers, outcome.cause, epoch))))
            })
            .await;
        let group_id = match &expiry {
            Expiry::Session { group_id, .. } | Expiry::Rebalance { group_id, .. } => {
                group_id.clone()
            }
        };
        match written {
            Ok(None) => {}
            Ok(Some((timers, cause, group_epoch))) => self.apply_written(
                index,
                epoch,
                &group_id,
                Written {
                    timers,
                    cause,
                    epoch: group_epoch,
                },
            ),
            Err(failed) => {
                tracing::warn!(group = %group_id, error = ?failed, "fencing an expired member failed");
                let retry = now_ms() + 1_000;
                let op = match expiry {
                    Expiry::Session {
                        group_id,
                        member_id,
                    } => TimerOp::Session {
                        group_id,
                        member_id,
                        deadline_ms: retry,
                    },
                    Expiry::Rebalance {
                        group_id,
                        member_id,
                        member_epoch,
                    } => TimerOp::Rebalance {
                        group_id,
                        member_id,
                        member_epoch,
                        deadline_ms: retry,
                    },
                };
                if let Some(partition) = self
                    .clocks
                    .lock()
                    .get_mut(&index)
                    .filter(|c| c.epoch == epoch)
                {
                    partition.timers.apply(&[op]);
                }
            }
        }
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
