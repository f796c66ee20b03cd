//! One producer batch: the records of one partition that travel together, their delivery
//! promises, their attempt history, and their encoding as a v2 record batch.
//!
//! Encoding goes through `kafka-protocol`'s `RecordBatchEncoder`, which starts a new batch
//! whenever `offset - sequence` changes between records; so records get offsets `0..n` and
//! sequences `base + i` (base -1 when not idempotent), keeping the difference constant.

use std::time::Instant;

use bytes::{Bytes, BytesMut};
use indexmap::IndexMap;
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::records::{
    Compression, Record, RecordBatchEncoder, RecordEncodeOptions, TimestampType,
};
use tokio::sync::{OwnedSemaphorePermit, oneshot};

use crate::error::Error;
use crate::ids::{Offset, ProducerEpoch, ProducerId, Sequence, TopicPartition};
use crate::outcome::Certainty;
use crate::producer::{DeliveryResult, ProduceError, RecordMetadata};

/// Fixed overhead of a v2 batch header (`DefaultRecordBatch.RECORD_BATCH_OVERHEAD`).
pub const BATCH_OVERHEAD_BYTES: usize = 61;

/// A record waiting in the accumulator.
#[derive(Debug)]
pub struct PendingRecord {
    /// The key.
    pub key: Option<Bytes>,
    /// The value.
    pub value: Option<Bytes>,
    /// Headers.
    pub headers: Vec<(String, Option<Bytes>)>,
    /// Create time, ms since the Unix epoch.
    pub timestamp_ms: i64,
    /// Where the outcome goes.
    pub completion: oneshot::Sender<DeliveryResult>,
}

impl PendingRecord {
    /// An upper bound of the record's encoded size (`DefaultRecord.sizeInUpperBound`).
    pub fn size_estimate(&self) -> usize {
        let headers: usize = self
            .headers
            .iter()
            .map(|(k, v)| k.len() + v.as_ref().map_or(0, Bytes::len) + 10)
            .sum();
        21 + self.key.as_ref().map_or(0, Bytes::len)
            + self.value.as_ref().map_or(0, Bytes::len)
            + headers
    }
}

/// The idempotent producer's stamp on a batch, assigned when it is first drained and kept
/// for every retry so the broker can deduplicate.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProducerStamp {
    /// The producer id.
    pub producer_id: ProducerId,
    /// Its epoch.
    pub producer_epoch: ProducerEpoch,
    /// The batch's base sequence.
    pub base_sequence: Sequence,
}

/// A batch of records for one partition.
#[derive(Debug)]
pub struct ProducerBatch {
    /// The partition.
    pub partition: TopicPartition,
    records: Vec<PendingRecord>,
    /// Estimated encoded size so far.
    pub size_bytes: usize,
    /// Bytes reserved from `buffer.memory` (`max(batch.size, first record)`).
    pub capacity_bytes: usize,
    /// Holds the reservation; released when the batch is dropped.
    pub memory: Option<OwnedSemaphorePermit>,
    /// When the batch was created: linger and delivery timeout count from here.
    pub created_at: Instant,
    /// When it was last sent.
    pub last_attempt_at: Option<Instant>,
    /// No send before this instant (retry backoff).
    pub retry_at: Option<Instant>,
    /// Produce requests that carried it.
    pub attempts: u32,
    /// Definite while every attempt so far was certainly rejected (see `outcome.rs`).
    pub certainty: Certainty,
    /// Set by the idempotent producer.
    pub stamp: Option<ProducerStamp>,
    /// No more records may be appended (it was drained once).
    pub closed: bool,
    /// The error of the last failed attempt, reported if the batch times out.
    pub last_error: Option<String>,
    /// Part of a transaction: the batch header's transactional bit (set when stamped).
    pub transactional: bool,
}

impl ProducerBatch {
    /// A new batch holding `record`.
    pub fn new(
        partition: TopicPartition,
        record: PendingRecord,
        capacity_bytes: usize,
        memory: Option<OwnedSemaphorePermit>,
        now: Instant,
    ) -> ProducerBatch {
        let size_bytes = BATCH_OVERHEAD_BYTES + record.size_estimate();
        ProducerBatch {
            partition,
            records: vec![record],
            size_bytes,
            capacity_bytes,
            memory,
            created_at: now,
            last_attempt_at: None,
            retry_at: None,
            attempts: 0,
            last_error: None,
            certainty: Certainty::Definite,
            stamp: None,
            closed: false,
            transactional: false,
        }
    }

    /// Appends `record` when it fits in the capacity; gives it back otherwise.
    pub fn try_append(&mut self, record: PendingRecord) -> Result<(), PendingRecord> {
        let size = record.size_estimate();
        if self.closed || self.size_bytes + size > self.capacity_bytes {
            return Err(record);
        }
        self.size_bytes += size;
        self.records.push(record);
        Ok(())
    }

    /// Number of records.
    pub fn record_count(&self) -> usize {
        self.records.len()
    }

    /// Whether no more records fit (a batch this size is sent without lingering).
    pub fn is_full(&self) -> bool {
        self.closed || self.size_bytes + 22 > self.capacity_bytes
    }

    /// Encodes the batch as one v2 record batch.
    ///
    /// # Panics
    /// If the encoder fails, which only happens for unsupported versions (we always use 2).
    pub fn encode(&self) -> Bytes {
        let (producer_id, producer_epoch, base_sequence) = match self.stamp {
            Some(stamp) => (
                stamp.producer_id.0,
                stamp.producer_epoch.0,
                stamp.base_sequence.0,
            ),
            None => (-1, -1, -1),
        };
        let records: Vec<Record> = self
            .records
            .iter()
            .enumerate()
            .map(|(index, record)| Record {
                transactional: self.transactional,
                control: false,
                delete_horizon: false,
                partition_leader_epoch: -1,
                producer_id,
                producer_epoch,
                timestamp_type: TimestampType::Creation,
                offset: index as i64,
                // Keeps offset - sequence constant so the encoder emits one batch.
                sequence: base_sequence.wrapping_add(index as i32),
                timestamp: record.timestamp_ms,
                key: record.key.clone(),
                value: record.value.clone(),
                headers: record
                    .headers
                    .iter()
                    .map(|(k, v)| (StrBytes::from_string(k.clone()), v.clone()))
                    .collect::<IndexMap<_, _>>(),
            })
            .collect();
        let mut buf = BytesMut::with_capacity(self.size_bytes);
        RecordBatchEncoder::encode(
            &mut buf,
            &records,
            &RecordEncodeOptions {
                version: 2,
                compression: Compression::None,
            },
        )
        .expect("v2 batches always encode");
        buf.freeze()
    }

    /// Completes every record: offsets `base_offset + i` (none for acks=0 or a duplicate).
    pub fn succeed(self, base_offset: Option<Offset>) {
        for (index, record) in self.records.into_iter().enumerate() {
            let _ = record.completion.send(Ok(RecordMetadata {
                partition: self.partition.clone(),
                offset: base_offset.map(|o| Offset(o.0 + index as i64)),
                timestamp_ms: record.timestamp_ms,
                attempts: self.attempts,
            }));
        }
    }

    /// Fails every record with `error`; `certainty` already folds in earlier attempts.
    pub fn fail(self, error: Error, certainty: Certainty) {
        for record in self.records {
            let _ = record.completion.send(Err(ProduceError {
                error: error.clone(),
                certainty,
                attempts: self.attempts,
            }));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kafka_protocol::records::RecordBatchDecoder;

    fn record(value: &[u8]) -> PendingRecord {
        PendingRecord {
            key: Some(Bytes::from_static(b"k")),
            value: Some(Bytes::copy_from_slice(value)),
            headers: vec![("h".to_owned(), Some(Bytes::from_static(b"v")))],
            timestamp_ms: 1_700_000_000_000,
            completion: oneshot::channel().0,
        }
    }

    fn batch_of(n: usize, stamp: Option<ProducerStamp>) -> ProducerBatch {
        let now = Instant::now();
        let mut batch =
            ProducerBatch::new(TopicPartition::new("t", 0), record(b"0"), 16384, None, now);
        for i in 1..n {
            batch.try_append(record(i.to_string().as_bytes())).unwrap();
        }
        batch.stamp = stamp;
        batch
    }

    /// Regression guard for the encoder gotcha: inconsistent offset/sequence pairs split one
    /// logical batch into many on the wire.
    #[test]
    fn encodes_one_batch_without_idempotence() {
        let mut bytes = batch_of(10, None).encode();
        let info = RecordBatchDecoder::decode_batch_info(&mut bytes.clone()).unwrap();
        assert_eq!(info.len(), 1);
        assert_eq!(info[0].record_count, 10);
        assert_eq!(info[0].base_sequence, -1);
        assert_eq!(info[0].producer_id, -1);
        let set = RecordBatchDecoder::decode(&mut bytes).unwrap();
        let values: Vec<_> = set
            .records
            .iter()
            .map(|r| r.value.clone().unwrap())
            .collect();
        assert_eq!(values[3], Bytes::from_static(b"3"));
        assert_eq!(set.records[9].offset, 9);
    }

    #[test]
    fn encodes_one_batch_with_producer_id_epoch_and_base_sequence() {
        let stamp = ProducerStamp {
            producer_id: ProducerId(4000),
            producer_epoch: ProducerEpoch(2),
            base_sequence: Sequence(i32::MAX - 3),
        };
        let bytes = batch_of(10, Some(stamp)).encode();
        let info = RecordBatchDecoder::decode_batch_info(&mut bytes.clone()).unwrap();
        assert_eq!(info.len(), 1, "sequence wrap must not split the batch");
        assert_eq!(info[0].base_sequence, i32::MAX - 3);
        assert_eq!(info[0].producer_id, 4000);
        assert_eq!(info[0].producer_epoch, 2);
    }

    #[test]
    fn a_transactional_batch_carries_the_transactional_bit() {
        let stamp = ProducerStamp {
            producer_id: ProducerId(7),
            producer_epoch: ProducerEpoch(1),
            base_sequence: Sequence(0),
        };
        let mut batch = batch_of(3, Some(stamp));
        batch.transactional = true;
        let bytes = batch.encode();
        let set = RecordBatchDecoder::decode(&mut bytes.clone()).unwrap();
        assert!(set.records.iter().all(|r| r.transactional && !r.control));
        let plain = batch_of(3, Some(stamp)).encode();
        let set = RecordBatchDecoder::decode(&mut plain.clone()).unwrap();
        assert!(set.records.iter().all(|r| !r.transactional));
    }

    #[test]
    fn append_stops_at_capacity() {
        let now = Instant::now();
        let mut batch = ProducerBatch::new(
            TopicPartition::new("t", 0),
            record(&[0; 40]),
            250,
            None,
            now,
        );
        assert!(batch.try_append(record(&[0; 40])).is_ok());
        assert!(batch.try_append(record(&[0; 40])).is_err());
        assert_eq!(batch.record_count(), 2);
    }
}
