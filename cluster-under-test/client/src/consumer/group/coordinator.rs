//! The tokio shell of classic group membership, as `impl Consumer` methods: `subscribe`, the
//! join before a poll (JoinGroup with the MEMBER_ID_REQUIRED retry, the leader running the
//! assignor, SyncGroup; eager strategies revoke everything first, cooperative ones only what
//! the assignment moved), the heartbeat task started per generation and its findings acted on
//! at the next poll; a KIP-848 member's poll goes to `kip848_shell.rs` instead. Decisions live
//! in `membership.rs`; the coordinator's discovery in `discovery.rs`; commits, committed
//! offsets for new partitions and close in `commits.rs`.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use kafka_protocol::messages::join_group_request::JoinGroupRequestProtocol;
use kafka_protocol::messages::sync_group_request::SyncGroupRequestAssignment;
use kafka_protocol::messages::{ApiKey, GroupId, JoinGroupRequest, SyncGroupRequest};
use kafka_protocol::protocol::StrBytes;
use tokio::task::JoinHandle;
use tokio::time::Instant;

use super::assignor::{self, MemberSubscription};
use super::heartbeat::{self, Beat, Identity, Outcome};
use super::kip848::{Member848, State};
use super::kip848_shell::Kip848;
use super::membership::{GroupMember, Reaction, RebalanceCause, RebalanceEvent, codes, reaction};
use super::protocol::{self, CONSUMER_PROTOCOL_VERSION, Subscription};
use crate::config::{AssignmentStrategy, ConfigError, GroupConfig, GroupProtocol};
use crate::connection::Connection;
use crate::consumer::Consumer;
use crate::error::{Error, Result};
use crate::ids::{BrokerId, TopicPartition};

/// A callback told of every assignment change as it happens.
pub type RebalanceListener = Box<dyn FnMut(&RebalanceEvent) + Send>;

/// A subscribed consumer's group state.
pub struct GroupState {
    pub(super) config: GroupConfig,
    pub(super) group_id: String,
    pub(super) topics: Vec<String>,
    pub(super) member: GroupMember,
    pub(super) coordinator: Option<BrokerId>,
    pub(super) beat: Arc<Mutex<Beat>>,
    pub(super) heartbeat: Option<JoinHandle<()>>,
    pub(super) last_auto_commit: Instant,
    pub(super) events: Vec<RebalanceEvent>,
    /// Behind a mutex only so the consumer stays `Sync` (a poll holds `&self` across awaits).
    pub(super) listener: Option<Mutex<RebalanceListener>>,
    /// As this member's last assignment as leader saw them: the subscribed topics' partition
    /// counts (Java's `assignmentSnapshot`; `None` when it does not lead), and when they were
    /// last compared with the cluster's.
    pub(super) leader_counts: Option<(BTreeMap<String, i32>, Instant)>,
    /// The KIP-848 member (`group.protocol=consumer`); `None` for the classic protocol.
    pub(crate) kip848: Option<Kip848>,
}

impl std::fmt::Debug for GroupState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GroupState")
            .field("group_id", &self.group_id)
            .field("member", &self.member)
            .finish_non_exhaustive()
    }
}

impl GroupState {
    fn eager(&self) -> bool {
        !self
            .config
            .assignment_strategies
            .iter()
            .all(|s| s.is_cooperative())
    }

    pub(super) fn identity(&self) -> Identity {
        Identity {
            group_id: self.group_id.clone(),
            member_id: self.member.member_id.clone(),
            generation: self.member.generation,
            instance_id: self.config.group_instance_id.clone(),
        }
    }

    pub(super) fn stop_heartbeat(&mut self) {
        if let Some(task) = self.heartbeat.take() {
            task.abort();
        }
        if let Some(kip848) = self.kip848.as_mut() {
            kip848.stop();
        }
    }

    /// A KIP-848 member's id and epoch as its heartbeats last learned them, for commits
    /// (the member epoch is the generation of OffsetCommit v9); -1 while not in the group.
    pub(super) fn sync_identity(&mut self) {
        if let Some(kip848) = &self.kip848 {
            let core = kip848.core.lock().expect("kip848");
            self.member.member_id = core.member_id.clone();
            self.member.generation = if core.state == State::Member {
                core.member_epoch
            } else {
                -1
            };
        }
    }

    /// Moves the member's new events to the caller's queue, telling the listener.
    pub(super) fn publish(&mut self) {
        for event in self.member.take_events() {
            tracing::info!(
                generation = event.generation,
                member = %event.member_id,
                cause = event.cause.name(),
                assigned = ?event.assigned,
                revoked = ?event.revoked,
                "rebalance"
            );
            if let Some(listener) = self.listener.as_mut() {
                (listener.get_mut().expect("listener"))(&event);
            }
            self.events.push(event);
        }
    }
}

impl Drop for GroupState {
    fn drop(&mut self) {
        self.stop_heartbeat();
    }
}

impl Consumer {
    /// Joins `group.id` subscribed to `topics` with the configured `group.protocol`:
    /// partitions arrive through the rebalances (classic) or the reconciliations (KIP-848)
    /// that the next polls perform.
    ///
    /// # Errors
    /// No `group.id` configured.
    pub fn subscribe(&mut self, topics: impl IntoIterator<Item = impl Into<String>>) -> Result<()> {
        let config = self.config.group.clone();
        let Some(group_id) = config.group_id.clone() else {
            return Err(Error::Config(ConfigError::Missing { key: "group.id" }));
        };
        let mut topics: Vec<String> = topics.into_iter().map(Into::into).collect();
        topics.sort();
        topics.dedup();
        self.cluster.track_topics(topics.iter().map(String::as_str));
        match self.group.as_mut() {
            Some(group) => {
                group.topics = topics.clone();
                match group.kip848.as_mut() {
                    Some(kip848) => kip848.subscribe(topics),
                    None => group.member.rejoin = Some(RebalanceCause::Join),
                }
            }
            None => {
                let kip848 = (config.group_protocol == GroupProtocol::Consumer).then(|| {
                    Kip848::new(Member848::new(
                        uuid::Uuid::new_v4().to_string(),
                        topics.clone(),
                        config.group_instance_id.clone(),
                        config.max_poll_interval,
                        config.remote_assignor.clone(),
                    ))
                });
                self.group = Some(Box::new(GroupState {
                    config,
                    group_id,
                    topics,
                    member: GroupMember::new(),
                    coordinator: None,
                    beat: Arc::new(Mutex::new(Beat {
                        last_poll: Instant::now(),
                        outcome: None,
                        paused_until: None,
                    })),
                    heartbeat: None,
                    last_auto_commit: Instant::now(),
                    events: Vec::new(),
                    listener: None,
                    leader_counts: None,
                    kip848,
                }))
            }
        }
        Ok(())
    }

    /// Every assignment change since the last call, oldest first.
    pub fn take_rebalance_events(&mut self) -> Vec<RebalanceEvent> {
        self.group
            .as_mut()
            .map(|g| std::mem::take(&mut g.events))
            .unwrap_or_default()
    }

    /// Calls `listener` with every assignment change as it happens (events are still queued
    /// for [`Consumer::take_rebalance_events`]).
    pub fn set_rebalance_listener(
        &mut self,
        listener: impl FnMut(&RebalanceEvent) + Send + 'static,
    ) {
        if let Some(group) = self.group.as_mut() {
            group.listener = Some(Mutex::new(Box::new(listener)));
        }
    }

    /// The member id and generation, once joined.
    /// Under KIP-848 the generation is the member epoch, as its heartbeats last learned it.
    pub fn group_generation(&self) -> Option<(String, i32)> {
        let group = self.group.as_ref()?;
        if let Some(kip848) = &group.kip848 {
            let core = kip848.core.lock().expect("kip848");
            return (core.state == State::Member)
                .then(|| (core.member_id.clone(), core.member_epoch));
        }
        (group.member.generation >= 0)
            .then(|| (group.member.member_id.clone(), group.member.generation))
    }

    /// The group work of a poll: act on what the heartbeat task found, restart the poll
    /// clock, (re)join when needed (bounded by `deadline`: an unfinished join is resumed by
    /// the next poll with the same member id), auto-commit when due.
    pub(crate) async fn group_poll(&mut self, deadline: Instant) -> Result<()> {
        let Some(group) = self.group.as_mut() else {
            return Ok(());
        };
        if group.kip848.is_some() {
            return self.kip848_poll(deadline).await;
        }
        let outcome = {
            let mut beat = group.beat.lock().expect("beat");
            beat.last_poll = Instant::now();
            beat.outcome.take()
        };
        match outcome {
            None => {}
            Some(Outcome::Fatal(error)) => return Err(error),
            Some(Outcome::Rejoin) => {
                group.member.rejoin = Some(RebalanceCause::RebalanceInProgress)
            }
            Some(Outcome::Rediscover) => {
                group.coordinator = None;
                // The heartbeat stopped; rejoining is how a member finds its place again.
                group
                    .member
                    .rejoin
                    .get_or_insert(RebalanceCause::RebalanceInProgress);
            }
            Some(Outcome::Reset) | Some(Outcome::PollTimeout) => {
                let cause = if outcome == Some(Outcome::PollTimeout) {
                    RebalanceCause::PollTimeout
                } else {
                    RebalanceCause::MemberReset
                };
                // The partitions are lost, not revoked: no commit with a dead generation.
                group.member.revoke_all(cause.clone());
                group.member.reset();
                group.member.rejoin = Some(cause);
                group.publish();
                self.assign(Vec::new());
            }
        }
        if self
            .group
            .as_ref()
            .is_some_and(|g| g.member.rejoin.is_some())
        {
            match tokio::time::timeout_at(deadline, self.join_group()).await {
                Ok(result) => result?,
                Err(_) => tracing::debug!("join not finished by the poll's deadline"),
            }
        }
        // Cut off at the deadline, it changed nothing: the next poll asks again.
        if tokio::time::timeout_at(deadline, self.refresh_committed())
            .await
            .is_err()
        {
            tracing::debug!("committed offsets not fetched by the poll's deadline");
        }
        self.maybe_auto_commit().await;
        self.check_leader_metadata().await;
        Ok(())
    }

    /// A leader whose partition counts are older than `metadata.max.age.ms` looks again; when
    /// a subscribed topic's count changed, it rejoins (cause metadata-change), so the
    /// coordinator rebalances and the next assignment covers the new partitions.
    async fn check_leader_metadata(&mut self) {
        let max_age = self.config.metadata_max_age;
        let Some(group) = self.group.as_mut() else {
            return;
        };
        let Some((counts, checked)) = group.leader_counts.as_mut() else {
            return;
        };
        if checked.elapsed() < max_age || group.member.rejoin.is_some() {
            return;
        }
        *checked = Instant::now();
        let names: Vec<String> = counts.keys().cloned().collect();
        let wanted: Vec<&str> = names.iter().map(String::as_str).collect();
        if let Err(error) = self.cluster.refresh_metadata(&wanted).await {
            tracing::debug!(%error, "leader's metadata check failed");
            return;
        }
        let now: BTreeMap<String, i32> = self.cluster.with_metadata(|m| {
            wanted
                .iter()
                .filter_map(|t| m.partition_count(t).map(|n| ((*t).to_owned(), n as i32)))
                .collect()
        });
        let Some(group) = self.group.as_mut() else {
            return;
        };
        if let Some((counts, _)) = &group.leader_counts
            && *counts != now
        {
            tracing::info!(before = ?counts, after = ?now, "subscribed topics' partitions changed; rejoining");
            group.member.rejoin = Some(RebalanceCause::MetadataChange);
        }
    }

    /// Joins until the member holds an assignment that needs no follow-up round.
    async fn join_group(&mut self) -> Result<()> {
        loop {
            let group = self.group.as_mut().ok_or(Error::Closed)?;
            let Some(cause) = group.member.rejoin.clone() else {
                return Ok(());
            };
            group.stop_heartbeat();
            // Whoever leads the next generation takes the snapshot.
            group.leader_counts = None;
            if group.eager() && !group.member.owned.is_empty() {
                let owned: Vec<TopicPartition> = group.member.owned.iter().cloned().collect();
                if group.config.enable_auto_commit {
                    let offsets = self.positions(Some(&owned));
                    if let Err(error) = self.commit_offsets(&offsets).await {
                        tracing::debug!(%error, "commit before revocation failed");
                    }
                }
                let group = self.group.as_mut().ok_or(Error::Closed)?;
                group.member.revoke_all(cause.clone());
                group.publish();
                self.assign(Vec::new());
            }
            let connection = match self.group_coordinator().await {
                Ok(connection) => connection,
                Err(error) => {
                    tracing::debug!(%error, "no group coordinator yet");
                    tokio::time::sleep(self.config.retry_backoff).await;
                    continue;
                }
            };
            self.join_and_sync(&connection, cause).await?;
        }
    }

    /// One JoinGroup + SyncGroup round. `Ok(None)` when the round must be repeated.
    async fn join_and_sync(
        &mut self,
        connection: &Arc<Connection>,
        cause: RebalanceCause,
    ) -> Result<Option<()>> {
        let timeout = self.config.group.max_poll_interval + Duration::from_secs(5);
        let backoff = self.config.retry_backoff;
        let group = self.group.as_mut().ok_or(Error::Closed)?;
        let subscription = Subscription {
            topics: group.topics.clone(),
            owned: group.member.owned.iter().cloned().collect(),
            generation: group.member.generation,
        };
        let metadata = protocol::encode_subscription(&subscription, CONSUMER_PROTOCOL_VERSION);
        let request = JoinGroupRequest::default()
            .with_group_id(GroupId(StrBytes::from_string(group.group_id.clone())))
            .with_session_timeout_ms(group.config.session_timeout.as_millis() as i32)
            .with_rebalance_timeout_ms(group.config.max_poll_interval.as_millis() as i32)
            .with_member_id(StrBytes::from_string(group.member.member_id.clone()))
            .with_group_instance_id(
                group
                    .config
                    .group_instance_id
                    .clone()
                    .map(StrBytes::from_string),
            )
            .with_protocol_type(StrBytes::from_static_str("consumer"))
            .with_protocols(
                group
                    .config
                    .assignment_strategies
                    .iter()
                    .map(|s| {
                        JoinGroupRequestProtocol::default()
                            .with_name(StrBytes::from_static_str(s.name()))
                            .with_metadata(metadata.clone())
                    })
                    .collect(),
            )
            .with_reason(Some(StrBytes::from_static_str(cause.name())));
        let response = match connection.send(ApiKey::JoinGroup, &request, timeout).await {
            Ok(response) => response,
            Err(error) => {
                tracing::debug!(%error, "JoinGroup failed");
                group.coordinator = None;
                tokio::time::sleep(backoff).await;
                return Ok(None);
            }
        };
        if response.error_code == codes::MEMBER_ID_REQUIRED {
            group.member.member_id = response.member_id.to_string();
            return Ok(None);
        }
        if !self.react("JoinGroup", response.error_code).await? {
            return Ok(None);
        }
        let group = self.group.as_mut().ok_or(Error::Closed)?;
        let member_id = response.member_id.to_string();
        let generation = response.generation_id;
        let protocol_name = response
            .protocol_name
            .as_ref()
            .map(|p| p.to_string())
            .unwrap_or_default();
        let strategy =
            AssignmentStrategy::from_name(&protocol_name).ok_or_else(|| Error::Protocol {
                address: connection.address().to_owned(),
                detail: format!("JoinGroup chose unknown assignor {protocol_name:?}"),
            })?;
        group.member.member_id = member_id.clone();
        let assignments = if response.leader.as_str() == member_id && !response.skip_assignment {
            self.run_assignor(strategy, &response.members).await?
        } else {
            Vec::new()
        };
        let group = self.group.as_mut().ok_or(Error::Closed)?;
        let request = SyncGroupRequest::default()
            .with_group_id(GroupId(StrBytes::from_string(group.group_id.clone())))
            .with_generation_id(generation)
            .with_member_id(StrBytes::from_string(member_id.clone()))
            .with_group_instance_id(
                group
                    .config
                    .group_instance_id
                    .clone()
                    .map(StrBytes::from_string),
            )
            .with_protocol_type(Some(StrBytes::from_static_str("consumer")))
            .with_protocol_name(Some(StrBytes::from_string(protocol_name)))
            .with_assignments(assignments);
        let response = match connection.send(ApiKey::SyncGroup, &request, timeout).await {
            Ok(response) => response,
            Err(error) => {
                tracing::debug!(%error, "SyncGroup failed");
                group.coordinator = None;
                return Ok(None);
            }
        };
        if !self.react("SyncGroup", response.error_code).await? {
            return Ok(None);
        }
        let assignment =
            protocol::decode_assignment(response.assignment).map_err(|e| Error::Protocol {
                address: connection.address().to_owned(),
                detail: e.to_string(),
            })?;
        let group = self.group.as_mut().ok_or(Error::Closed)?;
        let revoked: Vec<TopicPartition> = group
            .member
            .owned
            .iter()
            .filter(|tp| !assignment.contains(tp))
            .cloned()
            .collect();
        if group.config.enable_auto_commit && !revoked.is_empty() {
            let offsets = self.positions(Some(&revoked));
            if let Err(error) = self.commit_offsets(&offsets).await {
                tracing::debug!(%error, "commit before revocation failed");
            }
        }
        let group = self.group.as_mut().ok_or(Error::Closed)?;
        let (added, _) = group.member.on_assignment(
            generation,
            &member_id,
            &assignment,
            strategy.is_cooperative(),
            cause,
        );
        group.publish();
        let owned: Vec<TopicPartition> = group.member.owned.iter().cloned().collect();
        self.assign(owned);
        // Where the new partitions start is asked at every poll until the group answers
        // (`refresh_committed`): a join cut off by the poll's deadline or an unstable offset
        // of a pending transaction must not leave them to `auto.offset.reset`.
        for tp in &added {
            if let Some(state) = self.partitions.get_mut(tp) {
                state.awaiting_committed = true;
            }
        }
        let group = self.group.as_mut().ok_or(Error::Closed)?;
        group.beat.lock().expect("beat").last_poll = Instant::now();
        group.heartbeat = Some(tokio::spawn(heartbeat::run(
            connection.clone(),
            group.identity(),
            group.config.heartbeat_interval,
            group.config.max_poll_interval,
            self.config.request_timeout,
            group.beat.clone(),
        )));
        Ok(Some(()))
    }

    /// Acts on a JoinGroup/SyncGroup error code: true to go on, false to repeat the round.
    async fn react(&mut self, api: &'static str, code: i16) -> Result<bool> {
        let group = self.group.as_mut().ok_or(Error::Closed)?;
        match reaction(code) {
            Reaction::Ok => return Ok(true),
            Reaction::Rejoin => {}
            Reaction::ResetAndRejoin => group.member.reset(),
            Reaction::Rediscover => group.coordinator = None,
            Reaction::Retry => {}
            Reaction::Fatal | Reaction::Fail => {
                return Err(Error::broker(api, code, Some(group.group_id.clone())));
            }
        }
        tokio::time::sleep(self.config.retry_backoff).await;
        Ok(false)
    }

    /// The leader's work: decode every member's subscription, learn the topics' partition
    /// counts, run the chosen assignor, encode each member's share.
    async fn run_assignor(
        &mut self,
        strategy: AssignmentStrategy,
        members: &[kafka_protocol::messages::join_group_response::JoinGroupResponseMember],
    ) -> Result<Vec<SyncGroupRequestAssignment>> {
        let mut subscriptions = Vec::new();
        for member in members {
            let decoded =
                protocol::decode_subscription(member.metadata.clone()).unwrap_or_else(|error| {
                    tracing::warn!(member = %member.member_id, %error, "undecodable subscription");
                    Subscription::default()
                });
            subscriptions.push(MemberSubscription {
                member_id: member.member_id.to_string(),
                group_instance_id: member.group_instance_id.as_ref().map(|i| i.to_string()),
                topics: decoded.topics,
                owned: decoded.owned,
                generation: decoded.generation,
            });
        }
        let topics: Vec<String> = subscriptions
            .iter()
            .flat_map(|s| s.topics.iter().cloned())
            .collect();
        let names: Vec<&str> = topics.iter().map(String::as_str).collect();
        if let Err(error) = self.cluster.refresh_metadata(&names).await {
            tracing::debug!(%error, "leader's metadata refresh failed");
        }
        let counts: BTreeMap<String, i32> = self.cluster.with_metadata(|m| {
            names
                .iter()
                .filter_map(|t| m.partition_count(t).map(|n| ((*t).to_owned(), n as i32)))
                .collect()
        });
        let assignment = assignor::assign(strategy, &subscriptions, &counts);
        if let Some(group) = self.group.as_mut() {
            group.leader_counts = Some((counts.clone(), Instant::now()));
        }
        Ok(assignment
            .into_iter()
            .map(|(member_id, partitions)| {
                SyncGroupRequestAssignment::default()
                    .with_member_id(StrBytes::from_string(member_id))
                    .with_assignment(protocol::encode_assignment(
                        &partitions,
                        CONSUMER_PROTOCOL_VERSION,
                    ))
            })
            .collect())
    }
}
