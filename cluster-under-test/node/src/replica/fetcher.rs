//! The replication shell (tokio): one replica fetcher per leader broker this broker follows
//! (Kafka's `ReplicaFetcherThread`, `num.replica.fetchers=1`), the `isr-expiration` task, and
//! the sender of AlterPartition requests to the active controller.
//!
//! Driven by the metadata image: on every image change the hosted partitions take their new
//! state (becoming leader assigns the epoch start, see `replica/manager.rs`), and a fetcher is started
//! for every leader that has none. A fetcher recomputes the partitions it fetches from the
//! image on every round and ends when none is left. It fetches from each partition's log end
//! with the epoch of its last record (KIP-595); the leader answers records up to its log end,
//! or a diverging epoch to truncate to (see `Partition::apply_fetched`).
//!
//! Decisions live in `replication.rs` (pure); the partition state in `partition.rs`; this file only
//! moves bytes and timers.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::{ApiKey, FetchRequest, RequestKind, ResponseKind, TopicName};
use kafka_protocol::protocol::StrBytes;
use logjam_storage::{EpochEndOffset, LeaderEpoch, Offset};
use tokio::task::JoinHandle;

use crate::controller::Quorum;
use crate::metadata::BrokerId;
use crate::network::NodeClient;
use crate::replica::alter_partition::send_alter_partition;
use crate::replica::{Fetched, Partition, ReplicaManager};

/// The Fetch version replica fetchers speak: 12 is the first with `LastFetchedEpoch` and
/// `DivergingEpoch`, and still names topics.
const FETCH_VERSION: i16 = 12;

/// Kafka's `replica.fetch.backoff.ms` default: the pause after a failed fetch.
const FETCH_BACKOFF: Duration = Duration::from_millis(1000);

/// The largest response frame a fetcher accepts, and the most an answer may hold by
/// `replica.fetch.response.max.bytes` (1 MiB under it, for headers and a first batch past
/// the limit, which KIP-74 returns whole).
const MAX_RESPONSE_BYTES: usize = 100 * 1024 * 1024;
const MAX_FETCH_ANSWER_BYTES: i32 = (MAX_RESPONSE_BYTES - 1024 * 1024) as i32;

/// How long a fetcher waits to connect to a leader.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// Runs the replication of a broker until the process stops: applies every new image to the
/// hosted partitions and starts fetchers, checks ISR expiration every
/// `replica.lag.time.max.ms / 2`, and sends the ISR changes partitions propose.
pub async fn run(replicas: Arc<ReplicaManager>, quorum: Arc<Quorum>) {
    if !replicas.config().is_broker() {
        return;
    }
    let Some(mut isr_changes) = replicas.take_isr_changes() else {
        return;
    };
    let mut images = replicas.subscribe_image();
    let lag_ms = replicas.replica_lag_time_max_ms().max(2) as u64;
    let mut expiration = tokio::time::interval(Duration::from_millis(lag_ms / 2));
    let mut fetchers: HashMap<BrokerId, JoinHandle<()>> = HashMap::new();
    refresh(&replicas, &mut fetchers).await;
    loop {
        tokio::select! {
            changed = images.changed() => {
                if changed.is_err() {
                    return;
                }
                refresh(&replicas, &mut fetchers).await;
            }
            _ = expiration.tick() => {
                for partition in replicas.hosted_partitions() {
                    if let Some(change) = partition.maybe_shrink_isr() {
                        tokio::spawn(send_alter_partition(
                            Arc::clone(&replicas), Arc::clone(&quorum), partition, change));
                    }
                }
                refresh(&replicas, &mut fetchers).await;
            }
            Some((partition, change)) = isr_changes.recv() => {
                tokio::spawn(send_alter_partition(
                    Arc::clone(&replicas), Arc::clone(&quorum), partition, change));
            }
        }
    }
}

/// Applies the image to the hosted partitions (opening new logs, off the async workers) and
/// starts a fetcher for each leader followed.
async fn refresh(replicas: &Arc<ReplicaManager>, fetchers: &mut HashMap<BrokerId, JoinHandle<()>>) {
    let me = replicas.node_id();
    let applying = Arc::clone(replicas);
    let Ok(hosted) = tokio::task::spawn_blocking(move || applying.apply_image()).await else {
        return;
    };
    let mut leaders = Vec::new();
    for (_, state) in hosted {
        if state.leader.is_some() && state.leader != me && !leaders.contains(&state.leader) {
            leaders.push(state.leader);
        }
    }
    fetchers.retain(|_, handle| !handle.is_finished());
    for leader in leaders {
        fetchers.entry(leader).or_insert_with(|| {
            tracing::info!(%leader, "starting a replica fetcher");
            tokio::spawn(fetch_from(Arc::clone(replicas), leader))
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

/// What a replica fetch asks for, from the `replica.fetch.*` settings as Kafka's
/// ReplicaFetcherThread takes them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct FetchSettings {
    /// `replica.fetch.wait.max.ms` (500): how long the leader may hold the fetch.
    wait_ms: i32,
    /// `replica.fetch.min.bytes` (1): the leader answers as soon as this much is there.
    min_bytes: i32,
    /// `replica.fetch.max.bytes` (1 MiB): per partition.
    partition_max_bytes: i32,
    /// `replica.fetch.response.max.bytes` (10 MiB): per answer.
    response_max_bytes: i32,
}

impl FetchSettings {
    fn from_config(config: &crate::config::Config) -> FetchSettings {
        // Int keys: the config validated them into i32's range.
        let int = |key: &str| i32::try_from(config.int(key)).expect("an Int key");
        FetchSettings {
            wait_ms: int("replica.fetch.wait.max.ms"),
            min_bytes: int("replica.fetch.min.bytes"),
            partition_max_bytes: int("replica.fetch.max.bytes"),
            // Clamped to what the fetcher reads as one frame, so an answer always fits.
            response_max_bytes: int("replica.fetch.response.max.bytes").min(MAX_FETCH_ANSWER_BYTES),
        }
    }
}

/// The request's topics: runs of consecutive partitions of one topic, in the given order (a
/// topic may appear twice when the order wraps around inside it, as Kafka's builder allows).
fn fetch_topics(partitions: Vec<(String, FetchPartition)>) -> Vec<FetchTopic> {
    let mut topics: Vec<FetchTopic> = Vec::new();
    for (name, partition) in partitions {
        match topics.last_mut() {
            Some(last) if last.topic.0.as_str() == name => last.partitions.push(partition),
            _ => topics.push(
                FetchTopic::default()
                    .with_topic(TopicName(StrBytes::from_string(name)))
                    .with_partitions(vec![partition]),
            ),
        }
    }
    topics
}

/// The replica fetcher for `leader`: fetches every partition this broker follows there, until
/// there is none.
async fn fetch_from(replicas: Arc<ReplicaManager>, leader: BrokerId) {
    let me = replicas.node_id();
    let FetchSettings {
        wait_ms,
        min_bytes,
        partition_max_bytes,
        response_max_bytes,
    } = FetchSettings::from_config(replicas.config());
    let mut client: Option<NodeClient> = None;
    let mut round: usize = 0;
    loop {
        let image = replicas.image();
        let mut wanted = Vec::new();
        let mut partitions = Vec::new();
        for topic in image.topics.values() {
            for (index, state) in &topic.partitions {
                if state.leader != leader || leader == me || !state.replicas.contains(&me) {
                    continue;
                }
                let Some(partition) = replicas.partition(&topic.name, *index) else {
                    continue;
                };
                let (fetch_offset, last_fetched_epoch, log_start_offset) =
                    partition.follower_fetch_position();
                partitions.push((
                    topic.name.clone(),
                    FetchPartition::default()
                        .with_partition(*index)
                        .with_current_leader_epoch(state.leader_epoch)
                        .with_fetch_offset(fetch_offset)
                        .with_last_fetched_epoch(last_fetched_epoch)
                        .with_log_start_offset(log_start_offset)
                        .with_partition_max_bytes(partition_max_bytes),
                ));
                wanted.push(Wanted {
                    topic: topic.name.clone(),
                    index: *index,
                    leader_epoch: state.leader_epoch,
                    fetch_offset,
                    partition,
                });
            }
        }
        // The leader fills an answer in request order up to `replica.fetch.response.max.bytes`:
        // starting one partition later each round keeps the first ones from starving the rest
        // while many lag (Kafka moves the partitions that returned data to the end).
        if !partitions.is_empty() {
            let count = partitions.len();
            partitions.rotate_left(round % count);
            round = round.wrapping_add(1);
        }
        let topics = fetch_topics(partitions);
        if wanted.is_empty() {
            tracing::info!(%leader, "replica fetcher has nothing left to fetch");
            return;
        }
        let Some(registration) = image.brokers.get(&leader) else {
            tokio::time::sleep(FETCH_BACKOFF).await;
            continue;
        };
        if !client
            .as_ref()
            .is_some_and(|client| client.is_for(&registration.host, registration.port))
        {
            client = Some(NodeClient::new(
                registration.host.clone(),
                registration.port,
                "logjam-replica-fetcher",
                CONNECT_TIMEOUT,
                MAX_RESPONSE_BYTES,
            ));
        }
        let Some(connection) = client.as_ref() else {
            continue;
        };
        let request = FetchRequest::default()
            .with_replica_id(kafka_protocol::messages::BrokerId(me.0))
            .with_max_wait_ms(wait_ms)
            .with_min_bytes(min_bytes)
            .with_max_bytes(response_max_bytes)
            .with_session_id(0)
            .with_session_epoch(-1)
            .with_topics(topics);
        let wait =
            Duration::from_millis(u64::try_from(wait_ms).unwrap_or(500)) + Duration::from_secs(10);
        let response = match connection
            .request(
                &RequestKind::Fetch(request),
                ApiKey::Fetch,
                FETCH_VERSION,
                wait,
            )
            .await
        {
            Ok(ResponseKind::Fetch(response)) => response,
            other => {
                tracing::debug!(%leader, answer = ?other.err(), "replica fetch failed; backing off");
                tokio::time::sleep(FETCH_BACKOFF).await;
                continue;
            }
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
                let fetched = Fetched {
                    leader_epoch: entry.leader_epoch,
                    fetch_offset: entry.fetch_offset,
                    diverging,
                    records: data.records.unwrap_or_default(),
                    high_watermark: data.high_watermark,
                };
                // Most answers append without an fsync: apply them here, sparing a hand-off
                // to a blocking thread and back per fetch (yielding after each, so one large
                // answer does not hold the worker); the rest go to a blocking thread.
                let applied = match entry.partition.try_apply_fetched_now(&fetched) {
                    Some(applied) => {
                        tokio::task::yield_now().await;
                        Ok(applied)
                    }
                    None => {
                        let partition = Arc::clone(&entry.partition);
                        tokio::task::spawn_blocking(move || partition.apply_fetched(&fetched)).await
                    }
                };
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

#[cfg(test)]
mod tests {
    use super::{FetchPartition, FetchSettings, MAX_FETCH_ANSWER_BYTES, fetch_topics};
    use crate::config::Config;

    const NODE: &str = "node.id=1\nprocess.roles=broker,controller\n";

    #[test]
    fn replica_fetches_ask_what_the_settings_say_and_kafkas_defaults_otherwise() {
        let defaults = FetchSettings::from_config(&Config::parse(NODE, &[]).unwrap());
        assert_eq!(
            defaults,
            FetchSettings {
                wait_ms: 500,
                min_bytes: 1,
                partition_max_bytes: 1_048_576,
                response_max_bytes: 10_485_760,
            }
        );
        let overrides = [
            "replica.fetch.wait.max.ms=200",
            "replica.fetch.min.bytes=65536",
            "replica.fetch.max.bytes=4096",
            "replica.fetch.response.max.bytes=8192",
        ]
        .map(String::from);
        let set = FetchSettings::from_config(&Config::parse(NODE, &overrides).unwrap());
        assert_eq!(
            set,
            FetchSettings {
                wait_ms: 200,
                min_bytes: 65_536,
                partition_max_bytes: 4096,
                response_max_bytes: 8192,
            }
        );
    }

    #[test]
    fn an_answer_cap_past_the_frame_limit_is_clamped_to_it() {
        let overrides = ["replica.fetch.response.max.bytes=2147483647".to_owned()];
        let settings = FetchSettings::from_config(&Config::parse(NODE, &overrides).unwrap());
        assert_eq!(settings.response_max_bytes, MAX_FETCH_ANSWER_BYTES);
    }

    #[test]
    fn a_rotated_order_keeps_runs_of_one_topic_together_and_may_repeat_a_topic() {
        let mut order: Vec<(String, FetchPartition)> = [("a", 0), ("a", 1), ("b", 0)]
            .into_iter()
            .map(|(t, p)| (t.to_owned(), FetchPartition::default().with_partition(p)))
            .collect();
        order.rotate_left(1);
        let topics: Vec<(String, Vec<i32>)> = fetch_topics(order)
            .into_iter()
            .map(|t| {
                let indexes = t.partitions.iter().map(|p| p.partition).collect();
                (t.topic.0.to_string(), indexes)
            })
            .collect();
        let expected = [("a", vec![1]), ("b", vec![0]), ("a", vec![0])];
        assert_eq!(topics, expected.map(|(t, p)| (t.to_owned(), p)));
    }
}
