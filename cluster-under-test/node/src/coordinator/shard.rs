//! The pure side of a coordinator (Kafka's `CoordinatorShard`): a state machine that replays
//! the records of its internal-topic partition, and the codec between those records and the
//! record batches of the log. No tokio, no I/O: the runtime ([`super::runtime`]) feeds it.

use bytes::{Bytes, BytesMut};
use indexmap::IndexMap;
use kafka_protocol::records::{
    Compression, Record, RecordBatchDecoder, RecordBatchEncoder, RecordEncodeOptions, TimestampType,
};

/// One record of a coordinator's log: a key and a value (`None` is a tombstone), as Kafka's
/// coordinators write them (`CoordinatorRecord` through its serde).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CoordinatorRecord {
    /// What the record is about (a group, a transactional id, ...).
    pub key: Option<Bytes>,
    /// The new value; `None` deletes the key.
    pub value: Option<Bytes>,
}

/// The state of one coordinator partition, rebuilt by replaying its log.
///
/// `replay` must be deterministic: the runtime replays the same records twice (once on the
/// latest state when a write is accepted, once on the committed state when the high watermark
/// passes them) and on every load, and all must agree.
pub trait CoordinatorShard: Clone + Send + Sync + 'static {
    /// Applies one record.
    ///
    /// # Errors
    /// A message when the record cannot be applied (malformed, unknown type): a load stops
    /// there and the partition is not served; a write producing it is refused before it is
    /// appended.
    fn replay(&mut self, record: &CoordinatorRecord) -> Result<(), String>;
}

/// One record batch read back from the log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LoadedBatch {
    /// The offset after the batch's last record: the batch is committed once the high
    /// watermark reaches it.
    pub end_offset: i64,
    /// The batch's records, in offset order.
    pub records: Vec<CoordinatorRecord>,
}

/// Encodes `records` as one uncompressed, non-transactional record batch (offsets relative
/// to 0: the leader's append assigns the real ones), so a write's records commit or fail
/// together.
pub fn encode_records(records: &[CoordinatorRecord], timestamp_ms: i64) -> Bytes {
    let records: Vec<Record> = records
        .iter()
        .enumerate()
        .map(|(index, record)| Record {
            transactional: false,
            control: false,
            delete_horizon: false,
            partition_leader_epoch: -1,
            producer_id: -1,
            producer_epoch: -1,
            timestamp_type: TimestampType::Creation,
            offset: index as i64,
            // No producer: the batch's base sequence is -1. The encoder keeps records in one
            // batch only while offset - sequence is constant, so the sequence runs along.
            sequence: index as i32 - 1,
            timestamp: timestamp_ms,
            key: record.key.clone(),
            value: record.value.clone(),
            headers: IndexMap::new(),
        })
        .collect();
    let mut buf = BytesMut::new();
    RecordBatchEncoder::encode(
        &mut buf,
        &records,
        &RecordEncodeOptions {
            version: 2,
            compression: Compression::None,
        },
    )
    .expect("coordinator record batches encode");
    buf.freeze()
}

/// Decodes the whole record batches of a log read. Control batches (transaction markers) are
/// skipped: no coordinator replays them yet. A partial batch at the end (a read cut at its
/// byte limit) is left for the next read.
///
/// # Errors
/// A message naming the offset of a batch that does not decode.
pub fn decode_batches(bytes: &Bytes) -> Result<Vec<LoadedBatch>, String> {
    let mut loaded = Vec::new();
    let whole = logjam_storage::batch::complete_batches_len(bytes);
    for item in logjam_storage::batch::batches(&bytes[..whole]) {
        let (position, header) = item.map_err(|defect| format!("bad batch: {defect:?}"))?;
        let size = header.size_bytes();
        if header.is_control() {
            loaded.push(LoadedBatch {
                end_offset: header.next_offset().0,
                records: Vec::new(),
            });
            continue;
        }
        let mut batch = bytes.slice(position..position + size);
        let set = RecordBatchDecoder::decode(&mut batch).map_err(|error| {
            format!(
                "batch at offset {} does not decode: {error}",
                header.base_offset.0
            )
        })?;
        loaded.push(LoadedBatch {
            end_offset: header.next_offset().0,
            records: set
                .records
                .into_iter()
                .map(|record| CoordinatorRecord {
                    key: record.key,
                    value: record.value,
                })
                .collect(),
        });
    }
    Ok(loaded)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_round_trip_through_a_batch() {
        let records = vec![
            CoordinatorRecord {
                key: Some(Bytes::from_static(b"k")),
                value: Some(Bytes::from_static(b"v")),
            },
            CoordinatorRecord {
                key: Some(Bytes::from_static(b"k")),
                value: None,
            },
        ];
        let bytes = encode_records(&records, 7);
        let loaded = decode_batches(&bytes).unwrap();
        assert_eq!(
            loaded,
            vec![LoadedBatch {
                end_offset: 2,
                records
            }]
        );
    }

    #[test]
    fn a_partial_trailing_batch_is_left_for_later() {
        let record = CoordinatorRecord {
            key: Some(Bytes::from_static(b"k")),
            value: Some(Bytes::from_static(b"v")),
        };
        let whole = encode_records(std::slice::from_ref(&record), 7);
        let mut two = BytesMut::from(&whole[..]);
        two.extend_from_slice(&whole[..whole.len() - 3]);
        let loaded = decode_batches(&two.freeze()).unwrap();
        assert_eq!(loaded.len(), 1);
    }
}
