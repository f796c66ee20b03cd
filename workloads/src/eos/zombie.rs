//! A zombie's pause (part of [`EosClient`]): the member stops mid-transaction as in a GC
//! pause (no heartbeat, no request) for the configured pause, past its session timeout, and
//! stays stopped until the takeover the zombie mode exists to show has happened: another
//! member committed offsets past this op's inputs. On a loaded machine the group can take
//! longer than the pause to expire the member, rebalance and let another member commit, and a
//! zombie that woke first would show nothing. The takeover is read by an observer consumer
//! of the same group that never joins it, so the zombie itself still says nothing.

use std::time::Duration;

use super::*;

/// How much longer than its pause a zombie waits for its takeover. The zombie scenarios set
/// `transaction.timeout.ms` to 30 s and pause 10 s, so the paused transaction is still open
/// when the zombie wakes: the fence they show is the group's, not the coordinator's abort.
const TAKEOVER_WAIT: Duration = Duration::from_secs(10);

/// How often the observer reads the group's committed offsets.
const TAKEOVER_POLL: Duration = Duration::from_millis(200);

impl EosClient {
    /// Pauses this member (already holding `offsets` of consumed input, not yet committed)
    /// for `pause`, then until its takeover is seen or [`TAKEOVER_WAIT`] passes; returns how
    /// long it was paused.
    pub(super) async fn zombie_pause(
        &self,
        pause: Duration,
        offsets: &BTreeMap<TopicPartition, Offset>,
    ) -> Duration {
        let started = Instant::now();
        let consumer = self.consumer.as_ref().expect("created");
        consumer.pause_heartbeats(pause + TAKEOVER_WAIT);
        tokio::time::sleep(pause).await;
        let taken_over = self
            .await_takeover(offsets, started + pause + TAKEOVER_WAIT)
            .await;
        // Wake: the heartbeats resume and learn what the group decided meanwhile.
        consumer.pause_heartbeats(Duration::ZERO);
        let paused = started.elapsed();
        tracing::info!(?paused, taken_over, "zombie: waking");
        paused
    }

    /// Whether, before `deadline`, the group's committed offset of one of `offsets`'
    /// partitions reached this op's next offset there (another member processed and
    /// committed the same inputs).
    async fn await_takeover(
        &self,
        offsets: &BTreeMap<TopicPartition, Offset>,
        deadline: Instant,
    ) -> bool {
        let Ok(mut observer) = super::final_reads::group_observer(&self.settings) else {
            return false;
        };
        let partitions: Vec<TopicPartition> = offsets.keys().cloned().collect();
        loop {
            if let Ok(committed) = observer.committed(&partitions).await
                && offsets
                    .iter()
                    .any(|(tp, next)| committed.get(tp).is_some_and(|c| c.0 >= next.0))
            {
                return true;
            }
            if Instant::now() + TAKEOVER_POLL >= deadline {
                return false;
            }
            tokio::time::sleep(TAKEOVER_POLL).await;
        }
    }
}
