//! The partition as leader of a transaction's records: appending a COMMIT or ABORT marker for
//! the transaction coordinator (WriteTxnMarkers), checked against the producer state in the log
//! (an older producer epoch is `INVALID_PRODUCER_EPOCH`, an older coordinator epoch
//! `TRANSACTION_COORDINATOR_FENCED`; nothing is written then), and telling the produce path
//! when a transactional batch opens a transaction here (KIP-890's verification point).

use std::sync::Arc;

use kafka_protocol::ResponseError;
use logjam_storage::{EndTxnMarker, LeaderEpoch, ProducerId, VerificationGuard};

use crate::replica::now_ms;

use super::{Acks, Appended, Partition};

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
        self.append_under_leadership(Acks::All, move |partition, log, leader_epoch| {
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
            })
        })
        .await
    }

    /// Appends a coordinator's transactional batch (TxnOffsetCommit's offsets) as the leader,
    /// acks=all: as Kafka's `AppendOrigin.COORDINATOR`, the producer's sequence is not
    /// checked (the batch has none) but an epoch older than the partition's is
    /// `INVALID_PRODUCER_EPOCH`; with `guard` (taken by [`Partition::opens_transaction`]
    /// before the transaction coordinator verified the partition), a batch that would open
    /// the transaction after a marker voided the guard is `INVALID_TXN_STATE`.
    ///
    /// # Errors
    /// As above, and [`Partition::append`]'s.
    pub async fn append_as_coordinator(
        self: Arc<Self>,
        records: bytes::Bytes,
        producer_id: i64,
        producer_epoch: i16,
        guard: Option<VerificationGuard>,
    ) -> Result<Appended, ResponseError> {
        self.append_under_leadership(Acks::All, move |partition, log, leader_epoch| {
            let entry = log.producer_state().entry(ProducerId(producer_id));
            if entry.is_some_and(|entry| entry.epoch.0 > producer_epoch) {
                return Err(ResponseError::InvalidProducerEpoch);
            }
            let opens = entry.is_none_or(|entry| entry.current_txn_first_offset.is_none());
            if let Some(guard) = guard
                && opens
                && !log.transaction_verification_holds(ProducerId(producer_id), guard)
            {
                return Err(ResponseError::InvalidTxnState);
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
            })
        })
        .await
    }

    /// Takes a verification guard for `producer_id` unless it has a transaction open here
    /// (then `None`: nothing to verify).
    pub fn start_verification(&self, producer_id: i64) -> Option<VerificationGuard> {
        let mut log = self.lock();
        let open = log
            .producer_state()
            .entry(ProducerId(producer_id))
            .is_some_and(|entry| entry.current_txn_first_offset.is_some());
        (!open).then(|| log.start_transaction_verification(ProducerId(producer_id)))
    }

    /// The producer id and epoch of `records` when its first batch is transactional and
    /// would open a transaction on this partition (no open one for that producer): the
    /// produce path then verifies it with the coordinator first (Kafka's
    /// `hasOngoingTransaction`), with the producer's verification guard taken under the log
    /// lock, for [`Partition::append_verified`]. `None` for anything else, malformed records
    /// included (the append gives the precise error).
    pub fn opens_transaction(&self, records: &[u8]) -> Option<(i64, i16, VerificationGuard)> {
        let (_, header) = logjam_storage::batch::batches(records).next()?.ok()?;
        if !header.is_transactional() || header.is_control() || header.producer_id < 0 {
            return None;
        }
        let mut log = self.lock();
        let open = log
            .producer_state()
            .entry(ProducerId(header.producer_id))
            .is_some_and(|entry| entry.current_txn_first_offset.is_some());
        if open {
            return None;
        }
        let guard = log.start_transaction_verification(ProducerId(header.producer_id));
        Some((header.producer_id, header.producer_epoch, guard))
    }
}
