//! The sender task: the background loop that turns ready batches into Produce requests,
//! bounded by `max.in.flight.requests.per.connection`, and turns every answer into a
//! completion, a retry (with exponential `retry.backoff.ms`, within `retries` and
//! `delivery.timeout.ms`) or a failure whose certainty folds in every earlier attempt.
//!
//! It also obtains the idempotent producer's id (`InitProducerId`) before draining anything,
//! and refreshes metadata when leaders are unknown or an error says they moved. Decisions
//! live in `accumulator.rs`, `idempotence.rs` and `outcome.rs`; this file only acts.
//!
//! Without idempotence and with more than one request in flight, a retried batch can land
//! after a later one, and a batch whose response was lost is sent again: reordering and
//! duplicates, exactly as Kafka's producer does. With `max.in.flight=1` partitions are muted
//! while a batch is in flight, which keeps order.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::{
    ApiKey, InitProducerIdRequest, ProduceRequest, ProduceResponse, TopicName, TransactionalId,
};
use kafka_protocol::protocol::StrBytes;
use tokio::task::JoinSet;

use crate::config::{Acks, ProducerConfig};
use crate::connection::PRODUCE_VERSION_BEFORE_TRANSACTION_V2;
use crate::error::{Error, Result};
use crate::ids::{BrokerId, Offset, ProducerEpoch, ProducerId, TopicPartition};
use crate::metadata::MetadataCache;
use crate::outcome::{Certainty, Classification, classify_code, classify_error};
use crate::producer::Shared;
use crate::producer::batch::ProducerBatch;
use crate::producer::idempotence::{IdempotenceState, OutOfOrderAction};
use crate::producer::txn_requests::{self, TxnContext};

/// One finished produce request.
struct Completed {
    node: BrokerId,
    batches: Vec<ProducerBatch>,
    /// `Ok(None)` for acks=0.
    result: Result<Option<ProduceResponse>>,
}

struct SenderState {
    idempotence: IdempotenceState,
    in_flight_per_node: HashMap<BrokerId, usize>,
    in_flight_per_partition: HashMap<TopicPartition, usize>,
    requests: JoinSet<Completed>,
    refresh: Option<tokio::task::JoinHandle<()>>,
    last_refresh_request: Option<Instant>,
}

/// The producer id and epoch the sender currently uses.
pub(crate) fn producer_identity(shared: &Shared) -> Option<(ProducerId, ProducerEpoch)> {
    *shared.identity.lock().expect("identity lock")
}

/// Runs until the producer is closed and everything queued has an outcome.
pub(crate) async fn run(shared: Arc<Shared>) {
    let mut state = SenderState {
        idempotence: IdempotenceState::new(),
        in_flight_per_node: HashMap::new(),
        in_flight_per_partition: HashMap::new(),
        requests: JoinSet::new(),
        refresh: None,
        last_refresh_request: None,
    };
    loop {
        let empty = shared
            .accumulator
            .lock()
            .expect("accumulator lock")
            .is_empty();
        if empty && state.requests.is_empty() {
            shared.idle.notify_waiters();
            if shared.closed.load(Ordering::Acquire) {
                return;
            }
        }
        if let Some(txn) = &shared.txn {
            transactional_step(&shared, txn, &mut state).await;
        } else if shared.config.enable_idempotence
            && state.idempotence.producer().is_none()
            && !empty
            && !ensure_producer_id(&shared, &mut state).await
        {
            continue;
        }
        let next_check = send_ready(&shared, &mut state).await;
        let sleep_for = next_check
            .unwrap_or(Duration::from_millis(100))
            .clamp(Duration::from_millis(1), Duration::from_millis(100));
        tokio::select! {
            () = shared.wake.notified() => {}
            () = tokio::time::sleep(sleep_for) => {}
            Some(done) = state.requests.join_next(), if !state.requests.is_empty() => {
                if let Ok(done) = done {
                    handle_completed(&shared, &mut state, done);
                }
            }
        }
    }
}

/// Gets a producer id; false when the loop should start over (backoff or fatal error).
async fn ensure_producer_id(shared: &Arc<Shared>, state: &mut SenderState) -> bool {
    match init_producer_id(shared).await {
        Ok((id, epoch)) => {
            tracing::debug!(
                producer_id = id.0,
                epoch = epoch.0,
                "idempotent producer initialised"
            );
            state.idempotence.set_producer(id, epoch);
            *shared.identity.lock().expect("identity lock") = Some((id, epoch));
            true
        }
        Err(error) if error.is_retriable() => {
            tokio::time::sleep(shared.config.retry_backoff).await;
            false
        }
        Err(error) => {
            tracing::warn!(%error, "idempotent producer cannot start");
            *shared.fatal.lock().expect("fatal lock") = Some(error.clone());
            let batches = shared
                .accumulator
                .lock()
                .expect("accumulator lock")
                .drain_all();
            for batch in batches {
                let certainty = batch.certainty;
                batch.fail(error.clone(), certainty);
            }
            false
        }
    }
}

/// The transactional producer's part of a loop: adopt the id and epoch the transaction
/// manager holds (init, an epoch bump), fail the never-sent batches of a transaction that
/// will not commit, and add new partitions to a TV1 transaction before their first batch.
async fn transactional_step(shared: &Arc<Shared>, txn: &TxnContext, state: &mut SenderState) {
    let producer = txn.manager().producer();
    if let Some((id, epoch)) = producer
        && producer != state.idempotence.producer()
    {
        state.idempotence.set_producer(id, epoch);
        shared
            .accumulator
            .lock()
            .expect("accumulator lock")
            .clear_stamps();
        *shared.identity.lock().expect("identity lock") = producer;
    }
    let abort_cause = {
        let manager = txn.manager();
        manager
            .must_abort_unsent_batches()
            .then(|| manager.last_error().map(ToString::to_string))
    };
    if let Some(cause) = abort_cause {
        let unsent = shared
            .accumulator
            .lock()
            .expect("accumulator lock")
            .drain_unsent();
        for batch in unsent {
            // Never sent: certainly not in the log.
            batch.fail(
                Error::TransactionAborted {
                    cause: cause.clone(),
                },
                Certainty::Definite,
            );
        }
    }
    let partitions = txn.manager().take_partitions_to_add();
    if !partitions.is_empty() && !txn_requests::add_partitions(shared, txn, partitions).await {
        // Retriable (CONCURRENT_TRANSACTIONS while the previous transaction completes, ...):
        // Kafka backs off 20 ms for the first add of a transaction, retry.backoff.ms otherwise.
        tokio::time::sleep(Duration::from_millis(20).min(shared.config.retry_backoff)).await;
    }
}

/// Records a transactional batch's final failure in the transaction manager
/// (`maybeTransitionToErrorState`).
fn report_to_transaction(shared: &Shared, error: &Error) {
    if let Some(txn) = &shared.txn {
        let code = match error {
            Error::Broker { code, .. } => Some(*code),
            _ => None,
        };
        txn.manager().on_failed_batch(code, error.clone());
    }
}

async fn init_producer_id(shared: &Shared) -> Result<(ProducerId, ProducerEpoch)> {
    let connection = shared.cluster.any_connection().await?;
    if connection.version(ApiKey::InitProducerId).is_none() {
        return Err(Error::IdempotenceUnsupported {
            address: connection.address().to_owned(),
            explicit: shared.config.idempotence_explicit,
        });
    }
    let request = InitProducerIdRequest::default()
        .with_transactional_id(None)
        .with_transaction_timeout_ms(i32::MAX)
        .with_producer_id(kafka_protocol::messages::ProducerId(-1))
        .with_producer_epoch(-1);
    let response = connection
        .send(
            ApiKey::InitProducerId,
            &request,
            shared.config.request_timeout,
        )
        .await?;
    if response.error_code != 0 {
        return Err(Error::broker("InitProducerId", response.error_code, None));
    }
    Ok((
        ProducerId(response.producer_id.0),
        ProducerEpoch(response.producer_epoch),
    ))
}

fn leader_of(metadata: &MetadataCache) -> impl Fn(&TopicPartition) -> Option<BrokerId> + '_ {
    |tp| metadata.leader(tp).map(|(broker, _)| broker)
}

/// Expires old batches, drains ready ones into requests; returns when to look again.
async fn send_ready(shared: &Arc<Shared>, state: &mut SenderState) -> Option<Duration> {
    let now = Instant::now();
    let expired = shared
        .accumulator
        .lock()
        .expect("accumulator lock")
        .expire(now);
    for batch in expired {
        state.idempotence.resolve(&batch.partition, batch.stamp);
        let error = Error::DeliveryTimeout {
            partition: batch.partition.clone(),
            attempts: batch.attempts,
            last_error: batch.last_error.clone(),
        };
        report_to_transaction(shared, &error);
        let certainty = batch.certainty;
        batch.fail(error, certainty);
    }
    let metadata = shared.cluster.metadata();
    let mute_in_flight =
        !shared.config.enable_idempotence && shared.config.max_in_flight_per_connection == 1;
    let readiness = shared.accumulator.lock().expect("accumulator lock").ready(
        now,
        leader_of(&metadata),
        shared.memory_waiters.load(Ordering::Acquire) > 0,
        |tp| mute_in_flight && state.in_flight_per_partition.get(tp).copied().unwrap_or(0) > 0,
    );
    let stale = shared
        .cluster
        .refreshed_at()
        .is_some_and(|at| at.elapsed() > shared.config.metadata_max_age);
    if readiness.unknown_leaders || stale {
        request_refresh(shared, state);
    }
    for node in readiness.ready_nodes {
        if state.in_flight_per_node.get(&node).copied().unwrap_or(0)
            >= shared.config.max_in_flight_per_connection
        {
            continue;
        }
        let connection = match shared.cluster.connection(node).await {
            Ok(connection) => connection,
            Err(error) => {
                tracing::debug!(%error, broker = node.0, "cannot connect to leader");
                request_refresh(shared, state);
                continue;
            }
        };
        let idempotent = shared.config.enable_idempotence;
        let txn = shared.txn.as_deref();
        let mut batches = {
            let in_flight = &state.in_flight_per_partition;
            let idempotence = &mut state.idempotence;
            shared.accumulator.lock().expect("accumulator lock").drain(
                node,
                now,
                shared.config.max_request_size,
                leader_of(&metadata),
                |tp, batch| {
                    let flying = in_flight.get(tp).copied().unwrap_or(0);
                    if txn.is_some_and(|t| !t.manager().is_send_allowed(tp)) {
                        false
                    } else if idempotent {
                        idempotence.may_drain(batch, flying)
                    } else {
                        !(mute_in_flight && flying > 0)
                    }
                },
            )
        };
        if batches.is_empty() {
            continue;
        }
        for batch in &mut batches {
            if idempotent {
                state.idempotence.stamp(batch);
            }
            batch.transactional = txn.is_some();
            batch.attempts += 1;
            batch.last_attempt_at = Some(now);
            *state
                .in_flight_per_partition
                .entry(batch.partition.clone())
                .or_default() += 1;
        }
        *state.in_flight_per_node.entry(node).or_default() += 1;
        shared
            .in_flight_batches
            .fetch_add(batches.len(), Ordering::AcqRel);
        let request = produce_request(shared.config.acks, shared.config.request_timeout, &batches)
            .with_transactional_id(
                txn.map(|t| TransactionalId(StrBytes::from_string(t.transactional_id.clone()))),
            );
        // Produce v12 tells the leader to add partitions implicitly (transactions V2).
        let produce_version = if txn.is_some_and(|t| t.manager().is_transaction_v2()) {
            12
        } else {
            PRODUCE_VERSION_BEFORE_TRANSACTION_V2
        };
        let acks = shared.config.acks;
        let timeout = request_wait(&batches, &shared.config, now);
        state.requests.spawn(async move {
            let result = if acks == Acks::None {
                connection
                    .send_without_response(ApiKey::Produce, &request, produce_version, timeout)
                    .await
                    .map(|()| None)
            } else {
                connection
                    .send_capped(ApiKey::Produce, &request, produce_version, timeout)
                    .await
                    .map(Some)
            };
            Completed {
                node,
                batches,
                result,
            }
        });
    }
    readiness.next_check
}

/// How long to wait for a produce request's answer: `request.timeout.ms`, but no later than
/// the first of its batches' `delivery.timeout.ms` deadlines, as Kafka expires in-flight
/// batches at that deadline. Without the cap a retry sent just before the deadline to a
/// node that never answers (paused) would hold the send open for a further request timeout.
fn request_wait(batches: &[ProducerBatch], config: &ProducerConfig, now: Instant) -> Duration {
    batches
        .iter()
        .map(|batch| (batch.created_at + config.delivery_timeout).saturating_duration_since(now))
        .min()
        .unwrap_or(config.request_timeout)
        .clamp(Duration::from_millis(1), config.request_timeout)
}

fn request_refresh(shared: &Arc<Shared>, state: &mut SenderState) {
    if state.refresh.as_ref().is_some_and(|r| !r.is_finished()) {
        return;
    }
    if state
        .last_refresh_request
        .is_some_and(|at| at.elapsed() < shared.config.retry_backoff)
    {
        return;
    }
    state.last_refresh_request = Some(Instant::now());
    let shared = shared.clone();
    state.refresh = Some(tokio::spawn(async move {
        if let Err(error) = shared.cluster.refresh_metadata(&[]).await {
            tracing::debug!(%error, "metadata refresh failed");
        }
        shared.wake.notify_one();
    }));
}

/// Builds one Produce request holding `batches` (one per partition).
fn produce_request(acks: Acks, timeout: Duration, batches: &[ProducerBatch]) -> ProduceRequest {
    let mut topics: Vec<TopicProduceData> = Vec::new();
    for batch in batches {
        let data = PartitionProduceData::default()
            .with_index(batch.partition.partition.0)
            .with_records(Some(batch.encode()));
        match topics
            .iter_mut()
            .find(|t| t.name.0.as_str() == &*batch.partition.topic)
        {
            Some(topic) => topic.partition_data.push(data),
            None => topics.push(
                TopicProduceData::default()
                    .with_name(TopicName(StrBytes::from_string(
                        batch.partition.topic.to_string(),
                    )))
                    .with_partition_data(vec![data]),
            ),
        }
    }
    ProduceRequest::default()
        .with_acks(acks.to_wire())
        .with_timeout_ms(i32::try_from(timeout.as_millis()).unwrap_or(i32::MAX))
        .with_topic_data(topics)
}

fn handle_completed(shared: &Arc<Shared>, state: &mut SenderState, done: Completed) {
    if let Some(count) = state.in_flight_per_node.get_mut(&done.node) {
        *count = count.saturating_sub(1);
    }
    shared
        .in_flight_batches
        .fetch_sub(done.batches.len(), Ordering::AcqRel);
    for batch in &done.batches {
        if let Some(count) = state.in_flight_per_partition.get_mut(&batch.partition) {
            *count = count.saturating_sub(1);
        }
    }
    match done.result {
        Ok(None) => {
            for batch in done.batches {
                state.idempotence.resolve(&batch.partition, batch.stamp);
                batch.succeed(None);
            }
        }
        Ok(Some(response)) => {
            for batch in done.batches {
                let answer = response
                    .responses
                    .iter()
                    .filter(|t| t.name.0.as_str() == &*batch.partition.topic)
                    .flat_map(|t| t.partition_responses.iter())
                    .find(|p| p.index == batch.partition.partition.0);
                match answer {
                    Some(answer) => handle_partition(
                        shared,
                        state,
                        batch,
                        answer.error_code,
                        answer.base_offset,
                    ),
                    None => {
                        let error = Error::Protocol {
                            address: format!("broker {}", done.node),
                            detail: format!("no produce answer for {}", batch.partition),
                        };
                        let class = classify_error(&error);
                        handle_failure(shared, state, batch, error, class);
                    }
                }
            }
        }
        Err(error) => {
            let class = classify_error(&error);
            for batch in done.batches {
                handle_failure(shared, state, batch, error.clone(), class);
            }
        }
    }
    shared.wake.notify_one();
}

fn handle_partition(
    shared: &Arc<Shared>,
    state: &mut SenderState,
    batch: ProducerBatch,
    code: i16,
    base_offset: i64,
) {
    const DUPLICATE_SEQUENCE_NUMBER: i16 = 46;
    const OUT_OF_ORDER_SEQUENCE_NUMBER: i16 = 45;
    const UNKNOWN_PRODUCER_ID: i16 = 59;
    match code {
        0 => {
            state.idempotence.resolve(&batch.partition, batch.stamp);
            batch.succeed(Some(Offset(base_offset)));
        }
        DUPLICATE_SEQUENCE_NUMBER => {
            state.idempotence.resolve(&batch.partition, batch.stamp);
            batch.succeed(None);
        }
        // A transactional producer's epoch belongs to the coordinator: no local bump; the
        // batch fails and the transaction must abort (`handleFailedBatch`).
        OUT_OF_ORDER_SEQUENCE_NUMBER | UNKNOWN_PRODUCER_ID
            if shared.config.enable_idempotence && shared.txn.is_none() =>
        {
            match state
                .idempotence
                .on_out_of_order(&batch.partition, batch.stamp)
            {
                OutOfOrderAction::Retry => {
                    let class = classify_code(code).expect("non-zero code");
                    let retriable = Classification {
                        retriable: true,
                        ..class
                    };
                    let error = Error::broker("Produce", code, Some(batch_context(&batch)));
                    handle_failure(shared, state, batch, error, retriable);
                }
                OutOfOrderAction::FailAndBump => {
                    shared
                        .accumulator
                        .lock()
                        .expect("accumulator lock")
                        .clear_stamps();
                    *shared.identity.lock().expect("identity lock") = state.idempotence.producer();
                    let certainty = batch.certainty;
                    let error = Error::broker("Produce", code, Some(batch_context(&batch)));
                    batch.fail(error, certainty);
                }
            }
        }
        _ => {
            let class = classify_code(code).expect("non-zero code");
            let error = Error::broker("Produce", code, Some(batch_context(&batch)));
            handle_failure(shared, state, batch, error, class);
        }
    }
}

fn batch_context(batch: &ProducerBatch) -> String {
    batch.partition.to_string()
}

fn handle_failure(
    shared: &Arc<Shared>,
    state: &mut SenderState,
    mut batch: ProducerBatch,
    error: Error,
    class: Classification,
) {
    let config = &shared.config;
    batch.certainty = batch.certainty.and_then(class.certainty);
    if class.refresh_metadata {
        shared.cluster.invalidate_leader(&batch.partition);
        request_refresh(shared, state);
    }
    let now = Instant::now();
    let expired = now.saturating_duration_since(batch.created_at) >= config.delivery_timeout;
    let retries_left = i64::from(batch.attempts) <= i64::from(config.retries);
    tracing::debug!(partition = %batch.partition, %error, attempts = batch.attempts, "produce attempt failed");
    batch.last_error = Some(error.to_string());
    if class.retriable && retries_left && !expired {
        let exponent = batch.attempts.saturating_sub(1).min(16);
        let backoff = config
            .retry_backoff
            .saturating_mul(1 << exponent)
            .min(config.retry_backoff_max.max(config.retry_backoff));
        shared
            .accumulator
            .lock()
            .expect("accumulator lock")
            .reenqueue(batch, now, backoff);
        return;
    }
    state.idempotence.resolve(&batch.partition, batch.stamp);
    let certainty = batch.certainty;
    let error = if class.retriable && expired {
        Error::DeliveryTimeout {
            partition: batch.partition.clone(),
            attempts: batch.attempts,
            last_error: batch.last_error.clone(),
        }
    } else {
        error
    };
    report_to_transaction(shared, &error);
    batch.fail(error, certainty);
}

#[cfg(test)]
mod tests {
    use tokio::sync::oneshot;

    use super::*;
    use crate::producer::batch::PendingRecord;

    fn batch(created_at: Instant) -> ProducerBatch {
        let record = PendingRecord {
            key: None,
            value: None,
            headers: Vec::new(),
            timestamp_ms: 0,
            completion: oneshot::channel().0,
        };
        ProducerBatch::new(TopicPartition::new("t", 0), record, 1024, None, created_at)
    }

    /// A request sent 1 s before its batch's delivery deadline waits 1 s, not a whole
    /// request timeout; one sent early waits the request timeout.
    #[test]
    fn a_request_waits_no_longer_than_its_first_delivery_deadline() {
        let config = ProducerConfig {
            request_timeout: Duration::from_secs(3),
            delivery_timeout: Duration::from_secs(10),
            ..ProducerConfig::default()
        };
        let start = Instant::now();
        let old = batch(start);
        let young = batch(start + Duration::from_secs(5));
        let late = start + Duration::from_secs(9);
        assert_eq!(
            request_wait(&[young, old], &config, late),
            Duration::from_secs(1)
        );
        let early = start + Duration::from_secs(5);
        assert_eq!(
            request_wait(&[batch(start)], &config, early),
            Duration::from_secs(3)
        );
        // Past the deadline: the shortest wait, the batch expires on its next turn.
        let past = start + Duration::from_secs(11);
        assert_eq!(
            request_wait(&[batch(start)], &config, past),
            Duration::from_millis(1)
        );
    }
}
