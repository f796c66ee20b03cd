//! The group API of a subscribed consumer around committed offsets: `commit_sync`,
//! `commit_async`, auto-commit on its interval, the committed offsets a newly assigned
//! partition starts from, and `close` (a last commit, then LeaveGroup
//! for a dynamic member only: a static member's place waits for it, as in Java).

use std::collections::BTreeMap;

use tokio::task::JoinHandle;
use tokio::time::Instant;

use super::heartbeat;
use super::membership::{CLOSE_REASON, Reaction, RebalanceCause, codes};
use super::offsets::{self, Offsets};
use crate::consumer::Consumer;
use crate::error::{Error, Result};
use crate::ids::{Offset, TopicPartition};

impl Consumer {
    pub(super) async fn maybe_auto_commit(&mut self) {
        let Some(group) = self.group.as_ref() else {
            return;
        };
        if !group.config.enable_auto_commit
            || group.member.generation < 0
            || group.last_auto_commit.elapsed() < group.config.auto_commit_interval
        {
            return;
        }
        if let Err(error) = self.commit_sync().await {
            tracing::debug!(%error, "auto-commit failed");
        }
        if let Some(group) = self.group.as_mut() {
            group.last_auto_commit = Instant::now();
        }
    }

    pub(super) fn positions(&self, only: Option<&[TopicPartition]>) -> Offsets {
        self.partitions
            .iter()
            .filter(|(tp, _)| only.is_none_or(|only| only.contains(tp)))
            .filter_map(|(tp, s)| s.position.map(|p| (tp.clone(), (p, s.last_record_epoch))))
            .collect()
    }

    /// Commits the positions of every assigned partition with the member's generation.
    ///
    /// # Errors
    /// Not subscribed; the group rebalanced or forgot the member (Kafka's
    /// `CommitFailedException`, as [`Error::Broker`] with its code; the next poll rejoins);
    /// transport errors.
    pub async fn commit_sync(&mut self) -> Result<()> {
        let offsets = self.positions(None);
        self.commit_offsets(&offsets).await
    }

    pub(super) async fn commit_offsets(&mut self, offsets: &Offsets) -> Result<()> {
        let connection = self.group_coordinator().await?;
        let group = self.group.as_mut().ok_or(Error::Closed)?;
        group.sync_identity();
        let request = offsets::commit_request(
            &group.group_id,
            group.member.generation,
            &group.member.member_id,
            group.config.group_instance_id.as_deref(),
            offsets,
        );
        match offsets::commit(&connection, &request, self.config.request_timeout).await {
            Ok(()) => Ok(()),
            Err((reaction, error)) => {
                match reaction {
                    Reaction::Rediscover => group.coordinator = None,
                    Reaction::Rejoin => {
                        group.member.rejoin = Some(RebalanceCause::RebalanceInProgress)
                    }
                    Reaction::ResetAndRejoin => {
                        group.member.rejoin = Some(RebalanceCause::MemberReset)
                    }
                    _ => {}
                }
                Err(error)
            }
        }
    }

    /// The group's committed offsets of `partitions` (Java's `committed`): OffsetFetch with
    /// `require_stable`, so offsets of a pending transaction are waited for, not returned.
    /// Needs `subscribe` (for the group id) but not a join: any process can read them.
    /// A partition with nothing committed is absent.
    ///
    /// # Errors
    /// Not subscribed; the coordinator cannot be found; OffsetFetch errors.
    pub async fn committed(
        &mut self,
        partitions: &[TopicPartition],
    ) -> Result<BTreeMap<TopicPartition, Offset>> {
        let connection = self.group_coordinator().await?;
        let group = self.group.as_ref().ok_or(Error::Closed)?;
        let fetched = offsets::fetch_committed(
            &connection,
            &group.group_id,
            partitions,
            self.config.request_timeout,
            self.config.retry_backoff,
        )
        .await;
        if fetched.is_err()
            && let Some(group) = self.group.as_mut()
        {
            group.coordinator = None;
        }
        fetched
    }

    /// Commits the current positions in the background; the handle answers as `commit_sync`
    /// would (without acting on a rebalance: the next poll learns of it from the heartbeat).
    pub fn commit_async(&mut self) -> JoinHandle<Result<()>> {
        let offsets = self.positions(None);
        let cluster = self.cluster.clone();
        let timeout = self.config.request_timeout;
        if let Some(group) = self.group.as_mut() {
            group.sync_identity();
        }
        let target = self.group.as_ref().map(|g| {
            let request = offsets::commit_request(
                &g.group_id,
                g.member.generation,
                &g.member.member_id,
                g.config.group_instance_id.as_deref(),
                &offsets,
            );
            (g.coordinator, request)
        });
        tokio::spawn(async move {
            let Some((Some(coordinator), request)) = target else {
                return Err(Error::broker(
                    "OffsetCommit",
                    codes::COORDINATOR_NOT_AVAILABLE,
                    None,
                ));
            };
            let connection = cluster.connection(coordinator).await?;
            offsets::commit(&connection, &request, timeout)
                .await
                .map_err(|(_, e)| e)
        })
    }

    /// Leaves the group (commits first when auto-commit is on). A static member does not
    /// send LeaveGroup: its place waits for it until its session expires (Java's behaviour).
    ///
    /// # Errors
    /// None that matter: leaving is best effort.
    pub async fn close(mut self) -> Result<()> {
        if self
            .group
            .as_ref()
            .is_some_and(|g| g.config.enable_auto_commit && g.member.generation >= 0)
        {
            let _ = self.commit_sync().await;
        }
        if self.group.as_ref().is_some_and(|g| g.kip848.is_some()) {
            self.kip848_leave().await;
        }
        let Some(mut group) = self.group.take() else {
            return Ok(());
        };
        group.stop_heartbeat();
        if group.kip848.is_none()
            && group.config.group_instance_id.is_none()
            && !group.member.member_id.is_empty()
            && let Some(coordinator) = group.coordinator
            && let Ok(connection) = self.cluster.connection(coordinator).await
        {
            heartbeat::leave(
                &connection,
                &group.identity(),
                CLOSE_REASON,
                self.config.request_timeout,
            )
            .await;
        }
        group.member.revoke_all(RebalanceCause::Close);
        group.publish();
        Ok(())
    }

    /// Java's `refreshCommittedOffsetsIfNeeded`: the committed offsets of assigned partitions
    /// still awaiting them become their positions; a partition the group has no offset for
    /// falls back to `auto.offset.reset`. Any error (UNSTABLE_OFFSET_COMMIT past the request
    /// timeout, the coordinator moved) leaves them awaiting, for the next poll.
    pub(super) async fn refresh_committed(&mut self) {
        let awaiting: Vec<TopicPartition> = self
            .partitions
            .iter()
            .filter(|(_, state)| state.awaiting_committed)
            .map(|(tp, _)| tp.clone())
            .collect();
        if awaiting.is_empty() {
            return;
        }
        let fetched = match self.group_coordinator().await {
            Ok(connection) => match self.group.as_ref() {
                Some(group) => {
                    offsets::fetch_committed(
                        &connection,
                        &group.group_id,
                        &awaiting,
                        self.config.request_timeout,
                        self.config.retry_backoff,
                    )
                    .await
                }
                None => return,
            },
            Err(error) => Err(error),
        };
        let committed = match fetched {
            Ok(committed) => committed,
            Err(error) => {
                tracing::debug!(%error, "committed offsets not fetched; asking again");
                if let Some(group) = self.group.as_mut()
                    && !matches!(error, Error::Broker { code: 88 | 14, .. })
                {
                    group.coordinator = None;
                }
                tokio::time::sleep(self.config.retry_backoff).await;
                return;
            }
        };
        for tp in awaiting {
            // Still assigned and still awaiting: a rebalance or seek meanwhile decided.
            let Some(state) = self.partitions.get_mut(&tp) else {
                continue;
            };
            if !state.awaiting_committed {
                continue;
            }
            state.awaiting_committed = false;
            if let Some(offset) = committed.get(&tp) {
                state.position = Some(*offset);
                state.reset = None;
                state.last_record_epoch = None;
            }
        }
    }
}
