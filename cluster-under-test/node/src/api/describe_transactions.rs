//! DescribeTransactions (apiKey 65), v0: the committed state of each transactional id this
//! node coordinates (`NOT_COORDINATOR` elsewhere, `COORDINATOR_LOAD_IN_PROGRESS` while its
//! partition loads, `TRANSACTIONAL_ID_NOT_FOUND` for an id with no state), as Kafka's
//! `TransactionCoordinator.handleDescribeTransactions`.

use kafka_protocol::ResponseError;
use kafka_protocol::messages::describe_transactions_response::{TopicData, TransactionState};
use kafka_protocol::messages::{
    DescribeTransactionsRequest, DescribeTransactionsResponse, ProducerId, TopicName,
};
use kafka_protocol::protocol::StrBytes;

use crate::coordinator::txn::TxnCoordinator;

/// Answers one DescribeTransactions request.
pub fn handle(
    txn: &TxnCoordinator,
    request: &DescribeTransactionsRequest,
) -> DescribeTransactionsResponse {
    let states = request
        .transactional_ids
        .iter()
        .map(|id| {
            let base = TransactionState::default()
                .with_transactional_id(id.clone())
                .with_transaction_state(StrBytes::from_static_str(""))
                .with_producer_id(ProducerId(-1))
                .with_producer_epoch(-1)
                .with_transaction_start_time_ms(-1);
            let found = if id.is_empty() {
                Err(ResponseError::TransactionalIdNotFound)
            } else {
                txn.describe(id)
                    .and_then(|meta| meta.ok_or(ResponseError::TransactionalIdNotFound))
            };
            match found {
                Err(error) => base.with_error_code(error.code()),
                Ok(meta) => {
                    let mut topics: Vec<TopicData> = Vec::new();
                    for (topic, index) in &meta.partitions {
                        match topics.last_mut() {
                            Some(last) if last.topic.as_str() == topic => {
                                last.partitions.push(*index);
                            }
                            _ => topics.push(
                                TopicData::default()
                                    .with_topic(TopicName(StrBytes::from_string(topic.clone())))
                                    .with_partitions(vec![*index]),
                            ),
                        }
                    }
                    base.with_transaction_state(StrBytes::from_static_str(meta.state.name()))
                        .with_transaction_timeout_ms(meta.timeout_ms)
                        .with_transaction_start_time_ms(meta.start_ms)
                        .with_producer_id(ProducerId(meta.producer_id))
                        .with_producer_epoch(meta.producer_epoch)
                        .with_topics(topics)
                }
            }
        })
        .collect();
    DescribeTransactionsResponse::default().with_transaction_states(states)
}
