//! Metadata: brokers, the controller, and topics with their partitions' leaders and ISRs.
//!
//! Requested topics that do not exist are created on the fly when the request allows it and
//! `auto.create.topics.enable` is true (Kafka's default, and one of its dangerous ones: a typo
//! in a topic name silently creates a new topic).

use kafka_protocol::ResponseError;
use kafka_protocol::messages::metadata_response::{
    MetadataResponseBroker, MetadataResponsePartition, MetadataResponseTopic,
};
use kafka_protocol::messages::{BrokerId, MetadataRequest, MetadataResponse, TopicName};
use kafka_protocol::protocol::StrBytes;

use crate::broker::{Broker, CreateTopicError};
use crate::topics::TopicInfo;

/// Kafka's "authorized operations were not requested" marker.
const OPERATIONS_NOT_REQUESTED: i32 = i32::MIN;

/// Describes the requested topics (all of them when the list is null).
pub fn handle(broker: &Broker, request: &MetadataRequest, _version: i16) -> MetadataResponse {
    let topics = match &request.topics {
        None => broker
            .topics()
            .into_iter()
            .map(|topic| describe(broker, &topic))
            .collect(),
        Some(requested) => requested
            .iter()
            .map(|wanted| match &wanted.name {
                Some(name) => describe_by_name(broker, name, request.allow_auto_topic_creation),
                None => match broker.topic_by_id(wanted.topic_id) {
                    Some(topic) => describe(broker, &topic),
                    None => MetadataResponseTopic::default()
                        .with_topic_id(wanted.topic_id)
                        .with_error_code(ResponseError::UnknownTopicId.code())
                        .with_topic_authorized_operations(OPERATIONS_NOT_REQUESTED),
                },
            })
            .collect(),
    };
    let config = broker.config();
    let node = MetadataResponseBroker::default()
        .with_node_id(BrokerId(config.node_id))
        .with_host(StrBytes::from_string(config.advertised_host.clone()))
        .with_port(i32::from(config.advertised_port));
    MetadataResponse::default()
        .with_brokers(vec![node])
        .with_cluster_id(Some(StrBytes::from_string(broker.cluster_id().to_owned())))
        .with_controller_id(BrokerId(config.node_id))
        .with_topics(topics)
        .with_cluster_authorized_operations(OPERATIONS_NOT_REQUESTED)
}

fn describe_by_name(
    broker: &Broker,
    name: &TopicName,
    allow_create: bool,
) -> MetadataResponseTopic {
    if let Some(topic) = broker.topic_by_name(name) {
        return describe(broker, &topic);
    }
    let failed = |error: ResponseError| {
        MetadataResponseTopic::default()
            .with_name(Some(name.clone()))
            .with_error_code(error.code())
            .with_topic_authorized_operations(OPERATIONS_NOT_REQUESTED)
    };
    if !(allow_create && broker.config().auto_create_topics_enable) {
        return failed(ResponseError::UnknownTopicOrPartition);
    }
    match broker.create_topic(name, None, None, &[]) {
        Ok(topic) => describe(broker, &topic),
        // Another request created it first: describe the winner.
        Err(CreateTopicError::AlreadyExists) => match broker.topic_by_name(name) {
            Some(topic) => describe(broker, &topic),
            None => failed(ResponseError::UnknownTopicOrPartition),
        },
        Err(error) => failed(error.response_error()),
    }
}

fn describe(broker: &Broker, topic: &TopicInfo) -> MetadataResponseTopic {
    let partitions = (0..topic.partitions)
        .map(|index| {
            let answer = MetadataResponsePartition::default().with_partition_index(index);
            match broker.partition(&topic.name, index) {
                Some(partition) => {
                    let replicas: Vec<BrokerId> =
                        partition.replicas().iter().copied().map(BrokerId).collect();
                    answer
                        .with_leader_id(BrokerId(partition.leader()))
                        .with_leader_epoch(partition.leader_epoch())
                        .with_isr_nodes(partition.isr().iter().copied().map(BrokerId).collect())
                        .with_replica_nodes(replicas)
                }
                None => answer
                    .with_error_code(ResponseError::LeaderNotAvailable.code())
                    .with_leader_id(BrokerId(-1))
                    .with_leader_epoch(-1),
            }
        })
        .collect();
    MetadataResponseTopic::default()
        .with_name(Some(TopicName(StrBytes::from_string(topic.name.clone()))))
        .with_topic_id(topic.id)
        .with_partitions(partitions)
        .with_topic_authorized_operations(OPERATIONS_NOT_REQUESTED)
}
