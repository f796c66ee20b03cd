//! CreateTopics: validates names, partition counts, replication factors and topic configs, and
//! creates the topics (or only validates them when `validate_only` is set).

use std::collections::HashSet;

use kafka_protocol::ResponseError;
use kafka_protocol::messages::create_topics_response::CreatableTopicResult;
use kafka_protocol::messages::{CreateTopicsRequest, CreateTopicsResponse};
use kafka_protocol::protocol::StrBytes;

use crate::broker::{Broker, CreateTopicError};

/// Creates each topic independently; one failure does not affect the others.
pub fn handle(
    broker: &Broker,
    request: &CreateTopicsRequest,
    _version: i16,
) -> CreateTopicsResponse {
    let mut seen = HashSet::new();
    let duplicated: HashSet<&str> = request
        .topics
        .iter()
        .map(|topic| &*topic.name.0)
        .filter(|name| !seen.insert(*name))
        .collect();
    let topics = request
        .topics
        .iter()
        .map(|topic| {
            let result = CreatableTopicResult::default()
                .with_name(topic.name.clone())
                .with_num_partitions(-1)
                .with_replication_factor(-1);
            let fail = |error: CreateTopicError| {
                let message = error.to_string();
                result
                    .clone()
                    .with_error_code(error.response_error().code())
                    .with_error_message(Some(StrBytes::from_string(message)))
            };
            if duplicated.contains(&*topic.name.0) {
                return result
                    .with_error_code(ResponseError::InvalidRequest.code())
                    .with_error_message(Some(StrBytes::from_static_str(
                        "the topic appears more than once in the request",
                    )));
            }
            let configs: Vec<(String, String)> = topic
                .configs
                .iter()
                .map(|config| {
                    (
                        config.name.to_string(),
                        config.value.as_deref().unwrap_or("").to_owned(),
                    )
                })
                .collect();
            let (partitions, replication_factor) = if topic.assignments.is_empty() {
                (topic.num_partitions, topic.replication_factor)
            } else if topic.num_partitions != -1 || topic.replication_factor != -1 {
                return fail(CreateTopicError::InvalidRequest(
                    "give either assignments or partitions and replication factor, not both",
                ));
            } else {
                let node = broker.config().node_id;
                if topic
                    .assignments
                    .iter()
                    .any(|a| a.broker_ids.iter().any(|id| id.0 != node))
                {
                    return fail(CreateTopicError::InvalidReplicaAssignment);
                }
                let factor = topic.assignments[0].broker_ids.len() as i16;
                (topic.assignments.len() as i32, factor)
            };
            let partitions = (partitions != -1).then_some(partitions);
            let replication_factor = (replication_factor != -1).then_some(replication_factor);
            let outcome = if request.validate_only {
                broker.validate_topic(&topic.name, partitions, replication_factor, &configs)
            } else {
                broker.create_topic(&topic.name, partitions, replication_factor, &configs)
            };
            match outcome {
                Ok(created) => result
                    .with_topic_id(created.id)
                    .with_num_partitions(created.partitions)
                    .with_replication_factor(created.replication_factor),
                Err(error) => fail(error),
            }
        })
        .collect();
    CreateTopicsResponse::default().with_topics(topics)
}
