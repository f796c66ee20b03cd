//! The internal topics coordinators keep their state on (`__transaction_state`,
//! `__consumer_offsets`): created on first use as Kafka's brokers do, and a key's coordinator
//! found as the leader of the key's partition. One place for both coordinators. As Kafka, a
//! topic is created only with its configured replication factor: until that many brokers are
//! live, its coordinators answer `COORDINATOR_NOT_AVAILABLE` (a cluster of fewer brokers must
//! set `offsets.topic.replication.factor` / `transaction.state.log.replication.factor`).
//! Also the key's partition ([`key`]) and what a client is told when a coordinator's write
//! fails ([`append_error`]). The coming share coordinator lives on the same shell.

pub mod key;

pub use key::partition_for;

use kafka_protocol::ResponseError;
use kafka_protocol::messages::create_topics_request::{CreatableTopic, CreatableTopicConfig};
use kafka_protocol::messages::{CreateTopicsRequest, TopicName};
use kafka_protocol::protocol::StrBytes;

use crate::replica::ReplicaManager;
use crate::topics::TopicCreator;

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

/// The group coordinator's topic: committed offsets and group metadata.
pub const CONSUMER_OFFSETS: &str = "__consumer_offsets";

/// The transaction coordinator's topic: transactional ids' states.
pub const TRANSACTION_STATE: &str = "__transaction_state";

/// Whether only coordinators write `topic` (Kafka's `Topic.isInternal`): clients' produces
/// to it are refused, since a load replays every record of it.
pub fn is_internal(topic: &str) -> bool {
    topic == CONSUMER_OFFSETS || topic == TRANSACTION_STATE
}

/// How an internal topic is created.
#[derive(Debug)]
pub struct InternalTopic<'a> {
    /// Its name.
    pub name: &'static str,
    /// Its partition count.
    pub partitions: i32,
    /// Its configured replication factor (never capped: not enough live brokers, no topic).
    pub replication_factor: i16,
    /// Its topic configs.
    pub configs: &'a [(&'static str, String)],
}

/// Creates `topic` when it does not exist yet, when at least its replication factor of brokers
/// are live (Kafka's controller refuses the auto-creation otherwise: "The target replication
/// factor of 3 cannot be reached because only 1 broker(s) are registered"). Answers
/// `COORDINATOR_NOT_AVAILABLE` (retriable) while the topic is missing.
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
    if !can_create(topic.replication_factor, live) {
        tracing::debug!(
            topic = topic.name,
            factor = topic.replication_factor,
            live,
            "not enough live brokers for the internal topic's replication factor"
        );
        return Err(ResponseError::CoordinatorNotAvailable);
    }
    let factor = topic.replication_factor;
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

/// What a client is told when a coordinator's write to `topic` fails, as Kafka's
/// `TransactionStateManager.appendTransactionToLog` and `CoordinatorRuntime` map it: an
/// append that could not be replicated (too few in-sync replicas, timed out) is
/// `COORDINATOR_NOT_AVAILABLE` (retriable: the client looks the coordinator up again), a lost
/// leadership or storage failure `NOT_COORDINATOR`, a record too large `UNKNOWN_SERVER_ERROR`.
/// The decisions' own errors pass through.
pub fn append_error(topic: &str, error: ResponseError) -> ResponseError {
    let mapped = match error {
        ResponseError::UnknownTopicOrPartition
        | ResponseError::NotEnoughReplicas
        | ResponseError::NotEnoughReplicasAfterAppend
        | ResponseError::RequestTimedOut => ResponseError::CoordinatorNotAvailable,
        ResponseError::NotLeaderOrFollower | ResponseError::KafkaStorageError => {
            ResponseError::NotCoordinator
        }
        ResponseError::MessageTooLarge | ResponseError::RecordListTooLarge => {
            ResponseError::UnknownServerError
        }
        other => other,
    };
    if mapped != error {
        tracing::info!(topic, ?error, answered = ?mapped, "a coordinator write failed");
    }
    mapped
}

/// Whether an internal topic of `replication_factor` can be created with `live` brokers.
pub fn can_create(replication_factor: i16, live: usize) -> bool {
    usize::try_from(replication_factor).is_ok_and(|factor| factor <= live)
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

#[cfg(test)]
mod tests {
    use super::can_create;

    #[test]
    fn an_internal_topic_needs_its_replication_factor_of_live_brokers() {
        let cases = [
            (3, 1, false),
            (3, 2, false),
            (3, 3, true),
            (3, 5, true),
            (1, 1, true),
            (2, 1, false),
            (1, 0, false),
        ];
        for (factor, live, expected) in cases {
            assert_eq!(
                can_create(factor, live),
                expected,
                "factor {factor}, {live} live"
            );
        }
    }
}
