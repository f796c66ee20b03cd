//! The transactional producer's client-side state, as Kafka's Java `TransactionManager` keeps
//! it: the state machine (UNINITIALIZED … FATAL_ERROR and its valid transitions), which
//! partitions the open transaction holds or still has to add, and how every coordinator and
//! produce error moves the state: retried, abortable (the application must abort) or fatal (the
//! producer is unusable). Pure and synchronous; `producer/txn_client.rs` sends the requests and
//! `producer/sender.rs` asks [`TransactionManager::is_send_allowed`] before draining a batch.
//!
//! Whether a failed *commit* may still have committed is not decided here but in
//! `outcome.rs` (`classify_end_txn_code`), the one place that classifies certainty.
//!
//! The reaction table ([`reaction`]) follows the Java client of Kafka 4.0 handler by handler
//! (`InitProducerIdHandler`, `AddPartitionsToTxnHandler`, `AddOffsetsToTxnHandler`,
//! `TxnOffsetCommitHandler`, `EndTxnHandler`, `FindCoordinatorHandler`,
//! `maybeTransitionToErrorState` for produce). Every "retriable" below is Kafka's
//! `RetriableException` hierarchy, as `outcome.rs` encodes it.

use std::collections::BTreeSet;

use kafka_protocol::ResponseError as E;

use crate::error::Error;
use crate::ids::{ProducerEpoch, ProducerId, TopicPartition};

/// The client-side transaction states (`TransactionManager.State`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TxnState {
    /// `init_transactions` not called yet.
    Uninitialized,
    /// `InitProducerId` in progress (first time, or the epoch bump after an abort).
    Initializing,
    /// Between transactions.
    Ready,
    /// `begin_transaction` was called.
    InTransaction,
    /// `commit_transaction` is flushing and ending the transaction.
    CommittingTransaction,
    /// `abort_transaction` is ending the transaction.
    AbortingTransaction,
    /// The transaction cannot commit; only `abort_transaction` is allowed.
    AbortableError,
    /// The producer cannot continue (fenced, unauthorised, ...); only closing it makes sense.
    FatalError,
}

impl TxnState {
    /// Kafka 4.0's `State.isTransitionValid`.
    pub fn can_transition_to(self, target: TxnState) -> bool {
        use TxnState::*;
        match target {
            Uninitialized => matches!(self, Ready | AbortableError),
            Initializing => matches!(
                self,
                Uninitialized | CommittingTransaction | AbortingTransaction
            ),
            Ready => matches!(
                self,
                Initializing | CommittingTransaction | AbortingTransaction
            ),
            InTransaction => self == Ready,
            CommittingTransaction => self == InTransaction,
            AbortingTransaction => matches!(self, InTransaction | AbortableError),
            AbortableError => matches!(
                self,
                InTransaction | CommittingTransaction | AbortableError | Initializing
            ),
            FatalError => true,
        }
    }
}

/// The request whose answer is being judged.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TxnApi {
    /// FindCoordinator (transaction or group key).
    FindCoordinator,
    /// InitProducerId with a transactional id.
    InitProducerId,
    /// AddPartitionsToTxn v3 and below (one partition's code).
    AddPartitionsToTxn,
    /// AddOffsetsToTxn.
    AddOffsetsToTxn,
    /// TxnOffsetCommit (one partition's code).
    TxnOffsetCommit,
    /// EndTxn.
    EndTxn,
    /// A produce batch of the transaction that failed for good.
    Produce,
}

/// Which coordinator a request goes to (FindCoordinator's `key_type`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CoordinatorType {
    /// The group coordinator (key: group id).
    Group,
    /// The transaction coordinator (key: transactional id).
    Transaction,
}

impl CoordinatorType {
    /// The wire value.
    pub fn key_type(self) -> i8 {
        match self {
            CoordinatorType::Group => 0,
            CoordinatorType::Transaction => 1,
        }
    }
}

/// What the client does with one answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reaction {
    /// Success.
    Done,
    /// Send the request again, after looking the coordinator up again when `find_coordinator`.
    Retry {
        /// The coordinator moved or is unavailable: look it up before the retry.
        find_coordinator: Option<CoordinatorType>,
    },
    /// The transaction must be aborted (ABORTABLE_ERROR).
    Abortable,
    /// Abortable with an epoch bump when the coordinator can bump epochs, fatal otherwise
    /// (`abortableErrorIfPossible`: UNKNOWN_PRODUCER_ID).
    AbortableIfPossible,
    /// The producer is unusable (FATAL_ERROR).
    Fatal,
}

fn retriable(code: i16) -> bool {
    crate::outcome::classify_code(code).is_some_and(|c| c.retriable)
}

/// The Java client's reaction to error `code` answering `api`. Code 0 is [`Reaction::Done`].
pub fn reaction(api: TxnApi, code: i16) -> Reaction {
    use Reaction::*;
    const TXN: Option<CoordinatorType> = Some(CoordinatorType::Transaction);
    if code == 0 {
        return Done;
    }
    let error = E::try_from_code(code).unwrap_or(E::UnknownServerError);
    let fenced = matches!(error, E::InvalidProducerEpoch | E::ProducerFenced);
    match api {
        TxnApi::FindCoordinator => match error {
            _ if retriable(code) => Retry {
                find_coordinator: None,
            },
            E::TransactionalIdAuthorizationFailed => Fatal,
            E::GroupAuthorizationFailed | E::TransactionAbortable => Abortable,
            _ => Fatal,
        },
        TxnApi::InitProducerId => match error {
            E::NotCoordinator | E::CoordinatorNotAvailable => Retry {
                find_coordinator: TXN,
            },
            _ if retriable(code) => Retry {
                find_coordinator: None,
            },
            // Kafka 4.0 treats the authorisation failures as fatal here (4.1 made them
            // abortable).
            E::TransactionalIdAuthorizationFailed | E::ClusterAuthorizationFailed => Fatal,
            _ if fenced => Fatal,
            E::TransactionAbortable => Abortable,
            _ => Fatal,
        },
        TxnApi::AddPartitionsToTxn => match error {
            E::NotCoordinator | E::CoordinatorNotAvailable => Retry {
                find_coordinator: TXN,
            },
            _ if retriable(code) => Retry {
                find_coordinator: None,
            },
            _ if fenced => Fatal,
            E::TransactionalIdAuthorizationFailed
            | E::InvalidTxnState
            | E::InvalidProducerIdMapping => Fatal,
            E::UnknownProducerId => AbortableIfPossible,
            // TOPIC_AUTHORIZATION_FAILED, OPERATION_NOT_ATTEMPTED, TRANSACTION_ABORTABLE and
            // anything unexpected: "could not add partitions", abortable.
            _ => Abortable,
        },
        TxnApi::AddOffsetsToTxn | TxnApi::EndTxn => match error {
            E::NotCoordinator | E::CoordinatorNotAvailable => Retry {
                find_coordinator: TXN,
            },
            _ if retriable(code) => Retry {
                find_coordinator: None,
            },
            E::UnknownProducerId => AbortableIfPossible,
            _ if fenced => Fatal,
            E::TransactionalIdAuthorizationFailed
            | E::InvalidTxnState
            | E::InvalidProducerIdMapping => Fatal,
            E::GroupAuthorizationFailed if api == TxnApi::AddOffsetsToTxn => Abortable,
            E::TransactionAbortable => Abortable,
            _ => Fatal,
        },
        TxnApi::TxnOffsetCommit => match error {
            E::NotCoordinator | E::CoordinatorNotAvailable | E::RequestTimedOut => Retry {
                find_coordinator: Some(CoordinatorType::Group),
            },
            _ if retriable(code) => Retry {
                find_coordinator: None,
            },
            E::GroupAuthorizationFailed
            | E::FencedInstanceId
            | E::UnknownMemberId
            | E::IllegalGeneration
            | E::TransactionAbortable => Abortable,
            _ if fenced => Fatal,
            E::TransactionalIdAuthorizationFailed | E::UnsupportedForMessageFormat => Fatal,
            _ => Fatal,
        },
        // `maybeTransitionToErrorState`: a batch's final failure. INVALID_PRODUCER_EPOCH on
        // produce is `InvalidProducerEpochException` (KIP-588), abortable, unlike on the
        // coordinator requests where it means fenced.
        TxnApi::Produce => match error {
            E::ClusterAuthorizationFailed
            | E::TransactionalIdAuthorizationFailed
            | E::ProducerFenced
            | E::UnsupportedVersion
            | E::InvalidProducerIdMapping => Fatal,
            _ => Abortable,
        },
    }
}

/// The transactional producer's state.
#[derive(Debug)]
pub struct TransactionManager {
    state: TxnState,
    /// Why the state is ABORTABLE_ERROR or FATAL_ERROR; later operations fail with it.
    last_error: Option<Error>,
    producer: Option<(ProducerId, ProducerEpoch)>,
    /// `transaction.version >= 2` finalized: epoch bump per transaction, implicit adds.
    transaction_v2: bool,
    /// InitProducerId v3+: the coordinator accepts a client-requested epoch bump.
    coordinator_supports_epoch_bump: bool,
    /// The client must bump the epoch (InitProducerId with its id and epoch) after the abort.
    epoch_bump_required: bool,
    /// Partitions the coordinator acknowledged (or, under TV2, that were sent to).
    partitions_in_transaction: BTreeSet<TopicPartition>,
    /// Partitions to add with the next AddPartitionsToTxn.
    new_partitions: BTreeSet<TopicPartition>,
    /// Partitions in an AddPartitionsToTxn request awaiting its answer.
    pending_partitions: BTreeSet<TopicPartition>,
    /// Something reached the coordinator in this transaction: EndTxn is needed.
    transaction_started: bool,
}

impl Default for TransactionManager {
    fn default() -> Self {
        TransactionManager::new()
    }
}

impl TransactionManager {
    /// A manager in UNINITIALIZED.
    pub fn new() -> TransactionManager {
        TransactionManager {
            state: TxnState::Uninitialized,
            last_error: None,
            producer: None,
            transaction_v2: false,
            coordinator_supports_epoch_bump: false,
            epoch_bump_required: false,
            partitions_in_transaction: BTreeSet::new(),
            new_partitions: BTreeSet::new(),
            pending_partitions: BTreeSet::new(),
            transaction_started: false,
        }
    }

    /// The current state.
    pub fn state(&self) -> TxnState {
        self.state
    }

    /// The error that put the manager in an error state.
    pub fn last_error(&self) -> Option<&Error> {
        self.last_error.as_ref()
    }

    /// The producer id and epoch, once initialised.
    pub fn producer(&self) -> Option<(ProducerId, ProducerEpoch)> {
        self.producer
    }

    /// Whether transactions V2 (KIP-890 part 2) are in use.
    pub fn is_transaction_v2(&self) -> bool {
        self.transaction_v2
    }

    /// Records what the cluster finalized (`transaction.version`) and whether the coordinator
    /// speaks InitProducerId v3+; TV2 also counts as able to bump epochs.
    pub fn set_capabilities(&mut self, transaction_v2: bool, init_producer_id_v3: bool) {
        self.transaction_v2 = transaction_v2;
        self.coordinator_supports_epoch_bump = init_producer_id_v3;
    }

    /// Whether an abortable error can be recovered from (`canHandleAbortableError`).
    fn can_handle_abortable_error(&self) -> bool {
        self.coordinator_supports_epoch_bump || self.transaction_v2
    }

    /// TV1 with a coordinator that bumps on request: the client must ask for the bump.
    fn client_must_bump_epoch(&self) -> bool {
        self.coordinator_supports_epoch_bump && !self.transaction_v2
    }

    /// Whether the next InitProducerId is the epoch bump after an abort (send the current id
    /// and epoch) rather than a first initialisation.
    pub fn is_epoch_bump_pending(&self) -> bool {
        self.epoch_bump_required
    }

    fn transition(&mut self, target: TxnState, operation: &'static str) -> Result<(), Error> {
        if self.state.can_transition_to(target) {
            self.state = target;
            Ok(())
        } else {
            Err(Error::IllegalTransactionState {
                operation,
                state: format!("{:?}", self.state),
            })
        }
    }

    /// `maybeFailWithError`: operations other than abort fail in an error state.
    fn fail_if_error(&self) -> Result<(), Error> {
        match self.state {
            TxnState::AbortableError | TxnState::FatalError => Err(self
                .last_error
                .clone()
                .unwrap_or(Error::IllegalTransactionState {
                    operation: "transactional operation",
                    state: format!("{:?}", self.state),
                })),
            _ => Ok(()),
        }
    }

    /// `init_transactions`: UNINITIALIZED → INITIALIZING.
    ///
    /// # Errors
    /// Any other state.
    pub fn begin_init(&mut self) -> Result<(), Error> {
        self.fail_if_error()?;
        self.transition(TxnState::Initializing, "init_transactions")
    }

    /// InitProducerId answered: READY with the new id and epoch.
    pub fn on_producer_id(&mut self, producer_id: ProducerId, producer_epoch: ProducerEpoch) {
        self.producer = Some((producer_id, producer_epoch));
        self.epoch_bump_required = false;
        self.last_error = None;
        self.state = TxnState::Ready;
    }

    /// `begin_transaction`: READY → IN_TRANSACTION.
    ///
    /// # Errors
    /// An error state, or not READY.
    pub fn begin_transaction(&mut self) -> Result<(), Error> {
        self.fail_if_error()?;
        self.transition(TxnState::InTransaction, "begin_transaction")
    }

    /// `send` to `partition`: under TV1 the partition is queued for AddPartitionsToTxn; under
    /// TV2 the Produce request adds it, so it counts as added at once.
    ///
    /// # Errors
    /// An error state, no producer id, or no transaction open.
    pub fn maybe_add_partition(&mut self, partition: &TopicPartition) -> Result<(), Error> {
        self.fail_if_error()?;
        if self.producer.is_none() || self.state != TxnState::InTransaction {
            return Err(Error::IllegalTransactionState {
                operation: "send",
                state: format!("{:?}", self.state),
            });
        }
        if self.transaction_v2 {
            self.partitions_in_transaction.insert(partition.clone());
            self.transaction_started = true;
        } else if !self.partitions_in_transaction.contains(partition)
            && !self.pending_partitions.contains(partition)
        {
            self.new_partitions.insert(partition.clone());
        }
        Ok(())
    }

    /// Partitions for the next AddPartitionsToTxn (moved to pending); empty when none.
    pub fn take_partitions_to_add(&mut self) -> Vec<TopicPartition> {
        if matches!(self.state, TxnState::FatalError | TxnState::AbortableError) {
            return Vec::new();
        }
        let taken: Vec<TopicPartition> = std::mem::take(&mut self.new_partitions)
            .into_iter()
            .collect();
        self.pending_partitions.extend(taken.iter().cloned());
        taken
    }

    /// The AddPartitionsToTxn request failed retriably: its partitions go back in the queue.
    pub fn retry_partitions(&mut self, partitions: &[TopicPartition]) {
        for partition in partitions {
            self.pending_partitions.remove(partition);
            if !matches!(
                self.state,
                TxnState::AbortingTransaction | TxnState::FatalError
            ) {
                self.new_partitions.insert(partition.clone());
            }
        }
    }

    /// The coordinator added `partitions`.
    pub fn on_partitions_added(&mut self, partitions: &[TopicPartition]) {
        for partition in partitions {
            self.pending_partitions.remove(partition);
            self.partitions_in_transaction.insert(partition.clone());
        }
        self.transaction_started = true;
    }

    /// The request with `partitions` failed for good (the error went to [`Self::on_error`]).
    pub fn on_partitions_failed(&mut self, partitions: &[TopicPartition]) {
        for partition in partitions {
            self.pending_partitions.remove(partition);
        }
    }

    /// AddOffsetsToTxn (or under TV2 the TxnOffsetCommit) reached the coordinator.
    pub fn on_offsets_added(&mut self) {
        self.transaction_started = true;
    }

    /// Whether a batch for `partition` may be sent (`isSendToPartitionAllowed`).
    pub fn is_send_allowed(&self, partition: &TopicPartition) -> bool {
        self.state != TxnState::FatalError && self.partitions_in_transaction.contains(partition)
    }

    /// Whether AddPartitionsToTxn work is queued or in flight (EndTxn waits for it).
    pub fn has_partitions_to_add(&self) -> bool {
        !self.new_partitions.is_empty() || !self.pending_partitions.is_empty()
    }

    /// Whether unsent batches must be failed: the transaction will not commit.
    pub fn must_abort_unsent_batches(&self) -> bool {
        matches!(
            self.state,
            TxnState::AbortableError | TxnState::AbortingTransaction | TxnState::FatalError
        )
    }

    /// `commit_transaction`: IN_TRANSACTION → COMMITTING_TRANSACTION. A retry of a commit that
    /// is already under way (it timed out) is accepted as it is, as Kafka's cached result is.
    ///
    /// # Errors
    /// An error state, or no transaction open.
    pub fn begin_commit(&mut self) -> Result<(), Error> {
        if self.state == TxnState::CommittingTransaction {
            return Ok(());
        }
        self.fail_if_error()?;
        self.transition(TxnState::CommittingTransaction, "commit_transaction")
    }

    /// `abort_transaction`: IN_TRANSACTION or ABORTABLE_ERROR → ABORTING_TRANSACTION.
    ///
    /// # Errors
    /// FATAL_ERROR, or no transaction open.
    pub fn begin_abort(&mut self) -> Result<(), Error> {
        if self.state == TxnState::AbortingTransaction {
            return Ok(());
        }
        if self.state != TxnState::AbortableError {
            self.fail_if_error()?;
        }
        self.transition(TxnState::AbortingTransaction, "abort_transaction")?;
        self.new_partitions.clear();
        Ok(())
    }

    /// Whether EndTxn must be sent (something of the transaction reached the coordinator);
    /// otherwise the transaction completes locally, as Kafka's client does.
    pub fn needs_end_txn(&self) -> bool {
        self.transaction_started
    }

    /// EndTxn answered NONE (or was not needed): READY, or INITIALIZING when the client must
    /// bump the epoch first. Under TV2 the answer carries the bumped epoch (`new_producer`).
    pub fn complete_transaction(&mut self, new_producer: Option<(ProducerId, ProducerEpoch)>) {
        if let Some(producer) = new_producer {
            self.producer = Some(producer);
        }
        self.state = if self.epoch_bump_required {
            TxnState::Initializing
        } else {
            TxnState::Ready
        };
        self.last_error = None;
        self.transaction_started = false;
        self.new_partitions.clear();
        self.pending_partitions.clear();
        self.partitions_in_transaction.clear();
    }

    /// Applies a non-retry [`Reaction`] with its error; returns the state reached.
    pub fn on_error(&mut self, reaction: Reaction, error: Error) -> TxnState {
        if self.state == TxnState::FatalError {
            // The first fatal error stays the reason (later batch failures are its echoes).
            return self.state;
        }
        match reaction {
            Reaction::Done | Reaction::Retry { .. } => {}
            Reaction::Fatal => self.transition_to_fatal(error),
            Reaction::Abortable => self.transition_to_abortable(error),
            Reaction::AbortableIfPossible => {
                if self.can_handle_abortable_error() {
                    if self.client_must_bump_epoch() {
                        self.epoch_bump_required = true;
                    }
                    self.transition_to_abortable(error);
                } else {
                    self.transition_to_fatal(error);
                }
            }
        }
        self.state
    }

    /// A transactional batch failed for good with `error` (Kafka error `code` when the broker
    /// answered one, else `None`): `maybeTransitionToErrorState`.
    pub fn on_failed_batch(&mut self, code: Option<i16>, error: Error) -> TxnState {
        let reaction = code.map_or(Reaction::Abortable, |c| reaction(TxnApi::Produce, c));
        if reaction == Reaction::Abortable
            && self.client_must_bump_epoch()
            && !matches!(
                self.state,
                TxnState::CommittingTransaction | TxnState::AbortingTransaction
            )
        {
            self.epoch_bump_required = true;
        }
        self.on_error(reaction, error)
    }

    fn transition_to_fatal(&mut self, error: Error) {
        self.state = TxnState::FatalError;
        self.last_error = Some(error);
    }

    fn transition_to_abortable(&mut self, error: Error) {
        if self.state == TxnState::AbortingTransaction {
            // Already aborting: the abort goes on.
            return;
        }
        if self.state.can_transition_to(TxnState::AbortableError) {
            self.state = TxnState::AbortableError;
            self.last_error = Some(error);
        } else {
            // Kafka poisons the manager on an invalid transition (KAFKA-14831).
            self.transition_to_fatal(error);
        }
    }
}

#[cfg(test)]
#[path = "transaction_tests.rs"]
mod tests;
