//! The transaction coordinator's decisions (Kafka's `TransactionCoordinator` with
//! `TransactionMetadata`'s `prepare*` transitions), as pure functions from the current state
//! of a transactional id and a request to the state to write (or the answer, or the error).
//! The runtime writes what they return and answers once it is replicated; nothing here does
//! I/O or reads a clock. Table-tested in `transitions/tests.rs`.

use std::collections::BTreeSet;

use kafka_protocol::ResponseError;

use crate::canary::{Canaries, Canary};
use crate::coordinator::txn::metadata::{TransactionMetadata, TxnState};

/// The node settings the decisions depend on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rules {
    /// `transaction.max.timeout.ms`.
    pub max_timeout_ms: i32,
    /// `transaction.version` is 2 (KIP-890): an EndTxn v5+ bumps the epoch.
    pub tv2: bool,
    /// The node's canaries.
    pub canaries: Canaries,
}

/// Kafka's `ProducerIdAndEpoch.isEpochExhausted` bound: the last epoch a producer id may be
/// bumped to is `i16::MAX - 1`, so a fence can still bump once more.
fn epoch_exhausted(epoch: i16) -> bool {
    epoch >= i16::MAX - 1
}

/// The epoch of the abort that fences `meta`'s producer (Kafka's `prepareFenceProducerEpoch`,
/// then `prepareAbortOrCommit`): one bump, and under TV2 the abort bumps again, so the fenced
/// producer's epoch is not the one just before the abort's, which TV2's EndTxn takes for a
/// retry and would answer with the new epoch.
fn fenced_epoch(meta: &TransactionMetadata) -> i16 {
    let bumps = if meta.tv2 { 2 } else { 1 };
    meta.producer_epoch.saturating_add(bumps)
}

/// A partition, as (topic, index).
pub type TopicPartition = (String, i32);

/// What InitProducerId with a transactional id does.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum InitOutcome {
    /// Write this state, then answer its producer id and epoch.
    Write(TransactionMetadata),
    /// Answer this producer id and epoch, writing nothing (a retried request, KIP-360).
    Answer(i64, i16),
    /// A fresh producer id is needed (a new id, or the epoch is exhausted): decide again
    /// with one.
    NeedProducerId,
    /// The id has an open transaction: write this (the abort at a bumped epoch, which fences
    /// the old producer) and answer `CONCURRENT_TRANSACTIONS`, so the client retries once
    /// the abort completes.
    FenceAndAbort(TransactionMetadata),
}

/// InitProducerId's parameters.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct InitRequest {
    /// `TransactionTimeoutMs`.
    pub timeout_ms: i32,
    /// The producer id and epoch the client already has (KIP-360, v3+), if any.
    pub expected: Option<(i64, i16)>,
    /// A producer id allocated for this request, when [`InitOutcome::NeedProducerId`] asked.
    pub fresh_producer_id: Option<i64>,
    /// Now.
    pub now_ms: i64,
}

/// Decides InitProducerId for a transactional id whose state is `current`.
///
/// # Errors
/// `INVALID_TRANSACTION_TIMEOUT` (not in `1..=transaction.max.timeout.ms`),
/// `CONCURRENT_TRANSACTIONS` (markers being written), `PRODUCER_FENCED` (the expected
/// producer id and epoch are not this id's).
pub fn init_producer_id(
    current: Option<&TransactionMetadata>,
    request: &InitRequest,
    rules: &Rules,
) -> Result<InitOutcome, ResponseError> {
    if request.timeout_ms <= 0 || request.timeout_ms > rules.max_timeout_ms {
        return Err(ResponseError::InvalidTransactionTimeout);
    }
    let Some(meta) = current else {
        let Some(producer_id) = request.fresh_producer_id else {
            return Ok(InitOutcome::NeedProducerId);
        };
        return Ok(InitOutcome::Write(TransactionMetadata {
            producer_id,
            previous_producer_id: -1,
            next_producer_id: -1,
            producer_epoch: 0,
            last_producer_epoch: -1,
            timeout_ms: request.timeout_ms,
            state: TxnState::Empty,
            partitions: BTreeSet::new(),
            start_ms: -1,
            last_update_ms: request.now_ms,
            tv2: rules.tv2,
        }));
    };
    if let Some((producer_id, epoch)) = request.expected
        && meta.producer_epoch != -1
        && !(producer_id == meta.producer_id
            && (epoch == meta.producer_epoch || epoch == meta.last_producer_epoch))
        && !(producer_id == meta.previous_producer_id && meta.producer_epoch == 0)
    {
        return Err(ResponseError::ProducerFenced);
    }
    match meta.state {
        TxnState::PrepareCommit
        | TxnState::PrepareAbort
        | TxnState::PrepareEpochFence
        | TxnState::Dead => Err(ResponseError::ConcurrentTransactions),
        TxnState::Ongoing => {
            let mut fenced = meta.clone();
            // CANARY(no-zombie-fence): the open transaction is aborted at the producer's own
            // epoch, so the old producer is not fenced.
            if !rules.canaries.is_on(Canary::NoZombieFence) && meta.producer_epoch < i16::MAX {
                fenced.producer_epoch = fenced_epoch(meta);
            }
            fenced.state = TxnState::PrepareAbort;
            fenced.last_update_ms = request.now_ms;
            Ok(InitOutcome::FenceAndAbort(fenced))
        }
        TxnState::Empty | TxnState::CompleteCommit | TxnState::CompleteAbort => {
            // A retry of a bump that already happened: answer it again.
            if let Some((producer_id, epoch)) = request.expected {
                let retried_bump = producer_id == meta.producer_id
                    && epoch != meta.producer_epoch
                    && epoch == meta.last_producer_epoch;
                let retried_rotation =
                    producer_id == meta.previous_producer_id && meta.producer_epoch == 0;
                if retried_bump || retried_rotation {
                    return Ok(InitOutcome::Answer(meta.producer_id, meta.producer_epoch));
                }
            }
            let mut next = meta.clone();
            if epoch_exhausted(meta.producer_epoch) {
                let Some(producer_id) = request.fresh_producer_id else {
                    return Ok(InitOutcome::NeedProducerId);
                };
                next.previous_producer_id = meta.producer_id;
                next.producer_id = producer_id;
                next.producer_epoch = 0;
            } else if rules.canaries.is_on(Canary::NoZombieFence) {
                // CANARY(no-zombie-fence): a new producer gets the old producer's epoch, so
                // the zombie's requests are still accepted.
                next.producer_epoch = meta.producer_epoch.max(0);
            } else {
                next.producer_epoch = meta.producer_epoch + 1;
            }
            next.timeout_ms = request.timeout_ms;
            next.state = TxnState::Empty;
            next.partitions.clear();
            next.start_ms = -1;
            next.last_update_ms = request.now_ms;
            next.tv2 = rules.tv2;
            Ok(InitOutcome::Write(next))
        }
    }
}

/// The checks every request of an open transaction starts with: the id has this producer
/// id and epoch, and no markers are being written.
fn check_producer(
    current: Option<&TransactionMetadata>,
    producer_id: i64,
    epoch: i16,
) -> Result<&TransactionMetadata, ResponseError> {
    let meta = current
        .filter(|meta| meta.producer_id == producer_id && meta.state != TxnState::Dead)
        .ok_or(ResponseError::InvalidProducerIdMapping)?;
    if meta.producer_epoch != epoch {
        return Err(ResponseError::ProducerFenced);
    }
    if meta.state.is_prepare() || meta.state == TxnState::PrepareEpochFence {
        return Err(ResponseError::ConcurrentTransactions);
    }
    Ok(meta)
}

/// AddPartitionsToTxn (and AddOffsetsToTxn, whose partition is the group's offsets
/// partition): the new state to write, or `None` when every partition is already in the
/// open transaction.
///
/// # Errors
/// `INVALID_PRODUCER_ID_MAPPING`, `PRODUCER_FENCED`, `CONCURRENT_TRANSACTIONS`.
pub fn add_partitions(
    current: Option<&TransactionMetadata>,
    producer_id: i64,
    epoch: i16,
    partitions: &BTreeSet<TopicPartition>,
    now_ms: i64,
) -> Result<Option<TransactionMetadata>, ResponseError> {
    let meta = check_producer(current, producer_id, epoch)?;
    if meta.state == TxnState::Ongoing && partitions.is_subset(&meta.partitions) {
        return Ok(None);
    }
    let mut next = meta.clone();
    if meta.state != TxnState::Ongoing {
        next.partitions.clear();
        next.start_ms = now_ms;
    }
    next.state = TxnState::Ongoing;
    next.partitions.extend(partitions.iter().cloned());
    next.last_update_ms = now_ms;
    Ok(Some(next))
}

/// AddPartitionsToTxn's verify-only form (KIP-890 part 1, the partition leaders' check):
/// for each partition, `None` when it is in the open transaction, else the error.
///
/// # Errors
/// As [`add_partitions`], for the whole request.
pub fn verify_partitions(
    current: Option<&TransactionMetadata>,
    producer_id: i64,
    epoch: i16,
    partitions: &BTreeSet<TopicPartition>,
) -> Result<Vec<(TopicPartition, Option<ResponseError>)>, ResponseError> {
    let meta = check_producer(current, producer_id, epoch)?;
    Ok(partitions
        .iter()
        .map(|partition| {
            let added = meta.state == TxnState::Ongoing && meta.partitions.contains(partition);
            (
                partition.clone(),
                (!added).then_some(ResponseError::TransactionAbortable),
            )
        })
        .collect())
}

/// What EndTxn does.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EndOutcome {
    /// Write this (PrepareCommit / PrepareAbort), then answer its producer id and epoch; the
    /// markers follow.
    Write(TransactionMetadata),
    /// Answer this producer id and epoch, writing nothing (a retry of a completed EndTxn).
    Answer(i64, i16),
    /// The TV2 bump would exhaust the epoch: decide again with a fresh producer id.
    NeedProducerId,
}

/// Decides EndTxn. `bump` is true for a TV2 request (EndTxn v5+ on a `transaction.version`
/// 2 node): the epoch is bumped at the prepare, and a retry comes at the epoch before it.
/// When the bump would leave the epoch exhausted (Kafka's `isProducerEpochExhausted`), the
/// prepare also names `fresh_producer_id` as its `next_producer_id` (asking for one with
/// [`EndOutcome::NeedProducerId`]): the markers carry the old id at the bumped epoch, the
/// completion moves to the new id at epoch 0, and the answer is the new id at epoch 0
/// (KIP-890; Kafka's `prepareAbortOrCommit` / `prepareComplete`). A retry after the
/// completion comes with the previous producer id.
///
/// # Errors
/// `INVALID_PRODUCER_ID_MAPPING`, `PRODUCER_FENCED`, `CONCURRENT_TRANSACTIONS` (markers are
/// being written, whatever the request's epoch or outcome), `INVALID_TXN_STATE` (no open
/// transaction, or the other outcome was written).
pub fn end_txn(
    current: Option<&TransactionMetadata>,
    producer_id: i64,
    epoch: i16,
    commit: bool,
    bump: bool,
    now_ms: i64,
    fresh_producer_id: Option<i64>,
) -> Result<EndOutcome, ResponseError> {
    let live = current.filter(|meta| meta.state != TxnState::Dead);
    if let Some(meta) = live.filter(|meta| {
        bump && meta.previous_producer_id == producer_id
            && meta.producer_id != producer_id
            && meta.producer_epoch == 0
            && epoch_exhausted(epoch)
    }) {
        // A retry of the EndTxn that moved the id to a new producer id.
        let done = if commit {
            TxnState::CompleteCommit
        } else {
            TxnState::CompleteAbort
        };
        return if meta.state == done {
            Ok(EndOutcome::Answer(meta.producer_id, meta.producer_epoch))
        } else {
            Err(ResponseError::InvalidTxnState)
        };
    }
    let meta = live
        .filter(|meta| meta.producer_id == producer_id)
        .ok_or(ResponseError::InvalidProducerIdMapping)?;
    // While markers are written (a PrepareX whose CompleteX is pending) every EndTxn of the
    // producer id waits: CONCURRENT_TRANSACTIONS before the epoch is looked at (Kafka 4.0,
    // KAFKA-18464). Checking the epoch first fenced a TV2 client whose abort came at the
    // bumped epoch its commit had just been answered with, while that commit's markers were
    // still on their way; its next transaction, opened at that epoch by a late produce's
    // implicit add, was then left to the timeout with no client to end it.
    if meta.state.is_prepare() {
        return Err(ResponseError::ConcurrentTransactions);
    }
    let retry = bump && meta.producer_epoch > 0 && epoch == meta.producer_epoch - 1;
    if meta.producer_epoch != epoch && !retry {
        return Err(ResponseError::ProducerFenced);
    }
    // TV2 (Kafka's `isValidEpoch`): a completed transaction also takes a retry one epoch
    // back; an open or empty one only the current epoch.
    if bump {
        let valid = match meta.state {
            TxnState::CompleteCommit | TxnState::CompleteAbort => true,
            _ => epoch == meta.producer_epoch,
        };
        if !valid {
            return Err(ResponseError::ProducerFenced);
        }
    }
    let (prepare, complete) = if commit {
        (TxnState::PrepareCommit, TxnState::CompleteCommit)
    } else {
        (TxnState::PrepareAbort, TxnState::CompleteAbort)
    };
    let answer = EndOutcome::Answer(meta.producer_id, meta.producer_epoch);
    let rotates = bump && epoch_exhausted(meta.producer_epoch);
    let next_producer_id = match (rotates, fresh_producer_id) {
        (false, _) => -1,
        (true, Some(fresh)) => fresh,
        (true, None) => -1,
    };
    let opens_prepare = |state: TxnState| match state {
        TxnState::Ongoing => !retry,
        TxnState::Empty | TxnState::CompleteCommit | TxnState::CompleteAbort => {
            bump && !commit && !retry
        }
        _ => false,
    };
    if rotates && fresh_producer_id.is_none() && opens_prepare(meta.state) {
        return Ok(EndOutcome::NeedProducerId);
    }
    match meta.state {
        state if state == complete && (retry || !bump) => Ok(answer),
        TxnState::Ongoing if !retry => {
            let mut next = meta.clone();
            if bump && meta.producer_epoch < i16::MAX {
                next.producer_epoch = meta.producer_epoch + 1;
            }
            next.next_producer_id = next_producer_id;
            next.state = prepare;
            next.last_update_ms = now_ms;
            Ok(EndOutcome::Write(next))
        }
        // TV2 lets a client abort with no transaction open (KIP-890): the epoch is bumped.
        TxnState::Empty | TxnState::CompleteCommit | TxnState::CompleteAbort
            if bump && !commit && !retry =>
        {
            let mut next = meta.clone();
            next.producer_epoch = meta.producer_epoch.saturating_add(1);
            next.next_producer_id = next_producer_id;
            next.state = prepare;
            next.partitions.clear();
            next.last_update_ms = now_ms;
            Ok(EndOutcome::Write(next))
        }
        TxnState::Ongoing => Err(ResponseError::ProducerFenced),
        _ => Err(ResponseError::InvalidTxnState),
    }
}

/// The markers a prepared transaction still needs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MarkerWork {
    /// The producer id the markers carry.
    pub producer_id: i64,
    /// The epoch the markers carry.
    pub producer_epoch: i16,
    /// Commit or abort.
    pub commit: bool,
    /// The partitions to write them to.
    pub partitions: BTreeSet<TopicPartition>,
}

/// The markers `meta` needs written, if it is prepared.
pub fn marker_work(meta: &TransactionMetadata) -> Option<MarkerWork> {
    meta.state.is_prepare().then(|| MarkerWork {
        producer_id: meta.producer_id,
        producer_epoch: meta.producer_epoch,
        commit: meta.state == TxnState::PrepareCommit,
        partitions: meta.partitions.clone(),
    })
}

/// The state to write once every marker of `work` is written: Complete* with no partitions,
/// or `None` when the id moved on meanwhile (another coordinator epoch finished it).
pub fn complete(
    current: Option<&TransactionMetadata>,
    work: &MarkerWork,
    now_ms: i64,
) -> Option<TransactionMetadata> {
    let meta = current?;
    if marker_work(meta).as_ref() != Some(work) {
        return None;
    }
    let mut next = meta.clone();
    next.state = if work.commit {
        TxnState::CompleteCommit
    } else {
        TxnState::CompleteAbort
    };
    next.partitions.clear();
    next.last_update_ms = now_ms;
    if meta.next_producer_id != -1 {
        next.previous_producer_id = meta.producer_id;
        next.producer_id = meta.next_producer_id;
        next.producer_epoch = 0;
        next.last_producer_epoch = -1;
        next.next_producer_id = -1;
    }
    Some(next)
}

/// The abort of a transaction open longer than its timeout (Kafka's
/// `abortTimedOutTransactions`): PrepareAbort at a bumped epoch, which fences the producer.
pub fn expire(current: &TransactionMetadata, now_ms: i64) -> Option<TransactionMetadata> {
    if current.state != TxnState::Ongoing
        || current
            .start_ms
            .saturating_add(i64::from(current.timeout_ms))
            > now_ms
    {
        return None;
    }
    let mut next = current.clone();
    if current.producer_epoch < i16::MAX {
        next.producer_epoch = fenced_epoch(current);
    }
    next.state = TxnState::PrepareAbort;
    next.last_update_ms = now_ms;
    Some(next)
}

#[cfg(test)]
mod tests;
