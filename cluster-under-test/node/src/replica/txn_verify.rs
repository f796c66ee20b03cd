//! KIP-890 part 1, the partition leader's half: before the first transactional batch of a
//! producer's transaction is appended to a partition (the partition has no open transaction
//! for it), the leader asks the producer's transaction coordinator whether the partition is
//! in the transaction (Kafka's `AddPartitionsToTxnManager`): AddPartitionsToTxn v5 with
//! `VerifyOnly` set, or, under `transaction.version=2` for a Produce v12+ client, the implicit
//! add (`VerifyOnly` false). The coordinator is the leader of `__transaction_state` partition
//! `abs(javaHashCode(transactional.id)) % partitions` in this broker's metadata image, reached
//! over the wire with a [`NodeClient`]: the coordinator's code is never called directly.
//!
//! The coordinator's answer becomes the produce error as Kafka's `ReplicaManager` maps it
//! ([`produce_error`]). As in Kafka, a verification guard taken before the question
//! (`Partition::opens_transaction`) must still hold at the append (`Partition::append_verified`):
//! a marker in between voids it, and the append is `INVALID_TXN_STATE`.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use kafka_protocol::ResponseError;
use kafka_protocol::messages::add_partitions_to_txn_request::{
    AddPartitionsToTxnTopic, AddPartitionsToTxnTransaction,
};
use kafka_protocol::messages::{
    AddPartitionsToTxnRequest, ApiKey, ProducerId, RequestKind, ResponseKind, TopicName,
    TransactionalId,
};
use kafka_protocol::protocol::StrBytes;

use crate::coordinator::internal_topic::key::partition_for;
use crate::metadata::MetadataImage;
use crate::network::NodeClient;

/// The internal topic whose partition leaders coordinate transactions.
const TRANSACTION_STATE: &str = "__transaction_state";
/// The AddPartitionsToTxn version sent (the first with `TRANSACTION_ABORTABLE`).
const VERSION: i16 = 5;
/// How long the coordinator may take to answer (Kafka's inter-broker `request.timeout.ms`
/// is 30 s; a produce must answer well within its own timeout).
const TIMEOUT: Duration = Duration::from_secs(10);

/// The produce error for a coordinator's answer to a verification (Kafka's
/// `ReplicaManager` and `AddPartitionsToTxnManager`): `PRODUCER_FENCED` is
/// `INVALID_PRODUCER_EPOCH` (what producers handle here); `TRANSACTION_ABORTABLE` is
/// `INVALID_TXN_STATE` for Produce before v11 (older clients do not know it); the retriable
/// coordinator errors become `NOT_ENOUGH_REPLICAS`, which every client retries without a
/// metadata refresh; `CLUSTER_AUTHORIZATION_FAILED` is `INVALID_TXN_STATE`. Others pass.
pub fn produce_error(error: ResponseError, produce_version: i16) -> ResponseError {
    use ResponseError::*;
    match error {
        ProducerFenced => InvalidProducerEpoch,
        TransactionAbortable if produce_version < 11 => InvalidTxnState,
        ClusterAuthorizationFailed => InvalidTxnState,
        ConcurrentTransactions
        | NetworkException
        | CoordinatorLoadInProgress
        | CoordinatorNotAvailable
        | NotCoordinator => NotEnoughReplicas,
        other => other,
    }
}

/// One transactional produce to check.
#[derive(Debug, Clone)]
pub struct Verification<'a> {
    /// The Produce request's `TransactionalId`.
    pub transactional_id: &'a str,
    /// The batch's producer id.
    pub producer_id: i64,
    /// The batch's producer epoch.
    pub producer_epoch: i16,
    /// The partition's topic.
    pub topic: &'a str,
    /// The partition.
    pub partition: i32,
    /// The Produce request's version.
    pub produce_version: i16,
}

/// The leader's connections to transaction coordinators.
#[derive(Debug)]
pub struct TxnVerifier {
    /// `transaction.version` (1 or 2).
    transaction_version: i16,
    /// `transaction.partition.verification.enable`.
    verification_enabled: bool,
    max_frame_bytes: usize,
    clients: Mutex<HashMap<(String, u16), Arc<NodeClient>>>,
}

impl TxnVerifier {
    /// A verifier for a node running `transaction_version`.
    pub fn new(
        transaction_version: i16,
        verification_enabled: bool,
        max_frame_bytes: usize,
    ) -> TxnVerifier {
        TxnVerifier {
            transaction_version,
            verification_enabled,
            max_frame_bytes,
            clients: Mutex::new(HashMap::new()),
        }
    }

    /// Whether a verification of this produce adds the partition implicitly (TV2 with a
    /// Produce v12+ client) rather than only checking it.
    pub fn adds_implicitly(&self, produce_version: i16) -> bool {
        self.transaction_version >= 2 && produce_version >= 12
    }

    /// Whether a produce of `produce_version` is checked at all: with
    /// `transaction.partition.verification.enable` on, or when the check adds the partition
    /// (TV2, Produce v12+), which a TV2 transaction needs whatever the setting.
    pub fn checks(&self, produce_version: i16) -> bool {
        self.verification_enabled || self.adds_implicitly(produce_version)
    }

    /// Asks the coordinator; `Ok` when the partition is (now) in the producer's transaction.
    ///
    /// # Errors
    /// The produce error for the partition ([`produce_error`]).
    pub async fn verify(
        &self,
        image: &MetadataImage,
        check: &Verification<'_>,
    ) -> Result<(), ResponseError> {
        let verify_only = !self.adds_implicitly(check.produce_version);
        self.ask(image, check, verify_only)
            .await
            .map_err(|error| produce_error(error, check.produce_version))
    }

    /// Whether a TxnOffsetCommit of `version` is checked (the group coordinator's half of
    /// KIP-890: under TV2 a v5+ TxnOffsetCommit adds the offsets partition implicitly, as
    /// such clients send no AddOffsetsToTxn; otherwise only with verification enabled).
    pub fn checks_txn_offsets(&self, version: i16) -> bool {
        self.verification_enabled || (self.transaction_version >= 2 && version >= 5)
    }

    /// The TxnOffsetCommit check: whether the group's `__consumer_offsets` partition is in
    /// the producer's transaction (under TV2 with a v5+ request, adds it).
    ///
    /// # Errors
    /// The coordinator's answer as the group coordinator returns it: `PRODUCER_FENCED` and
    /// `INVALID_TXN_STATE`-like refusals pass; unreachable or busy coordinators are
    /// `COORDINATOR_NOT_AVAILABLE` (retried by clients).
    pub async fn verify_txn_offsets(
        &self,
        image: &MetadataImage,
        check: &Verification<'_>,
        txn_offset_commit_version: i16,
    ) -> Result<(), ResponseError> {
        let verify_only = !(self.transaction_version >= 2 && txn_offset_commit_version >= 5);
        self.ask(image, check, verify_only)
            .await
            .map_err(|error| match error {
                ResponseError::ConcurrentTransactions
                | ResponseError::NetworkException
                | ResponseError::CoordinatorLoadInProgress
                | ResponseError::NotCoordinator => ResponseError::CoordinatorNotAvailable,
                other => other,
            })
    }

    /// One AddPartitionsToTxn to the coordinator; the coordinator's error as it is.
    async fn ask(
        &self,
        image: &MetadataImage,
        check: &Verification<'_>,
        verify_only: bool,
    ) -> Result<(), ResponseError> {
        let client = self.coordinator(image, check.transactional_id)?;
        let request = AddPartitionsToTxnRequest::default().with_transactions(vec![
            AddPartitionsToTxnTransaction::default()
                .with_transactional_id(TransactionalId(StrBytes::from_string(
                    check.transactional_id.to_owned(),
                )))
                .with_producer_id(ProducerId(check.producer_id))
                .with_producer_epoch(check.producer_epoch)
                .with_verify_only(verify_only)
                .with_topics(vec![
                    AddPartitionsToTxnTopic::default()
                        .with_name(TopicName(StrBytes::from_string(check.topic.to_owned())))
                        .with_partitions(vec![check.partition]),
                ]),
        ]);
        let answer = match client
            .request(
                &RequestKind::AddPartitionsToTxn(request),
                ApiKey::AddPartitionsToTxn,
                VERSION,
                TIMEOUT,
            )
            .await
        {
            Ok(ResponseKind::AddPartitionsToTxn(answer)) => answer,
            Ok(_) | Err(_) => return Err(ResponseError::NetworkException),
        };
        if answer.error_code != 0 {
            return Err(to_error(answer.error_code));
        }
        let code = answer
            .results_by_transaction
            .iter()
            .flat_map(|txn| &txn.topic_results)
            .filter(|topic| topic.name.0.as_str() == check.topic)
            .flat_map(|topic| &topic.results_by_partition)
            .find(|result| result.partition_index == check.partition)
            .map(|result| result.partition_error_code);
        match code {
            Some(0) => Ok(()),
            Some(code) => Err(to_error(code)),
            // An answer without our partition verified nothing.
            None => Err(ResponseError::InvalidTxnState),
        }
    }

    /// The client for the coordinator of `transactional_id`.
    fn coordinator(
        &self,
        image: &MetadataImage,
        transactional_id: &str,
    ) -> Result<Arc<NodeClient>, ResponseError> {
        let topic = image
            .topics
            .get(TRANSACTION_STATE)
            .ok_or(ResponseError::CoordinatorNotAvailable)?;
        let partitions = i32::try_from(topic.partitions.len()).unwrap_or(i32::MAX);
        let leader = topic
            .partitions
            .get(&partition_for(transactional_id, partitions))
            .map(|partition| partition.leader)
            .ok_or(ResponseError::CoordinatorNotAvailable)?;
        let broker = image
            .brokers
            .get(&leader)
            .filter(|broker| !broker.fenced)
            .ok_or(ResponseError::CoordinatorNotAvailable)?;
        let mut clients = self
            .clients
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        let key = (broker.host.clone(), broker.port);
        Ok(Arc::clone(clients.entry(key).or_insert_with(|| {
            Arc::new(NodeClient::new(
                broker.host.clone(),
                broker.port,
                "logjam-txn-verification",
                TIMEOUT,
                self.max_frame_bytes,
            ))
        })))
    }
}

fn to_error(code: i16) -> ResponseError {
    ResponseError::try_from_code(code).unwrap_or(ResponseError::UnknownServerError)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn coordinator_answers_become_kafkas_produce_errors() {
        use ResponseError::*;
        let cases = [
            (ProducerFenced, 9, InvalidProducerEpoch),
            (TransactionAbortable, 9, InvalidTxnState),
            (TransactionAbortable, 11, TransactionAbortable),
            (ConcurrentTransactions, 9, NotEnoughReplicas),
            (NotCoordinator, 12, NotEnoughReplicas),
            (CoordinatorLoadInProgress, 12, NotEnoughReplicas),
            (CoordinatorNotAvailable, 3, NotEnoughReplicas),
            (NetworkException, 12, NotEnoughReplicas),
            (ClusterAuthorizationFailed, 12, InvalidTxnState),
            (InvalidTxnState, 12, InvalidTxnState),
            (InvalidProducerIdMapping, 12, InvalidProducerIdMapping),
        ];
        for (answer, version, expected) in cases {
            assert_eq!(
                produce_error(answer, version),
                expected,
                "{answer:?} v{version}"
            );
        }
    }

    #[test]
    fn only_tv2_with_produce_v12_adds_implicitly() {
        assert!(TxnVerifier::new(2, true, 1 << 20).adds_implicitly(12));
        assert!(!TxnVerifier::new(2, true, 1 << 20).adds_implicitly(11));
        assert!(!TxnVerifier::new(1, true, 1 << 20).adds_implicitly(12));
    }

    #[test]
    fn the_setting_turns_off_only_checks_that_add_nothing() {
        assert!(!TxnVerifier::new(1, false, 1 << 20).checks(12));
        assert!(!TxnVerifier::new(2, false, 1 << 20).checks(11));
        assert!(TxnVerifier::new(2, false, 1 << 20).checks(12));
        assert!(TxnVerifier::new(1, true, 1 << 20).checks(3));
    }
}
