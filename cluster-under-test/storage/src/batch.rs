//! Record batch v2 (magic 2) headers: parsing the 61-byte header, validating framing, magic and
//! CRC-32C, and rewriting the two fields the log owns (`BaseOffset` and `PartitionLeaderEpoch`,
//! both outside the CRC). Records themselves stay opaque bytes; nothing here touches files.
//!
//! Header layout (all big-endian), see `docs/kafka-semantics.md` §7.2:
//!
//! ```text
//!  0 BaseOffset i64 | 8 BatchLength i32 | 12 PartitionLeaderEpoch i32 | 16 Magic i8 | 17 CRC u32
//! 21 Attributes i16 | 23 LastOffsetDelta i32 | 27 BaseTimestamp i64 | 35 MaxTimestamp i64
//! 43 ProducerId i64 | 51 ProducerEpoch i16 | 53 BaseSequence i32 | 57 RecordsCount i32 | 61 records
//! ```

use crate::ids::{LeaderEpoch, Offset};

/// Size of the v2 batch header, up to and including `RecordsCount`.
pub const HEADER_BYTES: usize = 61;
/// Bytes before `BatchLength` counts: `BaseOffset` (8) + `BatchLength` (4).
pub const LOG_OVERHEAD_BYTES: usize = 12;
/// The only batch format this crate stores.
pub const MAGIC_V2: i8 = 2;

const BASE_OFFSET_AT: usize = 0;
const BATCH_LENGTH_AT: usize = 8;
const PARTITION_LEADER_EPOCH_AT: usize = 12;
const MAGIC_AT: usize = 16;
const CRC_AT: usize = 17;
const ATTRIBUTES_AT: usize = 21;
const LAST_OFFSET_DELTA_AT: usize = 23;
const BASE_TIMESTAMP_AT: usize = 27;
const MAX_TIMESTAMP_AT: usize = 35;
const PRODUCER_ID_AT: usize = 43;
const PRODUCER_EPOCH_AT: usize = 51;
const BASE_SEQUENCE_AT: usize = 53;
const RECORDS_COUNT_AT: usize = 57;
/// The smallest legal `BatchLength`: a header with zero records.
const BATCH_LENGTH_MIN: i32 = (HEADER_BYTES - LOG_OVERHEAD_BYTES) as i32;

const COMPRESSION_MASK: i16 = 0x07;
const COMPRESSION_CODEC_MAX: u8 = 4;
const TIMESTAMP_TYPE_LOG_APPEND_TIME_BIT: i16 = 0x08;
const TRANSACTIONAL_BIT: i16 = 0x10;
const CONTROL_BIT: i16 = 0x20;

/// Why a batch is not acceptable. Framing and CRC problems are corruption (Kafka's
/// `CORRUPT_MESSAGE`); the rest are invalid content (`INVALID_RECORD`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BatchDefect {
    /// The buffer ends before the batch does (a torn write, or a partial batch in a fetch).
    #[error("batch needs {needed} bytes but only {available} remain")]
    Truncated {
        /// Bytes the batch claims (or the header needs).
        needed: usize,
        /// Bytes actually present.
        available: usize,
    },
    /// `BatchLength` is smaller than a header.
    #[error("batch length {batch_length} is smaller than a v2 header")]
    BatchLengthTooSmall {
        /// The stored `BatchLength`.
        batch_length: i32,
    },
    /// `Magic` is not 2.
    #[error("magic {magic} is not 2")]
    MagicUnsupported {
        /// The stored magic byte.
        magic: i8,
    },
    /// The stored CRC-32C does not match the bytes from `Attributes` to the end.
    #[error("crc mismatch: stored {stored:#010x}, computed {computed:#010x}")]
    CrcMismatch {
        /// CRC in the header.
        stored: u32,
        /// CRC of the bytes.
        computed: u32,
    },
    /// `RecordsCount` disagrees with `LastOffsetDelta + 1`.
    #[error(
        "records count {records_count} does not match last offset delta {last_offset_delta} + 1"
    )]
    RecordsCountMismatch {
        /// The stored `RecordsCount`.
        records_count: i32,
        /// The stored `LastOffsetDelta`.
        last_offset_delta: i32,
    },
    /// A batch without records, or with a negative `LastOffsetDelta`.
    #[error(
        "batch has no records (records count {records_count}, last offset delta {last_offset_delta})"
    )]
    NoRecords {
        /// The stored `RecordsCount`.
        records_count: i32,
        /// The stored `LastOffsetDelta`.
        last_offset_delta: i32,
    },
    /// The compression codec bits name no known codec.
    #[error("unknown compression codec {codec}")]
    CompressionUnknown {
        /// The codec bits (attributes & 7).
        codec: u8,
    },
}

impl BatchDefect {
    /// Whether the defect means damaged bytes (`CORRUPT_MESSAGE`) rather than invalid content.
    pub fn is_corruption(&self) -> bool {
        matches!(
            self,
            BatchDefect::Truncated { .. }
                | BatchDefect::BatchLengthTooSmall { .. }
                | BatchDefect::CrcMismatch { .. }
        )
    }
}

/// How a batch's timestamps were assigned (attribute bit 3).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TimestampType {
    /// The producer's clock (`CreateTime`, Kafka's default).
    CreateTime,
    /// The broker's clock at append (`LogAppendTime`).
    LogAppendTime,
}

/// The parsed 61-byte header of a v2 record batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BatchHeader {
    /// Offset of the first record.
    pub base_offset: Offset,
    /// Bytes after the `BatchLength` field; the batch occupies `12 + batch_length` bytes.
    pub batch_length: i32,
    /// Epoch of the leader that appended the batch.
    pub partition_leader_epoch: LeaderEpoch,
    /// Format version; always 2 once validated.
    pub magic: i8,
    /// CRC-32C of everything from `attributes` to the end of the batch.
    pub crc: u32,
    /// Compression, timestamp type, transactional and control flags.
    pub attributes: i16,
    /// Offset of the last record relative to `base_offset`.
    pub last_offset_delta: i32,
    /// Timestamp of the first record.
    pub base_timestamp_ms: i64,
    /// Largest timestamp in the batch.
    pub max_timestamp_ms: i64,
    /// Idempotent producer id, `-1` if none.
    pub producer_id: i64,
    /// Idempotent producer epoch, `-1` if none.
    pub producer_epoch: i16,
    /// Sequence number of the first record, `-1` if none.
    pub base_sequence: i32,
    /// Number of records in the batch.
    pub records_count: i32,
}

impl BatchHeader {
    /// Parses a header from the first [`HEADER_BYTES`] of `bytes` without validating anything
    /// beyond the length of the slice.
    ///
    /// # Errors
    ///
    /// [`BatchDefect::Truncated`] if fewer than [`HEADER_BYTES`] bytes are given.
    pub fn parse(bytes: &[u8]) -> Result<BatchHeader, BatchDefect> {
        if bytes.len() < HEADER_BYTES {
            return Err(BatchDefect::Truncated {
                needed: HEADER_BYTES,
                available: bytes.len(),
            });
        }
        Ok(BatchHeader {
            base_offset: Offset(read_i64(bytes, BASE_OFFSET_AT)),
            batch_length: read_i32(bytes, BATCH_LENGTH_AT),
            partition_leader_epoch: LeaderEpoch(read_i32(bytes, PARTITION_LEADER_EPOCH_AT)),
            magic: bytes[MAGIC_AT] as i8,
            crc: read_u32(bytes, CRC_AT),
            attributes: read_i16(bytes, ATTRIBUTES_AT),
            last_offset_delta: read_i32(bytes, LAST_OFFSET_DELTA_AT),
            base_timestamp_ms: read_i64(bytes, BASE_TIMESTAMP_AT),
            max_timestamp_ms: read_i64(bytes, MAX_TIMESTAMP_AT),
            producer_id: read_i64(bytes, PRODUCER_ID_AT),
            producer_epoch: read_i16(bytes, PRODUCER_EPOCH_AT),
            base_sequence: read_i32(bytes, BASE_SEQUENCE_AT),
            records_count: read_i32(bytes, RECORDS_COUNT_AT),
        })
    }

    /// Total bytes the batch occupies, log overhead included.
    pub fn size_bytes(&self) -> usize {
        LOG_OVERHEAD_BYTES + self.batch_length.max(0) as usize
    }

    /// Offset of the last record.
    pub fn last_offset(&self) -> Offset {
        self.base_offset.plus(i64::from(self.last_offset_delta))
    }

    /// The offset after the last record.
    pub fn next_offset(&self) -> Offset {
        self.last_offset().next()
    }

    /// Compression codec: 0 none, 1 gzip, 2 snappy, 3 lz4, 4 zstd.
    pub fn compression_codec(&self) -> u8 {
        (self.attributes & COMPRESSION_MASK) as u8
    }

    /// How timestamps in this batch were assigned.
    pub fn timestamp_type(&self) -> TimestampType {
        if self.attributes & TIMESTAMP_TYPE_LOG_APPEND_TIME_BIT != 0 {
            TimestampType::LogAppendTime
        } else {
            TimestampType::CreateTime
        }
    }

    /// Whether the batch belongs to a transaction.
    pub fn is_transactional(&self) -> bool {
        self.attributes & TRANSACTIONAL_BIT != 0
    }

    /// Whether the batch holds a control record (transaction marker).
    pub fn is_control(&self) -> bool {
        self.attributes & CONTROL_BIT != 0
    }
}

/// Reads `BatchLength` and returns the total size of the batch at the start of `bytes`
/// (`12 + BatchLength`), checking only that the length is at least a header.
///
/// # Errors
///
/// [`BatchDefect::Truncated`] if fewer than 12 bytes are given,
/// [`BatchDefect::BatchLengthTooSmall`] for an impossible length.
pub fn batch_size(bytes: &[u8]) -> Result<usize, BatchDefect> {
    if bytes.len() < LOG_OVERHEAD_BYTES {
        return Err(BatchDefect::Truncated {
            needed: LOG_OVERHEAD_BYTES,
            available: bytes.len(),
        });
    }
    let batch_length = read_i32(bytes, BATCH_LENGTH_AT);
    if batch_length < BATCH_LENGTH_MIN {
        return Err(BatchDefect::BatchLengthTooSmall { batch_length });
    }
    Ok(LOG_OVERHEAD_BYTES + batch_length as usize)
}

/// Validates the batch at the start of `bytes`: complete framing, magic 2, and CRC-32C. This is
/// Kafka's `ensureValid`, the check used both on append and on recovery.
///
/// # Errors
///
/// The first [`BatchDefect`] found, in the order framing, magic, CRC.
pub fn validate_batch(bytes: &[u8]) -> Result<BatchHeader, BatchDefect> {
    let size = batch_size(bytes)?;
    if bytes.len() < size {
        return Err(BatchDefect::Truncated {
            needed: size,
            available: bytes.len(),
        });
    }
    let header = BatchHeader::parse(bytes)?;
    if header.magic != MAGIC_V2 {
        return Err(BatchDefect::MagicUnsupported {
            magic: header.magic,
        });
    }
    let computed = compute_crc(&bytes[..size]);
    if computed != header.crc {
        return Err(BatchDefect::CrcMismatch {
            stored: header.crc,
            computed,
        });
    }
    Ok(header)
}

/// The content checks a leader applies to a structurally valid batch from a producer: at least
/// one record, a known codec, and `RecordsCount == LastOffsetDelta + 1` (control batches are
/// exempt from the count check).
///
/// # Errors
///
/// The first [`BatchDefect`] found.
pub fn check_producer_batch(header: &BatchHeader) -> Result<(), BatchDefect> {
    if header.last_offset_delta < 0 || header.records_count <= 0 {
        return Err(BatchDefect::NoRecords {
            records_count: header.records_count,
            last_offset_delta: header.last_offset_delta,
        });
    }
    let codec = header.compression_codec();
    if codec > COMPRESSION_CODEC_MAX {
        return Err(BatchDefect::CompressionUnknown { codec });
    }
    if !header.is_control()
        && i64::from(header.records_count) != i64::from(header.last_offset_delta) + 1
    {
        return Err(BatchDefect::RecordsCountMismatch {
            records_count: header.records_count,
            last_offset_delta: header.last_offset_delta,
        });
    }
    Ok(())
}

/// Length of the longest prefix of `bytes` made of complete batches (framing only, no CRC).
/// A fetch response may end with a partial batch; a follower appends only this prefix.
pub fn complete_batches_len(bytes: &[u8]) -> usize {
    let mut position = 0;
    while let Ok(size) = batch_size(&bytes[position..]) {
        if bytes.len() - position < size {
            break;
        }
        position += size;
    }
    position
}

/// CRC-32C of a whole batch's covered bytes (from `Attributes` to the end).
pub fn compute_crc(batch: &[u8]) -> u32 {
    crc32c::crc32c(&batch[ATTRIBUTES_AT..])
}

/// Iterates over the batches in a buffer, validating each with [`validate_batch`]. Yields the
/// batch's byte position in the buffer and its header; stops after the first defect.
pub fn batches(bytes: &[u8]) -> BatchIter<'_> {
    BatchIter {
        bytes,
        position: 0,
        failed: false,
    }
}

/// Iterator returned by [`batches`].
#[derive(Debug)]
pub struct BatchIter<'a> {
    bytes: &'a [u8],
    position: usize,
    failed: bool,
}

impl Iterator for BatchIter<'_> {
    type Item = Result<(usize, BatchHeader), BatchDefect>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.failed || self.position >= self.bytes.len() {
            return None;
        }
        match validate_batch(&self.bytes[self.position..]) {
            Ok(header) => {
                let position = self.position;
                self.position += header.size_bytes();
                Some(Ok((position, header)))
            }
            Err(defect) => {
                self.failed = true;
                Some(Err(defect))
            }
        }
    }
}

/// Overwrites `BaseOffset` of the batch at the start of `batch` (not covered by the CRC).
pub(crate) fn set_base_offset(batch: &mut [u8], base_offset: Offset) {
    batch[BASE_OFFSET_AT..BASE_OFFSET_AT + 8].copy_from_slice(&base_offset.0.to_be_bytes());
}

/// Overwrites `PartitionLeaderEpoch` of the batch at the start of `batch` (not covered by the
/// CRC).
pub(crate) fn set_partition_leader_epoch(batch: &mut [u8], epoch: LeaderEpoch) {
    batch[PARTITION_LEADER_EPOCH_AT..PARTITION_LEADER_EPOCH_AT + 4]
        .copy_from_slice(&epoch.0.to_be_bytes());
}

/// Marks the batch as `LogAppendTime` with `MaxTimestamp = now_ms` and recomputes the CRC, as a
/// broker does for topics with `message.timestamp.type=LogAppendTime`. `batch` must be exactly
/// one whole batch.
pub(crate) fn set_log_append_time(batch: &mut [u8], now_ms: i64) {
    let attributes = read_i16(batch, ATTRIBUTES_AT) | TIMESTAMP_TYPE_LOG_APPEND_TIME_BIT;
    batch[ATTRIBUTES_AT..ATTRIBUTES_AT + 2].copy_from_slice(&attributes.to_be_bytes());
    batch[MAX_TIMESTAMP_AT..MAX_TIMESTAMP_AT + 8].copy_from_slice(&now_ms.to_be_bytes());
    let crc = compute_crc(batch);
    batch[CRC_AT..CRC_AT + 4].copy_from_slice(&crc.to_be_bytes());
}

fn read_i64(bytes: &[u8], at: usize) -> i64 {
    let mut raw = [0u8; 8];
    raw.copy_from_slice(&bytes[at..at + 8]);
    i64::from_be_bytes(raw)
}

fn read_i32(bytes: &[u8], at: usize) -> i32 {
    let mut raw = [0u8; 4];
    raw.copy_from_slice(&bytes[at..at + 4]);
    i32::from_be_bytes(raw)
}

fn read_u32(bytes: &[u8], at: usize) -> u32 {
    let mut raw = [0u8; 4];
    raw.copy_from_slice(&bytes[at..at + 4]);
    u32::from_be_bytes(raw)
}

fn read_i16(bytes: &[u8], at: usize) -> i16 {
    i16::from_be_bytes([bytes[at], bytes[at + 1]])
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::builder::BatchBuilder;

    fn two_record_batch() -> Vec<u8> {
        let mut builder = BatchBuilder::new(50);
        builder
            .record(None, Some(b"a"))
            .record(Some(b"k"), Some(b"b"));
        builder.build()
    }

    #[test]
    fn validate_reports_framing_magic_and_crc_defects() {
        let good = two_record_batch();
        assert_eq!(validate_batch(&good).unwrap().records_count, 2);
        assert!(matches!(
            validate_batch(&good[..5]),
            Err(BatchDefect::Truncated { .. })
        ));
        assert!(matches!(
            validate_batch(&good[..good.len() - 1]),
            Err(BatchDefect::Truncated { .. })
        ));
        let mut short_length = good.clone();
        short_length[8..12].copy_from_slice(&10i32.to_be_bytes());
        assert!(matches!(
            validate_batch(&short_length),
            Err(BatchDefect::BatchLengthTooSmall { .. })
        ));
        let mut magic = good.clone();
        magic[MAGIC_AT] = 1;
        assert_eq!(
            validate_batch(&magic),
            Err(BatchDefect::MagicUnsupported { magic: 1 })
        );
        let mut flipped = good.clone();
        flipped[HEADER_BYTES] ^= 0x40;
        assert!(matches!(
            validate_batch(&flipped),
            Err(BatchDefect::CrcMismatch { .. })
        ));
    }

    #[test]
    fn offset_and_epoch_rewrites_keep_crc_and_log_append_time_recomputes_it() {
        let mut batch = two_record_batch();
        set_base_offset(&mut batch, Offset(1234));
        set_partition_leader_epoch(&mut batch, LeaderEpoch(7));
        let header = validate_batch(&batch).unwrap();
        assert_eq!(header.base_offset, Offset(1234));
        assert_eq!(header.last_offset(), Offset(1235));
        assert_eq!(header.partition_leader_epoch, LeaderEpoch(7));
        set_log_append_time(&mut batch, 99_000);
        let header = validate_batch(&batch).unwrap();
        assert_eq!(header.timestamp_type(), TimestampType::LogAppendTime);
        assert_eq!(header.max_timestamp_ms, 99_000);
    }

    #[test]
    fn complete_batches_len_drops_partial_tail() {
        let batch = two_record_batch();
        let mut buffer = [batch.clone(), batch.clone()].concat();
        buffer.extend_from_slice(&batch[..30]);
        assert_eq!(complete_batches_len(&buffer), batch.len() * 2);
        assert_eq!(batches(&buffer).filter(Result::is_ok).count(), 2);
    }
}
