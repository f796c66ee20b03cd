//! The transactional producer's front door and its coordinator requests, with Kafka's API
//! shape: [`Producer::init_transactions`], [`Producer::begin_transaction`], `send` (the
//! ordinary [`Producer::send`]), [`Producer::send_offsets_to_transaction`],
//! [`Producer::commit_transaction`], [`Producer::abort_transaction`].
//!
//! The decisions live in `producer/transaction.rs` (states, fatal versus abortable) and in
//! `outcome.rs` (whether a failed commit may have committed); this file sends FindCoordinator,
//! InitProducerId, AddOffsetsToTxn, TxnOffsetCommit and EndTxn and applies the answers. The
//! sender task (`producer/sender.rs`) sends AddPartitionsToTxn through `txn_requests::add_partitions`
//! before a partition's first batch of a TV1 transaction. Every call is bounded by
//! `max.block.ms`, as Kafka's; a commit that runs out of time after its EndTxn may have been
//! appended is indefinite, and calling `commit_transaction` again resumes it.
//!
//! Transactions V2 (KIP-890 part 2) are used when the broker reports the finalized feature
//! `transaction.version >= 2` in ApiVersions at `init_transactions`, as Kafka's client does:
//! then Produce v12 adds partitions implicitly, `send_offsets_to_transaction` sends only
//! TxnOffsetCommit v5, and EndTxn v5 answers with the bumped epoch.

use std::collections::BTreeMap;
use std::sync::Arc;

use kafka_protocol::messages::txn_offset_commit_request::{
    TxnOffsetCommitRequestPartition, TxnOffsetCommitRequestTopic,
};
use kafka_protocol::messages::{
    AddOffsetsToTxnRequest, ApiKey, EndTxnRequest, GroupId, InitProducerIdRequest, TopicName,
    TxnOffsetCommitRequest,
};
use kafka_protocol::protocol::StrBytes;
use tokio::time::Instant;

use crate::error::Error;
use crate::ids::{Offset, ProducerEpoch, ProducerId, TopicPartition};
use crate::outcome::{Certainty, classify_end_txn_code, classify_error};
use crate::producer::Producer;
use crate::producer::transaction::{CoordinatorType, Reaction, TxnApi, TxnState, reaction};
use crate::producer::txn_requests::{
    TxnCall, TxnContext, coordinator, pid, txn_id, wait_or_give_up, with_txn_coordinator,
};

/// The consumer group whose offsets a transaction commits (Kafka's `ConsumerGroupMetadata`);
/// KIP-447 fences a TxnOffsetCommit whose generation or member is stale.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConsumerGroupMetadata {
    /// `group.id`.
    pub group_id: String,
    /// The generation, -1 outside a group generation.
    pub generation_id: i32,
    /// The member id, empty outside a group.
    pub member_id: String,
    /// `group.instance.id` of a static member.
    pub group_instance_id: Option<String>,
}

impl ConsumerGroupMetadata {
    /// Metadata for a group the caller is not a member of (generation -1, no member id).
    pub fn new(group_id: impl Into<String>) -> ConsumerGroupMetadata {
        ConsumerGroupMetadata {
            group_id: group_id.into(),
            generation_id: -1,
            member_id: String::new(),
            group_instance_id: None,
        }
    }
}

/// Why a transactional call failed, the state it left, and for a commit whether the
/// transaction may nevertheless have committed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{error} (transaction state {state:?}, {certainty:?})")]
pub struct TransactionError {
    /// The cause.
    pub error: Error,
    /// The state after the failure: ABORTABLE_ERROR means abort and go on, FATAL_ERROR means
    /// close the producer; a state in progress (INITIALIZING, COMMITTING_TRANSACTION) means the
    /// call timed out and may be called again.
    pub state: TxnState,
    /// For `commit_transaction`: `Definite` when the transaction certainly did not commit.
    /// For the other calls: whether the call certainly had no effect.
    pub certainty: Certainty,
}

impl TransactionError {
    /// Whether the producer is unusable (fenced, unauthorised, ...).
    pub fn is_fatal(&self) -> bool {
        self.state == TxnState::FatalError
    }

    /// Whether the application must abort the transaction.
    pub fn is_abortable(&self) -> bool {
        self.state == TxnState::AbortableError
    }
}

fn transaction_error(txn: &TxnContext, error: Error, certainty: Certainty) -> TransactionError {
    TransactionError {
        error,
        state: txn.manager().state(),
        certainty,
    }
}

impl Producer {
    fn txn(&self) -> std::result::Result<&Arc<TxnContext>, TransactionError> {
        self.shared.txn.as_ref().ok_or_else(|| TransactionError {
            error: Error::IllegalTransactionState {
                operation: "use transactions without transactional.id",
                state: "none".to_owned(),
            },
            state: TxnState::Uninitialized,
            certainty: Certainty::Definite,
        })
    }

    fn deadline(&self) -> Instant {
        Instant::now() + self.shared.config.max_block
    }

    /// Gets the producer id and epoch of `transactional.id` from its coordinator, fencing any
    /// older producer with the same id and aborting its open transaction (InitProducerId).
    ///
    /// # Errors
    /// Fatal errors (fenced, unauthorised), or a timeout after `max.block.ms` (call again).
    pub async fn init_transactions(&self) -> std::result::Result<(), TransactionError> {
        let txn = self.txn()?;
        let started = txn.manager().begin_init();
        if let Err(error) = started
            && txn.manager().state() != TxnState::Initializing
        {
            return Err(transaction_error(txn, error, Certainty::Definite));
        }
        self.init_producer_id(txn, None).await
    }

    async fn init_producer_id(
        &self,
        txn: &TxnContext,
        bump: Option<(ProducerId, ProducerEpoch)>,
    ) -> std::result::Result<(), TransactionError> {
        let shared = &self.shared;
        let deadline = self.deadline();
        let connection = coordinator(
            shared,
            txn,
            CoordinatorType::Transaction,
            &txn.transactional_id,
            deadline,
        )
        .await
        .map_err(|e| transaction_error(txn, e.clone(), classify_error(&e).certainty))?;
        let transaction_v2 = connection
            .finalized_feature("transaction.version")
            .is_some_and(|level| level >= 2);
        // Without KIP-360 (`logjam.kip360=false`) the client speaks InitProducerId v2 at most,
        // as Kafka's clients before 2.5 did, and never asks for a bump.
        let kip360 = shared.config.kip360;
        let epoch_bump = kip360
            && connection
                .version(ApiKey::InitProducerId)
                .is_some_and(|v| v >= 3);
        txn.manager().set_capabilities(transaction_v2, epoch_bump);
        let (producer_id, producer_epoch) = bump.map_or((-1, -1), |(id, epoch)| (id.0, epoch.0));
        let request = InitProducerIdRequest::default()
            .with_transactional_id(Some(txn_id(&txn.transactional_id)))
            .with_transaction_timeout_ms(
                i32::try_from(shared.config.transaction_timeout.as_millis()).unwrap_or(i32::MAX),
            )
            .with_producer_id(kafka_protocol::messages::ProducerId(producer_id))
            .with_producer_epoch(producer_epoch);
        let response = with_txn_coordinator(
            shared,
            txn,
            TxnCall {
                api: TxnApi::InitProducerId,
                key: ApiKey::InitProducerId,
                max_version: if kip360 { i16::MAX } else { 2 },
            },
            &request,
            deadline,
            |r| r.error_code,
            |_| {},
        )
        .await
        .map_err(|e| transaction_error(txn, e.clone(), classify_error(&e).certainty))?;
        let id = ProducerId(response.producer_id.0);
        let epoch = ProducerEpoch(response.producer_epoch);
        tracing::debug!(transactional_id = %txn.transactional_id, producer_id = id.0, epoch = epoch.0, transaction_v2, "transactional producer initialised");
        txn.manager().on_producer_id(id, epoch);
        shared.wake.notify_one();
        Ok(())
    }

    /// Opens a transaction (local only: nothing is sent until the first record or offsets).
    ///
    /// # Errors
    /// Not initialised, a transaction already open, or an error state.
    pub fn begin_transaction(&self) -> std::result::Result<(), TransactionError> {
        let txn = self.txn()?;
        let begun = txn.manager().begin_transaction();
        *txn.commit_certainty.lock().expect("commit certainty") = None;
        begun.map_err(|e| transaction_error(txn, e, Certainty::Definite))
    }

    /// Adds the consumed `offsets` of `group` to the transaction: they are committed with it
    /// (AddOffsetsToTxn to the transaction coordinator under TV1, then TxnOffsetCommit to the
    /// group coordinator, carrying the group's generation and member for KIP-447 fencing).
    ///
    /// # Errors
    /// No transaction open, abortable errors (stale group metadata: `ILLEGAL_GENERATION`,
    /// `UNKNOWN_MEMBER_ID`, ...), fatal errors, or a timeout.
    pub async fn send_offsets_to_transaction(
        &self,
        offsets: &BTreeMap<TopicPartition, Offset>,
        group: &ConsumerGroupMetadata,
    ) -> std::result::Result<(), TransactionError> {
        let txn = self.txn()?;
        let shared = &self.shared;
        let deadline = self.deadline();
        let fail = |e: Error| {
            let certainty = classify_error(&e).certainty;
            transaction_error(txn, e, certainty)
        };
        let (producer, transaction_v2) = {
            let manager = txn.manager();
            if manager.state() != TxnState::InTransaction {
                let error = manager.last_error().cloned().unwrap_or_else(|| {
                    Error::IllegalTransactionState {
                        operation: "send offsets",
                        state: format!("{:?}", manager.state()),
                    }
                });
                drop(manager);
                return Err(transaction_error(txn, error, Certainty::Definite));
            }
            let producer = manager.producer().expect("in a transaction");
            (producer, manager.is_transaction_v2())
        };
        if !transaction_v2 {
            let request = AddOffsetsToTxnRequest::default()
                .with_transactional_id(txn_id(&txn.transactional_id))
                .with_producer_id(pid(producer))
                .with_producer_epoch(producer.1.0)
                .with_group_id(GroupId(StrBytes::from_string(group.group_id.clone())));
            with_txn_coordinator(
                shared,
                txn,
                TxnCall {
                    api: TxnApi::AddOffsetsToTxn,
                    key: ApiKey::AddOffsetsToTxn,
                    max_version: i16::MAX,
                },
                &request,
                deadline,
                |r| r.error_code,
                |_| {},
            )
            .await
            .map_err(fail)?;
        }
        txn.manager().on_offsets_added();
        let mut pending = offsets.clone();
        let max_version = if transaction_v2 { 5 } else { 4 };
        loop {
            let request = txn_offset_commit_request(txn, producer, group, &pending);
            let connection = coordinator(
                shared,
                txn,
                CoordinatorType::Group,
                &group.group_id,
                deadline,
            )
            .await
            .map_err(fail)?;
            let response = match connection
                .send_capped(
                    ApiKey::TxnOffsetCommit,
                    &request,
                    max_version,
                    shared.config.request_timeout,
                )
                .await
            {
                Ok(response) => response,
                Err(error) if error.is_retriable() => {
                    txn.forget_coordinator(CoordinatorType::Group, &group.group_id);
                    wait_or_give_up(shared, deadline, error)
                        .await
                        .map_err(fail)?;
                    continue;
                }
                Err(error) => return Err(fail(error)),
            };
            let mut last_retry = None;
            for topic in &response.topics {
                for partition in &topic.partitions {
                    let tp =
                        TopicPartition::new(topic.name.0.to_string(), partition.partition_index);
                    let code = partition.error_code;
                    let error = Error::broker("TxnOffsetCommit", code, Some(tp.to_string()));
                    match reaction(TxnApi::TxnOffsetCommit, code) {
                        Reaction::Done => {
                            pending.remove(&tp);
                        }
                        Reaction::Retry { find_coordinator } => {
                            if find_coordinator.is_some() {
                                txn.forget_coordinator(CoordinatorType::Group, &group.group_id);
                            }
                            last_retry = Some(error);
                        }
                        other => {
                            txn.manager().on_error(other, error.clone());
                            return Err(fail(error));
                        }
                    }
                }
            }
            if pending.is_empty() {
                return Ok(());
            }
            let error = last_retry.unwrap_or_else(|| Error::Protocol {
                address: connection.address().to_owned(),
                detail: "TxnOffsetCommit answered without every partition".to_owned(),
            });
            wait_or_give_up(shared, deadline, error)
                .await
                .map_err(fail)?;
        }
    }

    /// Flushes the transaction's records, then commits it (EndTxn). Under TV2 the producer
    /// continues with the epoch the coordinator bumped.
    ///
    /// # Errors
    /// An abortable error (a record failed: abort), a fatal one (fenced), or a timeout after
    /// `max.block.ms` (call again to resume). [`TransactionError::certainty`] says whether the
    /// transaction may have committed nonetheless.
    pub async fn commit_transaction(&self) -> std::result::Result<(), TransactionError> {
        self.end_transaction(true).await
    }

    /// Aborts the open transaction: unsent records fail with
    /// [`Error::TransactionAborted`], sent ones are aborted by the coordinator's markers.
    ///
    /// # Errors
    /// A fatal error, or a timeout after `max.block.ms` (call again to resume).
    pub async fn abort_transaction(&self) -> std::result::Result<(), TransactionError> {
        self.end_transaction(false).await
    }

    async fn end_transaction(&self, commit: bool) -> std::result::Result<(), TransactionError> {
        let txn = self.txn()?;
        let shared = &self.shared;
        let deadline = self.deadline();
        let prior = *txn.commit_certainty.lock().expect("commit certainty");
        // Whether the transaction may have committed so far (an earlier EndTxn(commit)).
        let committed_so_far = |txn: &TxnContext| {
            txn.commit_certainty
                .lock()
                .expect("commit certainty")
                .unwrap_or(Certainty::Definite)
        };
        let begun = if commit {
            txn.manager().begin_commit()
        } else {
            txn.manager().begin_abort()
        };
        if let Err(error) = begun {
            return Err(transaction_error(
                txn,
                error,
                prior.unwrap_or(Certainty::Definite),
            ));
        }
        shared.wake.notify_one();
        // EndTxn goes only once every record has an outcome (Kafka's `hasIncompleteBatches`).
        let flushed = tokio::time::timeout_at(deadline, self.flush()).await;
        if flushed.is_err() {
            let error = Error::Timeout {
                what: "flushing the transaction's records".to_owned(),
                after: shared.config.max_block,
            };
            return Err(transaction_error(txn, error, committed_so_far(txn)));
        }
        {
            let manager = txn.manager();
            if commit && manager.state() != TxnState::CommittingTransaction {
                // A record failed while flushing: the transaction cannot commit.
                let error = manager.last_error().cloned().unwrap_or(Error::Closed);
                drop(manager);
                return Err(transaction_error(txn, error, committed_so_far(txn)));
            }
            if manager.state() == TxnState::FatalError {
                let error = manager.last_error().cloned().unwrap_or(Error::Closed);
                drop(manager);
                return Err(transaction_error(txn, error, committed_so_far(txn)));
            }
        }
        let (needs_end_txn, producer, transaction_v2) = {
            let manager = txn.manager();
            (
                manager.needs_end_txn(),
                manager.producer().expect("a transaction has a producer id"),
                manager.is_transaction_v2(),
            )
        };
        let mut new_producer = None;
        if needs_end_txn {
            let request = EndTxnRequest::default()
                .with_transactional_id(txn_id(&txn.transactional_id))
                .with_producer_id(pid(producer))
                .with_producer_epoch(producer.1.0)
                .with_committed(commit);
            let max_version = if transaction_v2 { 5 } else { 4 };
            let answer = with_txn_coordinator(
                shared,
                txn,
                TxnCall {
                    api: TxnApi::EndTxn,
                    key: ApiKey::EndTxn,
                    max_version,
                },
                &request,
                deadline,
                |r| r.error_code,
                |attempt| {
                    if !commit {
                        return;
                    }
                    let this = match attempt {
                        Ok(0) => return,
                        Ok(code) => classify_end_txn_code(code).unwrap_or(Certainty::Indefinite),
                        Err(error) => classify_error(error).certainty,
                    };
                    let mut folded = txn.commit_certainty.lock().expect("commit certainty");
                    *folded = Some(folded.unwrap_or(Certainty::Definite).and_then(this));
                },
            )
            .await;
            match answer {
                Ok(response) => {
                    if transaction_v2 && response.producer_id.0 != -1 {
                        new_producer = Some((
                            ProducerId(response.producer_id.0),
                            ProducerEpoch(response.producer_epoch),
                        ));
                    }
                }
                Err(error) => {
                    return Err(transaction_error(txn, error, committed_so_far(txn)));
                }
            }
        }
        *txn.commit_certainty.lock().expect("commit certainty") = None;
        let bump = {
            let mut manager = txn.manager();
            manager.complete_transaction(new_producer);
            (manager.state() == TxnState::Initializing)
                .then(|| manager.producer())
                .flatten()
        };
        shared.wake.notify_one();
        if let Some(current) = bump {
            // TV1 after an abortable error: bump the epoch before the next transaction.
            self.init_producer_id(txn, Some(current)).await?;
        }
        Ok(())
    }
}

fn txn_offset_commit_request(
    txn: &TxnContext,
    producer: (ProducerId, ProducerEpoch),
    group: &ConsumerGroupMetadata,
    offsets: &BTreeMap<TopicPartition, Offset>,
) -> TxnOffsetCommitRequest {
    let mut topics: BTreeMap<&str, Vec<TxnOffsetCommitRequestPartition>> = BTreeMap::new();
    for (tp, offset) in offsets {
        topics.entry(&tp.topic).or_default().push(
            TxnOffsetCommitRequestPartition::default()
                .with_partition_index(tp.partition.0)
                .with_committed_offset(offset.0)
                .with_committed_leader_epoch(-1),
        );
    }
    TxnOffsetCommitRequest::default()
        .with_transactional_id(txn_id(&txn.transactional_id))
        .with_group_id(GroupId(StrBytes::from_string(group.group_id.clone())))
        .with_producer_id(pid(producer))
        .with_producer_epoch(producer.1.0)
        .with_generation_id(group.generation_id)
        .with_member_id(StrBytes::from_string(group.member_id.clone()))
        .with_group_instance_id(group.group_instance_id.clone().map(StrBytes::from_string))
        .with_topics(
            topics
                .into_iter()
                .map(|(topic, partitions)| {
                    TxnOffsetCommitRequestTopic::default()
                        .with_name(TopicName(StrBytes::from_string(topic.to_owned())))
                        .with_partitions(partitions)
                })
                .collect(),
        )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// KIP-447: the TxnOffsetCommit carries the group's generation, member and instance ids
    /// with the producer's id and epoch, offsets grouped by topic.
    #[test]
    fn txn_offset_commit_carries_the_group_metadata() {
        let txn = TxnContext::new("tx".to_owned());
        let group = ConsumerGroupMetadata {
            group_id: "g".to_owned(),
            generation_id: 7,
            member_id: "m-1".to_owned(),
            group_instance_id: Some("i-1".to_owned()),
        };
        let offsets = BTreeMap::from([
            (TopicPartition::new("a", 0), Offset(10)),
            (TopicPartition::new("a", 1), Offset(11)),
            (TopicPartition::new("b", 0), Offset(12)),
        ]);
        let request =
            txn_offset_commit_request(&txn, (ProducerId(5), ProducerEpoch(3)), &group, &offsets);
        assert_eq!(request.transactional_id.0.as_str(), "tx");
        assert_eq!(request.group_id.0.as_str(), "g");
        assert_eq!((request.producer_id.0, request.producer_epoch), (5, 3));
        assert_eq!(request.generation_id, 7);
        assert_eq!(request.member_id.as_str(), "m-1");
        assert_eq!(request.group_instance_id.as_deref(), Some("i-1"));
        let committed: Vec<(String, i32, i64)> = request
            .topics
            .iter()
            .flat_map(|t| {
                t.partitions
                    .iter()
                    .map(move |p| (t.name.0.to_string(), p.partition_index, p.committed_offset))
            })
            .collect();
        assert_eq!(
            committed,
            [
                ("a".into(), 0, 10),
                ("a".into(), 1, 11),
                ("b".into(), 0, 12)
            ]
        );
        let standalone = ConsumerGroupMetadata::new("g");
        assert_eq!(
            (standalone.generation_id, standalone.member_id.as_str()),
            (-1, "")
        );
    }
}
