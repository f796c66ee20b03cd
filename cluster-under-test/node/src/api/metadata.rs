//! Metadata: brokers, the controller, and topics with their partitions' leaders, epochs,
//! replicas and ISRs, all from the broker's replayed metadata image.
//!
//! Requested topics that do not exist are created on the fly (through the active controller)
//! when the request allows it and `auto.create.topics.enable` is true (Kafka's default, and
//! one of its dangerous ones: a typo in a topic name silently creates a new topic).
//! Only unfenced brokers are listed, as Kafka's `MetadataCache` does; a leaderless partition
//! carries `LEADER_NOT_AVAILABLE`. The controller id is a live broker (KRaft clients cannot
//! reach controllers), this one.

use kafka_protocol::ResponseError;
use kafka_protocol::messages::create_topics_request::CreatableTopic;
use kafka_protocol::messages::metadata_response::{
    MetadataResponseBroker, MetadataResponsePartition, MetadataResponseTopic,
};
use kafka_protocol::messages::{
    BrokerId, CreateTopicsRequest, MetadataRequest, MetadataResponse, TopicName,
};
use kafka_protocol::protocol::StrBytes;

use crate::metadata::{MetadataImage, TopicImage};
use crate::replica::ReplicaManager;
use crate::topics::TopicCreator;

/// Kafka's "authorized operations were not requested" marker.
const OPERATIONS_NOT_REQUESTED: i32 = i32::MIN;

/// Describes the requested topics (all of them when the list is null).
/// What Metadata tells about the cluster besides its topics.
#[derive(Debug, Clone, Copy)]
pub struct Cluster<'a> {
    /// The cluster id.
    pub cluster_id: &'a str,
    /// This node's id (answered as the controller id, as Kafka's brokers do).
    pub node_id: i32,
    /// `auto.create.topics.enable`.
    pub auto_create_topics: bool,
}

pub async fn handle(
    replicas: &ReplicaManager,
    topics: &TopicCreator,
    cluster: &Cluster<'_>,
    request: &MetadataRequest,
    version: i16,
) -> MetadataResponse {
    // Auto-create what is missing first, in one CreateTopics.
    if let Some(requested) = &request.topics
        && request.allow_auto_topic_creation
        && cluster.auto_create_topics
    {
        let image = replicas.image();
        let missing: Vec<CreatableTopic> = requested
            .iter()
            .filter_map(|wanted| wanted.name.clone())
            .filter(|name| !image.topics.contains_key(name.as_str()))
            .filter(|name| crate::topics::validate_topic_name(name).is_ok())
            .map(|name| {
                CreatableTopic::default()
                    .with_name(name)
                    .with_num_partitions(-1)
                    .with_replication_factor(-1)
            })
            .collect();
        if !missing.is_empty() {
            let response = topics
                .create_topics(
                    CreateTopicsRequest::default()
                        .with_timeout_ms(10_000)
                        .with_topics(missing),
                )
                .await;
            for topic in response.topics.iter().filter(|t| t.error_code != 0) {
                tracing::debug!(topic = %topic.name.0, code = topic.error_code, "auto-creation failed");
            }
        }
    }
    let image = replicas.image();
    // Every topic: a null list, or in v0 (which has no null) an empty one.
    let every_topic = request
        .topics
        .as_ref()
        .is_none_or(|topics| version == 0 && topics.is_empty());
    let topics = match request.topics.as_ref().filter(|_| !every_topic) {
        None => image
            .topics
            .values()
            .map(|topic| describe(&image, topic))
            .collect(),
        Some(requested) => requested
            .iter()
            .map(|wanted| match &wanted.name {
                Some(name) => match image.topics.get(name.as_str()) {
                    Some(topic) => describe(&image, topic),
                    None => failed(name, ResponseError::UnknownTopicOrPartition),
                },
                None => match image.topic_by_id(wanted.topic_id) {
                    Some(topic) => describe(&image, topic),
                    None => MetadataResponseTopic::default()
                        .with_topic_id(wanted.topic_id)
                        .with_error_code(ResponseError::UnknownTopicId.code())
                        .with_topic_authorized_operations(OPERATIONS_NOT_REQUESTED),
                },
            })
            .collect(),
    };
    let brokers = image
        .brokers
        .values()
        .filter(|registration| !registration.fenced)
        .map(|registration| {
            MetadataResponseBroker::default()
                .with_node_id(BrokerId(registration.broker_id.0))
                .with_host(StrBytes::from_string(registration.host.clone()))
                .with_port(i32::from(registration.port))
                .with_rack(registration.rack.clone().map(StrBytes::from_string))
        })
        .collect();
    MetadataResponse::default()
        .with_brokers(brokers)
        .with_cluster_id(Some(StrBytes::from_string(cluster.cluster_id.to_owned())))
        .with_controller_id(BrokerId(cluster.node_id))
        .with_topics(topics)
        .with_cluster_authorized_operations(OPERATIONS_NOT_REQUESTED)
}

fn failed(name: &TopicName, error: ResponseError) -> MetadataResponseTopic {
    MetadataResponseTopic::default()
        .with_name(Some(name.clone()))
        .with_error_code(error.code())
        .with_topic_authorized_operations(OPERATIONS_NOT_REQUESTED)
}

fn describe(image: &MetadataImage, topic: &TopicImage) -> MetadataResponseTopic {
    let partitions = topic
        .partitions
        .iter()
        .map(|(index, state)| {
            let ids = |list: &[crate::metadata::BrokerId]| -> Vec<BrokerId> {
                list.iter().map(|b| BrokerId(b.0)).collect()
            };
            let offline: Vec<BrokerId> = state
                .replicas
                .iter()
                .filter(|b| !image.is_unfenced(**b))
                .map(|b| BrokerId(b.0))
                .collect();
            let answer = MetadataResponsePartition::default()
                .with_partition_index(*index)
                .with_leader_id(BrokerId(state.leader.0))
                .with_leader_epoch(state.leader_epoch)
                .with_replica_nodes(ids(&state.replicas))
                .with_isr_nodes(ids(&state.isr))
                .with_offline_replicas(offline);
            if state.leader.is_some() {
                answer
            } else {
                answer.with_error_code(ResponseError::LeaderNotAvailable.code())
            }
        })
        .collect();
    MetadataResponseTopic::default()
        .with_name(Some(TopicName(StrBytes::from_string(topic.name.clone()))))
        .with_topic_id(topic.id)
        .with_is_internal(crate::coordinator::internal_topic::is_internal(&topic.name))
        .with_partitions(partitions)
        .with_topic_authorized_operations(OPERATIONS_NOT_REQUESTED)
}
