//! The partition as leader of a transaction's records: appending a COMMIT or ABORT marker for
//! the transaction coordinator (WriteTxnMarkers), checked against the producer state in the log
//! (an older producer epoch is `INVALID_PRODUCER_EPOCH`, an older coordinator epoch
//! `TRANSACTION_COORDINATOR_FENCED`; nothing is written then), telling the produce path and
//! the group coordinator when a transactional batch must be verified with the transaction
//! coordinator first (KIP-890's verification point), and the pure decisions behind both:
//! [`needs_verification`] before the question, [`txn_refusal`] at the append.

use std::sync::Arc;

use kafka_protocol::ResponseError;
use logjam_storage::{EndTxnMarker, LeaderEpoch, ProducerId, VerificationGuard};

use crate::clock::now_ms;

use super::{Acks, Appended, Partition};

/// What the KIP-890 check established about a batch, for [`Partition::append_verified`] and
/// [`Partition::append_as_coordinator`].
#[derive(Debug, Clone, Copy)]
pub enum Verified {
    /// No check applies (no transactional id, verification off for this version, or the
    /// records are not a transactional data batch).
    NotRequired,
    /// The producer had a transaction open here at the batch's epoch, so nothing was asked
    /// of the coordinator.
    WasOpen,
    /// The coordinator confirmed the partition for this producer under `guard`.
    Guarded {
        /// The producer id the guard was taken for.
        producer_id: i64,
        /// The guard.
        guard: VerificationGuard,
        /// Whether the producer's transaction at an older epoch was open here when the guard
        /// was taken (TV2: its marker may land before the append and void the guard, an
        /// expected race answered retriable rather than `INVALID_TXN_STATE`).
        over_open: bool,
    },
}

/// A verification to ask the coordinator for, with the guard taken under the log lock.
#[derive(Debug, Clone, Copy)]
pub struct Ask {
    /// The batch's producer id.
    pub producer_id: i64,
    /// The batch's producer epoch.
    pub producer_epoch: i16,
    /// The guard that must still hold at the append.
    pub guard: VerificationGuard,
    /// See [`Verified::Guarded`].
    pub over_open: bool,
}

impl Ask {
    /// What the append is told once the coordinator confirmed the partition.
    pub fn verified(self) -> Verified {
        Verified::Guarded {
            producer_id: self.producer_id,
            guard: self.guard,
            over_open: self.over_open,
        }
    }
}

/// What the produce path does about a batch before its append.
#[derive(Debug, Clone, Copy)]
pub enum TxnCheck {
    /// Nothing to ask: append with this.
    Settled(Verified),
    /// Ask the coordinator first.
    Ask(Ask),
}

/// Whether a transactional batch at `producer_epoch` must be verified with the coordinator
/// before it is appended, given the epoch of the producer's transaction open here (if any):
/// `None` when it continues the transaction open at its own epoch (or is older than it: the
/// append fences it), `Some(false)` when it would open one, `Some(true)` when the open one is
/// at an older epoch. Kafka's `hasOngoingTransaction(producerId, producerEpoch)` compares the
/// epoch (KAFKA-18575): under TV2 the open transaction's marker may not have landed yet (the
/// coordinator answers `CONCURRENT_TRANSACTIONS` until it has), or it hangs and only the
/// coordinator can let the producer go on.
pub fn needs_verification(producer_epoch: i16, open_epoch: Option<i16>) -> Option<bool> {
    match open_epoch {
        None => Some(false),
        Some(open) if open < producer_epoch => Some(true),
        Some(_) => None,
    }
}

/// Why a transactional append at `producer_epoch`, whose sequence and epoch the producer
/// state accepted, must be refused, given the epoch of the producer's transaction open here
/// (if any), what was verified and whether a verification guard still holds:
/// - at a newer epoch than the open transaction, unverified: `CONCURRENT_TRANSACTIONS`
///   (it would join the old transaction and be ended by its marker); verified, it joins it
///   (the coordinator has the partition in the new transaction: the old one hangs here);
/// - opening a transaction after the produce path saw one open (a marker closed it since:
///   nobody verified this one, Kafka's `batchMissingRequiredVerification`):
///   `CONCURRENT_TRANSACTIONS`, so the retry is verified;
/// - opening one under a guard a marker voided: `INVALID_TXN_STATE`, or
///   `CONCURRENT_TRANSACTIONS` when the guard was taken over an older open transaction
///   (its marker was expected).
pub fn txn_refusal(
    producer_epoch: i16,
    open_epoch: Option<i16>,
    verified: Verified,
    guard_holds: bool,
) -> Option<ResponseError> {
    match (open_epoch, verified) {
        (Some(open), Verified::Guarded { .. }) if open < producer_epoch => None,
        (Some(open), _) if open < producer_epoch => Some(ResponseError::ConcurrentTransactions),
        (Some(_), _) | (None, Verified::NotRequired) => None,
        (None, Verified::WasOpen) => Some(ResponseError::ConcurrentTransactions),
        (None, Verified::Guarded { .. }) if guard_holds => None,
        (None, Verified::Guarded { over_open, .. }) => Some(if over_open {
            ResponseError::ConcurrentTransactions
        } else {
            ResponseError::InvalidTxnState
        }),
    }
}

/// The producer (id, epoch) of `records` when its first batch is a transactional data batch
/// (the only batches KIP-890 verifies); `None` for anything else, malformed records included.
pub fn transactional_producer(records: &[u8]) -> Option<(i64, i16)> {
    let (_, header) = logjam_storage::batch::batches(records).next()?.ok()?;
    (header.is_transactional() && !header.is_control() && header.producer_id >= 0)
        .then_some((header.producer_id, header.producer_epoch))
}

/// The epoch of `producer_id`'s transaction open in `log`, if one is.
pub(super) fn open_epoch(log: &logjam_storage::Log, producer_id: i64) -> Option<i16> {
    log.producer_state()
        .entry(ProducerId(producer_id))
        .filter(|entry| entry.current_txn_first_offset.is_some())
        .map(|entry| entry.epoch.0)
}

/// Whether `verified`'s guard (if it has one) still holds in `log`.
pub(super) fn guard_holds(log: &logjam_storage::Log, verified: Verified) -> bool {
    match verified {
        Verified::Guarded {
            producer_id, guard, ..
        } => log.transaction_verification_holds(ProducerId(producer_id), guard),
        _ => true,
    }
}

impl Partition {
    /// Appends one marker control batch for `producer_id`/`producer_epoch` as the leader, as an
    /// acks=all append (callers wait on [`Partition::acks_status`] like a produce).
    ///
    /// # Errors
    /// `NOT_LEADER_OR_FOLLOWER`, `NOT_ENOUGH_REPLICAS`, `INVALID_PRODUCER_EPOCH`,
    /// `TRANSACTION_COORDINATOR_FENCED` or `KAFKA_STORAGE_ERROR`.
    pub async fn append_marker(
        self: Arc<Self>,
        producer_id: i64,
        producer_epoch: i16,
        marker: EndTxnMarker,
    ) -> Result<Appended, ResponseError> {
        self.append_under_leadership(Acks::All, None, move |partition, log, leader_epoch| {
            let info = log
                .append_marker_as_leader(
                    producer_id,
                    producer_epoch,
                    marker,
                    LeaderEpoch(leader_epoch),
                    now_ms(),
                )
                .map_err(|error| {
                    tracing::info!(partition = %partition.topic_partition, producer_id,
                        producer_epoch, ?marker, %error, "marker refused");
                    super::kafka_error(error.kafka_error_code())
                })?;
            tracing::debug!(partition = %partition.topic_partition, producer_id, producer_epoch,
                ?marker, offset = info.first_offset.0, "marker appended");
            Ok(Appended {
                base_offset: info.first_offset.0,
                log_start_offset: log.log_start_offset().0,
                end_offset: info.last_offset.0 + 1,
                leader_epoch,
                log_append_time_ms: info.log_append_time_ms.unwrap_or(-1),
            })
        })
        .await
    }

    /// Appends a coordinator's transactional batch (TxnOffsetCommit's offsets) as the leader,
    /// acks=all: as Kafka's `AppendOrigin.COORDINATOR`, the producer's sequence is not
    /// checked (the batch has none) but an epoch older than the partition's is
    /// `INVALID_PRODUCER_EPOCH`; then [`txn_refusal`] with what the group coordinator
    /// verified (`CONCURRENT_TRANSACTIONS`: the offsets would join the producer's older open
    /// transaction, or open one nobody verified; `INVALID_TXN_STATE`: a marker voided the
    /// guard).
    ///
    /// # Errors
    /// As above, and [`Partition::append`]'s.
    pub async fn append_as_coordinator(
        self: Arc<Self>,
        records: bytes::Bytes,
        producer_id: i64,
        producer_epoch: i16,
        verified: Verified,
    ) -> Result<Appended, ResponseError> {
        self.append_under_leadership(Acks::All, None, move |partition, log, leader_epoch| {
            let entry = log.producer_state().entry(ProducerId(producer_id));
            if entry.is_some_and(|entry| entry.epoch.0 > producer_epoch) {
                return Err(ResponseError::InvalidProducerEpoch);
            }
            let open = open_epoch(log, producer_id);
            if let Some(error) =
                txn_refusal(producer_epoch, open, verified, guard_holds(log, verified))
            {
                tracing::debug!(partition = %partition.topic_partition, producer_id,
                    producer_epoch, ?open, ?verified, ?error, "coordinator append refused");
                return Err(error);
            }
            let info = log
                .append_as_leader(&records, LeaderEpoch(leader_epoch), now_ms())
                .map_err(|error| {
                    tracing::debug!(partition = %partition.topic_partition, %error,
                        "coordinator append refused");
                    super::kafka_error(error.kafka_error_code())
                })?;
            Ok(Appended {
                base_offset: info.first_offset.0,
                log_start_offset: log.log_start_offset().0,
                end_offset: info.last_offset.0 + 1,
                leader_epoch,
                log_append_time_ms: info.log_append_time_ms.unwrap_or(-1),
            })
        })
        .await
    }

    /// Takes a verification guard for `producer_id` at `producer_epoch` when its batch must
    /// be verified here ([`needs_verification`]); `None` when it continues the transaction
    /// open here at its epoch.
    pub fn start_verification(&self, producer_id: i64, producer_epoch: i16) -> Option<Ask> {
        let mut log = self.lock();
        let over_open = needs_verification(producer_epoch, open_epoch(&log, producer_id))?;
        Some(Ask {
            producer_id,
            producer_epoch,
            guard: log.start_transaction_verification(ProducerId(producer_id)),
            over_open,
        })
    }

    /// What the produce path does about `records` before appending them: when the first
    /// batch is transactional and must be verified ([`needs_verification`]), ask the
    /// coordinator, with the producer's verification guard taken under the log lock (Kafka's
    /// `maybeStartTransactionVerification`); when it continues the producer's transaction
    /// open here, [`Verified::WasOpen`]; for anything else, malformed records included (the
    /// append gives the precise error), [`Verified::NotRequired`].
    pub fn opens_transaction(&self, records: &[u8]) -> TxnCheck {
        let Some((producer_id, producer_epoch)) = transactional_producer(records) else {
            return TxnCheck::Settled(Verified::NotRequired);
        };
        match self.start_verification(producer_id, producer_epoch) {
            Some(ask) => TxnCheck::Ask(ask),
            None => TxnCheck::Settled(Verified::WasOpen),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use bytes::BytesMut;
    use indexmap::IndexMap;
    use kafka_protocol::records::{
        Compression, Record, RecordBatchEncoder, RecordEncodeOptions, TimestampType,
    };

    fn batch(transactional: bool, control: bool, producer_id: i64) -> Vec<u8> {
        let record = Record {
            transactional,
            control,
            delete_horizon: false,
            partition_leader_epoch: -1,
            producer_id,
            producer_epoch: 3,
            timestamp_type: TimestampType::Creation,
            offset: 0,
            sequence: if producer_id < 0 { -1 } else { 0 },
            timestamp: 1_700_000_000_000,
            key: None,
            value: Some(bytes::Bytes::from_static(b"v")),
            headers: IndexMap::new(),
        };
        let mut buf = BytesMut::new();
        let options = RecordEncodeOptions {
            version: 2,
            compression: Compression::None,
        };
        RecordBatchEncoder::encode(&mut buf, &[record], &options).unwrap();
        buf.to_vec()
    }

    /// Only a transactional data batch is verified: plain, idempotent, control, empty and
    /// malformed records are `NotRequired` (they used to be taken for an open transaction).
    #[test]
    fn only_transactional_data_batches_are_verified() {
        let transactional = batch(true, false, 7);
        let cases = [
            ("transactional", transactional.clone(), Some((7, 3))),
            ("idempotent", batch(false, false, 7), None),
            ("plain", batch(false, false, -1), None),
            ("control", batch(true, true, 7), None),
            ("empty", Vec::new(), None),
            ("malformed", transactional[..20].to_vec(), None),
        ];
        for (name, records, expected) in cases {
            assert_eq!(transactional_producer(&records), expected, "{name}");
        }
    }

    #[test]
    fn a_transaction_open_at_an_older_epoch_is_verified() {
        let cases = [
            (5, None, Some(false), "none open: it would open one"),
            (5, Some(5), None, "continues the open one"),
            (5, Some(4), Some(true), "the open one is older (TV2 bump)"),
            (
                4,
                Some(5),
                None,
                "older than the open one: fenced at the append",
            ),
        ];
        for (epoch, open, expected, why) in cases {
            assert_eq!(needs_verification(epoch, open), expected, "{why}");
        }
    }

    #[test]
    fn txn_refusals() {
        use ResponseError::{ConcurrentTransactions as Concurrent, InvalidTxnState as Invalid};
        let guard = {
            let mut guards = logjam_storage::producer_state::VerificationGuards::default();
            guards.start(ProducerId(1))
        };
        let guarded = |over_open| Verified::Guarded {
            producer_id: 1,
            guard,
            over_open,
        };
        let cases = [
            (
                5,
                Some(4),
                Verified::WasOpen,
                true,
                Some(Concurrent),
                "joins the old one",
            ),
            (
                5,
                Some(4),
                Verified::NotRequired,
                true,
                Some(Concurrent),
                "joins, unchecked",
            ),
            (
                5,
                Some(4),
                guarded(true),
                true,
                None,
                "verified over a hanging one",
            ),
            (
                5,
                Some(5),
                Verified::WasOpen,
                true,
                None,
                "continues its own",
            ),
            (
                5,
                None,
                Verified::NotRequired,
                true,
                None,
                "verification off",
            ),
            (
                5,
                None,
                Verified::WasOpen,
                true,
                Some(Concurrent),
                "opens one unverified",
            ),
            (5, None, guarded(false), true, None, "verified"),
            (
                5,
                None,
                guarded(false),
                false,
                Some(Invalid),
                "a marker voided it",
            ),
            (
                5,
                None,
                guarded(true),
                false,
                Some(Concurrent),
                "the old one's marker",
            ),
        ];
        for (epoch, open, verified, holds, expected, why) in cases {
            assert_eq!(txn_refusal(epoch, open, verified, holds), expected, "{why}");
        }
    }
}
