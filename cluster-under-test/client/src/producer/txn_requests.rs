//! The transactional producer's requests to its coordinators: FindCoordinator (cached per
//! coordinator type and key, looked up again after NOT_COORDINATOR, COORDINATOR_NOT_AVAILABLE
//! or a disconnect), the retry loop every transaction-coordinator request shares
//! ([`with_txn_coordinator`]: the answer's [`reaction`] decides retry, abortable or fatal), and
//! AddPartitionsToTxn for the sender. The front door is `producer/transactional.rs`; the
//! decisions are in `producer/transaction.rs`.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use kafka_protocol::messages::add_partitions_to_txn_request::AddPartitionsToTxnTopic;
use kafka_protocol::messages::{
    AddPartitionsToTxnRequest, ApiKey, FindCoordinatorRequest, TopicName, TransactionalId,
};
use kafka_protocol::protocol::StrBytes;
use tokio::time::Instant;

use crate::connection::Connection;
use crate::error::{Error, Result};
use crate::ids::{BrokerId, ProducerEpoch, ProducerId, TopicPartition};
use crate::outcome::Certainty;
use crate::producer::Shared;
use crate::producer::transaction::{
    CoordinatorType, Reaction, TransactionManager, TxnApi, reaction,
};

/// The transactional part of a producer's shared state.
#[derive(Debug)]
pub(crate) struct TxnContext {
    pub(crate) transactional_id: String,
    pub(crate) manager: Mutex<TransactionManager>,
    /// The transaction coordinator, once found.
    coordinator: Mutex<Option<BrokerId>>,
    /// Group coordinators by group id.
    group_coordinators: Mutex<BTreeMap<String, BrokerId>>,
    /// The folded certainty of the EndTxn(commit) attempts of the transaction being
    /// committed; `None` before any attempt.
    pub(crate) commit_certainty: Mutex<Option<Certainty>>,
}

impl TxnContext {
    pub(crate) fn new(transactional_id: String) -> TxnContext {
        TxnContext {
            transactional_id,
            manager: Mutex::new(TransactionManager::new()),
            coordinator: Mutex::new(None),
            group_coordinators: Mutex::new(BTreeMap::new()),
            commit_certainty: Mutex::new(None),
        }
    }

    pub(crate) fn manager(&self) -> std::sync::MutexGuard<'_, TransactionManager> {
        self.manager.lock().expect("transaction manager lock")
    }

    pub(crate) fn forget_coordinator(&self, kind: CoordinatorType, key: &str) {
        match kind {
            CoordinatorType::Transaction => *self.coordinator.lock().expect("coordinator") = None,
            CoordinatorType::Group => {
                self.group_coordinators
                    .lock()
                    .expect("group coordinators")
                    .remove(key);
            }
        }
    }
}

pub(crate) fn txn_id(id: &str) -> TransactionalId {
    TransactionalId(StrBytes::from_string(id.to_owned()))
}

pub(crate) fn pid(producer: (ProducerId, ProducerEpoch)) -> kafka_protocol::messages::ProducerId {
    kafka_protocol::messages::ProducerId(producer.0.0)
}

/// A connection to the coordinator of `key`, found with FindCoordinator (retried while the
/// answer is retriable) and cached.
pub(crate) async fn coordinator(
    shared: &Shared,
    txn: &TxnContext,
    kind: CoordinatorType,
    key: &str,
    deadline: Instant,
) -> Result<Arc<Connection>> {
    let cached = match kind {
        CoordinatorType::Transaction => *txn.coordinator.lock().expect("coordinator"),
        CoordinatorType::Group => txn
            .group_coordinators
            .lock()
            .expect("group coordinators")
            .get(key)
            .copied(),
    };
    if let Some(broker) = cached {
        match broker_connection(shared, broker).await {
            Ok(connection) => return Ok(connection),
            Err(_) => txn.forget_coordinator(kind, key),
        }
    }
    loop {
        let answer = find_coordinator(shared, kind, key).await;
        let retry_error = match answer {
            Ok((0, broker)) => match broker_connection(shared, broker).await {
                Ok(connection) => {
                    match kind {
                        CoordinatorType::Transaction => {
                            *txn.coordinator.lock().expect("coordinator") = Some(broker);
                        }
                        CoordinatorType::Group => {
                            txn.group_coordinators
                                .lock()
                                .expect("group coordinators")
                                .insert(key.to_owned(), broker);
                        }
                    }
                    return Ok(connection);
                }
                Err(error) => error,
            },
            Ok((code, _)) => {
                let error = Error::broker("FindCoordinator", code, Some(key.to_owned()));
                match reaction(TxnApi::FindCoordinator, code) {
                    Reaction::Retry { .. } => error,
                    other => {
                        txn.manager().on_error(other, error.clone());
                        return Err(error);
                    }
                }
            }
            Err(error) if error.is_retriable() => error,
            Err(error) => return Err(error),
        };
        wait_or_give_up(shared, deadline, retry_error).await?;
    }
}

/// Sleeps `retry.backoff.ms`, or returns `error` when that would pass `deadline`.
pub(crate) async fn wait_or_give_up(
    shared: &Shared,
    deadline: Instant,
    error: Error,
) -> Result<()> {
    let backoff = shared.config.retry_backoff;
    if Instant::now() + backoff >= deadline {
        return Err(error);
    }
    tokio::time::sleep(backoff).await;
    Ok(())
}

/// One FindCoordinator: (error code, coordinator).
async fn find_coordinator(
    shared: &Shared,
    kind: CoordinatorType,
    key: &str,
) -> Result<(i16, BrokerId)> {
    let connection = shared.cluster.any_connection().await?;
    let version =
        connection
            .version(ApiKey::FindCoordinator)
            .ok_or_else(|| Error::UnsupportedApi {
                address: connection.address().to_owned(),
                api: "FindCoordinator",
            })?;
    let key_bytes = StrBytes::from_string(key.to_owned());
    let request = if version >= 4 {
        FindCoordinatorRequest::default()
            .with_key_type(kind.key_type())
            .with_coordinator_keys(vec![key_bytes])
    } else {
        FindCoordinatorRequest::default()
            .with_key_type(kind.key_type())
            .with_key(key_bytes)
    };
    let response = match connection
        .send(
            ApiKey::FindCoordinator,
            &request,
            shared.config.request_timeout,
        )
        .await
    {
        Ok(response) => response,
        Err(error) => {
            connection.close();
            return Err(error);
        }
    };
    if version >= 4 {
        let Some(answer) = response.coordinators.first() else {
            return Err(Error::Protocol {
                address: connection.address().to_owned(),
                detail: "FindCoordinator answered no coordinator".to_owned(),
            });
        };
        Ok((answer.error_code, BrokerId(answer.node_id.0)))
    } else {
        Ok((response.error_code, BrokerId(response.node_id.0)))
    }
}

/// A connection to `broker`, refreshing metadata once when the broker is not known yet.
async fn broker_connection(shared: &Shared, broker: BrokerId) -> Result<Arc<Connection>> {
    if shared
        .cluster
        .with_metadata(|m| m.address(broker).is_none())
    {
        shared.cluster.refresh_metadata(&[]).await?;
    }
    shared.cluster.connection(broker).await
}

/// Which request [`with_txn_coordinator`] sends, at most at which version.
#[derive(Debug, Clone, Copy)]
pub(crate) struct TxnCall {
    pub(crate) api: TxnApi,
    pub(crate) key: ApiKey,
    pub(crate) max_version: i16,
}

/// Sends a request to the transaction coordinator until its answer is not retriable;
/// `answer_code` extracts the error code. Returns the response with code 0, or the error after
/// applying the reaction to the manager. `on_attempt` sees every attempt's outcome (EndTxn
/// folds certainty with it).
pub(crate) async fn with_txn_coordinator<R, F>(
    shared: &Shared,
    txn: &TxnContext,
    call: TxnCall,
    request: &R,
    deadline: Instant,
    answer_code: F,
    mut on_attempt: impl FnMut(std::result::Result<i16, &Error>),
) -> Result<R::Response>
where
    R: kafka_protocol::protocol::Request,
    F: Fn(&R::Response) -> i16,
{
    let TxnCall {
        api,
        key,
        max_version,
    } = call;
    let name = crate::connection::api_name(key);
    loop {
        let connection = coordinator(
            shared,
            txn,
            CoordinatorType::Transaction,
            &txn.transactional_id,
            deadline,
        )
        .await?;
        let timeout = shared
            .config
            .request_timeout
            .min(deadline.saturating_duration_since(Instant::now()))
            .max(Duration::from_millis(1));
        let error = match connection
            .send_capped(key, request, max_version, timeout)
            .await
        {
            Ok(response) => {
                let code = answer_code(&response);
                on_attempt(Ok(code));
                let error = Error::broker(name, code, Some(txn.transactional_id.clone()));
                match reaction(api, code) {
                    Reaction::Done => return Ok(response),
                    Reaction::Retry { find_coordinator } => {
                        if find_coordinator.is_some() {
                            txn.forget_coordinator(
                                CoordinatorType::Transaction,
                                &txn.transactional_id,
                            );
                        }
                        error
                    }
                    other => {
                        txn.manager().on_error(other, error.clone());
                        return Err(error);
                    }
                }
            }
            Err(error) => {
                on_attempt(Err(&error));
                if !error.is_retriable() {
                    if matches!(error, Error::UnsupportedApi { .. }) {
                        txn.manager().on_error(Reaction::Fatal, error.clone());
                    }
                    return Err(error);
                }
                // Disconnected or timed out: look the coordinator up again (Kafka does).
                txn.forget_coordinator(CoordinatorType::Transaction, &txn.transactional_id);
                error
            }
        };
        wait_or_give_up(shared, deadline, error).await?;
    }
}

/// AddPartitionsToTxn (v3 and below) for `partitions`, called by the sender; the manager
/// learns the outcome. Returns false when the request should be retried after a backoff.
pub(crate) async fn add_partitions(
    shared: &Shared,
    txn: &TxnContext,
    partitions: Vec<TopicPartition>,
) -> bool {
    let Some(producer) = txn.manager().producer() else {
        return true;
    };
    let mut topics: BTreeMap<&str, Vec<i32>> = BTreeMap::new();
    for tp in &partitions {
        topics.entry(&tp.topic).or_default().push(tp.partition.0);
    }
    let request = AddPartitionsToTxnRequest::default()
        .with_v3_and_below_transactional_id(txn_id(&txn.transactional_id))
        .with_v3_and_below_producer_id(pid(producer))
        .with_v3_and_below_producer_epoch(producer.1.0)
        .with_v3_and_below_topics(
            topics
                .into_iter()
                .map(|(topic, partitions)| {
                    AddPartitionsToTxnTopic::default()
                        .with_name(TopicName(StrBytes::from_string(topic.to_owned())))
                        .with_partitions(partitions)
                })
                .collect(),
        );
    let deadline = Instant::now() + shared.config.request_timeout;
    let answer = with_txn_coordinator(
        shared,
        txn,
        TxnCall {
            api: TxnApi::AddPartitionsToTxn,
            key: ApiKey::AddPartitionsToTxn,
            max_version: 3,
        },
        &request,
        deadline,
        // The first failing partition decides, as Kafka's handler returns on it.
        |response| {
            response
                .results_by_topic_v3_and_below
                .iter()
                .flat_map(|t| t.results_by_partition.iter())
                .map(|p| p.partition_error_code)
                .find(|code| *code != 0)
                .unwrap_or(response.error_code)
        },
        |_| {},
    )
    .await;
    let mut manager = txn.manager();
    match answer {
        Ok(_) => {
            manager.on_partitions_added(&partitions);
            true
        }
        Err(error) if error.is_retriable() && !manager.must_abort_unsent_batches() => {
            manager.retry_partitions(&partitions);
            false
        }
        Err(error) => {
            if !manager.must_abort_unsent_batches() {
                manager.on_error(Reaction::Abortable, error);
            }
            manager.on_partitions_failed(&partitions);
            true
        }
    }
}
