//! The internal topics coordinators keep their state on (`__transaction_state`,
//! `__consumer_offsets`): created on first use as Kafka's brokers do, and a key's coordinator
//! found as the leader of the key's partition. One place for both coordinators.

use kafka_protocol::ResponseError;
use kafka_protocol::messages::create_topics_request::{CreatableTopic, CreatableTopicConfig};
use kafka_protocol::messages::{CreateTopicsRequest, TopicName};
use kafka_protocol::protocol::StrBytes;

use crate::broker::TopicCreator;
use crate::replica::ReplicaManager;

/// Where a key's coordinator is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CoordinatorAddress {
    /// The broker's id.
    pub node_id: i32,
    /// Its advertised host.
    pub host: String,
    /// Its advertised port.
    pub port: u16,
}

/// Whether only coordinators write `topic` (Kafka's `Topic.isInternal`): clients' produces
/// to it are refused, since a load replays every record of it.
pub fn is_internal(topic: &str) -> bool {
    topic == crate::coordinator::group::TOPIC || topic == crate::coordinator::txn::TOPIC
}

/// How an internal topic is created.
#[derive(Debug)]
pub struct InternalTopic<'a> {
    /// Its name.
    pub name: &'static str,
    /// Its partition count.
    pub partitions: i32,
    /// Its configured replication factor (capped by the live brokers at creation).
    pub replication_factor: i16,
    /// Its topic configs.
    pub configs: &'a [(&'static str, String)],
}

/// Creates `topic` when it does not exist yet, its replication factor capped by the live
/// brokers. Answers `COORDINATOR_NOT_AVAILABLE` (retriable) while the topic is missing.
///
/// # Errors
/// `COORDINATOR_NOT_AVAILABLE` while the topic does not exist.
pub async fn ensure(
    replicas: &ReplicaManager,
    topics: &TopicCreator,
    topic: &InternalTopic<'_>,
) -> Result<(), ResponseError> {
    let image = replicas.image();
    if image.topics.contains_key(topic.name) {
        return Ok(());
    }
    let live = image.brokers.values().filter(|b| !b.fenced).count();
    let factor = topic
        .replication_factor
        .min(i16::try_from(live.max(1)).unwrap_or(i16::MAX));
    let configs = topic
        .configs
        .iter()
        .map(|(name, value)| {
            CreatableTopicConfig::default()
                .with_name(StrBytes::from_static_str(name))
                .with_value(Some(StrBytes::from_string(value.clone())))
        })
        .collect();
    let request = CreateTopicsRequest::default()
        .with_timeout_ms(10_000)
        .with_topics(vec![
            CreatableTopic::default()
                .with_name(TopicName(StrBytes::from_static_str(topic.name)))
                .with_num_partitions(topic.partitions)
                .with_replication_factor(factor)
                .with_configs(configs),
        ]);
    let response = topics.create_topics(request).await;
    let code = response
        .topics
        .first()
        .map_or(-1, |created| created.error_code);
    if code != 0 && code != ResponseError::TopicAlreadyExists.code() {
        tracing::warn!(code, "creating {} failed", topic.name);
    }
    Err(ResponseError::CoordinatorNotAvailable)
}

/// The coordinator of partition `index` of `topic`: its leader, when that broker is unfenced.
///
/// # Errors
/// `COORDINATOR_NOT_AVAILABLE` while the partition has no such leader.
pub fn coordinator_of(
    replicas: &ReplicaManager,
    topic: &str,
    index: i32,
) -> Result<CoordinatorAddress, ResponseError> {
    let image = replicas.image();
    let leader = image
        .topics
        .get(topic)
        .and_then(|topic| topic.partitions.get(&index))
        .map(|partition| partition.leader)
        .ok_or(ResponseError::CoordinatorNotAvailable)?;
    let broker = image
        .brokers
        .get(&leader)
        .filter(|broker| !broker.fenced)
        .ok_or(ResponseError::CoordinatorNotAvailable)?;
    Ok(CoordinatorAddress {
        node_id: broker.broker_id.0,
        host: broker.host.clone(),
        port: broker.port,
    })
}
