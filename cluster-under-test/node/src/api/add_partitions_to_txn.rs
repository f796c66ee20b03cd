//! AddPartitionsToTxn (apiKey 24): v0–v3 add the partitions of one transaction (the Java
//! client's and librdkafka's request); v4+ batch transactions and carry `VerifyOnly`, the
//! partition leaders' KIP-890 check that a partition was added before a transactional
//! produce is appended. Partitions of unknown topics fail with `UNKNOWN_TOPIC_OR_PARTITION`
//! and the others of that transaction with `OPERATION_NOT_ATTEMPTED`, nothing added (as
//! Kafka's `KafkaApis`); any other error of the decision applies to every partition of its
//! transaction. Verification answers per partition (`TRANSACTION_ABORTABLE` for one not in
//! the transaction; `INVALID_TXN_STATE` before v5, which predates that code).

use std::collections::BTreeSet;

use kafka_protocol::ResponseError;
use kafka_protocol::messages::add_partitions_to_txn_request::AddPartitionsToTxnTopic;
use kafka_protocol::messages::add_partitions_to_txn_response::{
    AddPartitionsToTxnPartitionResult, AddPartitionsToTxnResult, AddPartitionsToTxnTopicResult,
};
use kafka_protocol::messages::{
    AddPartitionsToTxnRequest, AddPartitionsToTxnResponse, TopicName, TransactionalId,
};
use kafka_protocol::protocol::StrBytes;

use crate::api::end_txn::fenced_code;
use crate::coordinator::txn::TxnCoordinator;
use crate::coordinator::txn::transitions::TopicPartition;
use crate::metadata::MetadataImage;

/// Answers one AddPartitionsToTxn request.
pub async fn handle(
    txn: &TxnCoordinator,
    image: &MetadataImage,
    request: &AddPartitionsToTxnRequest,
    version: i16,
) -> AddPartitionsToTxnResponse {
    if version <= 3 {
        let results = one_transaction(
            txn,
            image,
            &request.v3_and_below_transactional_id,
            request.v3_and_below_producer_id.0,
            request.v3_and_below_producer_epoch,
            false,
            &request.v3_and_below_topics,
            version,
        )
        .await;
        return AddPartitionsToTxnResponse::default().with_results_by_topic_v3_and_below(results);
    }
    let mut results = Vec::with_capacity(request.transactions.len());
    for transaction in &request.transactions {
        let topic_results = one_transaction(
            txn,
            image,
            &transaction.transactional_id,
            transaction.producer_id.0,
            transaction.producer_epoch,
            transaction.verify_only,
            &transaction.topics,
            version,
        )
        .await;
        results.push(
            AddPartitionsToTxnResult::default()
                .with_transactional_id(transaction.transactional_id.clone())
                .with_topic_results(topic_results),
        );
    }
    AddPartitionsToTxnResponse::default().with_results_by_transaction(results)
}

#[allow(clippy::too_many_arguments)]
async fn one_transaction(
    txn: &TxnCoordinator,
    image: &MetadataImage,
    transactional_id: &TransactionalId,
    producer_id: i64,
    epoch: i16,
    verify_only: bool,
    topics: &[AddPartitionsToTxnTopic],
    version: i16,
) -> Vec<AddPartitionsToTxnTopicResult> {
    let partitions: BTreeSet<TopicPartition> = topics
        .iter()
        .flat_map(|topic| {
            topic
                .partitions
                .iter()
                .map(|index| (topic.name.to_string(), *index))
        })
        .collect();
    let unknown: BTreeSet<&TopicPartition> = partitions
        .iter()
        .filter(|(topic, index)| {
            !image
                .topics
                .get(topic)
                .is_some_and(|t| t.partitions.contains_key(index))
        })
        .collect();
    let code = |error: ResponseError| fenced_code(error, version, 2);
    let errors: Vec<(TopicPartition, i16)> = if !unknown.is_empty() {
        partitions
            .iter()
            .map(|partition| {
                let error = if unknown.contains(partition) {
                    ResponseError::UnknownTopicOrPartition
                } else {
                    ResponseError::OperationNotAttempted
                };
                (partition.clone(), error.code())
            })
            .collect()
    } else if transactional_id.is_empty() {
        all(&partitions, ResponseError::InvalidRequest.code())
    } else if verify_only {
        match txn
            .verify_partitions(transactional_id, producer_id, epoch, &partitions)
            .await
        {
            Ok(verified) => verified
                .into_iter()
                .map(|(partition, error)| {
                    let error = match error {
                        Some(ResponseError::TransactionAbortable) if version < 5 => {
                            ResponseError::InvalidTxnState.code()
                        }
                        Some(error) => error.code(),
                        None => 0,
                    };
                    (partition, error)
                })
                .collect(),
            Err(error) => all(&partitions, code(error)),
        }
    } else {
        match txn
            .add_partitions(transactional_id, producer_id, epoch, &partitions)
            .await
        {
            Ok(()) => all(&partitions, 0),
            Err(error) => all(&partitions, code(error)),
        }
    };
    let mut results: Vec<AddPartitionsToTxnTopicResult> = Vec::new();
    for ((topic, index), error) in errors {
        let partition = AddPartitionsToTxnPartitionResult::default()
            .with_partition_index(index)
            .with_partition_error_code(error);
        match results.last_mut() {
            Some(last) if last.name.as_str() == topic => last.results_by_partition.push(partition),
            _ => results.push(
                AddPartitionsToTxnTopicResult::default()
                    .with_name(TopicName(StrBytes::from_string(topic)))
                    .with_results_by_partition(vec![partition]),
            ),
        }
    }
    results
}

fn all(partitions: &BTreeSet<TopicPartition>, code: i16) -> Vec<(TopicPartition, i16)> {
    partitions.iter().map(|p| (p.clone(), code)).collect()
}
