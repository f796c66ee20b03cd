//! The one place that classifies every Kafka error code and every transport failure: did the
//! operation **definitely** not take effect, or **may** it have (Jepsen's `fail` versus `info`)?
//!
//! Everything else in the crate asks this module; nothing else decides certainty or
//! retriability. The rules, in order of importance:
//!
//! - A write that got no answer (timeout, connection lost after the request was written) may
//!   have taken effect: **indefinite**.
//! - Some error codes are sent *after* the leader appended: `REQUEST_TIMED_OUT` from acks=all
//!   purgatory, `NOT_ENOUGH_REPLICAS_AFTER_APPEND`, and `NOT_LEADER_OR_FOLLOWER` (a leader that
//!   lost leadership while the batch waited for replication answers this although the batch
//!   may survive on the new leader; KAFKA-13574, and Jepsen's Kafka client records it as
//!   `info`). **Indefinite.**
//! - Errors raised while validating, before any append (`NOT_ENOUGH_REPLICAS`,
//!   `MESSAGE_TOO_LARGE`, `INVALID_REQUIRED_ACKS`, `OUT_OF_ORDER_SEQUENCE_NUMBER`, ...):
//!   **definite**.
//! - Codes we do not know are indefinite: guessing "definite" could make a checker unsound.
//! - A send that was attempted several times is definite only if *every* attempt was
//!   definitely rejected ([`Certainty::and_then`]): a retry that is refused does not undo an
//!   earlier attempt that timed out.
//!
//! Reads (fetch, list offsets, metadata) never take effect, so their certainty does not matter
//! to a history; workloads apply Jepsen's rule through [`HistoryType::for_failure`].

use kafka_protocol::ResponseError;

/// Whether a failed operation certainly did not take effect.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Certainty {
    /// Certainly not applied: record `fail`.
    Definite,
    /// May have been applied: record `info`.
    Indefinite,
}

impl Certainty {
    /// The certainty of an operation whose earlier attempts had certainty `self` and whose
    /// latest attempt had `next`: definite only when both are.
    pub fn and_then(self, next: Certainty) -> Certainty {
        match (self, next) {
            (Certainty::Definite, Certainty::Definite) => Certainty::Definite,
            _ => Certainty::Indefinite,
        }
    }
}

/// How the client treats one error: is it worth retrying, what does it say about the write,
/// and does it mean our metadata is stale?
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Classification {
    /// Whether the write certainly did not happen.
    pub certainty: Certainty,
    /// Whether Kafka's clients retry it (subject to `retries` and `delivery.timeout.ms`).
    pub retriable: bool,
    /// Whether the metadata (leaders, topics) should be refreshed before the retry.
    pub refresh_metadata: bool,
}

const fn class(certainty: Certainty, retriable: bool, refresh_metadata: bool) -> Classification {
    Classification {
        certainty,
        retriable,
        refresh_metadata,
    }
}

use Certainty::{Definite, Indefinite};

/// The Jepsen history type a workload records for a completed operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HistoryType {
    /// It happened.
    Ok,
    /// It certainly did not happen.
    Fail,
    /// It may have happened.
    Info,
}

impl HistoryType {
    /// Maelstrom's rule: `fail` if the error is definite or the operation is idempotent (a read
    /// that failed changed nothing), `info` otherwise.
    pub fn for_failure(certainty: Certainty, operation_is_idempotent: bool) -> HistoryType {
        if certainty == Definite || operation_is_idempotent {
            HistoryType::Fail
        } else {
            HistoryType::Info
        }
    }
}

/// A failure below the Kafka protocol: the bytes did not make a round trip.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TransportFailure {
    /// No connection could be made: nothing was sent.
    ConnectFailed,
    /// The connection closed before the request was fully written.
    DisconnectedBeforeWrite,
    /// The connection closed after the request was written, before its response.
    DisconnectedAfterWrite,
    /// No response within `request.timeout.ms`; the client drops the connection, as Kafka does.
    RequestTimedOut,
    /// A response arrived that does not decode: what the broker did is unknown.
    MalformedResponse,
}

/// Classifies a transport failure.
pub fn classify_transport(failure: TransportFailure) -> Classification {
    match failure {
        TransportFailure::ConnectFailed => class(Definite, true, true),
        TransportFailure::DisconnectedBeforeWrite => class(Definite, true, true),
        TransportFailure::DisconnectedAfterWrite => class(Indefinite, true, true),
        TransportFailure::RequestTimedOut => class(Indefinite, true, true),
        TransportFailure::MalformedResponse => class(Indefinite, false, true),
    }
}

/// Classifies a Kafka error code as returned for a write (produce, create topics); `None` for
/// code 0 (no error).
///
/// `DUPLICATE_SEQUENCE_NUMBER` (46) means the batch *is* in the log; the producer reports it as
/// a success without an offset, as Kafka's does, so it is listed as indefinite here.
pub fn classify_code(code: i16) -> Option<Classification> {
    let error = ResponseError::try_from_code(code)?;
    Some(match error {
        // Answered after the leader appended, or in doubt: may have taken effect.
        ResponseError::UnknownServerError => class(Indefinite, false, false),
        ResponseError::NotLeaderOrFollower => class(Indefinite, true, true),
        ResponseError::RequestTimedOut => class(Indefinite, true, false),
        ResponseError::NetworkException => class(Indefinite, true, true),
        ResponseError::NotEnoughReplicasAfterAppend => class(Indefinite, true, false),
        ResponseError::KafkaStorageError => class(Indefinite, true, true),
        ResponseError::DuplicateSequenceNumber => class(Indefinite, false, false),
        // Refused before any append, retriable.
        ResponseError::CorruptMessage => class(Definite, true, false),
        ResponseError::UnknownTopicOrPartition => class(Definite, true, true),
        ResponseError::LeaderNotAvailable => class(Definite, true, true),
        ResponseError::ReplicaNotAvailable => class(Definite, true, true),
        ResponseError::NotEnoughReplicas => class(Definite, true, false),
        ResponseError::CoordinatorLoadInProgress => class(Definite, true, false),
        ResponseError::CoordinatorNotAvailable => class(Definite, true, true),
        ResponseError::NotCoordinator => class(Definite, true, true),
        ResponseError::NotController => class(Definite, true, true),
        ResponseError::ConcurrentTransactions => class(Definite, true, false),
        ResponseError::ListenerNotFound => class(Definite, true, true),
        ResponseError::FencedLeaderEpoch => class(Definite, true, true),
        ResponseError::UnknownLeaderEpoch => class(Definite, true, true),
        ResponseError::OffsetNotAvailable => class(Definite, true, true),
        ResponseError::ThrottlingQuotaExceeded => class(Definite, true, false),
        ResponseError::UnknownTopicId => class(Definite, true, true),
        // Refused before any append, fatal for this operation.
        ResponseError::OffsetOutOfRange => class(Definite, false, false),
        ResponseError::InvalidFetchSize => class(Definite, false, false),
        ResponseError::BrokerNotAvailable => class(Definite, false, true),
        ResponseError::MessageTooLarge => class(Definite, false, false),
        ResponseError::InvalidTopicException => class(Definite, false, false),
        ResponseError::RecordListTooLarge => class(Definite, false, false),
        ResponseError::InvalidRequiredAcks => class(Definite, false, false),
        ResponseError::TopicAuthorizationFailed => class(Definite, false, false),
        ResponseError::ClusterAuthorizationFailed => class(Definite, false, false),
        ResponseError::InvalidTimestamp => class(Definite, false, false),
        ResponseError::UnsupportedVersion => class(Definite, false, false),
        ResponseError::TopicAlreadyExists => class(Definite, false, false),
        ResponseError::InvalidPartitions => class(Definite, false, false),
        ResponseError::InvalidReplicationFactor => class(Definite, false, false),
        ResponseError::InvalidReplicaAssignment => class(Definite, false, false),
        ResponseError::InvalidConfig => class(Definite, false, false),
        ResponseError::InvalidRequest => class(Definite, false, false),
        ResponseError::UnsupportedForMessageFormat => class(Definite, false, false),
        ResponseError::PolicyViolation => class(Definite, false, false),
        ResponseError::OutOfOrderSequenceNumber => class(Definite, false, false),
        ResponseError::InvalidProducerEpoch => class(Definite, false, false),
        ResponseError::InvalidTxnState => class(Definite, false, false),
        ResponseError::InvalidProducerIdMapping => class(Definite, false, false),
        ResponseError::InvalidTransactionTimeout => class(Definite, false, false),
        ResponseError::TransactionalIdAuthorizationFailed => class(Definite, false, false),
        ResponseError::UnknownProducerId => class(Definite, false, false),
        ResponseError::UnsupportedCompressionType => class(Definite, false, false),
        ResponseError::InvalidRecord => class(Definite, false, false),
        ResponseError::ProducerFenced => class(Definite, false, false),
        // Anything else: we cannot vouch that nothing happened.
        other => class(Indefinite, other.is_retriable(), false),
    })
}

/// Classifies one answer to EndTxn with `committed = true`: may this attempt have committed?
///
/// The coordinator answers only after its PrepareCommit record is durable, and maps a failed
/// append to `COORDINATOR_NOT_AVAILABLE` (timeout, not enough replicas) or `NOT_COORDINATOR`
/// (leadership lost, storage error). Such a record may still replicate and the next
/// coordinator finish the commit (kafka-semantics.md §3.2), so those two codes, like
/// `REQUEST_TIMED_OUT`, are **indefinite**, although for a produce they are definite. Codes
/// refused before the append (`CONCURRENT_TRANSACTIONS`, `COORDINATOR_LOAD_IN_PROGRESS`, fenced,
/// invalid state, ...) are definite; unknown codes indefinite. `None` for 0: it committed.
/// Fold the attempts of one commit with [`Certainty::and_then`]: a commit whose earlier
/// attempt timed out stays indefinite whatever a later attempt answers, save success.
pub fn classify_end_txn_code(code: i16) -> Option<Certainty> {
    let error = ResponseError::try_from_code(code)?;
    Some(match error {
        ResponseError::CoordinatorNotAvailable
        | ResponseError::NotCoordinator
        | ResponseError::RequestTimedOut
        | ResponseError::UnknownServerError
        | ResponseError::NetworkException => Indefinite,
        ResponseError::Unknown(_) => Indefinite,
        // Refused by the coordinator before its append. (Produce's "after append" codes,
        // NOT_LEADER_OR_FOLLOWER and the like, are not EndTxn answers.)
        _ => Definite,
    })
}

/// The Kafka name of an error code, for messages (`NOT_LEADER_OR_FOLLOWER` style is Kafka's;
/// `kafka-protocol` spells it in camel case).
pub fn error_name(code: i16) -> String {
    match ResponseError::try_from_code(code) {
        None => "NONE".to_owned(),
        Some(error) => error.to_string(),
    }
}

/// Classifies any client error for a write. Errors raised before anything was sent
/// (configuration, buffer exhaustion, unsupported APIs, a closed client) are definite; a
/// delivery timeout is indefinite because the batch may have been sent (the producer refines
/// this per batch with its attempt history, see `producer/sender.rs`).
pub fn classify_error(error: &crate::error::Error) -> Classification {
    use crate::error::Error;
    match error {
        Error::Transport { failure, .. } => classify_transport(*failure),
        Error::Broker { code, .. } => {
            classify_code(*code).unwrap_or(class(Indefinite, false, false))
        }
        Error::Protocol { .. } => classify_transport(TransportFailure::MalformedResponse),
        Error::Timeout { .. } | Error::DeliveryTimeout { .. } => class(Indefinite, true, true),
        Error::Config(_)
        | Error::UnsupportedApi { .. }
        | Error::IdempotenceUnsupported { .. }
        | Error::BufferExhausted { .. }
        | Error::RecordTooLarge { .. }
        | Error::Closed
        | Error::NotAssigned { .. }
        | Error::IllegalTransactionState { .. }
        | Error::TransactionAborted { .. } => class(Definite, false, false),
        Error::LogTruncation { .. } | Error::OffsetOutOfRange { .. } => {
            class(Definite, false, false)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The classification table, row by row: (code, definite?, retriable?, refresh?).
    #[test]
    fn error_code_table() {
        #[rustfmt::skip]
        let table: &[(i16, Certainty, bool, bool)] = &[
            (-1, Indefinite, false, false), // UNKNOWN_SERVER_ERROR
            (1,  Definite,   false, false), // OFFSET_OUT_OF_RANGE
            (2,  Definite,   true,  false), // CORRUPT_MESSAGE
            (3,  Definite,   true,  true),  // UNKNOWN_TOPIC_OR_PARTITION
            (5,  Definite,   true,  true),  // LEADER_NOT_AVAILABLE
            (6,  Indefinite, true,  true),  // NOT_LEADER_OR_FOLLOWER (KAFKA-13574)
            (7,  Indefinite, true,  false), // REQUEST_TIMED_OUT (acks=all purgatory)
            (10, Definite,   false, false), // MESSAGE_TOO_LARGE
            (13, Indefinite, true,  true),  // NETWORK_EXCEPTION
            (19, Definite,   true,  false), // NOT_ENOUGH_REPLICAS (checked before append)
            (20, Indefinite, true,  false), // NOT_ENOUGH_REPLICAS_AFTER_APPEND (in the log)
            (21, Definite,   false, false), // INVALID_REQUIRED_ACKS
            (35, Definite,   false, false), // UNSUPPORTED_VERSION
            (36, Definite,   false, false), // TOPIC_ALREADY_EXISTS
            (45, Definite,   false, false), // OUT_OF_ORDER_SEQUENCE_NUMBER
            (46, Indefinite, false, false), // DUPLICATE_SEQUENCE_NUMBER (already written)
            (47, Definite,   false, false), // INVALID_PRODUCER_EPOCH
            (56, Indefinite, true,  true),  // KAFKA_STORAGE_ERROR
            (59, Definite,   false, false), // UNKNOWN_PRODUCER_ID (client resets sequences)
            (74, Definite,   true,  true),  // FENCED_LEADER_EPOCH
            (75, Definite,   true,  true),  // UNKNOWN_LEADER_EPOCH
            (90, Definite,   false, false), // PRODUCER_FENCED
            (100, Definite,  true,  true),  // UNKNOWN_TOPIC_ID
            (9999, Indefinite, false, false), // a code nobody knows: never claim definite
        ];
        for &(code, certainty, retriable, refresh_metadata) in table {
            assert_eq!(
                classify_code(code),
                Some(Classification {
                    certainty,
                    retriable,
                    refresh_metadata
                }),
                "code {code} ({})",
                error_name(code)
            );
        }
        assert_eq!(classify_code(0), None);
    }

    /// A commit answered with an error after its PrepareCommit may have been appended is
    /// indefinite; one refused before any append is definite.
    #[test]
    fn end_txn_codes() {
        #[rustfmt::skip]
        let table: &[(i16, Option<Certainty>)] = &[
            (0, None),                 // committed
            (15, Some(Indefinite)),    // COORDINATOR_NOT_AVAILABLE (append timed out)
            (16, Some(Indefinite)),    // NOT_COORDINATOR (leadership lost after append)
            (7, Some(Indefinite)),     // REQUEST_TIMED_OUT
            (-1, Some(Indefinite)),    // UNKNOWN_SERVER_ERROR
            (9999, Some(Indefinite)),  // unknown code
            (14, Some(Definite)),      // COORDINATOR_LOAD_IN_PROGRESS
            (51, Some(Definite)),      // CONCURRENT_TRANSACTIONS
            (47, Some(Definite)),      // INVALID_PRODUCER_EPOCH
            (90, Some(Definite)),      // PRODUCER_FENCED
            (48, Some(Definite)),      // INVALID_TXN_STATE
            (49, Some(Definite)),      // INVALID_PRODUCER_ID_MAPPING
            (120, Some(Definite)),     // TRANSACTION_ABORTABLE
        ];
        for &(code, expected) in table {
            assert_eq!(classify_end_txn_code(code), expected, "code {code}");
        }
        // A commit that timed out and was then fenced may have committed on the first try.
        assert_eq!(
            Indefinite.and_then(classify_end_txn_code(90).unwrap()),
            Indefinite
        );
    }

    #[test]
    fn transport_failures_are_indefinite_once_the_request_may_have_arrived() {
        use TransportFailure::*;
        let rows = [
            (ConnectFailed, Definite),
            (DisconnectedBeforeWrite, Definite),
            (DisconnectedAfterWrite, Indefinite),
            (RequestTimedOut, Indefinite),
            (MalformedResponse, Indefinite),
        ];
        for (failure, certainty) in rows {
            assert_eq!(
                classify_transport(failure).certainty,
                certainty,
                "{failure:?}"
            );
        }
    }

    /// Retriability agrees with Kafka's own `RetriableException` hierarchy (as encoded in
    /// `kafka-protocol`) for every code it knows, except the documented deliberate differences.
    #[test]
    fn retriability_matches_kafka_except_documented_cases() {
        // CONCURRENT_TRANSACTIONS (51) is a RetriableException in Kafka's Java client, which
        // `kafka-protocol` marks non-retriable; we follow Kafka.
        let documented_differences = [51];
        let mut mismatches = Vec::new();
        for code in -1..=140i16 {
            let Some(error) = ResponseError::try_from_code(code) else {
                continue;
            };
            if matches!(error, ResponseError::Unknown(_)) {
                continue;
            }
            let ours = classify_code(code).unwrap();
            if ours.retriable != error.is_retriable() {
                mismatches.push(code);
            }
        }
        assert_eq!(mismatches, documented_differences);
    }

    #[test]
    fn several_attempts_are_definite_only_if_all_were() {
        assert_eq!(Definite.and_then(Definite), Definite);
        assert_eq!(Indefinite.and_then(Definite), Indefinite);
        assert_eq!(Definite.and_then(Indefinite), Indefinite);
    }

    #[test]
    fn jepsen_rule_fails_idempotent_operations_even_when_indefinite() {
        assert_eq!(
            HistoryType::for_failure(Indefinite, true),
            HistoryType::Fail
        );
        assert_eq!(
            HistoryType::for_failure(Indefinite, false),
            HistoryType::Info
        );
        assert_eq!(HistoryType::for_failure(Definite, false), HistoryType::Fail);
    }
}
