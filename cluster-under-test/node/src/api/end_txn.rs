//! EndTxn (apiKey 26), v0–v5: commit or abort the open transaction
//! ([`TxnCoordinator::end_txn`]). Answered once PrepareCommit/PrepareAbort is replicated; the
//! markers follow. v5 answers the producer id and epoch to continue with (TV2 bumps the epoch
//! on every EndTxn). `PRODUCER_FENCED` is `INVALID_PRODUCER_EPOCH` below v2 (KIP-588).

use kafka_protocol::ResponseError;
use kafka_protocol::messages::{EndTxnRequest, EndTxnResponse, ProducerId};

use crate::coordinator::txn::TxnCoordinator;

/// Answers one EndTxn request.
pub async fn handle(txn: &TxnCoordinator, request: &EndTxnRequest, version: i16) -> EndTxnResponse {
    let answered = if request.transactional_id.is_empty() {
        Err(ResponseError::InvalidRequest)
    } else {
        txn.end_txn(
            &request.transactional_id,
            request.producer_id.0,
            request.producer_epoch,
            request.committed,
            version,
        )
        .await
    };
    match answered {
        Ok((id, epoch)) => EndTxnResponse::default()
            .with_producer_id(ProducerId(id))
            .with_producer_epoch(epoch),
        Err(error) => EndTxnResponse::default()
            .with_error_code(fenced_code(error, version, 2))
            .with_producer_id(ProducerId(-1))
            .with_producer_epoch(-1),
    }
}

/// The code of `error`, with `PRODUCER_FENCED` as `INVALID_PRODUCER_EPOCH` for versions
/// before `since` (KIP-588).
pub fn fenced_code(error: ResponseError, version: i16, since: i16) -> i16 {
    match error {
        ResponseError::ProducerFenced if version < since => {
            ResponseError::InvalidProducerEpoch.code()
        }
        other => other.code(),
    }
}
