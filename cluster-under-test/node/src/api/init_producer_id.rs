//! InitProducerId (apiKey 22) for idempotent producers (kafka-semantics.md §2): a null
//! `TransactionalId` gets a fresh producer id from the broker's block (see
//! `Broker::next_producer_id`) at epoch 0. The producer id and epoch a client sends along
//! (KIP-360, v3+) are ignored on this path, as Kafka's `TransactionCoordinator` ignores them
//! without a transactional id.
//!
//! Transactions are not supported (no transaction coordinator, no `FindCoordinator`): a
//! non-null `TransactionalId` is answered `TRANSACTIONAL_ID_AUTHORIZATION_FAILED`. That is the
//! answer of a Kafka broker that will not let this client use that transactional id; it is
//! non-retriable and fatal in the Java client and kafka-python, so a transactional client
//! fails at once with a clear error. `COORDINATOR_NOT_AVAILABLE` was rejected: it is
//! retriable, so the client would retry until its timeout and the cause would be hidden.

use kafka_protocol::ResponseError;
use kafka_protocol::messages::{InitProducerIdRequest, InitProducerIdResponse, ProducerId};

use crate::coordinator::ProducerIdManager;

/// Answers one InitProducerId request.
pub async fn handle(
    producer_ids: &ProducerIdManager,
    request: &InitProducerIdRequest,
) -> InitProducerIdResponse {
    let refused = |error: ResponseError| {
        InitProducerIdResponse::default()
            .with_error_code(error.code())
            .with_producer_id(ProducerId(-1))
            .with_producer_epoch(-1)
    };
    if request.transactional_id.is_some() {
        return refused(ResponseError::TransactionalIdAuthorizationFailed);
    }
    match producer_ids.next_producer_id().await {
        Ok(id) => InitProducerIdResponse::default()
            .with_producer_id(ProducerId(id.0))
            .with_producer_epoch(0),
        Err(error) => refused(error),
    }
}
