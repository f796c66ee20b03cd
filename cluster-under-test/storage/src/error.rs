//! The crate's error type. Every variant carries the context needed to act on it as fields (no
//! pre-formatted strings), and [`Error::kafka_error_code`] is the single place that maps a storage
//! failure to the Kafka error code the node should answer with.

use std::io;
use std::path::PathBuf;

use crate::batch::BatchDefect;
use crate::checkpoint::CheckpointDefect;
use crate::ids::{FilePosition, Offset};
use crate::topic_partition::TopicPartition;

/// `Result` with this crate's [`Error`] as the default error type.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// What went wrong in the storage engine.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A file-system operation failed.
    #[error("{operation} {path}: {source}")]
    Io {
        /// What we were doing (`"open"`, `"write"`, `"fsync"`, ...).
        operation: &'static str,
        /// The file or directory involved.
        path: PathBuf,
        /// The OS error.
        source: io::Error,
    },
    /// A batch in an append is malformed (framing, magic, CRC, record count, codec).
    #[error("batch {batch_index} of the append is invalid: {defect}")]
    InvalidBatch {
        /// Zero-based index of the offending batch within the appended buffer.
        batch_index: usize,
        /// What is wrong with it.
        defect: BatchDefect,
    },
    /// A batch is larger than `message.max.bytes`.
    #[error(
        "batch {batch_index} is {batch_bytes} bytes, above message.max.bytes {max_message_bytes}"
    )]
    MessageTooLarge {
        /// Zero-based index of the offending batch within the appended buffer.
        batch_index: usize,
        /// Size of the batch including its 12-byte log overhead.
        batch_bytes: usize,
        /// The configured limit.
        max_message_bytes: usize,
    },
    /// The whole append is larger than a segment (`log.segment.bytes`).
    #[error("append of {append_bytes} bytes exceeds log.segment.bytes {segment_bytes}")]
    RecordListTooLarge {
        /// Size of the appended buffer.
        append_bytes: usize,
        /// The configured segment size.
        segment_bytes: usize,
    },
    /// A batch's max timestamp is further in the future than
    /// `log.message.timestamp.after.max.ms` allows.
    #[error(
        "batch {batch_index} max timestamp {max_timestamp_ms} is more than {after_max_ms} ms after now {now_ms}"
    )]
    InvalidTimestamp {
        /// Zero-based index of the offending batch within the appended buffer.
        batch_index: usize,
        /// The batch's `MaxTimestamp`.
        max_timestamp_ms: i64,
        /// The broker's clock at append time.
        now_ms: i64,
        /// The configured tolerance.
        after_max_ms: i64,
    },
    /// An append contained no batches at all.
    #[error("append contains no record batches")]
    EmptyAppend,
    /// A follower append's first batch starts below the log end, or a later batch does not
    /// start exactly where the previous one ended.
    #[error(
        "batch {batch_index} starts at offset {base_offset}, expected {expected} (first batch: at least)"
    )]
    UnexpectedBaseOffset {
        /// Zero-based index of the offending batch within the appended buffer.
        batch_index: usize,
        /// The batch's base offset.
        base_offset: Offset,
        /// The log end offset (first batch) or the previous batch's next offset.
        expected: Offset,
    },
    /// A read or offset-taking operation asked for an offset outside `[log_start, log_end]`.
    #[error("offset {requested} out of range [{log_start}, {log_end}]")]
    OffsetOutOfRange {
        /// The offset asked for.
        requested: Offset,
        /// The log start offset at the time.
        log_start: Offset,
        /// The log end offset at the time.
        log_end: Offset,
    },
    /// A batch already on disk failed its CRC or framing check when read: it is never served.
    #[error("stored batch at {file}:{position} is corrupt: {defect}")]
    CorruptStoredBatch {
        /// The segment file (its directory names the partition).
        file: PathBuf,
        /// Byte position of the batch in that file.
        position: FilePosition,
        /// What is wrong with it.
        defect: BatchDefect,
    },
    /// `create_log` was called for a partition that already has a log.
    #[error("log for {tp} already exists")]
    LogAlreadyExists {
        /// The partition.
        tp: TopicPartition,
    },
    /// A directory name is not `<topic>-<partition>`.
    #[error("{name:?} is not a partition directory name (<topic>-<partition>)")]
    InvalidPartitionDirName {
        /// The offending name.
        name: String,
    },
    /// A checkpoint file could not be parsed.
    #[error("malformed checkpoint file {path} line {line}: {defect}")]
    MalformedCheckpoint {
        /// The checkpoint file.
        path: PathBuf,
        /// One-based line number where parsing failed.
        line: usize,
        /// What is wrong with that line.
        defect: CheckpointDefect,
    },
    /// A client may not produce control batches (Kafka: "Clients are not allowed to write
    /// control records").
    #[error("batch {batch_index} is a control batch, which only the broker writes")]
    ControlBatchFromClient {
        /// Zero-based index of the offending batch within the appended buffer.
        batch_index: usize,
    },
    /// The producer state refused a transaction marker (stale producer or coordinator epoch).
    #[error("marker refused: {0}")]
    MarkerRefused(#[from] crate::producer_state::ProducerStateError),
}

impl Error {
    /// The Kafka protocol error code a broker should return for this error.
    ///
    /// | error | code |
    /// |---|---|
    /// | `OffsetOutOfRange` | 1 `OFFSET_OUT_OF_RANGE` |
    /// | `InvalidBatch` (framing, CRC) | 2 `CORRUPT_MESSAGE` |
    /// | `InvalidBatch` (magic, count, codec), `EmptyAppend`, `ControlBatchFromClient` | 87 `INVALID_RECORD` |
    /// | `MarkerRefused` | 47 `INVALID_PRODUCER_EPOCH`, 52 `TRANSACTION_COORDINATOR_FENCED` |
    /// | `MessageTooLarge` | 10 `MESSAGE_TOO_LARGE` |
    /// | `RecordListTooLarge` | 18 `RECORD_LIST_TOO_LARGE` |
    /// | `InvalidTimestamp` | 32 `INVALID_TIMESTAMP` |
    /// | `Io`, `CorruptStoredBatch` | 56 `KAFKA_STORAGE_ERROR` |
    /// | anything else | -1 `UNKNOWN_SERVER_ERROR` |
    pub fn kafka_error_code(&self) -> i16 {
        match self {
            Error::OffsetOutOfRange { .. } => 1,
            Error::InvalidBatch { defect, .. } if defect.is_corruption() => 2,
            Error::InvalidBatch { .. }
            | Error::EmptyAppend
            | Error::ControlBatchFromClient { .. } => 87,
            Error::MarkerRefused(refused) => refused.kafka_error_code(),
            Error::MessageTooLarge { .. } => 10,
            Error::RecordListTooLarge { .. } => 18,
            Error::InvalidTimestamp { .. } => 32,
            Error::Io { .. } | Error::CorruptStoredBatch { .. } => 56,
            Error::UnexpectedBaseOffset { .. }
            | Error::LogAlreadyExists { .. }
            | Error::InvalidPartitionDirName { .. }
            | Error::MalformedCheckpoint { .. } => -1,
        }
    }

    /// Builds a closure that wraps an `io::Error` with the operation and path, for `map_err`.
    pub(crate) fn io(
        operation: &'static str,
        path: &std::path::Path,
    ) -> impl FnOnce(io::Error) -> Error {
        let path = path.to_path_buf();
        move |source| Error::Io {
            operation,
            path,
            source,
        }
    }
}
