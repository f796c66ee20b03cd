//! ListOffsets' and OffsetForLeaderEpoch's questions of a partition beyond its three positions:
//! the record a timestamp finds, the record with the largest timestamp, the epoch of the log
//! start, where an epoch ends, and the leader epoch's start offset (a new leader's high
//! watermark may lag it, KIP-207).
//!
//! The storage finds the batch (`logjam_storage::Log::first_batch_reaching_timestamp`); the
//! record inside is found here, where the wire crate can decompress it. A `LogAppendTime`
//! batch's records all carry the batch's largest timestamp, as Kafka's `DefaultRecordBatch`
//! reports them.

use bytes::Bytes;
use kafka_protocol::ResponseError;
use kafka_protocol::records::RecordBatchDecoder;
use logjam_storage::{BatchHeader, LeaderEpoch, Offset, TimestampType};

use super::{Partition, kafka_error};

/// A record ListOffsets found: its timestamp, its offset and the leader epoch of its batch
/// (`-1` when the batch has none).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TimestampOffset {
    /// The record's timestamp.
    pub timestamp: i64,
    /// The record's offset.
    pub offset: i64,
    /// The epoch of the leader that appended the batch, or -1.
    pub leader_epoch: i32,
}

impl Partition {
    /// The first record from the log start whose timestamp is at least `target_ms` (Kafka's
    /// `fetchOffsetByTimestamp` for a timestamp); `None` when there is none.
    ///
    /// # Errors
    /// A storage error's code (a read failed or a stored batch does not decode).
    pub fn offset_for_timestamp(
        &self,
        target_ms: i64,
    ) -> Result<Option<TimestampOffset>, ResponseError> {
        let mut from = Offset(0);
        loop {
            let Some((header, batch, log_start)) =
                self.batch_where(|log| log.first_batch_reaching_timestamp(target_ms, from))?
            else {
                return Ok(None);
            };
            let found = first_record(&header, batch, log_start, |timestamp| {
                timestamp >= target_ms
            })?;
            if found.is_some() {
                return Ok(found);
            }
            // Every record reaching the target lies below the log start: search on.
            from = header.next_offset();
        }
    }

    /// The first record holding the log's largest timestamp (ListOffsets `MAX_TIMESTAMP`,
    /// KIP-734); `None` when the log is empty.
    ///
    /// # Errors
    /// A storage error's code.
    pub fn offset_of_max_timestamp(&self) -> Result<Option<TimestampOffset>, ResponseError> {
        let Some((header, batch, _)) =
            self.batch_where(|log| log.first_batch_with_max_timestamp())?
        else {
            return Ok(None);
        };
        let max = header.max_timestamp_ms;
        // Kafka's `offsetOfMaxTimestamp` looks at the whole batch, log start or not.
        first_record(&header, batch, Offset(i64::MIN), |timestamp| {
            timestamp == max
        })
    }

    /// The epoch of the log start offset for ListOffsets `EARLIEST`: the earliest cached epoch
    /// when it starts at or below the log start, else -1 (Kafka's).
    pub fn log_start_epoch(&self) -> i32 {
        let log = self.lock();
        log.leader_epoch_cache()
            .entries()
            .first()
            .filter(|entry| entry.start_offset <= log.log_start_offset())
            .map_or(-1, |entry| entry.epoch.0)
    }

    /// Where `epoch` ends in this log (the leader-epoch cache's `endOffsetFor`): the largest
    /// cached epoch at or below it and the start of the next epoch, or the log end for the
    /// latest; `None` when the cache cannot say (OffsetForLeaderEpoch's `-1`/`-1`).
    pub fn end_offset_for_epoch(&self, epoch: i32) -> Option<(i32, i64)> {
        let answer = self.lock().end_offset_for_epoch(LeaderEpoch(epoch));
        (answer.end_offset.0 >= 0).then_some((answer.leader_epoch.0, answer.end_offset.0))
    }

    /// The offset this broker's log ended at when it became leader in the current epoch;
    /// `None` when it is not the leader of the current epoch.
    pub fn leader_epoch_start_offset(&self) -> Option<i64> {
        let state = self.state();
        let leader = self.leader_state();
        (state.leader.0 == self.node_id && leader.epoch == state.leader_epoch)
            .then_some(leader.epoch_start_offset.0)
    }

    /// Finds a batch with `find` under the log's lock and reads its bytes; with the log start.
    fn batch_where(
        &self,
        find: impl FnOnce(&logjam_storage::Log) -> logjam_storage::Result<Option<BatchHeader>>,
    ) -> Result<Option<(BatchHeader, Bytes, Offset)>, ResponseError> {
        let log = self.lock();
        let storage = |error: logjam_storage::Error| kafka_error(error.kafka_error_code());
        let Some(header) = find(&log).map_err(storage)? else {
            return Ok(None);
        };
        let log_start = log.log_start_offset();
        let read = log
            .read(
                header.base_offset.max(log_start),
                0,
                log.log_end_offset(),
                true,
            )
            .map_err(storage)?;
        Ok(Some((header, read.records, log_start)))
    }
}

/// The first record of `batch` at or after `from` whose timestamp satisfies `wanted`;
/// `CORRUPT_MESSAGE` when the batch's records do not decode.
fn first_record(
    header: &BatchHeader,
    mut batch: Bytes,
    from: Offset,
    wanted: impl Fn(i64) -> bool,
) -> Result<Option<TimestampOffset>, ResponseError> {
    // The leader checks a client's batch by its header and CRC, not record by record, so a
    // stored batch need not decode. The decoder bounds what a compressed batch may inflate to
    // (vendor/kafka-protocol's README.logjam.md) and runs under `catch_unwind` as a second line
    // of defence, as the controller's record decoding does.
    let decoded = std::panic::catch_unwind(move || RecordBatchDecoder::decode(&mut batch));
    let set = match decoded {
        Ok(Ok(set)) => set,
        Ok(Err(error)) => {
            tracing::warn!(base_offset = header.base_offset.0, %error, "a stored batch does not decode");
            return Err(ResponseError::CorruptMessage);
        }
        Err(_) => {
            tracing::warn!(
                base_offset = header.base_offset.0,
                "decoding a stored batch panicked"
            );
            return Err(ResponseError::CorruptMessage);
        }
    };
    let log_append_time = header.timestamp_type() == TimestampType::LogAppendTime;
    Ok(set
        .records
        .iter()
        .filter(|record| record.offset >= from.0)
        .map(|record| TimestampOffset {
            timestamp: if log_append_time {
                header.max_timestamp_ms
            } else {
                record.timestamp
            },
            offset: record.offset,
            leader_epoch: header.partition_leader_epoch.0.max(-1),
        })
        .find(|found| wanted(found.timestamp)))
}
