//! The tokio shell of KIP-848 membership (`group.protocol=consumer`): the heartbeat task
//! (ConsumerGroupHeartbeat at the coordinator's interval, at once when joining, leaving or
//! acknowledging; the poll clock's leave; FindCoordinator again when the coordinator moves),
//! and the consumer's side at each poll: partitions given up as lost after a fence or a poll
//! timeout, then the target assignment reconciled as Java's `ConsumerMembershipManager` does
//! it: topic ids resolved through metadata, revoked partitions committed (auto-commit) and
//! dropped before new ones are taken, then the acknowledgement sent. Decisions are the pure
//! core's (`kip848.rs`); commits and close share `commits.rs` with the classic protocol.

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use kafka_protocol::messages::consumer_group_heartbeat_request::TopicPartitions;
use kafka_protocol::messages::{ApiKey, ConsumerGroupHeartbeatRequest, GroupId, TopicName};
use kafka_protocol::protocol::StrBytes;
use tokio::sync::Notify;
use tokio::task::JoinHandle;
use tokio::time::Instant;

use super::discovery::find_coordinator;
use super::heartbeat::Beat;
use super::kip848::{Answer, Heartbeat, Member848, Next, State, TopicIdAssignment};
use super::membership::{POLL_TIMEOUT_REASON, RebalanceCause, poll_expired};
use crate::cluster::Cluster;
use crate::consumer::Consumer;
use crate::error::{Error, Result};
use crate::ids::{BrokerId, TopicPartition};

/// How often a poll of a KIP-848 member looks at its group: reconciliation runs on the
/// consumer's poll, so a new target waits at most this long to be taken up.
pub const RECONCILE_CHECK: Duration = Duration::from_millis(200);

/// Tries of the commit before a revocation.
const COMMIT_ATTEMPTS: u32 = 3;

/// STALE_MEMBER_EPOCH: a commit under an epoch the member has since left behind.
const STALE_MEMBER_EPOCH: i16 = 113;

/// A KIP-848 member's shell state, beside the classic [`super::coordinator::GroupState`].
#[derive(Debug)]
pub struct Kip848 {
    pub(super) core: Arc<Mutex<Member848>>,
    wake: Arc<Notify>,
    task: Option<JoinHandle<()>>,
    /// The cause the next assignment change is recorded with (the join, or why the member
    /// had to rejoin); `None`: the coordinator moved partitions on its own.
    next_cause: Option<RebalanceCause>,
}

impl Kip848 {
    /// A member of `subscription` that has not joined yet.
    pub fn new(core: Member848) -> Kip848 {
        Kip848 {
            core: Arc::new(Mutex::new(core)),
            wake: Arc::new(Notify::new()),
            task: None,
            next_cause: Some(RebalanceCause::Join),
        }
    }

    /// Changes the subscription; the next heartbeat carries it.
    pub fn subscribe(&mut self, topics: Vec<String>) {
        self.core.lock().expect("kip848").subscribe(topics);
        self.wake.notify_one();
    }

    /// Stops the heartbeat task.
    pub fn stop(&mut self) {
        if let Some(task) = self.task.take() {
            task.abort();
        }
    }
}

impl Drop for Kip848 {
    fn drop(&mut self) {
        self.stop();
    }
}

/// What the heartbeat task needs, fixed for the consumer's life.
struct Beats {
    cluster: Arc<Cluster>,
    group_id: String,
    core: Arc<Mutex<Member848>>,
    beat: Arc<Mutex<Beat>>,
    wake: Arc<Notify>,
    max_poll_interval: Duration,
    request_timeout: Duration,
    backoff: Duration,
}

impl Consumer {
    /// The group work of a poll for a KIP-848 member: start the heartbeat task, restart the
    /// poll clock, give partitions up if the member was fenced or went stale, reconcile the
    /// target assignment, fetch committed offsets for new partitions, auto-commit when due.
    pub(crate) async fn kip848_poll(&mut self, deadline: Instant) -> Result<()> {
        let cluster = self.cluster.clone();
        let (request_timeout, backoff) = (self.config.request_timeout, self.config.retry_backoff);
        let Some(group) = self.group.as_mut() else {
            return Ok(());
        };
        group.beat.lock().expect("beat").last_poll = Instant::now();
        let group_id = group.group_id.clone();
        let max_poll_interval = group.config.max_poll_interval;
        let Some(kip848) = group.kip848.as_mut() else {
            return Ok(());
        };
        if kip848.task.is_none() {
            let beats = Beats {
                cluster,
                group_id: group_id.clone(),
                core: kip848.core.clone(),
                beat: group.beat.clone(),
                wake: kip848.wake.clone(),
                max_poll_interval,
                request_timeout,
                backoff,
            };
            kip848.task = Some(tokio::spawn(beats.run()));
        }
        let (state, release, target) = {
            let core = kip848.core.lock().expect("kip848");
            (
                core.state.clone(),
                core.must_release(),
                core.target().cloned(),
            )
        };
        if let State::Fatal(code) = state {
            return Err(Error::broker(
                "ConsumerGroupHeartbeat",
                code,
                Some(group_id),
            ));
        }
        if release {
            let cause = if state == State::Fenced {
                RebalanceCause::MemberReset
            } else {
                RebalanceCause::PollTimeout
            };
            // Lost, not revoked: no commit under an epoch the group no longer has. Given up
            // as soon as the poll clock's leave is decided, before its answer: the group may
            // hand the partitions on meanwhile.
            if !group.member.owned.is_empty() {
                // Recorded under the epoch the partitions were held in.
                group.member.generation = kip848.core.lock().expect("kip848").last_epoch;
                group.member.revoke_all(cause.clone());
                kip848.next_cause = Some(cause);
            }
            if kip848.core.lock().expect("kip848").release() {
                kip848.wake.notify_one();
            }
            group.sync_identity();
            group.publish();
            self.assign(Vec::new());
        } else if let Some(target) = target {
            match tokio::time::timeout_at(deadline, self.reconcile(target)).await {
                Ok(result) => result?,
                Err(_) => tracing::debug!("reconciliation not finished by the poll's deadline"),
            }
        }
        if let Some(group) = self.group.as_mut() {
            group.sync_identity();
        }
        if tokio::time::timeout_at(deadline, self.refresh_committed())
            .await
            .is_err()
        {
            tracing::debug!("committed offsets not fetched by the poll's deadline");
        }
        self.maybe_auto_commit().await;
        Ok(())
    }

    /// Takes up `target`: resolve its topic ids, commit and drop the revoked partitions,
    /// add the new ones (their positions from the group's committed offsets), acknowledge.
    async fn reconcile(&mut self, target: TopicIdAssignment) -> Result<()> {
        let Some(next) = self.resolve(&target).await else {
            return Ok(());
        };
        let group = self.group.as_mut().ok_or(Error::Closed)?;
        let Some(epoch) = group
            .kip848
            .as_ref()
            .map(|k| k.core.lock().expect("kip848").member_epoch)
        else {
            return Ok(());
        };
        if next == group.member.owned {
            // Nothing moves (the target came back to what is owned): acknowledge only.
            if let Some(kip848) = group.kip848.as_mut() {
                kip848.core.lock().expect("kip848").reconciled(target);
                kip848.wake.notify_one();
            }
            return Ok(());
        }
        let revoked: Vec<TopicPartition> = group.member.owned.difference(&next).cloned().collect();
        if group.config.enable_auto_commit && !revoked.is_empty() {
            self.commit_before_revocation(&revoked).await;
        }
        let group = self.group.as_mut().ok_or(Error::Closed)?;
        let Some(kip848) = group.kip848.as_mut() else {
            return Ok(());
        };
        let member_id = {
            let core = kip848.core.lock().expect("kip848");
            // Fenced, left, or sent another target while the commit was out: this one is
            // no longer wanted (Java's `maybeAbortReconciliation`); the next poll decides.
            if !core.still_reconciling(epoch, &target) {
                tracing::debug!(epoch, "reconciliation abandoned: the member moved on");
                return Ok(());
            }
            core.member_id.clone()
        };
        let cause = kip848
            .next_cause
            .take()
            .unwrap_or(RebalanceCause::Assignment);
        let assignment: Vec<TopicPartition> = next.iter().cloned().collect();
        let (added, _) = group
            .member
            .on_assignment(epoch, &member_id, &assignment, false, cause);
        group.member.rejoin = None;
        kip848.core.lock().expect("kip848").reconciled(target);
        kip848.wake.notify_one();
        group.publish();
        self.assign(assignment);
        for tp in &added {
            if let Some(state) = self.partitions.get_mut(tp) {
                state.awaiting_committed = true;
            }
        }
        Ok(())
    }

    /// Auto-commit's commit of the partitions about to be revoked, at the member's current
    /// epoch, retried (epoch read again each time) while the coordinator moves or loads or the
    /// epoch was stale; after the last try the revocation goes on uncommitted, as Java's does.
    async fn commit_before_revocation(&mut self, revoked: &[TopicPartition]) {
        let offsets = self.positions(Some(revoked));
        for attempt in 1..=COMMIT_ATTEMPTS {
            match self.commit_offsets(&offsets).await {
                Ok(()) => return,
                Err(error) => {
                    let retriable = error.is_retriable()
                        || matches!(
                            error,
                            Error::Broker {
                                code: STALE_MEMBER_EPOCH,
                                ..
                            }
                        );
                    tracing::debug!(%error, attempt, "commit before revocation failed");
                    if !retriable {
                        return;
                    }
                    tokio::time::sleep(self.config.retry_backoff).await;
                }
            }
        }
    }

    /// The partitions of `target` by name; `None` while a topic id is not in the metadata
    /// even after asking for the subscribed topics again (the next poll tries again).
    async fn resolve(&mut self, target: &TopicIdAssignment) -> Option<BTreeSet<TopicPartition>> {
        let lookup = |cluster: &Cluster| {
            cluster.with_metadata(|m| {
                let mut named = BTreeSet::new();
                for (id, partitions) in target {
                    let topic = m.topics.values().find(|t| t.topic_id == *id)?;
                    named.extend(
                        partitions
                            .iter()
                            .map(|p| TopicPartition::new(topic.name.clone(), *p)),
                    );
                }
                Some(named)
            })
        };
        if let Some(named) = lookup(&self.cluster) {
            return Some(named);
        }
        let topics = self.group.as_ref()?.topics.clone();
        let names: Vec<&str> = topics.iter().map(String::as_str).collect();
        if let Err(error) = self.cluster.refresh_metadata(&names).await {
            tracing::debug!(%error, "metadata for the target assignment not fetched");
        }
        let named = lookup(&self.cluster);
        if named.is_none() {
            tracing::debug!(?target, "target assignment names a topic id not yet known");
        }
        named
    }

    /// `close` of a KIP-848 member: the heartbeat task stopped, then the leave heartbeat
    /// (epoch -1, or -2 for a static member, whose assignment waits for it) when it holds a
    /// place. Best effort: the session clock removes it anyway.
    pub(super) async fn kip848_leave(&mut self) {
        let Some(group) = self.group.as_mut() else {
            return;
        };
        let Some(kip848) = group.kip848.as_mut() else {
            return;
        };
        kip848.stop();
        let leave = {
            let mut core = kip848.core.lock().expect("kip848");
            core.close().then(|| core.leave_request())
        };
        let Some(leave) = leave else {
            return;
        };
        let connection = match self.group_coordinator().await {
            Ok(connection) => connection,
            Err(error) => {
                tracing::debug!(%error, "no coordinator to leave");
                return;
            }
        };
        let group_id = self.group.as_ref().map(|g| g.group_id.clone());
        let version = connection
            .version(ApiKey::ConsumerGroupHeartbeat)
            .unwrap_or(0);
        let request = wire_request(group_id.as_deref().unwrap_or_default(), &leave, version);
        match connection
            .send(
                ApiKey::ConsumerGroupHeartbeat,
                &request,
                self.config.request_timeout,
            )
            .await
        {
            Ok(answer) if answer.error_code != 0 => {
                tracing::debug!(
                    code = answer.error_code,
                    "leave heartbeat answered an error"
                )
            }
            Ok(_) => {
                tracing::info!(member = %leave.member_id, epoch = leave.member_epoch, "left the group")
            }
            Err(error) => tracing::debug!(%error, "leave heartbeat failed"),
        }
    }
}

/// The ConsumerGroupHeartbeat request for `beat` at `version`.
fn wire_request(group_id: &str, beat: &Heartbeat, version: i16) -> ConsumerGroupHeartbeatRequest {
    let text = |s: &str| StrBytes::from_string(s.to_owned());
    ConsumerGroupHeartbeatRequest::default()
        .with_group_id(GroupId(text(group_id)))
        .with_member_id(text(beat.wire_member_id(version)))
        .with_member_epoch(beat.member_epoch)
        .with_instance_id(beat.instance_id.as_deref().map(text))
        .with_rebalance_timeout_ms(beat.rebalance_timeout_ms)
        .with_subscribed_topic_names(
            beat.subscribed_topic_names
                .as_ref()
                .map(|names| names.iter().map(|n| TopicName(text(n))).collect()),
        )
        .with_server_assignor(beat.server_assignor.as_deref().map(text))
        .with_topic_partitions(beat.owned.as_ref().map(|owned| {
            owned
                .iter()
                .map(|(id, partitions)| {
                    TopicPartitions::default()
                        .with_topic_id(*id)
                        .with_partitions(partitions.iter().copied().collect())
                })
                .collect()
        }))
}

impl Beats {
    /// Beats until the consumer stops the task.
    async fn run(self) {
        let mut coordinator: Option<BrokerId> = None;
        let mut due = Instant::now();
        loop {
            let urgent = self.core.lock().expect("kip848").urgent();
            if !urgent {
                tokio::select! {
                    _ = tokio::time::sleep_until(due) => {}
                    _ = self.wake.notified() => {}
                }
            }
            let (since, paused_until) = {
                let beat = self.beat.lock().expect("beat");
                (beat.last_poll.elapsed(), beat.paused_until)
            };
            if let Some(until) = paused_until
                && Instant::now() < until
            {
                // As a paused process: nothing sent, no clock looked at.
                tokio::time::sleep_until(until).await;
                continue;
            }
            let request = {
                let mut core = self.core.lock().expect("kip848");
                if poll_expired(since, self.max_poll_interval)
                    && matches!(core.state, State::Member | State::Joining)
                {
                    tracing::warn!(member = %core.member_id, ?since, "{POLL_TIMEOUT_REASON}");
                    core.leave_on_poll_timeout();
                }
                core.request()
            };
            let Some(request) = request else {
                // Fenced, stale, left or fatal: the consumer acts at its next poll.
                let _ =
                    tokio::time::timeout(Duration::from_millis(500), self.wake.notified()).await;
                continue;
            };
            let sent = Instant::now();
            let next = match self.send(&mut coordinator, &request).await {
                Ok(answer) => self.core.lock().expect("kip848").on_answer(&answer),
                Err(error) => {
                    tracing::debug!(%error, "ConsumerGroupHeartbeat failed");
                    self.core.lock().expect("kip848").on_failure()
                }
            };
            match next {
                Next::Beat => {
                    let interval = self.core.lock().expect("kip848").heartbeat_interval;
                    due = sent + interval;
                }
                Next::Retry | Next::Rediscover => {
                    if next == Next::Rediscover {
                        coordinator = None;
                    }
                    tokio::time::sleep(self.backoff).await;
                    due = Instant::now();
                }
                Next::Wait => {}
            }
        }
    }

    async fn send(&self, coordinator: &mut Option<BrokerId>, beat: &Heartbeat) -> Result<Answer> {
        let broker = match *coordinator {
            Some(broker) => broker,
            None => {
                let found = tokio::time::timeout(
                    self.request_timeout,
                    find_coordinator(
                        &self.cluster,
                        &self.group_id,
                        self.request_timeout,
                        self.backoff,
                    ),
                )
                .await
                .map_err(|_| Error::broker("FindCoordinator", 15, Some(self.group_id.clone())))??;
                *coordinator = Some(found);
                found
            }
        };
        let connection = self.cluster.connection(broker).await?;
        let Some(version) = connection.version(ApiKey::ConsumerGroupHeartbeat) else {
            // A broker without KIP-848: UNSUPPORTED_VERSION, which no retry fixes.
            return Ok(Answer {
                error_code: 35,
                member_id: None,
                member_epoch: -1,
                heartbeat_interval_ms: 0,
                assignment: None,
            });
        };
        let request = wire_request(&self.group_id, beat, version);
        let response = connection
            .send(
                ApiKey::ConsumerGroupHeartbeat,
                &request,
                self.request_timeout,
            )
            .await?;
        if response.error_code != 0 {
            tracing::debug!(
                code = response.error_code,
                message = ?response.error_message,
                epoch = beat.member_epoch,
                "ConsumerGroupHeartbeat answered an error"
            );
        }
        Ok(Answer {
            error_code: response.error_code,
            member_id: response.member_id.map(|id| id.to_string()),
            member_epoch: response.member_epoch,
            heartbeat_interval_ms: response.heartbeat_interval_ms,
            assignment: response.assignment.map(|a| {
                a.topic_partitions
                    .into_iter()
                    .map(|t| (t.topic_id, t.partitions.into_iter().collect()))
                    .collect()
            }),
        })
    }
}
