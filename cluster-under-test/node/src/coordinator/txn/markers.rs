//! The marker sender (Kafka's `TransactionMarkerChannelManager`) and the coordinator's
//! periodic work.
//!
//! Every prepared transaction (PrepareCommit / PrepareAbort in the committed state of a
//! loaded partition) gets one task that writes its markers with real WriteTxnMarkers v1
//! requests, one per partition leader, carrying the coordinator epoch (the leader epoch of
//! the id's `__transaction_state` partition); partitions whose write failed are retried
//! (leaders looked up again) until every marker is written, then CompleteCommit /
//! CompleteAbort is written. A partition whose topic no longer exists is dropped, as Kafka
//! does. The task stops when this node stops coordinating the id; the next coordinator
//! loads the Prepare* state and sends the markers again (the failover resume, logged when it
//! starts and when it completes: a Prepare* older than the partition's load). The same scan
//! aborts transactions open past their timeout ([`transitions::expire`]).

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use kafka_protocol::ResponseError;
use kafka_protocol::messages::write_txn_markers_request::{
    WritableTxnMarker, WritableTxnMarkerTopic,
};
use kafka_protocol::messages::{
    ApiKey, ProducerId, RequestKind, ResponseKind, TopicName, WriteTxnMarkersRequest,
};
use kafka_protocol::protocol::StrBytes;
use tokio::sync::Notify;

use crate::canary::Canary;
use crate::clock::now_ms;
use crate::coordinator::txn::transitions::{self, MarkerWork, TopicPartition};
use crate::coordinator::txn::{TOPIC, TxnCoordinator};
use crate::network::NodeClient;
use crate::replica::ReplicaManager;

/// How often loaded partitions are scanned for prepared and expired transactions (Kafka's
/// `transaction.abort.timed.out.transaction.cleanup.interval.ms` is 10 s; prepared ones are
/// also picked up at once when the coordinator wakes the sender).
const SCAN_INTERVAL: Duration = Duration::from_millis(500);
/// The wait between rounds of a marker task whose writes failed.
const RETRY_BACKOFF: Duration = Duration::from_millis(100);
/// How long one WriteTxnMarkers waits for its answer.
const MARKER_TIMEOUT: Duration = Duration::from_secs(5);

/// The marker tasks running, and the clients they share.
pub struct MarkerSender {
    replicas: Arc<ReplicaManager>,
    /// Per transactional id, the work of its running (or given-up) task and the coordinator
    /// epoch it runs in.
    tasks: Mutex<HashMap<String, (MarkerWork, i32)>>,
    clients: Mutex<HashMap<(String, u16), Arc<NodeClient>>>,
    /// Ids whose timeout abort is being written: a scan does not start another while the
    /// write waits for its commit (the committed state still reads Ongoing until then).
    expiring: Mutex<HashSet<String>>,
    wake: Notify,
}

impl MarkerSender {
    /// A sender for the partitions of `replicas`.
    pub fn new(replicas: Arc<ReplicaManager>) -> MarkerSender {
        MarkerSender {
            replicas,
            tasks: Mutex::new(HashMap::new()),
            clients: Mutex::new(HashMap::new()),
            expiring: Mutex::new(HashSet::new()),
            wake: Notify::new(),
        }
    }

    /// Scans at once (a transaction was just prepared).
    pub fn wake(&self) {
        self.wake.notify_one();
    }

    fn tasks(&self) -> MutexGuard<'_, HashMap<String, (MarkerWork, i32)>> {
        self.tasks
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    fn expiring(&self) -> MutexGuard<'_, HashSet<String>> {
        self.expiring
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    fn client(&self, host: &str, port: u16) -> Arc<NodeClient> {
        let mut clients = self
            .clients
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        Arc::clone(clients.entry((host.to_owned(), port)).or_insert_with(|| {
            Arc::new(NodeClient::new(
                host.to_owned(),
                port,
                "logjam-txn-markers",
                MARKER_TIMEOUT,
                self.replicas.config().socket_request_max_bytes,
            ))
        }))
    }

    fn coordinator_epoch(&self, index: i32) -> Option<i32> {
        self.replicas
            .partition(TOPIC, index)
            .filter(|partition| partition.is_leader())
            .map(|partition| partition.leader_epoch())
    }
}

/// The periodic work: scan, start marker tasks and expire, until the node stops.
pub async fn run(coordinator: Arc<TxnCoordinator>) {
    loop {
        scan(&coordinator);
        tokio::select! {
            () = coordinator.markers.wake.notified() => {}
            () = tokio::time::sleep(SCAN_INTERVAL) => {}
        }
    }
}

fn scan(coordinator: &Arc<TxnCoordinator>) {
    let now = now_ms();
    for index in 0..coordinator.settings.partitions {
        let Ok((prepared, expired)) = coordinator.runtime.read(index, |shard| {
            let mut prepared = Vec::new();
            let mut expired = Vec::new();
            for (id, meta) in shard.iter() {
                if let Some(work) = transitions::marker_work(meta) {
                    prepared.push((id.to_owned(), work, meta.last_update_ms));
                } else if transitions::expire(meta, now).is_some() {
                    expired.push(id.to_owned());
                }
            }
            (prepared, expired)
        }) else {
            continue;
        };
        let Some(epoch) = coordinator.markers.coordinator_epoch(index) else {
            continue;
        };
        // Prepared before this coordinator's load: an earlier coordinator died (or lost the
        // partition) between PrepareCommit/PrepareAbort and the completion; this one resumes.
        let loaded_at_ms = if prepared.is_empty() {
            None
        } else {
            coordinator.runtime.loaded_at_ms(index).ok()
        };
        for (id, work, prepared_ms) in prepared {
            let resumed = loaded_at_ms.is_some_and(|loaded| prepared_ms < loaded);
            {
                let mut tasks = coordinator.markers.tasks();
                if tasks.get(&id) == Some(&(work.clone(), epoch)) {
                    continue;
                }
                tasks.insert(id.clone(), (work.clone(), epoch));
            }
            if resumed {
                tracing::info!(transactional_id = %id, commit = work.commit, epoch,
                    "resuming a transaction a previous coordinator prepared");
            }
            let task = Task {
                id,
                index,
                work,
                epoch,
                resumed,
            };
            tokio::spawn(finish(Arc::clone(coordinator), task));
        }
        for id in expired {
            if !coordinator.markers.expiring().insert(id.clone()) {
                continue;
            }
            let coordinator = Arc::clone(coordinator);
            tokio::spawn(async move {
                tracing::info!(transactional_id = %id, "aborting a transaction past its timeout");
                let expired = coordinator
                    .transit(&id, |current| {
                        Ok((current.and_then(|meta| transitions::expire(meta, now)), ()))
                    })
                    .await;
                coordinator.markers.expiring().remove(&id);
                if expired.is_ok() {
                    coordinator.markers.wake();
                }
            });
        }
    }
}

/// Why a marker task stopped before every marker was written.
enum Stopped {
    /// This node no longer coordinates the id (or its state moved on): the next coordinator
    /// takes over.
    NotCoordinator,
    /// A partition leader answered that this coordinator or producer epoch is stale.
    Fenced(ResponseError),
}

/// One marker task: a prepared transaction of partition `index` in coordinator `epoch`.
struct Task {
    id: String,
    index: i32,
    work: MarkerWork,
    epoch: i32,
    /// Prepared by an earlier coordinator (the failover resume).
    resumed: bool,
}

/// Writes the markers of `work`, then its completion.
async fn finish(coordinator: Arc<TxnCoordinator>, task: Task) {
    let Task {
        id,
        index,
        work,
        epoch,
        resumed,
    } = task;
    let canaries = coordinator.settings.rules.canaries;
    let outcome = if !work.commit && canaries.is_on(Canary::SkipAbortMarker) {
        // CANARY(skip-abort-marker): the abort is completed without its markers.
        Ok(())
    } else if work.commit && canaries.is_on(Canary::CommitBeforeMarkers) {
        // CANARY(commit-before-markers): CompleteCommit first, then one round of markers
        // that nothing retries.
        let _ = complete(&coordinator, &id, &work).await;
        let _ = send_round(
            &coordinator,
            index,
            &work,
            &mut work.partitions.clone(),
            epoch,
        )
        .await;
        coordinator.markers.tasks().remove(&id);
        return;
    } else {
        send_all(&coordinator, &id, index, &work, epoch).await
    };
    match outcome {
        Ok(()) => {
            // Only the completion is retried (Kafka's `tryAppendToLog` retry): a failed
            // write (REQUEST_TIMED_OUT) may still commit, so dropping the task would let the
            // next scan send every marker again, and a late one could close the id's next
            // transaction. Markers are sent again only by a new coordinator epoch.
            let mut completed = true;
            while let Err(error) = complete(&coordinator, &id, &work).await {
                if error == ResponseError::NotCoordinator
                    || coordinator.markers.coordinator_epoch(index) != Some(epoch)
                {
                    tracing::debug!(transactional_id = %id, ?error,
                        "completion not written and no longer coordinator; the next one resumes");
                    completed = false;
                    break;
                }
                tracing::debug!(transactional_id = %id, ?error, "completion not written; retrying it");
                tokio::time::sleep(RETRY_BACKOFF).await;
            }
            if completed && resumed {
                tracing::info!(transactional_id = %id, commit = work.commit, epoch,
                    "completed a transaction a previous coordinator prepared");
            }
            coordinator.markers.tasks().remove(&id);
        }
        Err(Stopped::NotCoordinator) => {
            coordinator.markers.tasks().remove(&id);
        }
        Err(Stopped::Fenced(error)) => {
            // Kept in `tasks`: not retried in this coordinator epoch, as Kafka gives up.
            tracing::warn!(transactional_id = %id, ?error, "markers refused as stale; giving up");
        }
    }
}

async fn complete(
    coordinator: &TxnCoordinator,
    id: &str,
    work: &MarkerWork,
) -> Result<(), ResponseError> {
    let now = now_ms();
    coordinator
        .transit(id, |current| {
            Ok((transitions::complete(current, work, now), ()))
        })
        .await
}

/// Rounds of markers until each partition has its marker.
async fn send_all(
    coordinator: &TxnCoordinator,
    id: &str,
    index: i32,
    work: &MarkerWork,
    epoch: i32,
) -> Result<(), Stopped> {
    let mut remaining = work.partitions.clone();
    loop {
        let current = coordinator.runtime.read(index, |shard| {
            shard.get(id).and_then(transitions::marker_work)
        });
        if current.ok().flatten().as_ref() != Some(work)
            || coordinator.markers.coordinator_epoch(index) != Some(epoch)
        {
            return Err(Stopped::NotCoordinator);
        }
        send_round(coordinator, index, work, &mut remaining, epoch).await?;
        if remaining.is_empty() {
            return Ok(());
        }
        tokio::time::sleep(RETRY_BACKOFF).await;
    }
}

/// One WriteTxnMarkers per partition leader for the `remaining` partitions; those written
/// (or whose topic is gone) are removed from it.
async fn send_round(
    coordinator: &TxnCoordinator,
    index: i32,
    work: &MarkerWork,
    remaining: &mut BTreeSet<TopicPartition>,
    epoch: i32,
) -> Result<(), Stopped> {
    let _ = index;
    let image = coordinator.replicas.image();
    let mut by_leader: BTreeMap<i32, Vec<TopicPartition>> = BTreeMap::new();
    for partition in remaining.clone() {
        match image
            .topics
            .get(&partition.0)
            .and_then(|topic| topic.partitions.get(&partition.1))
        {
            None => {
                tracing::info!(topic = %partition.0, index = partition.1,
                    "no such partition any more: its marker is dropped");
                remaining.remove(&partition);
            }
            Some(state) if state.leader.0 >= 0 => {
                by_leader.entry(state.leader.0).or_default().push(partition);
            }
            Some(_) => {}
        }
    }
    for (leader, partitions) in by_leader {
        let Some(broker) = image.brokers.get(&crate::metadata::BrokerId(leader)) else {
            continue;
        };
        let client = coordinator.markers.client(&broker.host, broker.port);
        let request = marker_request(work, &partitions, epoch);
        let answer = client
            .request(
                &RequestKind::WriteTxnMarkers(request),
                ApiKey::WriteTxnMarkers,
                1,
                MARKER_TIMEOUT,
            )
            .await;
        let response = match answer {
            Ok(ResponseKind::WriteTxnMarkers(response)) => response,
            other => {
                tracing::debug!(leader, ?other, "WriteTxnMarkers failed; retrying");
                continue;
            }
        };
        for marker in &response.markers {
            for topic in &marker.topics {
                for partition in &topic.partitions {
                    let key = (topic.name.to_string(), partition.partition_index);
                    match ResponseError::try_from_code(partition.error_code) {
                        None => {
                            remaining.remove(&key);
                        }
                        Some(
                            error @ (ResponseError::TransactionCoordinatorFenced
                            | ResponseError::InvalidProducerEpoch),
                        ) => return Err(Stopped::Fenced(error)),
                        Some(error) => {
                            tracing::debug!(topic = %key.0, index = key.1, ?error,
                                "marker not written; retrying");
                        }
                    }
                }
            }
        }
    }
    Ok(())
}

fn marker_request(
    work: &MarkerWork,
    partitions: &[TopicPartition],
    coordinator_epoch: i32,
) -> WriteTxnMarkersRequest {
    let mut topics: BTreeMap<&str, Vec<i32>> = BTreeMap::new();
    for (topic, index) in partitions {
        topics.entry(topic).or_default().push(*index);
    }
    WriteTxnMarkersRequest::default().with_markers(vec![
        WritableTxnMarker::default()
            .with_producer_id(ProducerId(work.producer_id))
            .with_producer_epoch(work.producer_epoch)
            .with_transaction_result(work.commit)
            .with_coordinator_epoch(coordinator_epoch)
            .with_topics(
                topics
                    .into_iter()
                    .map(|(name, indexes)| {
                        WritableTxnMarkerTopic::default()
                            .with_name(TopicName(StrBytes::from_string(name.to_owned())))
                            .with_partition_indexes(indexes)
                    })
                    .collect(),
            ),
    ])
}
