//! CreateTopics: forwarded to the active controller, which validates names, partition counts,
//! replication factors (against the registered, unfenced brokers), assignments and topic
//! configs, and answers once the topic records are committed; the broker then waits until the
//! topics are in its own image. `validate_only` validates without writing.

use kafka_protocol::messages::{CreateTopicsRequest, CreateTopicsResponse};

use crate::topics::TopicCreator;

/// Creates each topic independently; one failure does not affect the others.
pub async fn handle(
    topics: &TopicCreator,
    request: CreateTopicsRequest,
    _version: i16,
) -> CreateTopicsResponse {
    topics.create_topics(request).await
}
