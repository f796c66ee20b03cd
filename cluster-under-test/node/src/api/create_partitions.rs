//! CreatePartitions: forwarded to the active controller, which grows each topic's partition
//! count (never shrinks it) with the topic's replication factor; the answer waits until the new
//! partitions are in this broker's image and applied to its replicas. `validate_only` validates
//! without writing.

use kafka_protocol::messages::{CreatePartitionsRequest, CreatePartitionsResponse};

use crate::topics::TopicCreator;

/// Grows each topic independently; one failure does not affect the others.
pub async fn handle(
    topics: &TopicCreator,
    request: CreatePartitionsRequest,
) -> CreatePartitionsResponse {
    topics.create_partitions(request).await
}
