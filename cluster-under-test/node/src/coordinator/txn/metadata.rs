//! [`TransactionMetadata`]: what the coordinator knows of one transactional id (Kafka's
//! `TransactionMetadata`), its [`TxnState`], and the mapping to and from the log's
//! [`TxnLogValue`]. Pure data; the transitions live in `transitions.rs`.

use std::collections::BTreeSet;

use crate::coordinator::txn::record::{self, TxnLogValue};

/// Kafka's `TransactionState`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TxnState {
    /// No transaction open (after InitProducerId).
    Empty,
    /// Partitions added; the transaction is open.
    Ongoing,
    /// EndTxn(commit) accepted; markers being written.
    PrepareCommit,
    /// EndTxn(abort), a fence or a timeout accepted; markers being written.
    PrepareAbort,
    /// Every commit marker written.
    CompleteCommit,
    /// Every abort marker written.
    CompleteAbort,
    /// Expired transactional id (tombstone pending).
    Dead,
    /// In memory only in Kafka: an ongoing transaction being fenced (logged as PrepareAbort).
    PrepareEpochFence,
}

impl TxnState {
    /// The log's `TransactionStatus` code.
    pub fn code(self) -> i8 {
        match self {
            TxnState::Empty => record::STATUS_EMPTY,
            TxnState::Ongoing => record::STATUS_ONGOING,
            TxnState::PrepareCommit => record::STATUS_PREPARE_COMMIT,
            TxnState::PrepareAbort => record::STATUS_PREPARE_ABORT,
            TxnState::CompleteCommit => record::STATUS_COMPLETE_COMMIT,
            TxnState::CompleteAbort => record::STATUS_COMPLETE_ABORT,
            TxnState::Dead => record::STATUS_DEAD,
            TxnState::PrepareEpochFence => record::STATUS_PREPARE_EPOCH_FENCE,
        }
    }

    /// The state of a `TransactionStatus` code.
    pub fn from_code(code: i8) -> Option<TxnState> {
        Some(match code {
            record::STATUS_EMPTY => TxnState::Empty,
            record::STATUS_ONGOING => TxnState::Ongoing,
            record::STATUS_PREPARE_COMMIT => TxnState::PrepareCommit,
            record::STATUS_PREPARE_ABORT => TxnState::PrepareAbort,
            record::STATUS_COMPLETE_COMMIT => TxnState::CompleteCommit,
            record::STATUS_COMPLETE_ABORT => TxnState::CompleteAbort,
            record::STATUS_DEAD => TxnState::Dead,
            record::STATUS_PREPARE_EPOCH_FENCE => TxnState::PrepareEpochFence,
            _ => return None,
        })
    }

    /// The name DescribeTransactions and ListTransactions use (Kafka's `stateName`).
    pub fn name(self) -> &'static str {
        match self {
            TxnState::Empty => "Empty",
            TxnState::Ongoing => "Ongoing",
            TxnState::PrepareCommit => "PrepareCommit",
            TxnState::PrepareAbort => "PrepareAbort",
            TxnState::CompleteCommit => "CompleteCommit",
            TxnState::CompleteAbort => "CompleteAbort",
            TxnState::Dead => "Dead",
            TxnState::PrepareEpochFence => "PrepareEpochFence",
        }
    }

    /// Every state, for name lookups.
    pub const ALL: [TxnState; 8] = [
        TxnState::Empty,
        TxnState::Ongoing,
        TxnState::PrepareCommit,
        TxnState::PrepareAbort,
        TxnState::CompleteCommit,
        TxnState::CompleteAbort,
        TxnState::Dead,
        TxnState::PrepareEpochFence,
    ];

    /// Whether markers are being written (PrepareCommit or PrepareAbort).
    pub fn is_prepare(self) -> bool {
        matches!(self, TxnState::PrepareCommit | TxnState::PrepareAbort)
    }
}

/// One transactional id's state.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TransactionMetadata {
    /// The current producer id.
    pub producer_id: i64,
    /// The producer id before the last rotation (epoch exhaustion), or -1.
    pub previous_producer_id: i64,
    /// The producer id the transaction being prepared hands over to at its completion, or -1:
    /// set by a TV2 EndTxn whose epoch bump would exhaust the epoch (Kafka's
    /// `nextProducerId`).
    pub next_producer_id: i64,
    /// The current epoch (-1 before the first InitProducerId completes).
    pub producer_epoch: i16,
    /// The epoch before the last bump under the same producer id, or -1: lets a retried
    /// InitProducerId (KIP-360) be recognised. Not in the log: replay derives it from the
    /// previous record of the id, so every replay of the same log agrees.
    pub last_producer_epoch: i16,
    /// `transaction.timeout.ms` of the producer.
    pub timeout_ms: i32,
    /// The state.
    pub state: TxnState,
    /// Partitions in the open transaction.
    pub partitions: BTreeSet<(String, i32)>,
    /// When the open transaction began (its first AddPartitions), or -1.
    pub start_ms: i64,
    /// The last change.
    pub last_update_ms: i64,
    /// Whether the client uses transaction version 2 (KIP-890: epoch bump on every EndTxn).
    pub tv2: bool,
}

impl TransactionMetadata {
    /// The log value of this state.
    pub fn to_value(&self) -> TxnLogValue {
        TxnLogValue {
            producer_id: self.producer_id,
            previous_producer_id: self.previous_producer_id,
            next_producer_id: self.next_producer_id,
            producer_epoch: self.producer_epoch,
            timeout_ms: self.timeout_ms,
            // Kafka never logs the fence: it is logged as the abort it leads to.
            status: if self.state == TxnState::PrepareEpochFence {
                TxnState::PrepareAbort.code()
            } else {
                self.state.code()
            },
            partitions: self.partitions.clone(),
            last_update_ms: self.last_update_ms,
            start_ms: self.start_ms,
            client_transaction_version: if self.tv2 { 2 } else { 0 },
        }
    }

    /// The state a log value records; `previous` is the state it replaces (for
    /// `last_producer_epoch`).
    ///
    /// # Errors
    /// A message for an unknown status.
    pub fn from_value(
        value: &TxnLogValue,
        previous: Option<&TransactionMetadata>,
    ) -> Result<TransactionMetadata, String> {
        let state = TxnState::from_code(value.status)
            .ok_or_else(|| format!("unknown transaction status {}", value.status))?;
        let tv2 = value.client_transaction_version >= 2;
        // Kafka's transitions: an InitProducerId bump keeps the epoch it replaced (so a
        // KIP-360 retry is recognised); a fence (`prepareFenceProducerEpoch`, by a new
        // producer or an expiry) keeps none, so the fenced epoch is never taken for a retry;
        // the TV2 Prepare* bump (`prepareAbortOrCommit`) keeps the epoch just below its own,
        // which after a TV2 fence (two bumps) is the fence's epoch, not the zombie's.
        let last_producer_epoch = match previous {
            Some(old) if old.producer_id == value.producer_id => {
                let bumped_into_prepare =
                    matches!(state, TxnState::PrepareCommit | TxnState::PrepareAbort);
                if old.producer_epoch == value.producer_epoch {
                    old.last_producer_epoch
                } else if bumped_into_prepare && tv2 {
                    value.producer_epoch.saturating_sub(1)
                } else if bumped_into_prepare {
                    // TV1 bumps the epoch into PrepareAbort only to fence.
                    -1
                } else {
                    old.producer_epoch
                }
            }
            _ => -1,
        };
        Ok(TransactionMetadata {
            producer_id: value.producer_id,
            previous_producer_id: value.previous_producer_id,
            next_producer_id: value.next_producer_id,
            producer_epoch: value.producer_epoch,
            last_producer_epoch,
            timeout_ms: value.timeout_ms,
            state,
            partitions: value.partitions.clone(),
            start_ms: value.start_ms,
            last_update_ms: value.last_update_ms,
            tv2,
        })
    }
}
