//! Produce: append record batches as the partition leader and answer according to `acks`.
//!
//! - `acks=0`: append and say nothing; on any error close the connection, Kafka's only signal.
//! - `acks=1`: answer after the leader's own append (page cache, no fsync).
//! - `acks=-1` (all): refuse with `NOT_ENOUGH_REPLICAS` before appending when the ISR is
//!   smaller than the effective `min.insync.replicas`; otherwise append and wait until the high
//!   watermark covers the batch, up to the request's timeout (`REQUEST_TIMED_OUT`, whose
//!   outcome is indeterminate: the data stays in the log).
//! - any other value: `INVALID_REQUIRED_ACKS`, nothing appended.
//!
//! Each partition of a request succeeds or fails independently. Every partition is appended
//! first; the acks=all ones then wait together (one deadline, woken on every high-watermark
//! advance and metadata change), and are answered `NOT_ENOUGH_REPLICAS_AFTER_APPEND` when the
//! ISR shrank below the minimum, `NOT_LEADER_OR_FOLLOWER` when leadership moved, or
//! `REQUEST_TIMED_OUT` at the deadline.
//!
//! A transactional batch that would open its producer's transaction on a partition is first
//! verified with the transaction coordinator when the request carries a transactional id
//! (KIP-890 part 1, `replica/txn_verify.rs`); a refusal appends nothing. A request with
//! transactional records and no transactional id is refused whole with
//! `TRANSACTIONAL_ID_AUTHORIZATION_FAILED`, as Kafka's `KafkaApis.handleProduceRequest` does
//! (authorized or not): no coordinator could verify or ever end such a transaction.

use std::sync::Arc;
use std::time::Duration;

use kafka_protocol::ResponseError;
use kafka_protocol::messages::produce_response::{PartitionProduceResponse, TopicProduceResponse};
use kafka_protocol::messages::{ProduceRequest, ProduceResponse, ResponseKind};

use crate::api::Reply;
use crate::canary::Canary;
use crate::coordinator::internal_topic;
use crate::replica::delayed_produce;
use crate::replica::txn_verify::{self, Verification};
use crate::replica::{Acks, Appended, Partition, ReplicaManager, TxnCheck, Verified};

/// Appends every partition's records and answers once all are settled.
pub async fn handle(replicas: &ReplicaManager, request: ProduceRequest, version: i16) -> Reply {
    if request.transactional_id.is_none() && has_transactional_records(&request) {
        return refuse_whole(request, ResponseError::TransactionalIdAuthorizationFailed);
    }
    let acks = Acks::from_wire(request.acks);
    let timeout = Duration::from_millis(u64::try_from(request.timeout_ms).unwrap_or(0));
    let deadline = tokio::time::Instant::now() + timeout;
    let wakeups = replicas.subscribe_appends();
    // Phase 1: append everything; acks=all appends are parked with their partition.
    let mut topics = Vec::with_capacity(request.topic_data.len());
    for topic in request.topic_data {
        let resolved = if version >= 13 {
            replicas.topic_by_id(topic.topic_id)
        } else {
            replicas.topic_by_name(&topic.name)
        };
        let unknown = if version >= 13 {
            ResponseError::UnknownTopicId
        } else {
            ResponseError::UnknownTopicOrPartition
        };
        let mut partitions = Vec::with_capacity(topic.partition_data.len());
        for data in topic.partition_data {
            let outcome = match (&resolved, acks) {
                (_, None) => Err(ResponseError::InvalidRequiredAcks),
                (None, _) => Err(unknown),
                // Kafka's appendToLocalLog: "Cannot append to internal topic". A client's
                // record in a coordinator's log would be replayed by every later load.
                (Some(topic), _) if internal_topic::is_internal(&topic.name) => {
                    Err(ResponseError::InvalidTopicException)
                }
                (Some(topic), Some(acks)) => match replicas.partition(&topic.name, data.index) {
                    None => Err(replicas.missing_partition_error(&topic.name, data.index)),
                    Some(partition) => match data.records {
                        None => Err(ResponseError::CorruptMessage),
                        Some(records) => {
                            let tid = &request.transactional_id;
                            let producer = tid.as_ref().and_then(|_| batch_producer(&records));
                            let outcome = match verify(
                                replicas,
                                tid,
                                &topic.name,
                                &partition,
                                &records,
                                version,
                            )
                            .await
                            {
                                Err(error) => Err(error),
                                Ok(guard) => Arc::clone(&partition)
                                    .append_verified(records, acks, guard)
                                    .await
                                    .map(|appended| (partition, appended))
                                    .map_err(|error| concurrent_retriable(error, version)),
                            };
                            if let (Err(error), Some(tid), Some(producer)) =
                                (&outcome, tid, producer)
                            {
                                log_refused(
                                    tid.0.as_str(),
                                    &topic.name,
                                    data.index,
                                    producer,
                                    *error,
                                );
                            }
                            outcome
                        }
                    },
                },
            };
            let parked = matches!((&outcome, acks), (Ok(_), Some(Acks::All)))
                // CANARY(ack-before-replication): acks=all is answered right after the
                // leader's own append, without waiting for the ISR.
                && !replicas
                    .config()
                    .canaries
                    .is_on(Canary::AckBeforeReplication);
            partitions.push(Settling {
                index: data.index,
                outcome,
                parked,
            });
        }
        topics.push((topic.name, topic.topic_id, partitions));
    }
    // Phase 2: wait for every parked acks=all append together.
    let parked: Vec<(&Partition, &Appended)> = topics
        .iter()
        .flat_map(|(_, _, partitions)| partitions)
        .filter(|settling| settling.parked)
        .filter_map(|settling| settling.outcome.as_ref().ok())
        .map(|(partition, appended)| (partition.as_ref(), appended))
        .collect();
    let answers = delayed_produce::until_replicated(wakeups, &parked, deadline).await;
    let mut answers = answers.into_iter();
    for settling in topics
        .iter_mut()
        .flat_map(|(_, _, partitions)| partitions.iter_mut())
        .filter(|settling| settling.parked && settling.outcome.is_ok())
    {
        if let Some(Err(error)) = answers.next() {
            settling.outcome = Err(error);
        }
    }
    let mut any_error = false;
    let responses = topics
        .into_iter()
        .map(|(name, topic_id, partitions)| {
            let partitions = partitions
                .into_iter()
                .map(|settling| {
                    let answer = PartitionProduceResponse::default()
                        .with_index(settling.index)
                        .with_base_offset(-1)
                        .with_log_append_time_ms(-1)
                        .with_log_start_offset(-1);
                    match settling.outcome {
                        Ok((_, appended)) => answer
                            .with_base_offset(appended.base_offset)
                            .with_log_append_time_ms(appended.log_append_time_ms)
                            .with_log_start_offset(appended.log_start_offset),
                        Err(error) => {
                            any_error = true;
                            answer.with_error_code(error.code())
                        }
                    }
                })
                .collect();
            TopicProduceResponse::default()
                .with_name(name)
                .with_topic_id(topic_id)
                .with_partition_responses(partitions)
        })
        .collect();
    if request.acks == 0 {
        return if any_error {
            Reply::Close("acks=0 produce failed")
        } else {
            Reply::Silent
        };
    }
    Reply::Respond(Box::new(ResponseKind::Produce(
        ProduceResponse::default().with_responses(responses),
    )))
}

/// Whether the first batch of any partition is transactional, the test of Kafka's
/// `RequestUtils.hasTransactionalRecords`.
fn has_transactional_records(request: &ProduceRequest) -> bool {
    request.topic_data.iter().any(|topic| {
        topic.partition_data.iter().any(|data| {
            data.records.as_deref().is_some_and(|records| {
                logjam_storage::batch::batches(records)
                    .next()
                    .is_some_and(|batch| batch.is_ok_and(|(_, header)| header.is_transactional()))
            })
        })
    })
}

/// Every partition of `request` answered `error` with nothing appended (Kafka's
/// `ProduceRequest.getErrorResponse`); acks=0 closes the connection instead.
fn refuse_whole(request: ProduceRequest, error: ResponseError) -> Reply {
    if request.acks == 0 {
        return Reply::Close("acks=0 produce refused");
    }
    let responses = request
        .topic_data
        .into_iter()
        .map(|topic| {
            let partitions = topic
                .partition_data
                .into_iter()
                .map(|data| {
                    PartitionProduceResponse::default()
                        .with_index(data.index)
                        .with_base_offset(-1)
                        .with_log_append_time_ms(-1)
                        .with_log_start_offset(-1)
                        .with_error_code(error.code())
                })
                .collect();
            TopicProduceResponse::default()
                .with_name(topic.name)
                .with_topic_id(topic.topic_id)
                .with_partition_responses(partitions)
        })
        .collect();
    Reply::Respond(Box::new(ResponseKind::Produce(
        ProduceResponse::default().with_responses(responses),
    )))
}

/// (producer id, epoch, base sequence) of the first batch in `records`, from the v2 batch
/// header (offsets 43, 51 and 53).
fn batch_producer(records: &[u8]) -> Option<(i64, i16, i32)> {
    let id = i64::from_be_bytes(records.get(43..51)?.try_into().ok()?);
    let epoch = i16::from_be_bytes(records.get(51..53)?.try_into().ok()?);
    let sequence = i32::from_be_bytes(records.get(53..57)?.try_into().ok()?);
    Some((id, epoch, sequence))
}

/// A transactional batch refused because its transaction is over or its producer was
/// fenced: `INVALID_PRODUCER_EPOCH` (an older epoch than the partition's, e.g. a Produce of a
/// finished TV2 transaction delivered late), `INVALID_TXN_STATE` (not in the producer's
/// transaction), `PRODUCER_FENCED`. Logged so a run can say the refusal happened, not only
/// that nothing was written; other errors (retriable ones) are not.
fn log_refused(
    transactional_id: &str,
    topic: &str,
    partition: i32,
    (producer_id, epoch, sequence): (i64, i16, i32),
    error: ResponseError,
) {
    if matches!(
        error,
        ResponseError::InvalidProducerEpoch
            | ResponseError::InvalidTxnState
            | ResponseError::ProducerFenced
    ) {
        tracing::info!(
            transactional_id,
            topic,
            partition,
            producer_id,
            epoch,
            sequence,
            error = ?error,
            "refused a transactional produce"
        );
    }
}

/// KIP-890 part 1: when `records` would open a transaction on `partition` and the request
/// names its transactional id, the coordinator must confirm (or, under TV2, add) the
/// partition first.
async fn verify(
    replicas: &ReplicaManager,
    transactional_id: &Option<kafka_protocol::messages::TransactionalId>,
    topic: &str,
    partition: &Partition,
    records: &[u8],
    version: i16,
) -> Result<Verified, ResponseError> {
    let Some(transactional_id) = transactional_id else {
        return Ok(Verified::NotRequired);
    };
    if !replicas.txn_verifier().checks(version) {
        return Ok(Verified::NotRequired);
    }
    let ask = match partition.opens_transaction(records) {
        TxnCheck::Settled(verified) => return Ok(verified),
        TxnCheck::Ask(ask) => ask,
    };
    let check = Verification {
        transactional_id: transactional_id.0.as_str(),
        producer_id: ask.producer_id,
        producer_epoch: ask.producer_epoch,
        topic,
        partition: partition.topic_partition.partition,
        produce_version: version,
    };
    let verified = replicas
        .txn_verifier()
        .verify(&replicas.image(), &check)
        .await;
    if let Err(error) = verified {
        tracing::debug!(?check, ?error, "transactional produce not verified");
    }
    verified.map(|()| ask.verified())
}

/// The append's `CONCURRENT_TRANSACTIONS` (a TV2 transaction begun before the previous
/// one's marker reached this partition) as the coordinator's would be answered to a
/// produce ([`txn_verify::produce_error`]): an error every client retries.
fn concurrent_retriable(error: ResponseError, version: i16) -> ResponseError {
    match error {
        ResponseError::ConcurrentTransactions => txn_verify::produce_error(error, version),
        other => other,
    }
}

/// One partition of a produce request on its way to an answer.
struct Settling {
    /// The partition index.
    index: i32,
    /// The append, or the error to answer.
    outcome: Result<(Arc<Partition>, Appended), ResponseError>,
    /// An acks=all append that waits for the high watermark.
    parked: bool,
}
