//! The tokio side of committed offsets (part of [`GroupCoordinator`]): OffsetCommit and
//! OffsetFetch decided by the pure [`offsets`], TxnOffsetCommit staged by
//! the pure [`txn_offsets`], and the transaction markers that make
//! staged offsets committed or drop them; each fenced against the group's
//! [`GroupView`] and written through the runtime, answered once
//! replicated.

use std::time::Duration;

use kafka_protocol::ResponseError;

use crate::clock::now_ms;
use crate::coordinator::group::offsets::{self, FetchedOffset};
use crate::coordinator::group::record::OffsetValue;
use crate::coordinator::group::shard::{GroupShard, offset_record};
use crate::coordinator::group::view::{CommitMember, GroupState, GroupView};
use crate::coordinator::group::{GroupCoordinator, TOPIC, WRITE_TIMEOUT, txn_offsets};
use crate::coordinator::internal_topic;
use crate::coordinator::runtime::{MarkerWrite, WriteAs};
use crate::replica::Verified;

/// One partition of an OffsetCommit, as the coordinator needs it.
#[derive(Debug, Clone)]
pub struct CommitPartition {
    /// The topic.
    pub topic: String,
    /// The partition.
    pub partition: i32,
    /// The offset.
    pub offset: i64,
    /// Its leader epoch.
    pub leader_epoch: i32,
    /// The client's metadata.
    pub metadata: Option<String>,
}

impl GroupCoordinator {
    /// What the fencing of a commit sees of `group` when no live group serves it: a group
    /// with written metadata or offsets and no live members is Empty at its generation.
    fn view(shard: &GroupShard, group: &str) -> Option<GroupView> {
        let entry = shard.get(group)?;
        Some(GroupView {
            state: GroupState::Empty,
            generation_id: entry.metadata.as_ref().map_or(0, |meta| meta.generation),
            members: Vec::new(),
            static_members: Default::default(),
        })
    }

    /// The live group a commit to `group` is fenced against, if any: the served group, or a
    /// group written with members but not served yet in this epoch (a new coordinator),
    /// served now so the commit is fenced against its members.
    ///
    /// # Errors
    /// The runtime's (`COORDINATOR_LOAD_IN_PROGRESS` while this leader's high watermark is
    /// below what its load read: taking it for "no metadata" would fence a live member as
    /// UNKNOWN_MEMBER_ID, where Kafka's client just retries the load error).
    fn fence_view(&self, group: &str, index: i32) -> Result<Option<GroupView>, ResponseError> {
        if let Some(view) = self.live_view(group) {
            return Ok(Some(view));
        }
        let written = self.runtime.read(index, |shard| {
            shard.get(group).is_some_and(|e| e.metadata.is_some())
        })?;
        if written {
            Ok(Some(self.with_group(group, |live, _| live.group.view())?))
        } else {
            Ok(None)
        }
    }

    /// OffsetCommit: checks `member` against the group and writes the offsets of
    /// `partitions` (those without a per-partition error), answering once replicated.
    ///
    /// # Errors
    /// The group-level error of every partition: [`offsets::validate_commit`]'s, the
    /// runtime's (`NOT_COORDINATOR`, `COORDINATOR_LOAD_IN_PROGRESS`) and the write's as
    /// [`internal_topic::append_error`] maps them.
    pub async fn commit_offsets(
        &self,
        group: &str,
        member: &CommitMember<'_>,
        version: i16,
        partitions: &[CommitPartition],
    ) -> Result<(), ResponseError> {
        let index = self.partition_of(group);
        let now = now_ms();
        let skip_fence = self.settings.skip_offset_fence;
        let live = self.fence_view(group, index)?;
        self.runtime
            .write(index, WRITE_TIMEOUT, |shard| {
                if let Some(consumer) = shard.consumer().get(group) {
                    // A KIP-848 group: the member commits at its current epoch.
                    if !skip_fence {
                        consumer.validate_offset_commit(
                            member.member_id,
                            member.generation_id,
                            false,
                            version,
                        )?;
                    }
                } else {
                    let view = live.clone().or_else(|| Self::view(shard, group));
                    offsets::validate_commit(view.as_ref(), member, version, skip_fence)?;
                }
                let records = partitions
                    .iter()
                    .map(|p| {
                        offset_record(
                            group,
                            &p.topic,
                            p.partition,
                            &OffsetValue {
                                offset: p.offset,
                                leader_epoch: p.leader_epoch,
                                metadata: p.metadata.clone().unwrap_or_default(),
                                commit_timestamp: now,
                            },
                        )
                    })
                    .collect();
                Ok((records, ()))
            })
            .await
            .map_err(|error| internal_topic::append_error(TOPIC, error))
    }

    /// OffsetFetch of one group: the committed offsets of `topics` (all when `None`). With
    /// `require_stable` it answers only once every write appended before it is committed.
    ///
    /// # Errors
    /// `NOT_COORDINATOR`, `COORDINATOR_LOAD_IN_PROGRESS`.
    pub async fn fetch_offsets(
        &self,
        group: &str,
        topics: Option<&[(String, Vec<i32>)]>,
        require_stable: bool,
    ) -> Result<Vec<(String, Vec<FetchedOffset>)>, ResponseError> {
        let index = self.partition_of(group);
        if require_stable {
            return self
                .runtime
                .write(index, WRITE_TIMEOUT, |shard| {
                    let mut fetched = offsets::fetch(shard.get(group), topics);
                    offsets::mark_unstable(&mut fetched, group, shard.pending_txn());
                    Ok((vec![], fetched))
                })
                .await
                .map_err(|error| internal_topic::append_error(TOPIC, error));
        }
        self.runtime
            .read(index, |shard| offsets::fetch(shard.get(group), topics))
    }

    /// TxnOffsetCommit: checks `member` against the group (KIP-447, [`check_member`]) and
    /// writes the offsets of `partitions` to the group's partition as one batch of the
    /// producer's transaction, answering once replicated. They stay pending until the
    /// transaction's marker reaches the partition ([`GroupCoordinator::complete_transaction`]).
    /// `verify` is the transaction coordinator's check that the partition is in the
    /// transaction (KIP-890), made once a verification guard is taken, only when the
    /// producer has no transaction open on the partition yet.
    ///
    /// # Errors
    /// The group-level error of every partition: `NOT_COORDINATOR`,
    /// `COORDINATOR_LOAD_IN_PROGRESS`, `COORDINATOR_NOT_AVAILABLE`, KIP-447's,
    /// `INVALID_PRODUCER_EPOCH`, `INVALID_TXN_STATE` and the verification's.
    ///
    /// [`check_member`]: txn_offsets::check_member
    pub async fn commit_txn_offsets<V>(
        &self,
        group: &str,
        producer: (i64, i16),
        member: &CommitMember<'_>,
        partitions: &[CommitPartition],
        verify: Option<V>,
    ) -> Result<(), ResponseError>
    where
        V: std::future::Future<Output = Result<(), ResponseError>>,
    {
        let index = self.partition_of(group);
        let now = now_ms();
        let live = self.fence_view(group, index)?;
        let verified = match verify {
            None => Verified::NotRequired,
            Some(verify) => {
                let partition = self
                    .replicas
                    .partition(TOPIC, index)
                    .ok_or(ResponseError::NotCoordinator)?;
                match partition.start_verification(producer.0, producer.1) {
                    None => Verified::WasOpen,
                    Some(ask) => {
                        verify.await?;
                        ask.verified()
                    }
                }
            }
        };
        let how = WriteAs::Transactional {
            producer_id: producer.0,
            producer_epoch: producer.1,
            verified,
        };
        self.runtime
            .write_as(index, WRITE_TIMEOUT, how, |shard| {
                if let Some(consumer) = shard.consumer().get(group) {
                    consumer.validate_txn_offset_commit(member.member_id, member.generation_id)?;
                } else {
                    let view = live.clone().or_else(|| Self::view(shard, group));
                    txn_offsets::check_member(view.as_ref(), member)?;
                }
                let records = partitions
                    .iter()
                    .map(|p| {
                        offset_record(
                            group,
                            &p.topic,
                            p.partition,
                            &OffsetValue {
                                offset: p.offset,
                                leader_epoch: p.leader_epoch,
                                metadata: p.metadata.clone().unwrap_or_default(),
                                commit_timestamp: now,
                            },
                        )
                    })
                    .collect();
                Ok((records, ()))
            })
            .await
            .map_err(|error| match error {
                // The offsets would join the producer's older transaction still open there
                // (its marker has not landed), or open one nobody verified: retried by every
                // client, as Kafka's group coordinator answers its verification's
                // CONCURRENT_TRANSACTIONS.
                ResponseError::ConcurrentTransactions => ResponseError::CoordinatorNotAvailable,
                other => internal_topic::append_error(TOPIC, other),
            })
    }

    /// WriteTxnMarkers for partition `index` of `__consumer_offsets`: the marker is written
    /// through the runtime, which replays it (the producer's pending offsets become committed
    /// or are dropped), answered once replicated.
    ///
    /// # Errors
    /// As a marker append: `NOT_LEADER_OR_FOLLOWER` while this node does not serve the
    /// partition (not its leader, or still loading: the transaction coordinator retries),
    /// `INVALID_PRODUCER_EPOCH`, `TRANSACTION_COORDINATOR_FENCED`, `NOT_ENOUGH_REPLICAS`,
    /// `REQUEST_TIMED_OUT`.
    pub async fn complete_transaction(
        &self,
        index: i32,
        marker: MarkerWrite,
        timeout: Duration,
    ) -> Result<(), ResponseError> {
        self.runtime
            .write_marker(index, timeout, marker)
            .await
            .map_err(|error| match error {
                ResponseError::NotCoordinator
                | ResponseError::CoordinatorLoadInProgress
                | ResponseError::CoordinatorNotAvailable => ResponseError::NotLeaderOrFollower,
                other => other,
            })
    }
}
