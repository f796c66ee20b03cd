//! The replication shell (tokio): one replica fetcher per leader broker this broker follows
//! (Kafka's `ReplicaFetcherThread`, `num.replica.fetchers=1`), the `isr-expiration` task, and
//! the sender of AlterPartition requests to the active controller.
//!
//! Driven by the metadata image: on every image change the hosted partitions take their new
//! state (becoming leader assigns the epoch start, see `broker.rs`), and a fetcher is started
//! for every leader that has none. A fetcher recomputes the partitions it fetches from the
//! image on every round and ends when none is left. It fetches from each partition's log end
//! with the epoch of its last record (KIP-595); the leader answers records up to its log end,
//! or a diverging epoch to truncate to (see `Partition::apply_fetched`).
//!
//! Decisions live in `replication.rs` (pure); the partition state in `broker.rs`; this file only
//! moves bytes and timers.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use bytes::{BufMut, Bytes, BytesMut};
use kafka_protocol::messages::alter_partition_request::{BrokerState, PartitionData, TopicData};
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::{
    AlterPartitionRequest, ApiKey, FetchRequest, FetchResponse, RequestHeader, RequestKind,
    ResponseHeader, ResponseKind, TopicName,
};
use kafka_protocol::protocol::{Decodable, Encodable, StrBytes};
use logjam_storage::{EpochEndOffset, LeaderEpoch, Offset};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::task::JoinHandle;

use crate::broker::{Broker, IsrChange, Partition};
use crate::metadata::BrokerId;

/// The Fetch version replica fetchers speak: 12 is the first with `LastFetchedEpoch` and
/// `DivergingEpoch`, and still names topics.
const FETCH_VERSION: i16 = 12;

/// Kafka's `replica.fetch.backoff.ms` default: the pause after a failed fetch.
const FETCH_BACKOFF: Duration = Duration::from_millis(1000);

/// The largest response frame a fetcher accepts.
const MAX_RESPONSE_BYTES: usize = 100 * 1024 * 1024;

/// How long an AlterPartition may wait for the controller.
const ALTER_PARTITION_TIMEOUT: Duration = Duration::from_secs(10);

/// Runs the replication of a broker until the process stops: refreshes partitions and fetchers
/// on image changes, checks ISR expiration every `replica.lag.time.max.ms / 2`, and sends the
/// ISR changes partitions propose.
pub async fn run(broker: Arc<Broker>) {
    if !broker.config().is_broker() {
        return;
    }
    let Some(mut isr_changes) = broker.take_isr_changes() else {
        return;
    };
    let mut images = broker.quorum().subscribe_image();
    let lag_ms = broker.replica_lag_time_max_ms().max(2) as u64;
    let mut expiration = tokio::time::interval(Duration::from_millis(lag_ms / 2));
    let mut fetchers: HashMap<BrokerId, JoinHandle<()>> = HashMap::new();
    refresh(&broker, &mut fetchers);
    loop {
        tokio::select! {
            changed = images.changed() => {
                if changed.is_err() {
                    return;
                }
                refresh(&broker, &mut fetchers);
            }
            _ = expiration.tick() => {
                for partition in broker.hosted_partitions() {
                    if let Some(change) = partition.maybe_shrink_isr() {
                        tokio::spawn(send_alter_partition(Arc::clone(&broker), partition, change));
                    }
                }
                refresh(&broker, &mut fetchers);
            }
            Some((partition, change)) = isr_changes.recv() => {
                tokio::spawn(send_alter_partition(Arc::clone(&broker), partition, change));
            }
        }
    }
}

/// Applies the image to every hosted partition and starts a fetcher for each leader followed.
fn refresh(broker: &Arc<Broker>, fetchers: &mut HashMap<BrokerId, JoinHandle<()>>) {
    let me = BrokerId(broker.config().node_id);
    let image = broker.image();
    let mut leaders = Vec::new();
    for topic in image.topics.values() {
        for (index, state) in &topic.partitions {
            if !state.replicas.contains(&me) {
                continue;
            }
            // Opens the log if needed and applies the state (leader or follower).
            if broker.partition(&topic.name, *index).is_none() {
                continue;
            }
            if state.leader.is_some() && state.leader != me && !leaders.contains(&state.leader) {
                leaders.push(state.leader);
            }
        }
    }
    fetchers.retain(|_, handle| !handle.is_finished());
    for leader in leaders {
        fetchers.entry(leader).or_insert_with(|| {
            tracing::info!(%leader, "starting a replica fetcher");
            tokio::spawn(fetch_from(Arc::clone(broker), leader))
        });
    }
}

/// One partition a fetcher asks for in a round.
struct Wanted {
    topic: String,
    index: i32,
    leader_epoch: i32,
    fetch_offset: i64,
    partition: Arc<Partition>,
}

/// The replica fetcher for `leader`: fetches every partition this broker follows there, until
/// there is none.
async fn fetch_from(broker: Arc<Broker>, leader: BrokerId) {
    let me = BrokerId(broker.config().node_id);
    let wait_ms = broker
        .config()
        .raw
        .get("replica.fetch.wait.max.ms")
        .and_then(|v| v.parse().ok())
        .unwrap_or(500i32);
    let partition_max_bytes = broker
        .config()
        .raw
        .get("replica.fetch.max.bytes")
        .and_then(|v| v.parse().ok())
        .unwrap_or(1_048_576i32);
    let mut stream: Option<TcpStream> = None;
    let mut correlation_id = 0i32;
    loop {
        let image = broker.image();
        let mut wanted = Vec::new();
        let mut topics: Vec<FetchTopic> = Vec::new();
        for topic in image.topics.values() {
            let mut partitions = Vec::new();
            for (index, state) in &topic.partitions {
                if state.leader != leader || leader == me || !state.replicas.contains(&me) {
                    continue;
                }
                let Some(partition) = broker.partition(&topic.name, *index) else {
                    continue;
                };
                let (fetch_offset, last_fetched_epoch, log_start_offset) =
                    partition.follower_fetch_position();
                partitions.push(
                    FetchPartition::default()
                        .with_partition(*index)
                        .with_current_leader_epoch(state.leader_epoch)
                        .with_fetch_offset(fetch_offset)
                        .with_last_fetched_epoch(last_fetched_epoch)
                        .with_log_start_offset(log_start_offset)
                        .with_partition_max_bytes(partition_max_bytes),
                );
                wanted.push(Wanted {
                    topic: topic.name.clone(),
                    index: *index,
                    leader_epoch: state.leader_epoch,
                    fetch_offset,
                    partition,
                });
            }
            if !partitions.is_empty() {
                topics.push(
                    FetchTopic::default()
                        .with_topic(TopicName(StrBytes::from_string(topic.name.clone())))
                        .with_partitions(partitions),
                );
            }
        }
        if wanted.is_empty() {
            tracing::info!(%leader, "replica fetcher has nothing left to fetch");
            return;
        }
        let Some(registration) = image.brokers.get(&leader) else {
            tokio::time::sleep(FETCH_BACKOFF).await;
            continue;
        };
        let address = (registration.host.clone(), registration.port);
        let request = FetchRequest::default()
            .with_replica_id(kafka_protocol::messages::BrokerId(me.0))
            .with_max_wait_ms(wait_ms)
            .with_min_bytes(1)
            .with_max_bytes(i32::MAX)
            .with_session_id(0)
            .with_session_epoch(-1)
            .with_topics(topics);
        correlation_id = correlation_id.wrapping_add(1);
        let wait =
            Duration::from_millis(u64::try_from(wait_ms).unwrap_or(500)) + Duration::from_secs(10);
        let response = tokio::time::timeout(
            wait,
            exchange(&mut stream, &address, correlation_id, &request),
        )
        .await
        .ok()
        .flatten();
        let Some(response) = response else {
            stream = None;
            tracing::debug!(%leader, "replica fetch failed; backing off");
            tokio::time::sleep(FETCH_BACKOFF).await;
            continue;
        };
        let mut any_error = false;
        for topic in response.responses {
            for data in topic.partitions {
                let Some(entry) = wanted
                    .iter()
                    .find(|w| w.topic == topic.topic.0.as_str() && w.index == data.partition_index)
                else {
                    continue;
                };
                if data.error_code != 0 {
                    tracing::debug!(%leader, topic = %entry.topic, partition = entry.index,
                        error = data.error_code, "replica fetch error");
                    any_error = true;
                    continue;
                }
                let diverging = (data.diverging_epoch.epoch >= 0
                    || data.diverging_epoch.end_offset >= 0)
                    .then_some(EpochEndOffset {
                        leader_epoch: LeaderEpoch(data.diverging_epoch.epoch),
                        end_offset: Offset(data.diverging_epoch.end_offset),
                    });
                let records = data.records.unwrap_or_default();
                let partition = Arc::clone(&entry.partition);
                let (leader_epoch, fetch_offset) = (entry.leader_epoch, entry.fetch_offset);
                let high_watermark = data.high_watermark;
                let applied = tokio::task::spawn_blocking(move || {
                    partition.apply_fetched(
                        leader_epoch,
                        fetch_offset,
                        diverging,
                        &records,
                        high_watermark,
                    )
                })
                .await;
                if let Ok(Err(error)) = applied {
                    tracing::error!(%leader, topic = %entry.topic, partition = entry.index,
                        %error, "cannot apply fetched data");
                    any_error = true;
                }
            }
        }
        if any_error {
            tokio::time::sleep(FETCH_BACKOFF).await;
        }
    }
}

/// Sends `request` on the fetcher's connection (opening it if needed) and reads the answer.
async fn exchange(
    stream: &mut Option<TcpStream>,
    address: &(String, u16),
    correlation_id: i32,
    request: &FetchRequest,
) -> Option<FetchResponse> {
    if stream.is_none() {
        let connected = TcpStream::connect((address.0.as_str(), address.1))
            .await
            .ok()?;
        connected.set_nodelay(true).ok()?;
        *stream = Some(connected);
    }
    let connection = stream.as_mut()?;
    let key = ApiKey::Fetch;
    let mut buf = BytesMut::new();
    buf.put_i32(0);
    RequestHeader::default()
        .with_request_api_key(key as i16)
        .with_request_api_version(FETCH_VERSION)
        .with_correlation_id(correlation_id)
        .with_client_id(Some(StrBytes::from_static_str("logjam-replica-fetcher")))
        .encode(&mut buf, key.request_header_version(FETCH_VERSION))
        .ok()?;
    request.encode(&mut buf, FETCH_VERSION).ok()?;
    let length = i32::try_from(buf.len() - 4).ok()?;
    buf[..4].copy_from_slice(&length.to_be_bytes());
    connection.write_all(&buf).await.ok()?;
    let size = usize::try_from(connection.read_i32().await.ok()?).ok()?;
    if size > MAX_RESPONSE_BYTES {
        return None;
    }
    let mut frame = vec![0u8; size];
    connection.read_exact(&mut frame).await.ok()?;
    let mut frame = Bytes::from(frame);
    let header =
        ResponseHeader::decode(&mut frame, key.response_header_version(FETCH_VERSION)).ok()?;
    if header.correlation_id != correlation_id {
        return None;
    }
    FetchResponse::decode(&mut frame, FETCH_VERSION).ok()
}

/// Sends one ISR change to the active controller; on refusal or silence the partition forgets
/// it so that it can be proposed again. On success the change takes effect when the new
/// partition epoch reaches this broker's image.
async fn send_alter_partition(broker: Arc<Broker>, partition: Arc<Partition>, change: IsrChange) {
    let image = broker.image();
    let Some(topic) = image.topics.get(&change.topic_partition.topic) else {
        partition.isr_change_failed(&change);
        return;
    };
    let request = AlterPartitionRequest::default()
        .with_broker_id(kafka_protocol::messages::BrokerId(broker.config().node_id))
        .with_broker_epoch(broker.quorum().status().broker_epoch.unwrap_or(-1))
        .with_topics(vec![
            TopicData::default()
                .with_topic_id(topic.id)
                .with_partitions(vec![
                    PartitionData::default()
                        .with_partition_index(change.topic_partition.partition)
                        .with_leader_epoch(change.leader_epoch)
                        .with_new_isr_with_epochs(
                            change
                                .isr
                                .iter()
                                .map(|id| {
                                    BrokerState::default()
                                        .with_broker_id(kafka_protocol::messages::BrokerId(id.0))
                                        .with_broker_epoch(
                                            image.brokers.get(id).map_or(-1, |b| b.broker_epoch.0),
                                        )
                                })
                                .collect(),
                        )
                        .with_leader_recovery_state(0)
                        .with_partition_epoch(change.partition_epoch),
                ]),
        ]);
    let response = broker
        .quorum()
        .forward(
            RequestKind::AlterPartition(request),
            ALTER_PARTITION_TIMEOUT,
        )
        .await;
    let error = match response {
        Some(ResponseKind::AlterPartition(response)) => {
            // A change the controller found empty leaves the partition epoch as it was: no new
            // image will end the pending state, so end it here.
            let unchanged = response
                .topics
                .iter()
                .flat_map(|t| &t.partitions)
                .any(|p| p.error_code == 0 && p.partition_epoch == change.partition_epoch);
            if unchanged {
                partition.isr_change_failed(&change);
            }
            if response.error_code != 0 {
                Some(response.error_code)
            } else {
                response
                    .topics
                    .iter()
                    .flat_map(|t| &t.partitions)
                    .map(|p| p.error_code)
                    .find(|code| *code != 0)
            }
        }
        _ => Some(-1),
    };
    match error {
        None => tracing::info!(partition = %change.topic_partition, isr = ?change.isr,
            "AlterPartition committed"),
        Some(code) => {
            tracing::warn!(partition = %change.topic_partition, isr = ?change.isr, code,
                "AlterPartition refused or unanswered");
            partition.isr_change_failed(&change);
        }
    }
}
