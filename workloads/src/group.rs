//! The group workload: the queue workload in Jepsen's subscribe mode. Sends are the queue's;
//! consumers `subscribe` to the topic as members of one consumer group (classic, or KIP-848
//! with `--set group.protocol=consumer`) instead of assigning partitions themselves, commit their positions
//! after every poll (`commit_sync`, so a fresh member resumes from the committed offsets),
//! and every assignment change the client saw is written into the history as a `rebalance`
//! op ([`logjam_history::Rebalance`]): generation, member id, partitions assigned and revoked,
//! cause. The final phase is the queue's: assign-mode reads of every partition to its end.
//!
//! The queue generator drives it; its `assign` ops become `subscribe` ops (a member's first
//! poll subscribes it too; subscribing again to the same topic changes nothing, as in Kafka),
//! its crashes retire the process (the consumer leaves the group on close; a fresh member
//! joins in its place, and the group rebalances). At most `max_members` processes are members
//! at once (the harness's `--concurrency`); a process beyond them records its `subscribe` as
//! `fail` and only sends: the schedule opens processes whenever every other is busy, and
//! every member that joins makes the whole group rebalance. The leaving member's own revocation is not
//! recorded (the client is gone); its process's ops end there.

mod adapter;

pub use adapter::{GroupSettings, GroupWorkload};

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use logjam_client::consumer::Consumer;
use logjam_client::consumer::group::RebalanceEvent;
use logjam_history::{Function, Key, MicroOp, OpType, OpValue, Process, ProcessId, Rebalance};

use crate::queue::{Invocation, QueueClient, Targets, polled_reads};
use crate::recorder::{RecordError, Recorder};
use crate::workload::{self, Completion};

/// Member settings unless the run's consumer properties give them: heartbeats often enough
/// that a rebalance reaches every member within a fraction of a second (Kafka's 3 s would
/// keep a group of churning members rebalancing), and a rebalance timeout
/// (`max.poll.interval.ms`) of seconds, not Kafka's 5 min: a process the schedule leaves idle
/// does not poll, so it cannot rejoin, and the group would wait for it that long.
const MEMBER_DEFAULTS: &[(&str, &str)] = &[
    ("heartbeat.interval.ms", "200"),
    ("session.timeout.ms", "6000"),
    ("max.poll.interval.ms", "3000"),
];

/// The [`MEMBER_DEFAULTS`] that `consumer` (the run's consumer properties) does not set.
/// Under `group.protocol=consumer` (KIP-848) the coordinator runs the session clock
/// (`group.consumer.session.timeout.ms`) and sets the heartbeat interval, and the client
/// refuses both keys, so only the rebalance timeout is a member default there.
fn member_defaults<'a>(
    consumer: &'a [(String, String)],
) -> impl Iterator<Item = (&'a str, &'a str)> + 'a {
    let kip848 = consumer
        .iter()
        .any(|(k, v)| k == "group.protocol" && v.trim().eq_ignore_ascii_case("consumer"));
    MEMBER_DEFAULTS
        .iter()
        .filter(move |(key, _)| !consumer.iter().any(|(k, _)| k == key))
        .filter(move |(key, _)| !kip848 || *key == "max.poll.interval.ms")
        .copied()
}

/// How long a poll of a member outside any generation may wait for its join to finish.
const JOIN_POLL_TIMEOUT: Duration = Duration::from_secs(2);

/// How long a commit after a poll, or a member's leaving, may take: a member stuck on a
/// coordinator that does not answer would hold its place in the group (and its process).
const GROUP_CALL_TIMEOUT: Duration = Duration::from_secs(5);

/// A logical client process of the group workload: the queue's sender, and a consumer that
/// subscribes on its first `subscribe` op or poll.
pub struct GroupClient {
    process: ProcessId,
    settings: Arc<GroupSettings>,
    recorder: Arc<Recorder>,
    targets: Arc<Targets>,
    members: Arc<AtomicUsize>,
    sender: QueueClient,
    consumer: Option<Consumer>,
}

impl std::fmt::Debug for GroupClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GroupClient")
            .field("process", &self.process)
            .finish_non_exhaustive()
    }
}

impl GroupClient {
    /// A fresh process `process`; it connects on its first op.
    pub fn new(
        process: ProcessId,
        settings: Arc<GroupSettings>,
        recorder: Arc<Recorder>,
        targets: Arc<Targets>,
        members: Arc<AtomicUsize>,
    ) -> GroupClient {
        let sender = QueueClient::new(
            process,
            Arc::new(settings.queue.clone()),
            recorder.clone(),
            targets.clone(),
        );
        GroupClient {
            process,
            settings,
            recorder,
            targets,
            members,
            sender,
            consumer: None,
        }
    }

    fn record(
        &self,
        op_type: OpType,
        f: Function,
        value: OpValue,
        error: Option<String>,
    ) -> Result<(), RecordError> {
        self.recorder
            .record(
                Process::Client(self.process),
                op_type,
                f,
                value,
                error.map(Into::into),
            )
            .map(drop)
    }

    /// Every key of the topic: what a subscription covers.
    fn keys(&self) -> Vec<Key> {
        (0..self.settings.queue.keys)
            .map(|key| Key(i64::from(key)))
            .collect()
    }

    /// Invokes one operation and records its invoke and completion (and the rebalances the
    /// client saw meanwhile). After [`Completion::Info`] the process is done.
    ///
    /// # Errors
    /// Only when the history cannot be written; cluster errors become `fail`/`info` ops.
    pub async fn invoke(&mut self, invocation: Invocation) -> Result<Completion, RecordError> {
        match invocation {
            Invocation::Send { .. } | Invocation::Crash => self.sender.invoke(invocation).await,
            Invocation::Assign { .. } => self.subscribe().await,
            Invocation::Poll => {
                if self.consumer.is_none() {
                    let completion = self.subscribe().await?;
                    if completion != Completion::Ok {
                        return Ok(completion);
                    }
                }
                self.poll().await
            }
        }
    }

    /// A `subscribe` op: the first creates the member and subscribes it to the topic (the
    /// polls that follow join the group); later ones change nothing, as in Kafka.
    async fn subscribe(&mut self) -> Result<Completion, RecordError> {
        let value = OpValue::Keys(self.keys());
        self.record(OpType::Invoke, Function::Subscribe, value.clone(), None)?;
        if self.consumer.is_some() {
            // Kafka's `subscribe` to the topics already subscribed changes nothing (no
            // rejoin): the group rebalances when members come and go.
            self.record(OpType::Ok, Function::Subscribe, value, None)?;
            return Ok(Completion::Ok);
        }
        if self.members.fetch_add(1, Ordering::SeqCst) >= self.settings.max_members {
            self.members.fetch_sub(1, Ordering::SeqCst);
            let error = format!(
                "the group has its {} members already; this process only sends",
                self.settings.max_members
            );
            self.record(OpType::Fail, Function::Subscribe, value, Some(error))?;
            return Ok(Completion::Fail);
        }
        let queue = &self.settings.queue;
        let properties = queue
            .consumer
            .iter()
            .map(|(key, value)| (key.as_str(), value.as_str()))
            .chain([
                ("group.id", self.settings.group_id.as_str()),
                ("enable.auto.commit", "false"),
            ])
            .chain(member_defaults(&queue.consumer));
        let subscribed = Consumer::from_properties(properties)
            .map_err(|error| format!("consumer: {error}"))
            .and_then(|mut consumer| {
                consumer
                    .subscribe([queue.topic.clone()])
                    .map(|()| consumer)
                    .map_err(|error| format!("subscribe: {error}"))
            });
        match subscribed {
            Ok(consumer) => {
                self.consumer = Some(consumer);
                self.record(OpType::Ok, Function::Subscribe, value, None)?;
                Ok(Completion::Ok)
            }
            Err(error) => {
                self.members.fetch_sub(1, Ordering::SeqCst);
                self.record(OpType::Fail, Function::Subscribe, value, Some(error))?;
                Ok(Completion::Fail)
            }
        }
    }

    /// One poll (which may join or rejoin the group), then a `commit_sync` of the positions
    /// reached, then the rebalances the client saw, each as its own `rebalance` op. A failed
    /// poll changed nothing on the cluster: a definite `fail`. A failed commit is not an op
    /// (the next member re-reads from the last committed offsets: duplicates the subscribe
    /// policy allows).
    async fn poll(&mut self) -> Result<Completion, RecordError> {
        let invoke = OpValue::MicroOps(vec![MicroOp::Poll { reads: None }]);
        self.record(OpType::Invoke, Function::Poll, invoke.clone(), None)?;
        let consumer = self.consumer.as_mut().expect("subscribed before polling");
        // A member outside any generation gives its join time to finish (a join cut short
        // by the poll's deadline loses the JoinGroup answer and starts over).
        let timeout = if consumer.group_generation().is_some() {
            self.settings.queue.poll_timeout
        } else {
            JOIN_POLL_TIMEOUT
        };
        let polled = match consumer.poll(timeout).await {
            Ok(records) => Ok(polled_reads(consumer, records, &self.targets)),
            Err(error) => Err(error.to_string()),
        };
        let completion = match polled {
            Err(error) => {
                self.record(OpType::Fail, Function::Poll, invoke, Some(error))?;
                Completion::Fail
            }
            Ok(reads) => {
                self.record(
                    OpType::Ok,
                    Function::Poll,
                    OpValue::MicroOps(vec![MicroOp::Poll { reads: Some(reads) }]),
                    None,
                )?;
                let consumer = self.consumer.as_mut().expect("subscribed");
                if !consumer.assignment().is_empty() {
                    let _ = tokio::time::timeout(GROUP_CALL_TIMEOUT, consumer.commit_sync()).await;
                }
                Completion::Ok
            }
        };
        self.record_rebalances()?;
        Ok(completion)
    }

    /// Writes every assignment change the client saw since the last call.
    fn record_rebalances(&mut self) -> Result<(), RecordError> {
        let Some(consumer) = self.consumer.as_mut() else {
            return Ok(());
        };
        for event in consumer.take_rebalance_events() {
            let value = OpValue::Json(serde_json::to_value(rebalance(&event)).expect("plain data"));
            self.record(OpType::Invoke, Function::Rebalance, value.clone(), None)?;
            self.record(OpType::Ok, Function::Rebalance, value, None)?;
        }
        Ok(())
    }

    /// Leaves the group (closing the consumer) and closes the sender.
    pub async fn close(mut self) {
        if let Some(consumer) = self.consumer.take() {
            let _ = tokio::time::timeout(GROUP_CALL_TIMEOUT, consumer.close()).await;
            self.members.fetch_sub(1, Ordering::SeqCst);
        }
        self.sender.close().await;
    }
}

/// The history's view of one client rebalance event: partitions as keys.
fn rebalance(event: &RebalanceEvent) -> Rebalance {
    let keys = |partitions: &[logjam_client::ids::TopicPartition]| {
        let mut keys: Vec<Key> = partitions
            .iter()
            .map(|tp| Key(i64::from(tp.partition.0)))
            .collect();
        keys.sort();
        keys
    };
    Rebalance {
        generation: event.generation,
        member_id: event.member_id.clone(),
        assigned: keys(&event.assigned),
        revoked: keys(&event.revoked),
        cause: event.cause.name().to_owned(),
    }
}

impl workload::Client for GroupClient {
    type Op = Invocation;

    fn process(&self) -> ProcessId {
        self.process
    }

    async fn invoke(&mut self, op: Invocation) -> Result<Completion, RecordError> {
        GroupClient::invoke(self, op).await
    }

    async fn close(self) {
        GroupClient::close(self).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn props(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    /// The defaults make a valid consumer under either protocol: KIP-848 members get only the
    /// rebalance timeout (the client refuses the classic clocks by name), and a key the run
    /// sets is never overridden.
    #[test]
    fn member_defaults_fit_the_protocol_and_yield_to_the_runs_settings() {
        let classic = props(&[("session.timeout.ms", "9000")]);
        let defaults: Vec<_> = member_defaults(&classic).collect();
        assert_eq!(
            defaults,
            vec![
                ("heartbeat.interval.ms", "200"),
                ("max.poll.interval.ms", "3000")
            ]
        );
        let kip848 = props(&[("group.protocol", "Consumer")]);
        let defaults: Vec<_> = member_defaults(&kip848).collect();
        assert_eq!(defaults, vec![("max.poll.interval.ms", "3000")]);
        for consumer in [classic, kip848] {
            let all = consumer
                .iter()
                .map(|(k, v)| (k.as_str(), v.as_str()))
                .chain([("bootstrap.servers", "127.0.0.1:9"), ("group.id", "g")])
                .chain(member_defaults(&consumer));
            Consumer::from_properties(all).expect("a valid member");
        }
    }
}
