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

    /// Applies one record written in producer `producer_id`'s transaction (Kafka's
    /// `replay(offset, producerId, producerEpoch, record)` with a producer id): it takes
    /// effect only when [`CoordinatorShard::replay_end_transaction`] commits it. A coordinator
    /// that writes no transactional records refuses them.
    ///
    /// # Errors
    /// As [`CoordinatorShard::replay`].
    fn replay_transactional(
        &mut self,
        producer_id: i64,
        record: &CoordinatorRecord,
    ) -> Result<(), String> {
        let _ = record;
        Err(format!(
            "a transactional record of producer {producer_id} where none is expected"
        ))
    }

    /// Applies the marker ending producer `producer_id`'s transaction (Kafka's
    /// `replayEndTransactionMarker`). Nothing by default.
    ///
    /// # Errors
    /// As [`CoordinatorShard::replay`].
    fn replay_end_transaction(&mut self, producer_id: i64, commit: bool) -> Result<(), String> {
        let _ = (producer_id, commit);
        Ok(())
    }
}

/// What wrote a batch of a coordinator's log.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BatchKind {
    /// The coordinator, on its own account.
    Plain,
    /// The coordinator, inside producer `producer_id`'s transaction (TxnOffsetCommit).
    Transactional {
        /// The producer id.
        producer_id: i64,
        /// Its epoch.
        producer_epoch: i16,
    },
    /// A transaction marker (WriteTxnMarkers) ending producer `producer_id`'s transaction.
    Marker {
        /// The producer id.
        producer_id: i64,
        /// COMMIT (true) or ABORT.
        commit: bool,
    },
}

/// Replays one batch of `kind` on `shard`, record by record.
///
/// # Errors
/// The shard's.
pub fn replay_batch<S: CoordinatorShard>(
    shard: &mut S,
    kind: BatchKind,
    records: &[CoordinatorRecord],
) -> Result<(), String> {
    match kind {
        BatchKind::Plain => records.iter().try_for_each(|record| shard.replay(record)),
        BatchKind::Transactional { producer_id, .. } => records
            .iter()
            .try_for_each(|record| shard.replay_transactional(producer_id, record)),
        BatchKind::Marker {
            producer_id,
            commit,
        } => shard.replay_end_transaction(producer_id, commit),
    }
}

/// One record batch read back from the log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LoadedBatch {
    /// The offset after the batch's last record: the batch is committed once the high
    /// watermark reaches it.
    pub end_offset: i64,
    /// Who wrote it.
    pub kind: BatchKind,
    /// The batch's records, in offset order (none for a marker).
    pub records: Vec<CoordinatorRecord>,
}

/// Encodes `records` as one uncompressed, non-transactional record batch (offsets relative
/// to 0: the leader's append assigns the real ones), so a write's records commit or fail
/// together.
pub fn encode_records(records: &[CoordinatorRecord], timestamp_ms: i64) -> Bytes {
    encode_batch(records, timestamp_ms, None)
}

/// Encodes `records` as one uncompressed batch, transactional for `producer` (id, epoch)
/// when given, with no sequence (base sequence -1, as Kafka's coordinators write theirs).
pub fn encode_batch(
    records: &[CoordinatorRecord],
    timestamp_ms: i64,
    producer: Option<(i64, i16)>,
) -> Bytes {
    let (producer_id, producer_epoch) = producer.unwrap_or((-1, -1));
    let records: Vec<Record> = records
        .iter()
        .enumerate()
        .map(|(index, record)| Record {
            transactional: producer.is_some(),
            control: false,
            delete_horizon: false,
            partition_leader_epoch: -1,
            producer_id,
            producer_epoch,
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

/// Decodes the whole record batches of a log read: each with its [`BatchKind`] (a control
/// batch is its transaction marker, without records). A partial batch at the end (a read cut
/// at its byte limit) is left for the next read.
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
            let marker = logjam_storage::control::parse_marker(&header, &bytes[position..])
                .map_err(|defect| {
                    format!(
                        "control batch at offset {} does not decode: {defect:?}",
                        header.base_offset.0
                    )
                })?;
            loaded.push(LoadedBatch {
                end_offset: header.next_offset().0,
                kind: BatchKind::Marker {
                    producer_id: header.producer_id,
                    commit: marker.control_type == logjam_storage::ControlType::Commit,
                },
                records: Vec::new(),
            });
            continue;
        }
        let kind = if header.is_transactional() {
            BatchKind::Transactional {
                producer_id: header.producer_id,
                producer_epoch: header.producer_epoch,
            }
        } else {
            BatchKind::Plain
        };
        let mut batch = bytes.slice(position..position + size);
        let set = RecordBatchDecoder::decode(&mut batch).map_err(|error| {
            format!(
                "batch at offset {} does not decode: {error}",
                header.base_offset.0
            )
        })?;
        loaded.push(LoadedBatch {
            end_offset: header.next_offset().0,
            kind,
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
                kind: BatchKind::Plain,
                records: records.clone()
            }]
        );
        let transactional = encode_batch(&records, 7, Some((42, 3)));
        assert_eq!(
            decode_batches(&transactional).unwrap()[0].kind,
            BatchKind::Transactional {
                producer_id: 42,
                producer_epoch: 3
            }
        );
        for (control_type, commit) in [
            (logjam_storage::ControlType::Commit, true),
            (logjam_storage::ControlType::Abort, false),
        ] {
            let marker = logjam_storage::control::marker_batch(
                42,
                3,
                logjam_storage::EndTxnMarker {
                    control_type,
                    coordinator_epoch: 1,
                },
                9,
            );
            assert_eq!(
                decode_batches(&Bytes::from(marker)).unwrap(),
                vec![LoadedBatch {
                    end_offset: 1,
                    kind: BatchKind::Marker {
                        producer_id: 42,
                        commit
                    },
                    records: vec![]
                }]
            );
        }
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
