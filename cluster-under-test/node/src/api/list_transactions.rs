//! ListTransactions (apiKey 66), v0–v1: the transactional ids of every `__transaction_state`
//! partition this node coordinates, filtered by state name (unknown names are echoed in
//! `UnknownStateFilters`), producer id, and (v1) transactions open longer than
//! `DurationFilter` ms. v2's regular-expression filter is not served.

use kafka_protocol::messages::list_transactions_response::TransactionState;
use kafka_protocol::messages::{
    ListTransactionsRequest, ListTransactionsResponse, ProducerId, TransactionalId,
};
use kafka_protocol::protocol::StrBytes;

use crate::clock::now_ms;
use crate::coordinator::txn::TxnCoordinator;
use crate::coordinator::txn::metadata::TxnState;

/// Answers one ListTransactions request.
pub fn handle(txn: &TxnCoordinator, request: &ListTransactionsRequest) -> ListTransactionsResponse {
    let unknown: Vec<StrBytes> = request
        .state_filters
        .iter()
        .filter(|name| !TxnState::ALL.iter().any(|s| s.name() == name.as_str()))
        .cloned()
        .collect();
    let now = now_ms();
    let states = txn
        .list()
        .into_iter()
        .filter(|(_, meta)| {
            request.state_filters.is_empty()
                || request
                    .state_filters
                    .iter()
                    .any(|name| name.as_str() == meta.state.name())
        })
        .filter(|(_, meta)| {
            request.producer_id_filters.is_empty()
                || request
                    .producer_id_filters
                    .iter()
                    .any(|id| id.0 == meta.producer_id)
        })
        .filter(|(_, meta)| {
            request.duration_filter < 0 || now - meta.start_ms >= request.duration_filter
        })
        .map(|(id, meta)| {
            TransactionState::default()
                .with_transactional_id(TransactionalId(StrBytes::from_string(id)))
                .with_producer_id(ProducerId(meta.producer_id))
                .with_transaction_state(StrBytes::from_static_str(meta.state.name()))
        })
        .collect();
    ListTransactionsResponse::default()
        .with_unknown_state_filters(unknown)
        .with_transaction_states(states)
}
