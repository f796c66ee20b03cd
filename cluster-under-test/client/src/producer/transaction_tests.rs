//! Table tests of the transaction manager: transitions, the per-request reaction table (as
//! Kafka 4.0's Java client), and the state each kind of error leaves behind.

use super::*;
use CoordinatorType::{Group, Transaction};
use Reaction::*;
use TxnState::*;

const ALL_STATES: [TxnState; 8] = [
    Uninitialized,
    Initializing,
    Ready,
    InTransaction,
    CommittingTransaction,
    AbortingTransaction,
    AbortableError,
    FatalError,
];

/// Every (source, target) pair against Kafka 4.0's `isTransitionValid`, written out as the
/// list of valid sources per target.
#[test]
fn transitions_match_kafka() {
    let valid: &[(TxnState, &[TxnState])] = &[
        (Uninitialized, &[Ready, AbortableError]),
        (
            Initializing,
            &[Uninitialized, CommittingTransaction, AbortingTransaction],
        ),
        (
            Ready,
            &[Initializing, CommittingTransaction, AbortingTransaction],
        ),
        (InTransaction, &[Ready]),
        (CommittingTransaction, &[InTransaction]),
        (AbortingTransaction, &[InTransaction, AbortableError]),
        (
            AbortableError,
            &[
                InTransaction,
                CommittingTransaction,
                AbortableError,
                Initializing,
            ],
        ),
        (FatalError, &ALL_STATES),
    ];
    for (target, sources) in valid {
        for source in ALL_STATES {
            assert_eq!(
                source.can_transition_to(*target),
                sources.contains(&source),
                "{source:?} -> {target:?}"
            );
        }
    }
}

const RETRY: Reaction = Retry {
    find_coordinator: None,
};
const RETRY_TXN: Reaction = Retry {
    find_coordinator: Some(Transaction),
};
const RETRY_GROUP: Reaction = Retry {
    find_coordinator: Some(Group),
};

/// The reaction table, request by request: (api, code, reaction).
#[test]
fn reactions_match_the_java_client() {
    use TxnApi::*;
    #[rustfmt::skip]
    let table: &[(TxnApi, i16, Reaction)] = &[
        (FindCoordinator, 0, Done),
        (FindCoordinator, 15, RETRY),        // COORDINATOR_NOT_AVAILABLE
        (FindCoordinator, 14, RETRY),        // COORDINATOR_LOAD_IN_PROGRESS
        (FindCoordinator, 16, RETRY),        // NOT_COORDINATOR
        (FindCoordinator, 53, Fatal),        // TRANSACTIONAL_ID_AUTHORIZATION_FAILED
        (FindCoordinator, 30, Abortable),    // GROUP_AUTHORIZATION_FAILED
        (FindCoordinator, 42, Fatal),        // INVALID_REQUEST: unexpected
        (InitProducerId, 0, Done),
        (InitProducerId, 16, RETRY_TXN),     // NOT_COORDINATOR
        (InitProducerId, 15, RETRY_TXN),     // COORDINATOR_NOT_AVAILABLE
        (InitProducerId, 14, RETRY),         // COORDINATOR_LOAD_IN_PROGRESS
        (InitProducerId, 51, RETRY),         // CONCURRENT_TRANSACTIONS
        (InitProducerId, 53, Fatal),         // TRANSACTIONAL_ID_AUTHORIZATION_FAILED
        (InitProducerId, 31, Fatal),         // CLUSTER_AUTHORIZATION_FAILED
        (InitProducerId, 47, Fatal),         // INVALID_PRODUCER_EPOCH: fenced
        (InitProducerId, 90, Fatal),         // PRODUCER_FENCED
        (InitProducerId, 120, Abortable),    // TRANSACTION_ABORTABLE
        (InitProducerId, 50, Fatal),         // INVALID_TRANSACTION_TIMEOUT: unexpected
        (AddPartitionsToTxn, 0, Done),
        (AddPartitionsToTxn, 15, RETRY_TXN),
        (AddPartitionsToTxn, 16, RETRY_TXN),
        (AddPartitionsToTxn, 51, RETRY),     // CONCURRENT_TRANSACTIONS
        (AddPartitionsToTxn, 14, RETRY),
        (AddPartitionsToTxn, 3, RETRY),      // UNKNOWN_TOPIC_OR_PARTITION
        (AddPartitionsToTxn, 47, Fatal),
        (AddPartitionsToTxn, 90, Fatal),
        (AddPartitionsToTxn, 53, Fatal),
        (AddPartitionsToTxn, 48, Fatal),     // INVALID_TXN_STATE
        (AddPartitionsToTxn, 49, Fatal),     // INVALID_PRODUCER_ID_MAPPING
        (AddPartitionsToTxn, 29, Abortable), // TOPIC_AUTHORIZATION_FAILED
        (AddPartitionsToTxn, 55, Abortable), // OPERATION_NOT_ATTEMPTED
        (AddPartitionsToTxn, 59, AbortableIfPossible), // UNKNOWN_PRODUCER_ID
        (AddPartitionsToTxn, 120, Abortable),
        (AddOffsetsToTxn, 0, Done),
        (AddOffsetsToTxn, 16, RETRY_TXN),
        (AddOffsetsToTxn, 51, RETRY),
        (AddOffsetsToTxn, 59, AbortableIfPossible),
        (AddOffsetsToTxn, 90, Fatal),
        (AddOffsetsToTxn, 47, Fatal),
        (AddOffsetsToTxn, 48, Fatal),
        (AddOffsetsToTxn, 30, Abortable),    // GROUP_AUTHORIZATION_FAILED
        (AddOffsetsToTxn, 120, Abortable),
        (AddOffsetsToTxn, 42, Fatal),
        (TxnOffsetCommit, 0, Done),
        (TxnOffsetCommit, 15, RETRY_GROUP),
        (TxnOffsetCommit, 16, RETRY_GROUP),
        (TxnOffsetCommit, 7, RETRY_GROUP),   // REQUEST_TIMED_OUT
        (TxnOffsetCommit, 14, RETRY),
        (TxnOffsetCommit, 3, RETRY),
        (TxnOffsetCommit, 30, Abortable),
        (TxnOffsetCommit, 82, Abortable),    // FENCED_INSTANCE_ID
        (TxnOffsetCommit, 25, Abortable),    // UNKNOWN_MEMBER_ID (CommitFailedException)
        (TxnOffsetCommit, 22, Abortable),    // ILLEGAL_GENERATION
        (TxnOffsetCommit, 47, Fatal),
        (TxnOffsetCommit, 90, Fatal),
        (TxnOffsetCommit, 53, Fatal),
        (TxnOffsetCommit, 43, Fatal),        // UNSUPPORTED_FOR_MESSAGE_FORMAT
        (EndTxn, 0, Done),
        (EndTxn, 15, RETRY_TXN),
        (EndTxn, 16, RETRY_TXN),
        (EndTxn, 14, RETRY),
        (EndTxn, 51, RETRY),
        (EndTxn, 47, Fatal),
        (EndTxn, 90, Fatal),
        (EndTxn, 53, Fatal),
        (EndTxn, 48, Fatal),                 // INVALID_TXN_STATE
        (EndTxn, 49, Fatal),
        (EndTxn, 59, AbortableIfPossible),
        (EndTxn, 120, Abortable),
        (EndTxn, 30, Fatal),                 // unexpected for EndTxn
        (Produce, 90, Fatal),                // PRODUCER_FENCED
        (Produce, 53, Fatal),
        (Produce, 31, Fatal),
        (Produce, 35, Fatal),                // UNSUPPORTED_VERSION
        (Produce, 49, Fatal),
        (Produce, 47, Abortable),            // INVALID_PRODUCER_EPOCH on produce (KIP-588)
        (Produce, 120, Abortable),           // TRANSACTION_ABORTABLE
        (Produce, 48, Abortable),            // INVALID_TXN_STATE
        (Produce, 10, Abortable),            // MESSAGE_TOO_LARGE
        (Produce, 7, Abortable),             // REQUEST_TIMED_OUT after retries
    ];
    for &(api, code, expected) in table {
        assert_eq!(reaction(api, code), expected, "{api:?} code {code}");
    }
}

fn tp(partition: i32) -> TopicPartition {
    TopicPartition::new("t", partition)
}

fn error(code: i16) -> Error {
    Error::broker("test", code, None)
}

fn ready(v2: bool) -> TransactionManager {
    let mut manager = TransactionManager::new();
    manager.set_capabilities(v2, true);
    manager.begin_init().unwrap();
    assert_eq!(manager.state(), Initializing);
    manager.on_producer_id(ProducerId(10), ProducerEpoch(0));
    assert_eq!(manager.state(), Ready);
    manager
}

#[test]
fn send_before_begin_and_begin_before_init_are_refused() {
    let mut manager = TransactionManager::new();
    assert!(matches!(
        manager.begin_transaction(),
        Err(Error::IllegalTransactionState { .. })
    ));
    let mut manager = ready(false);
    assert!(manager.maybe_add_partition(&tp(0)).is_err());
    manager.begin_transaction().unwrap();
    assert!(manager.maybe_add_partition(&tp(0)).is_ok());
    assert!(
        manager.begin_transaction().is_err(),
        "no nested transactions"
    );
}

#[test]
fn tv1_partitions_wait_for_add_partitions_to_txn() {
    let mut manager = ready(false);
    manager.begin_transaction().unwrap();
    manager.maybe_add_partition(&tp(0)).unwrap();
    manager.maybe_add_partition(&tp(1)).unwrap();
    assert!(!manager.is_send_allowed(&tp(0)));
    assert!(!manager.needs_end_txn());
    let taken = manager.take_partitions_to_add();
    assert_eq!(taken, vec![tp(0), tp(1)]);
    assert!(
        manager.take_partitions_to_add().is_empty(),
        "pending, not new"
    );
    manager.maybe_add_partition(&tp(0)).unwrap();
    assert!(
        manager.take_partitions_to_add().is_empty(),
        "already pending"
    );
    manager.retry_partitions(&taken);
    let taken = manager.take_partitions_to_add();
    manager.on_partitions_added(&taken);
    assert!(manager.is_send_allowed(&tp(0)) && manager.is_send_allowed(&tp(1)));
    assert!(manager.needs_end_txn());
    manager.begin_commit().unwrap();
    manager.complete_transaction(None);
    assert_eq!(manager.state(), Ready);
    assert!(
        !manager.is_send_allowed(&tp(0)),
        "a new transaction adds again"
    );
}

#[test]
fn tv2_partitions_are_added_by_produce_and_the_epoch_comes_from_end_txn() {
    let mut manager = ready(true);
    manager.begin_transaction().unwrap();
    manager.maybe_add_partition(&tp(0)).unwrap();
    assert!(manager.is_send_allowed(&tp(0)));
    assert!(manager.take_partitions_to_add().is_empty());
    assert!(manager.needs_end_txn());
    manager.begin_commit().unwrap();
    manager.complete_transaction(Some((ProducerId(10), ProducerEpoch(1))));
    assert_eq!(manager.producer(), Some((ProducerId(10), ProducerEpoch(1))));
    assert_eq!(manager.state(), Ready);
}

#[test]
fn an_empty_transaction_needs_no_end_txn() {
    let mut manager = ready(false);
    manager.begin_transaction().unwrap();
    manager.begin_abort().unwrap();
    assert!(!manager.needs_end_txn());
}

#[test]
fn fenced_is_fatal_and_every_later_operation_fails_with_it() {
    let mut manager = ready(false);
    manager.begin_transaction().unwrap();
    let state = manager.on_error(reaction(TxnApi::AddPartitionsToTxn, 90), error(90));
    assert_eq!(state, FatalError);
    for result in [
        manager.begin_commit(),
        manager.begin_abort(),
        manager.begin_transaction(),
        manager.maybe_add_partition(&tp(0)),
    ] {
        assert_eq!(result, Err(error(90)));
    }
    assert!(manager.must_abort_unsent_batches());
    // Later failures (the batches that were in flight) do not replace the reason.
    manager.on_failed_batch(Some(48), error(48));
    assert_eq!(manager.last_error(), Some(&error(90)));
}

#[test]
fn an_abortable_error_refuses_commit_and_allows_abort() {
    let mut manager = ready(false);
    manager.begin_transaction().unwrap();
    manager.maybe_add_partition(&tp(0)).unwrap();
    let taken = manager.take_partitions_to_add();
    manager.on_partitions_added(&taken);
    assert_eq!(manager.on_failed_batch(Some(10), error(10)), AbortableError);
    assert!(manager.must_abort_unsent_batches());
    assert_eq!(manager.begin_commit(), Err(error(10)));
    manager.begin_abort().unwrap();
    assert_eq!(manager.state(), AbortingTransaction);
    // TV1 with a coordinator that bumps: the abort ends in INITIALIZING for the bump.
    assert!(manager.is_epoch_bump_pending());
    manager.complete_transaction(None);
    assert_eq!(manager.state(), Initializing);
    manager.on_producer_id(ProducerId(10), ProducerEpoch(1));
    assert_eq!(manager.state(), Ready);
    manager.begin_transaction().unwrap();
}

#[test]
fn a_fenced_produce_is_fatal_but_an_old_epoch_on_produce_is_abortable() {
    let mut manager = ready(true);
    manager.begin_transaction().unwrap();
    assert_eq!(manager.on_failed_batch(Some(47), error(47)), AbortableError);
    let mut manager = ready(true);
    manager.begin_transaction().unwrap();
    assert_eq!(manager.on_failed_batch(Some(90), error(90)), FatalError);
}

#[test]
fn unknown_producer_id_is_fatal_without_epoch_bumps() {
    let mut manager = TransactionManager::new();
    manager.set_capabilities(false, false);
    manager.begin_init().unwrap();
    manager.on_producer_id(ProducerId(1), ProducerEpoch(0));
    manager.begin_transaction().unwrap();
    assert_eq!(
        manager.on_error(AbortableIfPossible, error(59)),
        FatalError,
        "an old coordinator cannot bump: not recoverable"
    );
    let mut manager = ready(false);
    manager.begin_transaction().unwrap();
    assert_eq!(
        manager.on_error(AbortableIfPossible, error(59)),
        AbortableError
    );
}

#[test]
fn an_error_while_aborting_does_not_stop_the_abort() {
    let mut manager = ready(false);
    manager.begin_transaction().unwrap();
    manager.begin_abort().unwrap();
    assert_eq!(
        manager.on_failed_batch(None, Error::Closed),
        AbortingTransaction
    );
}

#[test]
fn an_abortable_error_before_any_transaction_poisons_the_manager() {
    let mut manager = ready(false);
    assert_eq!(manager.on_error(Abortable, error(120)), FatalError);
}

#[test]
fn a_commit_can_be_retried_while_it_is_under_way() {
    let mut manager = ready(false);
    manager.begin_transaction().unwrap();
    manager.begin_commit().unwrap();
    manager.begin_commit().unwrap();
    assert!(
        manager.begin_abort().is_err(),
        "abort is not valid while committing"
    );
}
