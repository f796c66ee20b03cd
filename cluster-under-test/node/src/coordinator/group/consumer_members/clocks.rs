//! The KIP-848 members' clocks ([`Timers`]) of each loaded `__consumer_offsets` partition
//! (part of [`GroupCoordinator`]), valid in one leader epoch: armed from the partition's
//! state when it is first served in that epoch, changed by each decision as it is made
//! (whatever becomes of its write, as Kafka schedules timers inside the operation), checked
//! every 100 ms, an expired member fenced through the write path
//! ([`consumer_group::expire`]) unless a heartbeat renewed its session since the clock
//! fired; and the last rebalance cause of each group (never in the log: kept per partition
//! and epoch, logged as `group=.. cause=.. epoch=..`).
//!
//! The clocks are changed only inside the runtime's operations (and the clock task's read),
//! so a decision and its clock changes are one step on the partition's latest state.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use crate::clock::now_ms;
use crate::coordinator::group::cause::Cause;
use crate::coordinator::group::consumer_group::{
    self, ConsumerGroupRecord, ConsumerGroups, Expiry, RebalanceCause, Timers,
};
use crate::coordinator::group::consumer_members::written_epoch;
use crate::coordinator::group::shard::GroupShard;
use crate::coordinator::group::{GroupCoordinator, WRITE_TIMEOUT};

/// How often the clocks are checked.
const TICK: Duration = Duration::from_millis(100);

/// How long after a failed fencing write its clock fires again.
const RETRY_MS: i64 = 1_000;

/// The clocks and last causes of one loaded partition, valid in one leader epoch.
#[derive(Debug)]
pub struct PartitionClocks {
    epoch: i32,
    /// The members' clocks.
    pub timers: Timers,
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

impl GroupCoordinator {
    /// Runs `change` on partition `index`'s clocks of leader epoch `epoch`, arming them
    /// first from `groups` (the partition's state in that epoch) when they are not armed in
    /// it yet: every member's session from now, as Kafka does on a load, and each group with
    /// members logged `coordinator-moved`. Called with the runtime's partition state in hand
    /// (inside an operation or a read), so arming and changes follow the state's order.
    pub(super) fn with_clocks<T>(
        &self,
        index: i32,
        epoch: i32,
        groups: &ConsumerGroups,
        change: impl FnOnce(&mut PartitionClocks) -> T,
    ) -> T {
        use std::collections::hash_map::Entry;
        let mut clocks = self.clocks.lock();
        let partition = match clocks.entry(index) {
            Entry::Occupied(entry) if entry.get().epoch == epoch => entry.into_mut(),
            Entry::Occupied(mut entry) => {
                entry.insert(self.armed(epoch, groups));
                entry.into_mut()
            }
            Entry::Vacant(entry) => entry.insert(self.armed(epoch, groups)),
        };
        change(partition)
    }

    /// Fresh clocks of leader epoch `epoch` for `groups`.
    fn armed(&self, epoch: i32, groups: &ConsumerGroups) -> PartitionClocks {
        let mut timers = Timers::default();
        timers.on_loaded(groups, now_ms(), self.settings.consumer.session_timeout_ms);
        let mut causes = HashMap::new();
        for group in groups.groups.values().filter(|g| !g.members.is_empty()) {
            tracing::info!(group = %group.group_id, cause = %Cause::CoordinatorMoved.name(),
                epoch = group.group_epoch, leader_epoch = epoch,
                "consumer group loaded by a new coordinator");
            causes.insert(group.group_id.clone(), Cause::CoordinatorMoved.name());
        }
        PartitionClocks {
            epoch,
            timers,
            causes,
        }
    }

    /// The last rebalance cause of `group_id` on partition `index` in leader epoch `epoch`.
    pub(super) fn last_cause(
        &self,
        index: i32,
        epoch: i32,
        group_id: &str,
    ) -> Option<&'static str> {
        self.clocks
            .lock()
            .get(&index)
            .filter(|c| c.epoch == epoch)
            .and_then(|c| c.causes.get(group_id).copied())
    }

    /// Notes a written outcome's cause: the group's last cause and the log line naming it.
    pub(super) fn note_cause(
        &self,
        index: i32,
        epoch: i32,
        group_id: &str,
        cause: &RebalanceCause,
        group_epoch: i32,
    ) {
        tracing::info!(group = %group_id, cause = %cause.name(), epoch = group_epoch,
            "consumer group rebalance");
        if let Some(partition) = self
            .clocks
            .lock()
            .get_mut(&index)
            .filter(|c| c.epoch == epoch)
        {
            partition.causes.insert(group_id.to_owned(), cause.name());
        }
    }

    /// The new protocol's clocks: every 100 ms, arms the clocks of each partition newly
    /// loaded, drops those of partitions no longer served, and fences every member whose
    /// clock fired.
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
                let Ok(expired) = self.runtime.read(index, |shard| {
                    self.with_clocks(index, epoch, shard.consumer(), |partition| {
                        if partition.timers.next_deadline().is_some_and(|d| d <= now) {
                            partition.timers.take_expired(now)
                        } else {
                            Vec::new()
                        }
                    })
                }) else {
                    continue;
                };
                fired.extend(expired.into_iter().map(|expiry| (index, epoch, expiry)));
            }
            for (index, epoch, expiry) in fired {
                let coordinator = Arc::clone(&self);
                tokio::spawn(async move { coordinator.fence_expired(index, epoch, expiry).await });
            }
        }
    }

    /// Fences the member whose clock fired, if the clock still applies (the partition is
    /// still loaded in `epoch`, no heartbeat renewed the session since, the member is still
    /// there at that epoch); a failed write re-arms the clock a second later unless a
    /// renewal armed it meanwhile.
    async fn fence_expired(&self, index: i32, epoch: i32, expiry: Expiry) {
        let topics = self.topics_image();
        let written = self
            .runtime
            .write_at(index, epoch, WRITE_TIMEOUT, |shard: &GroupShard| {
                let outcome = self.with_clocks(index, epoch, shard.consumer(), |partition| {
                    if partition.timers.superseded(&expiry) {
                        return None;
                    }
                    let outcome = consumer_group::expire(shard.consumer(), &expiry, &topics)?;
                    partition.timers.apply(&outcome.timers);
                    Some(outcome)
                });
                let Some(outcome) = outcome else {
                    return Ok((Vec::new(), None));
                };
                let records = outcome
                    .records
                    .iter()
                    .map(ConsumerGroupRecord::encode)
                    .collect();
                let epoch = written_epoch(&outcome.records).unwrap_or_default();
                Ok((records, Some((outcome.cause, epoch))))
            })
            .await;
        let group_id = match &expiry {
            Expiry::Session { group_id, .. } | Expiry::Rebalance { group_id, .. } => group_id,
        };
        match written {
            Ok(None) | Ok(Some((None, _))) => {}
            Ok(Some((Some(cause), group_epoch))) => {
                self.note_cause(index, epoch, group_id, &cause, group_epoch);
            }
            Err(failed) => {
                tracing::warn!(group = %group_id, error = ?failed, "fencing an expired member failed");
                if let Some(partition) = self
                    .clocks
                    .lock()
                    .get_mut(&index)
                    .filter(|c| c.epoch == epoch)
                {
                    partition.timers.rearm(&expiry, now_ms() + RETRY_MS);
                }
            }
        }
    }
}
