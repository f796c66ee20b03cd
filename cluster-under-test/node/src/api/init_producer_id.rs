//! InitProducerId (apiKey 22), v0–v5.
//!
//! Without a transactional id (an idempotent producer, kafka-semantics.md §2): a fresh
//! producer id from the broker's block at epoch 0; the producer id and epoch a client sends
//! along (KIP-360, v3+) are ignored on this path, as Kafka's `TransactionCoordinator` ignores
//! them without a transactional id.
//!
//! With one: the transaction coordinator's decision ([`TxnCoordinator::init_producer_id`]):
//! a new producer id or an epoch bump that fences the previous producer, an open transaction
//! aborted first (`CONCURRENT_TRANSACTIONS` until that completes), KIP-360's retry with the
//! producer id and epoch the client has. An empty transactional id is `INVALID_REQUEST`.
//! `PRODUCER_FENCED` is answered as `INVALID_PRODUCER_EPOCH` below v4 (KIP-588).

use kafka_protocol::ResponseError;
use kafka_protocol::messages::{InitProducerIdRequest, InitProducerIdResponse, ProducerId};

use crate::coordinator::ProducerIdManager;
use crate::coordinator::txn::TxnCoordinator;

/// Answers one InitProducerId request.
pub async fn handle(
    producer_ids: &ProducerIdManager,
    txn: &TxnCoordinator,
    request: &InitProducerIdRequest,
    version: i16,
) -> InitProducerIdResponse {
    let refused = |error: ResponseError| {
        let error = match error {
            ResponseError::ProducerFenced if version < 4 => ResponseError::InvalidProducerEpoch,
            other => other,
        };
        InitProducerIdResponse::default()
            .with_error_code(error.code())
            .with_producer_id(ProducerId(-1))
            .with_producer_epoch(-1)
    };
    let answered = match &request.transactional_id {
        None => producer_ids.next_producer_id().await.map(|id| (id.0, 0)),
        Some(id) if id.is_empty() => Err(ResponseError::InvalidRequest),
        Some(id) => {
            let expected = (version >= 3 && request.producer_id.0 >= 0)
                .then_some((request.producer_id.0, request.producer_epoch));
            txn.init_producer_id(id, request.transaction_timeout_ms, expected)
                .await
        }
    };
    match answered {
        Ok((id, epoch)) => InitProducerIdResponse::default()
            .with_producer_id(ProducerId(id))
            .with_producer_epoch(epoch),
        Err(error) => refused(error),
    }
}
