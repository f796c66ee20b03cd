//! The tokio side of classic membership (part of [`GroupCoordinator`]): each group's
//! [`ClassicGroup`] lives here while its `__consumer_offsets` partition is loaded in one
//! leader epoch (rebuilt from the last written generation when first asked, so a new
//! coordinator continues the group); delayed JoinGroup/SyncGroup answers wait on oneshot
//! channels; the clock ticks every 100 ms; written generations go through the runtime
//! before the answers they settle, one group's writes in the order they were decided (a
//! write turn per group, so a later load rebuilds the state the coordinator last decided).

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use kafka_protocol::ResponseError;
use tokio::sync::{oneshot, watch};

use crate::clock::now_ms;
use crate::coordinator::CoordinatorRuntime;
use crate::coordinator::group::GroupCoordinator;
use crate::coordinator::group::TOPIC;
use crate::coordinator::group::classic::{
    Cause, ClassicGroup, Effects, JoinReply, JoinRequest, LeaveOutcome, SyncReply, SyncRequest,
};
use crate::coordinator::group::shard::{GroupShard, group_record};
use crate::coordinator::group::view::{GroupState, GroupView};
use crate::coordinator::internal_topic::append_error;
use crate::coordinator::shard::CoordinatorRecord;

/// How often the clocks are checked.
const TICK: Duration = Duration::from_millis(100);

/// One group being served.
pub struct Live {
    /// The group.
    pub group: ClassicGroup,
    index: i32,
    epoch: i32,
    joins: HashMap<String, oneshot::Sender<JoinReply>>,
    syncs: HashMap<String, oneshot::Sender<SyncReply>>,
    /// The group's write turns: the next ticket to hand out, and the turn being served.
    next_turn: u64,
    turns: Arc<watch::Sender<u64>>,
}

impl Live {
    /// The next write turn of the group, taken where the write is decided (under the live
    /// lock), so writes reach the log in the order they were decided.
    pub(crate) fn take_turn(&mut self) -> Turn {
        let ticket = self.next_turn;
        self.next_turn += 1;
        Turn {
            turns: Arc::clone(&self.turns),
            ticket,
        }
    }
}

/// One write's place in its group's order.
pub(crate) struct Turn {
    turns: Arc<watch::Sender<u64>>,
    ticket: u64,
}

/// Passes the turn on when the write ends, however it ends (a panic or a shutdown included),
/// so one failed write never holds the group's later ones.
struct PassTurn(Turn);

impl Drop for PassTurn {
    fn drop(&mut self) {
        let next = self.0.ticket + 1;
        self.0.turns.send_modify(|turn| *turn = (*turn).max(next));
    }
}

/// Appends the `records` made from the partition's latest state to partition `index` in
/// `turn`: after every write of the group decided before it has finished. Runs as its own
/// task, so a request given up by its client (its future dropped) still takes and passes
/// its turn.
pub(crate) async fn write_in_turn(
    runtime: &Arc<CoordinatorRuntime<GroupShard>>,
    index: i32,
    turn: Turn,
    records: impl FnOnce(&GroupShard) -> Vec<CoordinatorRecord> + Send + 'static,
) -> Result<(), ResponseError> {
    let runtime = Arc::clone(runtime);
    in_turn(turn, async move {
        runtime
            .write(index, super::WRITE_TIMEOUT, |shard| {
                Ok((records(shard), ()))
            })
            .await
            .map_err(|error| append_error(TOPIC, error))
    })
    .await
}

/// Runs `work` as its own task once every turn before `turn` has passed, then passes it.
async fn in_turn(
    turn: Turn,
    work: impl std::future::Future<Output = Result<(), ResponseError>> + Send + 'static,
) -> Result<(), ResponseError> {
    let task = tokio::spawn(async move {
        let mut served = turn.turns.subscribe();
        let ticket = turn.ticket;
        let pass = PassTurn(turn);
        // The sender lives in `pass`, so waiting cannot fail.
        let _ = served.wait_for(|turn| *turn >= ticket).await;
        let done = work.await;
        drop(pass);
        done
    });
    task.await.unwrap_or(Err(ResponseError::UnknownServerError))
}

/// Answers to send once the group's metadata (if any) is written.
struct Release {
    index: i32,
    group_id: String,
    persist: Option<crate::coordinator::group::record::GroupValue>,
    /// The write turn of `persist`.
    turn: Option<Turn>,
    /// `persist` is this generation's assignment: answered through
    /// [`ClassicGroup::assignment_written`].
    assignment: Option<i32>,
    joins: Vec<(oneshot::Sender<JoinReply>, JoinReply)>,
    syncs: Vec<(oneshot::Sender<SyncReply>, SyncReply)>,
}

/// Live groups by id.
pub type LiveGroups = std::sync::Mutex<HashMap<String, Live>>;

impl GroupCoordinator {
    pub(crate) fn live(&self) -> std::sync::MutexGuard<'_, HashMap<String, Live>> {
        self.live
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Runs `operation` on `group_id`'s live group (loading it from the partition's committed
    /// state when this epoch has not served it yet).
    pub(crate) fn with_group<T>(
        &self,
        group_id: &str,
        operation: impl FnOnce(&mut Live, i64) -> T,
    ) -> Result<T, ResponseError> {
        let index = self.partition_of(group_id);
        let epoch = self.runtime.loaded_epoch(index)?;
        let written = self.runtime.read(index, |shard| {
            shard.get(group_id).and_then(|entry| entry.metadata.clone())
        })?;
        let now = now_ms();
        let mut live = self.live();
        if live.get(group_id).is_some_and(|l| l.epoch != epoch) {
            live.remove(group_id);
        }
        let entry = live.entry(group_id.to_owned()).or_insert_with(|| Live {
            index,
            epoch,
            group: match &written {
                Some(value) => {
                    let group = ClassicGroup::from_value(value, self.limits, now);
                    if group.moved {
                        // Members wrote their generation at another coordinator (or before
                        // a restart): the cause of whatever rebalance comes next.
                        tracing::info!(
                            group = group_id,
                            cause = Cause::CoordinatorMoved.name(),
                            generation = group.generation,
                            leader_epoch = epoch,
                            "group loaded by a new coordinator"
                        );
                    }
                    group
                }
                None => ClassicGroup::new(self.limits),
            },
            joins: HashMap::new(),
            syncs: HashMap::new(),
            next_turn: 0,
            turns: Arc::new(watch::Sender::new(0)),
        });
        Ok(operation(entry, now))
    }

    /// The live view of `group_id` for OffsetCommit's fencing, if it is being served.
    pub(crate) fn live_view(&self, group_id: &str) -> Option<GroupView> {
        let index = self.partition_of(group_id);
        let epoch = self.runtime.loaded_epoch(index).ok()?;
        self.live()
            .get(group_id)
            .filter(|l| l.epoch == epoch)
            .map(|l| l.group.view())
    }

    /// Takes the answers `effects` releases out of `live`: waiting members' senders, and the
    /// caller's own answer when it is among them (keyed by one of the ids in `own`).
    fn release(
        &self,
        group_id: &str,
        live: &mut Live,
        effects: Effects,
        own: &[&str],
    ) -> (Release, Option<JoinReply>, Option<SyncReply>) {
        if let Some(cause) = effects.rebalance {
            tracing::info!(
                group = group_id,
                cause = cause.name(),
                generation = live.group.generation,
                "group rebalance started"
            );
        }
        let mut release = Release {
            index: live.index,
            group_id: group_id.to_owned(),
            turn: effects.persist.as_ref().map(|_| live.take_turn()),
            persist: effects.persist,
            assignment: effects.assignment,
            joins: Vec::new(),
            syncs: Vec::new(),
        };
        let (mut own_join, mut own_sync) = (None, None);
        for (id, reply) in effects.joins {
            if own.contains(&id.as_str()) && own_join.is_none() {
                live.joins.remove(&id);
                own_join = Some(reply);
            } else if let Some(waiter) = live.joins.remove(&id) {
                release.joins.push((waiter, reply));
            }
        }
        for (id, reply) in effects.syncs {
            if own.contains(&id.as_str()) && own_sync.is_none() {
                live.syncs.remove(&id);
                own_sync = Some(reply);
            } else if let Some(waiter) = live.syncs.remove(&id) {
                release.syncs.push((waiter, reply));
            }
        }
        (release, own_join, own_sync)
    }

    /// Writes the release's metadata in the group's turn, then sends its answers (errors
    /// instead when the write fails); an assignment's outcome goes back to the group, whose
    /// answers (or its `write-failed` rebalance) are settled in turn. Returns the first
    /// write's error.
    async fn settle(&self, release: Release) -> Result<(), ResponseError> {
        let mut release = release;
        let mut first = None;
        loop {
            let written = match (&release.persist, release.turn.take()) {
                (Some(value), Some(turn)) => {
                    let record = group_record(&release.group_id, Some(value));
                    write_in_turn(&self.runtime, release.index, turn, move |_| vec![record]).await
                }
                _ => Ok(()),
            };
            if let Err(error) = written {
                tracing::warn!(group = %release.group_id, ?error, "group metadata write failed");
            }
            for (waiter, reply) in release.joins {
                let _ = waiter.send(reply);
            }
            for (waiter, reply) in release.syncs {
                let _ = waiter.send(match &written {
                    Ok(()) => reply,
                    Err(error) => Err(*error),
                });
            }
            let first = *first.get_or_insert(written);
            let Some(generation) = release.assignment else {
                return first;
            };
            let group_id = release.group_id;
            let next = self.with_group(&group_id, |live, now| {
                let effects = live.group.assignment_written(generation, written, now);
                self.release(&group_id, live, effects, &[]).0
            });
            match next {
                Ok(next) => release = next,
                // Unloaded: the waiters were dropped with the group (NOT_COORDINATOR).
                Err(_) => return first,
            }
        }
    }

    /// JoinGroup: answered at once or when the join phase ends.
    ///
    /// # Errors
    /// `NOT_COORDINATOR`, `COORDINATOR_LOAD_IN_PROGRESS`; the group's own errors come in the
    /// reply.
    pub async fn join(
        &self,
        group_id: &str,
        request: JoinRequest,
    ) -> Result<JoinReply, ResponseError> {
        // A KIP-848 group with members is not joined by a classic member (Kafka's migration
        // path is not supported); an empty one is deleted first, its offsets kept (Kafka's
        // `maybeDeleteEmptyConsumerGroup`), so the id is a classic group's alone.
        if let Err(refused) = self.delete_empty_consumer_group(group_id).await {
            return match refused {
                ResponseError::InconsistentGroupProtocol => {
                    Ok(JoinReply::error(refused, &request.member_id))
                }
                other => Err(other),
            };
        }
        let joining = request.joining_id();
        let (release, own, waiter) = self.with_group(group_id, |live, now| {
            let effects = live.group.join(&request, now);
            let (release, own, _) =
                self.release(group_id, live, effects, &[&joining, &request.member_id]);
            let waiter = own.is_none().then(|| {
                let (sender, receiver) = oneshot::channel();
                live.joins.insert(joining.clone(), sender);
                receiver
            });
            (release, own, waiter)
        })?;
        let written = self.settle(release).await;
        if let Some(own) = own {
            return written.map(|()| own);
        }
        match waiter {
            Some(waiter) => waiter.await.map_err(|_| ResponseError::NotCoordinator),
            None => Err(ResponseError::UnknownServerError),
        }
    }

    /// SyncGroup: the member's assignment, at once or when the leader sends it.
    ///
    /// # Errors
    /// The group's errors, the runtime's, and a failed write of the generation.
    pub async fn sync(&self, group_id: &str, request: SyncRequest) -> SyncReply {
        let double_assign = self.settings.double_assign;
        let id = request.member_id.clone();
        let (release, own, waiter) = self.with_group(group_id, |live, now| {
            let effects = live.group.sync(&request, now, double_assign);
            let (release, _, own) = self.release(group_id, live, effects, &[&id]);
            let waiter = own.is_none().then(|| {
                let (sender, receiver) = oneshot::channel();
                live.syncs.insert(id.clone(), sender);
                receiver
            });
            (release, own, waiter)
        })?;
        let written = self.settle(release).await;
        if let Some(own) = own {
            written?;
            return own;
        }
        match waiter {
            Some(waiter) => waiter.await.map_err(|_| ResponseError::NotCoordinator)?,
            None => Err(ResponseError::UnknownServerError),
        }
    }

    /// Heartbeat.
    ///
    /// # Errors
    /// As [`ClassicGroup::heartbeat`], and the runtime's.
    pub fn heartbeat(
        &self,
        group_id: &str,
        member_id: &str,
        instance: Option<&str>,
        generation: i32,
    ) -> Result<(), ResponseError> {
        self.with_group(group_id, |live, now| {
            live.group.heartbeat(member_id, instance, generation, now)
        })?
    }

    /// LeaveGroup of `members` (member id, instance id, reason).
    ///
    /// # Errors
    /// The runtime's; per-member errors come in the outcomes.
    pub async fn leave(
        &self,
        group_id: &str,
        members: &[(String, Option<String>, Option<String>)],
    ) -> Result<Vec<LeaveOutcome>, ResponseError> {
        for (member, instance, reason) in members {
            tracing::info!(group = group_id, member = %member, instance = instance.as_deref().unwrap_or(""),
                reason = reason.as_deref().unwrap_or(""), "LeaveGroup");
        }
        let (release, outcomes) = self.with_group(group_id, |live, now| {
            let (outcomes, effects) = live.group.leave(members, now);
            let (release, _, _) = self.release(group_id, live, effects, &[]);
            (release, outcomes)
        })?;
        let _ = self.settle(release).await;
        Ok(outcomes)
    }

    /// The clocks: ticks every live group, drops groups of partitions no longer served.
    pub(crate) async fn run_clocks(self: Arc<Self>) {
        let mut interval = tokio::time::interval(TICK);
        loop {
            interval.tick().await;
            let now = now_ms();
            let mut releases = Vec::new();
            {
                let mut live = self.live();
                live.retain(|_, l| self.runtime.loaded_epoch(l.index) == Ok(l.epoch));
                // A group with nothing live and no rebalance to report is rebuilt from the log
                // when next asked: dropping it keeps requests for made-up group ids from
                // growing the map.
                live.retain(|_, l| {
                    !(l.group.state == GroupState::Empty
                        && l.group.members.is_empty()
                        && l.group.pending.is_empty()
                        && l.group.last_cause.is_none()
                        && l.joins.is_empty()
                        && l.syncs.is_empty())
                });
                let ids: Vec<String> = live.keys().cloned().collect();
                for id in ids {
                    if let Some(entry) = live.get_mut(&id) {
                        let effects = entry.group.tick(now);
                        if effects == Effects::default() {
                            continue;
                        }
                        let (release, _, _) = self.release(&id, entry, effects, &[]);
                        releases.push(release);
                    }
                }
            }
            for release in releases {
                let coordinator = Arc::clone(&self);
                tokio::spawn(async move {
                    let _ = coordinator.settle(release).await;
                });
            }
        }
    }
}

/// A group as DescribeGroups shows it.
#[derive(Debug, Clone)]
pub struct Described {
    /// Kafka's state name.
    pub state: &'static str,
    /// The protocol type ("" for a simple group).
    pub protocol_type: String,
    /// The chosen protocol ("" when none).
    pub protocol: String,
    /// Members: (member id, instance id, client id, client host, metadata, assignment).
    pub members: Vec<(
        String,
        Option<String>,
        String,
        String,
        bytes::Bytes,
        bytes::Bytes,
    )>,
    /// The cause of the last rebalance, in the seed's terms.
    pub last_cause: Option<&'static str>,
}

/// Kafka's name of a group state.
pub fn state_name(state: crate::coordinator::group::view::GroupState) -> &'static str {
    use crate::coordinator::group::view::GroupState as S;
    match state {
        S::Empty => "Empty",
        S::PreparingRebalance => "PreparingRebalance",
        S::CompletingRebalance => "CompletingRebalance",
        S::Stable => "Stable",
        S::Dead => "Dead",
    }
}

impl GroupCoordinator {
    /// DescribeGroups of one group: `None` for a group this coordinator does not have as a
    /// classic group (Kafka answers it as Dead), a KIP-848 consumer group included: Kafka's
    /// `describeGroups` asks `classicGroup()`, which fails for a consumer group, so the
    /// classic API describes one as Dead with no members.
    ///
    /// # Errors
    /// `NOT_COORDINATOR`, `COORDINATOR_LOAD_IN_PROGRESS`.
    pub fn describe(&self, group_id: &str) -> Result<Option<Described>, ResponseError> {
        if self.consumer_subscriptions(group_id)?.is_some() {
            return Ok(None);
        }
        let index = self.partition_of(group_id);
        let known = self
            .runtime
            .read(index, |shard| shard.get(group_id).is_some())?;
        let live = self.live().contains_key(group_id);
        if !known && !live {
            return Ok(None);
        }
        self.with_group(group_id, |live, _| {
            let group = &live.group;
            let with_data =
                group.state != crate::coordinator::group::view::GroupState::PreparingRebalance;
            Some(Described {
                state: state_name(group.state),
                protocol_type: group.protocol_type.clone().unwrap_or_default(),
                protocol: if with_data {
                    group.protocol.clone().unwrap_or_default()
                } else {
                    String::new()
                },
                members: group
                    .members
                    .values()
                    .map(|m| {
                        let metadata = m
                            .protocols
                            .iter()
                            .find(|(name, _)| Some(name) == group.protocol.as_ref())
                            .map(|(_, meta)| meta.clone())
                            .unwrap_or_default();
                        (
                            m.member_id.clone(),
                            m.instance_id.clone(),
                            m.client_id.clone(),
                            m.client_host.clone(),
                            if with_data {
                                metadata
                            } else {
                                bytes::Bytes::new()
                            },
                            if with_data {
                                m.assignment.clone()
                            } else {
                                bytes::Bytes::new()
                            },
                        )
                    })
                    .collect(),
                last_cause: group.last_cause.map(|cause| cause.name()),
            })
        })
    }

    /// ListGroups: every group of every partition this node serves, with its protocol type
    /// and Kafka's state name.
    pub fn list(&self) -> Vec<(String, String, &'static str)> {
        let mut groups: std::collections::BTreeMap<String, (String, &'static str)> =
            std::collections::BTreeMap::new();
        for index in 0..self.settings.partitions {
            let Ok(ids) = self.runtime.read(index, |shard| {
                shard
                    .iter()
                    .map(|(id, entry)| {
                        let protocol_type = entry
                            .metadata
                            .as_ref()
                            .map(|m| m.protocol_type.clone())
                            .unwrap_or_default();
                        (id.to_owned(), protocol_type)
                    })
                    .collect::<Vec<_>>()
            }) else {
                continue;
            };
            for (id, protocol_type) in ids {
                groups.insert(id, (protocol_type, "Empty"));
            }
        }
        for (id, live) in self.live().iter() {
            if self.runtime.loaded_epoch(live.index) == Ok(live.epoch) {
                groups.insert(
                    id.clone(),
                    (
                        live.group.protocol_type.clone().unwrap_or_default(),
                        state_name(live.group.state),
                    ),
                );
            }
        }
        groups
            .into_iter()
            .map(|(id, (protocol_type, state))| (id, protocol_type, state))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Regression test: a group's writes were appended in whatever order their tasks reached
    /// the runtime, so a generation decided later could be written first and a load would
    /// rebuild the older one. Turns taken in decision order run in that order, even when the
    /// later write starts first.
    #[tokio::test]
    async fn writes_run_in_the_order_their_turns_were_taken() {
        let turns = Arc::new(watch::Sender::new(0));
        let turn = |ticket| Turn {
            turns: Arc::clone(&turns),
            ticket,
        };
        let log = Arc::new(std::sync::Mutex::new(Vec::new()));
        let record = |what: &'static str| {
            let log = Arc::clone(&log);
            async move {
                tokio::task::yield_now().await;
                log.lock().unwrap().push(what);
                Ok(())
            }
        };
        let later = tokio::spawn(in_turn(turn(1), record("generation 2")));
        tokio::time::sleep(Duration::from_millis(20)).await;
        assert!(
            log.lock().unwrap().is_empty(),
            "the later write waits its turn"
        );
        // A write that fails still passes its turn on.
        let failed = in_turn(turn(0), async { Err(ResponseError::NotCoordinator) });
        assert_eq!(failed.await, Err(ResponseError::NotCoordinator));
        later.await.unwrap().unwrap();
        in_turn(turn(2), record("generation 3")).await.unwrap();
        assert_eq!(*log.lock().unwrap(), ["generation 2", "generation 3"]);
    }
}
