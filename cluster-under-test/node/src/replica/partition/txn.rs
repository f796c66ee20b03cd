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
