//! The consumer without groups: `assign`, `seek` (earliest, latest, offset), `poll` returning
//! records with offsets, position tracking, `auto.offset.reset` on `OFFSET_OUT_OF_RANGE`,
//! metadata refresh on leader changes, and truncation detection with leader epochs (KIP-320).
//!
//! Truncation detection, as Kafka's consumer does it: each position remembers the leader
//! epoch of the last record consumed. When the partition's leader epoch in the metadata moves
//! past the one the position was validated against, the consumer asks the new leader
//! (`OffsetForLeaderEpoch`) where that epoch ends. An end offset below the position means the
//! log was truncated under us: with `auto.offset.reset=none` that is
//! [`Error::LogTruncation`]; otherwise the position moves back to the divergence point and
//! the event is kept for [`Consumer::take_truncations`]. A broker that does not serve
//! `OffsetForLeaderEpoch` skips validation, as Kafka's client does with old brokers.
//!
//! `isolation.level` (read_uncommitted by default, read_committed) is sent with Fetch and
//! ListOffsets; what read_committed filters lives in [`isolation`].

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::{ApiKey, FetchRequest, TopicName};
use kafka_protocol::protocol::StrBytes;

mod buffer;
pub mod group;
pub mod isolation;
mod positions;
mod ranges;

pub use positions::truncation_point;
pub use ranges::{FetchRange, Position};

use crate::cluster::{Cluster, ClusterSettings};
use crate::config::ConsumerConfig;
use crate::error::{Error, Result};
use crate::ids::{BrokerId, LeaderEpoch, Offset, TopicPartition};
use crate::outcome::classify_code;
use isolation::{AbortedTransactionFilter, BatchVerdict};

/// How long past its deadline a poll waits for fetch answers already on their way: a
/// broker holds an empty fetch until `max_wait`, which ends at the deadline.
pub const RESPONSE_GRACE: Duration = Duration::from_millis(50);

/// The fetches of one poll, each answering with its leader.
type Fetches = tokio::task::JoinSet<(BrokerId, Result<kafka_protocol::messages::FetchResponse>)>;

/// Where to move a position.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SeekTo {
    /// The log start offset.
    Earliest,
    /// The log end offset.
    Latest,
    /// This offset.
    Offset(Offset),
}

/// A consumed record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConsumerRecord {
    /// The partition.
    pub partition: TopicPartition,
    /// The record's offset.
    pub offset: Offset,
    /// The leader epoch the record was written in.
    pub leader_epoch: LeaderEpoch,
    /// Its timestamp, ms since the Unix epoch.
    pub timestamp_ms: i64,
    /// The key.
    pub key: Option<Bytes>,
    /// The value.
    pub value: Option<Bytes>,
    /// Headers.
    pub headers: Vec<(String, Option<Bytes>)>,
}

/// A truncation the consumer detected and recovered from by moving back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Truncation {
    /// The partition.
    pub partition: TopicPartition,
    /// The position before.
    pub position: Offset,
    /// Where it moved.
    pub divergent_offset: Offset,
}

#[derive(Debug, Clone, Default)]
struct PartitionState {
    /// The next offset to fetch; `None` until reset.
    position: Option<Offset>,
    /// Where to reset to when there is no position.
    reset: Option<SeekTo>,
    /// Leader epoch of the last consumed record.
    last_record_epoch: Option<LeaderEpoch>,
    /// The leader epoch the position was validated against.
    validated_epoch: Option<LeaderEpoch>,
    /// A group assigned the partition and its committed offset has not been fetched yet
    /// (Java's `INITIALIZING`): no reset to `auto.offset.reset` until the group answered.
    awaiting_committed: bool,
}

/// A consumer with manual assignment.
#[derive(Debug)]
pub struct Consumer {
    config: ConsumerConfig,
    cluster: Arc<Cluster>,
    partitions: BTreeMap<TopicPartition, PartitionState>,
    truncations: Vec<Truncation>,
    /// Leaders with fetches a poll stopped waiting for, since when (cleared by any answer).
    unanswered: HashMap<BrokerId, tokio::time::Instant>,
    /// Group membership after `subscribe` (`group/coordinator.rs`); `None` with `assign`.
    group: Option<Box<group::coordinator::GroupState>>,
    /// What fetches covered since the last `take_fetch_ranges`, per partition.
    fetched: BTreeMap<TopicPartition, FetchRange>,
    /// The rest of fetch answers one poll could not return, for the next (`buffer.rs`).
    kept: BTreeMap<TopicPartition, buffer::Kept>,
}

impl Consumer {
    /// A consumer from Kafka properties.
    ///
    /// # Errors
    /// Invalid configuration.
    pub fn from_properties<'a>(
        properties: impl IntoIterator<Item = (&'a str, &'a str)>,
    ) -> Result<Consumer> {
        Ok(Consumer::new(ConsumerConfig::from_properties(properties)?))
    }

    /// A consumer.
    pub fn new(config: ConsumerConfig) -> Consumer {
        let cluster = Arc::new(Cluster::new(ClusterSettings {
            bootstrap_servers: config.bootstrap_servers.clone(),
            client_id: config.client_id.clone(),
            request_timeout: config.request_timeout,
            allow_auto_topic_creation: false,
        }));
        Consumer {
            config,
            cluster,
            partitions: BTreeMap::new(),
            truncations: Vec::new(),
            unanswered: HashMap::new(),
            group: None,
            fetched: BTreeMap::new(),
            kept: BTreeMap::new(),
        }
    }

    /// Replaces the assignment. Partitions kept keep their positions; new ones start with no
    /// position (reset by `auto.offset.reset` unless sought).
    pub fn assign(&mut self, partitions: impl IntoIterator<Item = TopicPartition>) {
        let mut next = BTreeMap::new();
        for tp in partitions {
            let state = self.partitions.remove(&tp).unwrap_or_default();
            next.insert(tp, state);
        }
        self.cluster.track_topics(next.keys().map(|tp| &*tp.topic));
        self.partitions = next;
    }

    /// The assigned partitions.
    pub fn assignment(&self) -> Vec<TopicPartition> {
        self.partitions.keys().cloned().collect()
    }

    /// Moves a position; earliest and latest are resolved at the next poll.
    ///
    /// # Errors
    /// [`Error::NotAssigned`].
    pub fn seek(&mut self, partition: &TopicPartition, to: SeekTo) -> Result<()> {
        let state = self
            .partitions
            .get_mut(partition)
            .ok_or_else(|| Error::NotAssigned {
                partition: partition.clone(),
            })?;
        state.awaiting_committed = false;
        match to {
            SeekTo::Offset(offset) => {
                state.position = Some(offset);
                state.reset = None;
            }
            other => {
                state.position = None;
                state.reset = Some(other);
            }
        }
        state.last_record_epoch = None;
        Ok(())
    }

    /// The next offset `poll` will return for `partition`, once known.
    pub fn position(&self, partition: &TopicPartition) -> Option<Offset> {
        self.partitions.get(partition).and_then(|s| s.position)
    }

    /// Truncations detected and recovered from since the last call.
    pub fn take_truncations(&mut self) -> Vec<Truncation> {
        std::mem::take(&mut self.truncations)
    }

    /// Returns records from the assigned partitions, waiting up to `timeout` for some.
    ///
    /// # Errors
    /// [`Error::OffsetOutOfRange`] and [`Error::LogTruncation`] with `auto.offset.reset=none`;
    /// non-retriable Kafka errors. Retriable ones (leader moved, connection lost) are handled
    /// by refreshing metadata and fetching again within the timeout.
    pub async fn poll(&mut self, timeout: Duration) -> Result<Vec<ConsumerRecord>> {
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            // A subscribed consumer looks at its group at least every heartbeat interval.
            self.group_poll(deadline).await?;
            let step = match &self.group {
                Some(group) => {
                    let look = if group.kip848.is_some() {
                        group::kip848_shell::RECONCILE_CHECK
                    } else {
                        self.config.group.heartbeat_interval
                    };
                    deadline.min(tokio::time::Instant::now() + look)
                }
                None => deadline,
            };
            let records = self.poll_once(step).await?;
            let remaining = deadline.saturating_duration_since(tokio::time::Instant::now());
            if !records.is_empty() || remaining.is_zero() {
                return Ok(records);
            }
        }
    }

    async fn poll_once(&mut self, deadline: tokio::time::Instant) -> Result<Vec<ConsumerRecord>> {
        if self.partitions.is_empty() {
            tokio::time::sleep_until(deadline).await;
            return Ok(Vec::new());
        }
        // Metadata, position resets and validation change state only after an answer, so
        // cutting them off at the deadline loses nothing: the next poll starts them again.
        match tokio::time::timeout_at(deadline + RESPONSE_GRACE, self.prepare(deadline)).await {
            Ok(Ok(true)) => {}
            Ok(Ok(false)) | Err(_) => return Ok(Vec::new()),
            Ok(Err(error)) => return Err(error),
        }
        // As Kafka's consumer: what earlier answers left is returned before fetching again.
        if let Some(records) = self.take_kept() {
            return Ok(records);
        }
        let remaining = deadline.saturating_duration_since(tokio::time::Instant::now());
        let max_wait = remaining.min(self.config.fetch_max_wait);
        let mut by_leader: HashMap<BrokerId, Vec<(TopicPartition, Offset, LeaderEpoch)>> =
            HashMap::new();
        for (tp, state) in &self.partitions {
            let (Some(position), Some((leader, epoch))) =
                (state.position, self.cluster.with_metadata(|m| m.leader(tp)))
            else {
                continue;
            };
            by_leader
                .entry(leader)
                .or_default()
                .push((tp.clone(), position, epoch));
        }
        if by_leader.is_empty() {
            self.backoff(deadline).await;
            return Ok(Vec::new());
        }
        let leaders: Vec<BrokerId> = by_leader.keys().copied().collect();
        let epochs: HashMap<TopicPartition, LeaderEpoch> = by_leader
            .values()
            .flatten()
            .map(|(tp, _, epoch)| (tp.clone(), *epoch))
            .collect();
        let mut fetches = Fetches::new();
        for (leader, partitions) in by_leader {
            let cluster = self.cluster.clone();
            let request = self.fetch_request(&partitions, max_wait);
            let timeout = self.config.request_timeout + max_wait;
            fetches.spawn(async move {
                let answer = async {
                    let connection = cluster.connection(leader).await?;
                    connection.send(ApiKey::Fetch, &request, timeout).await
                };
                (leader, answer.await)
            });
        }
        // A poll that fails must not move any position: the caller records it as a failed
        // read that returned nothing, so records taken from earlier partitions of the same
        // poll would otherwise be skipped without anyone having seen them.
        let saved: Vec<(TopicPartition, Option<Offset>, Option<LeaderEpoch>)> = self
            .partitions
            .iter()
            .map(|(tp, state)| (tp.clone(), state.position, state.last_record_epoch))
            .collect();
        let fetched = self.fetched.clone();
        match self
            .collect_fetches(fetches, leaders, &epochs, deadline)
            .await
        {
            Ok(records) => Ok(records),
            Err(error) => {
                self.fetched = fetched;
                // Nothing was kept when the fetches started (kept data is served first).
                self.kept.clear();
                for (tp, position, last_record_epoch) in saved {
                    if let Some(state) = self.partitions.get_mut(&tp) {
                        state.position = position;
                        state.last_record_epoch = last_record_epoch;
                    }
                }
                Err(error)
            }
        }
    }

    /// What a fetch needs first: leaders that stopped answering given up on, metadata for
    /// partitions without a known leader, positions reset and validated. False when the poll
    /// should return empty (no metadata; it backed off).
    async fn prepare(&mut self, deadline: tokio::time::Instant) -> Result<bool> {
        self.give_up_on_silent_leaders();
        let unknown = self
            .partitions
            .keys()
            .any(|tp| self.cluster.with_metadata(|m| m.leader(tp).is_none()));
        if unknown && let Err(error) = self.cluster.refresh_metadata(&[]).await {
            tracing::debug!(%error, "consumer metadata refresh failed");
            self.backoff(deadline).await;
            return Ok(false);
        }
        self.reset_positions().await?;
        self.validate_positions().await?;
        Ok(true)
    }

    /// A leader whose fetches have gone unanswered for longer than `request.timeout.ms`
    /// (polls stopped waiting for them at their deadlines) is treated as Kafka's client
    /// treats a request timeout: its connection is closed and its partitions' leaders are
    /// looked up again, so a paused or cut-off leader does not keep the consumer waiting on it.
    fn give_up_on_silent_leaders(&mut self) {
        let now = tokio::time::Instant::now();
        let limit = self.config.request_timeout + self.config.fetch_max_wait;
        let silent: Vec<BrokerId> = self
            .unanswered
            .iter()
            .filter(|(_, since)| now.saturating_duration_since(**since) >= limit)
            .map(|(leader, _)| *leader)
            .collect();
        for leader in silent {
            tracing::debug!(
                broker = leader.0,
                "fetches unanswered past the request timeout"
            );
            self.unanswered.remove(&leader);
            self.cluster.disconnect(leader);
            for tp in self.partitions.keys() {
                if self.cluster.with_metadata(|m| m.leader(tp)).map(|(l, _)| l) == Some(leader) {
                    self.cluster.invalidate_leader(tp);
                }
            }
        }
    }

    /// Takes the records of every fetch response; the first non-retriable error ends the poll.
    ///
    /// It waits for the answers until the poll's deadline (plus [`RESPONSE_GRACE`]), not for
    /// the requests' own timeouts: fetches still unanswered then are dropped (their leaders
    /// noted in `unanswered`) and the poll returns what it has, as Kafka's `poll` returns at
    /// its timeout whatever its brokers do.
    async fn collect_fetches(
        &mut self,
        mut fetches: Fetches,
        mut waiting: Vec<BrokerId>,
        epochs: &HashMap<TopicPartition, LeaderEpoch>,
        deadline: tokio::time::Instant,
    ) -> Result<Vec<ConsumerRecord>> {
        let mut records = Vec::new();
        let mut refresh = false;
        loop {
            let joined =
                match tokio::time::timeout_at(deadline + RESPONSE_GRACE, fetches.join_next()).await
                {
                    Ok(Some(joined)) => joined,
                    Ok(None) => break,
                    Err(_) => {
                        let now = tokio::time::Instant::now();
                        for leader in waiting {
                            self.unanswered.entry(leader).or_insert(now);
                        }
                        // Dropping `fetches` aborts them; their connections stay open.
                        break;
                    }
                };
            let Ok((leader, answer)) = joined else {
                continue;
            };
            waiting.retain(|l| *l != leader);
            self.unanswered.remove(&leader);
            let response = match answer {
                Ok(response) => response,
                Err(error) => {
                    tracing::debug!(%error, "fetch failed");
                    refresh = true;
                    continue;
                }
            };
            for topic in response.responses {
                let name: std::sync::Arc<str> = topic.topic.0.as_str().into();
                for partition in topic.partitions {
                    let tp = TopicPartition::new(name.clone(), partition.partition_index);
                    match partition.error_code {
                        0 => {
                            let Some(&leader_epoch) = epochs.get(&tp) else {
                                continue;
                            };
                            let filter = AbortedTransactionFilter::new(
                                self.config.isolation_level,
                                isolation_aborted(&partition),
                            );
                            let answer = buffer::Answer {
                                last_stable_offset: partition.last_stable_offset,
                                high_watermark: partition.high_watermark,
                                leader_epoch,
                            };
                            let from = self.position(&tp);
                            let data = partition.records.unwrap_or_default();
                            self.take_records(&tp, data, filter, answer, &mut records);
                            if let (Some(from), Some(to)) = (from, self.position(&tp)) {
                                self.note_fetch(&tp, from, to, answer.range(from, to));
                            }
                        }
                        1 => self.out_of_range(&tp)?,
                        code => {
                            let class = classify_code(code).expect("non-zero");
                            if !class.retriable {
                                return Err(Error::broker("Fetch", code, Some(tp.to_string())));
                            }
                            if class.refresh_metadata {
                                self.cluster.invalidate_leader(&tp);
                                refresh = true;
                            }
                        }
                    }
                }
            }
        }
        if refresh {
            let _ = tokio::time::timeout_at(
                deadline + RESPONSE_GRACE,
                self.cluster.refresh_metadata(&[]),
            )
            .await;
            if records.is_empty() {
                self.backoff(deadline).await;
            }
        }
        Ok(records)
    }

    async fn backoff(&self, deadline: tokio::time::Instant) {
        let until = (tokio::time::Instant::now() + self.config.retry_backoff).min(deadline);
        tokio::time::sleep_until(until).await;
    }

    fn fetch_request(
        &self,
        partitions: &[(TopicPartition, Offset, LeaderEpoch)],
        max_wait: Duration,
    ) -> FetchRequest {
        let mut topics: Vec<FetchTopic> = Vec::new();
        for (tp, offset, epoch) in partitions {
            let data = FetchPartition::default()
                .with_partition(tp.partition.0)
                .with_fetch_offset(offset.0)
                .with_current_leader_epoch(epoch.0)
                .with_last_fetched_epoch(-1)
                .with_log_start_offset(-1)
                .with_partition_max_bytes(self.config.max_partition_fetch_bytes);
            match topics.iter_mut().find(|t| t.topic.0.as_str() == &*tp.topic) {
                Some(topic) => topic.partitions.push(data),
                None => topics.push(
                    FetchTopic::default()
                        .with_topic(TopicName(StrBytes::from_string(tp.topic.to_string())))
                        .with_partitions(vec![data]),
                ),
            }
        }
        FetchRequest::default()
            .with_replica_id(kafka_protocol::messages::BrokerId(-1))
            .with_max_wait_ms(i32::try_from(max_wait.as_millis()).unwrap_or(i32::MAX))
            .with_min_bytes(self.config.fetch_min_bytes)
            .with_max_bytes(self.config.fetch_max_bytes)
            .with_isolation_level(self.config.isolation_level.to_wire())
            .with_session_id(0)
            .with_session_epoch(-1)
            .with_topics(topics)
    }

    /// Returns `tp`'s records from fetched `data` into `out`, up to `max.poll.records` in
    /// all, moving its position; what the limit leaves is kept for the next polls
    /// (`buffer.rs`).
    fn take_records(
        &mut self,
        tp: &TopicPartition,
        data: Bytes,
        mut filter: AbortedTransactionFilter,
        answer: buffer::Answer,
        out: &mut Vec<ConsumerRecord>,
    ) {
        let limit = self.config.max_poll_records;
        let Some(state) = self.partitions.get_mut(tp) else {
            return;
        };
        let Some(mut position) = state.position else {
            return;
        };
        // A fetch may end in a partial batch (a broker cuts by bytes): keep every batch before
        // the first that does not decode, instead of dropping the whole response and stalling.
        // What the limit leaves is the tail of `data` from the batch it stopped at (`rest`,
        // its length): a slice of one handle, not a handle per batch.
        let whole = data.clone();
        // Room for what this answer can add, once, instead of growing `out` by doubling and
        // copying every record moved so far (a hint: a v2 record takes 7 bytes or more).
        out.reserve(limit.saturating_sub(out.len()).min(data.len() / 8));
        let mut batches = isolation::decode_batches(data, tp);
        let mut rest = None;
        'batches: loop {
            let start = batches.remaining();
            if out.len() >= limit {
                rest = Some(start);
                break;
            }
            let Some(batch) = batches.next() else { break };
            // Asked again for a batch it let through (kept after returning part of it), the
            // filter answers the same: deliver.
            let records = match filter.verdict(&batch) {
                BatchVerdict::Deliver => batch.records,
                // Skipped whole (aborted data, markers): the position moves past it.
                BatchVerdict::SkipAborted | BatchVerdict::SkipControl => {
                    vec![skipped_batch_end(batch.last_offset)]
                }
            };
            for record in records {
                if record.control || record.offset < position.0 {
                    if record.control && record.offset >= position.0 {
                        position = Offset(record.offset + 1);
                    }
                    continue;
                }
                if out.len() >= limit {
                    // Kept from this batch's start; its records below the position are
                    // skipped again when it is decoded next.
                    rest = Some(start);
                    break 'batches;
                }
                position = Offset(record.offset + 1);
                state.last_record_epoch = Some(LeaderEpoch(record.partition_leader_epoch));
                out.push(ConsumerRecord {
                    partition: tp.clone(),
                    offset: Offset(record.offset),
                    leader_epoch: LeaderEpoch(record.partition_leader_epoch),
                    timestamp_ms: record.timestamp,
                    key: record.key,
                    value: record.value,
                    headers: record
                        .headers
                        .into_iter()
                        .map(|(k, v)| (k.to_string(), v))
                        .collect(),
                });
            }
        }
        state.position = Some(position);
        if let Some(rest) = rest {
            self.keep(tp, whole.slice(whole.len() - rest..), filter, answer);
        }
    }
}

/// The aborted transactions of a read_committed fetch answer as (producer id, first offset).
fn isolation_aborted(
    partition: &kafka_protocol::messages::fetch_response::PartitionData,
) -> Vec<(i64, i64)> {
    partition
        .aborted_transactions
        .iter()
        .flatten()
        .map(|a| (a.producer_id.0, a.first_offset))
        .collect()
}

/// A stand-in control record at a skipped batch's last offset: the loop in `take_records`
/// moves the position past control records without returning them.
fn skipped_batch_end(last_offset: i64) -> kafka_protocol::records::Record {
    kafka_protocol::records::Record {
        transactional: false,
        control: true,
        delete_horizon: false,
        partition_leader_epoch: -1,
        producer_id: -1,
        producer_epoch: -1,
        timestamp_type: kafka_protocol::records::TimestampType::Creation,
        offset: last_offset,
        sequence: -1,
        timestamp: 0,
        key: None,
        value: None,
        headers: Default::default(),
    }
}

#[cfg(test)]
#[path = "consumer/tests.rs"]
mod tests;
