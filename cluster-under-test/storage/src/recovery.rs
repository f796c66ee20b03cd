//! Crash recovery: the batch-by-batch scanner that validates a segment file (framing, magic,
//! CRC-32C, increasing offsets), the loader that decides which segments of a partition to scan
//! and where to cut, and the [`RecoveryReport`] it returns. Per `docs/kafka-semantics.md` §7.6:
//! after an unclean shutdown every segment from the one holding the recovery point is scanned;
//! at the first bad batch that segment is truncated and all later segments are deleted. After a
//! clean shutdown only each segment's tail (from its last index entry) is checked.

use std::fs::File;
use std::io::{BufReader, Read, Seek, SeekFrom};
use std::path::Path;

use crate::batch::{self, BatchDefect, BatchHeader, LOG_OVERHEAD_BYTES};
use crate::config::LogConfig;
use crate::error::{Error, Result};
use crate::ids::{FilePosition, Offset};
use crate::segment::LogSegment;
use crate::topic_partition::TopicPartition;

/// Largest `.log` size we read: index positions are `int32` in Kafka's format.
const SEGMENT_BYTES_MAX: u64 = i32::MAX as u64;
/// Read-ahead buffer for scanning; large sequential reads keep recovery fast.
const SCAN_BUFFER_BYTES: usize = 1 << 20;

/// Why scanning a segment stopped before its end.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StopReason {
    /// The file ends inside a batch: a torn write.
    TornBatch {
        /// Position of the incomplete batch.
        position: FilePosition,
        /// Bytes the batch (or its length prefix) needs.
        needed: usize,
        /// Bytes left in the file.
        available: usize,
    },
    /// The batch's length, magic or CRC is bad.
    CorruptBatch {
        /// Position of the bad batch.
        position: FilePosition,
        /// What is wrong with it.
        defect: BatchDefect,
    },
    /// The batch does not start where the previous one ended (or, for a segment's first
    /// batch, at the segment's base offset); also used for a segment file overlapping the
    /// previous segment.
    OffsetMismatch {
        /// Position of the batch.
        position: FilePosition,
        /// Its base offset.
        base_offset: Offset,
        /// The base offset it should have.
        expected: Offset,
    },
}

impl StopReason {
    /// Byte position in the segment where valid data ends.
    pub fn position(&self) -> FilePosition {
        match self {
            StopReason::TornBatch { position, .. }
            | StopReason::CorruptBatch { position, .. }
            | StopReason::OffsetMismatch { position, .. } => *position,
        }
    }
}

/// What loading one partition found and did. Returned per partition by the log manager.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecoveryReport {
    /// The partition.
    pub tp: TopicPartition,
    /// Whether the log dir had the clean-shutdown marker.
    pub clean_shutdown: bool,
    /// The recovery point loaded from the checkpoint (scanning started at its segment).
    pub recovery_point: Offset,
    /// Base offset of the first fully scanned segment; `None` if nothing needed a full scan.
    pub scanned_from_segment: Option<Offset>,
    /// Segments scanned batch by batch.
    pub segments_scanned: usize,
    /// Batches that passed validation during full scans.
    pub batches_validated: u64,
    /// Bytes cut from the segment holding the first bad batch.
    pub bytes_truncated: u64,
    /// Segments deleted because they followed the first bad batch.
    pub segments_deleted: usize,
    /// Why the scan stopped early; `None` if all scanned data was valid.
    pub stop: Option<StopReason>,
    /// The log end offset after loading.
    pub log_end_offset: Offset,
}

/// Result of scanning one segment file.
#[derive(Debug)]
pub(crate) struct ScanOutcome {
    /// End of the last valid batch.
    pub(crate) valid_end: FilePosition,
    /// Offset after the last valid batch (or the `expected` given when none was valid).
    pub(crate) next_offset: Offset,
    /// Valid batches seen.
    pub(crate) batches: u64,
    /// Why the scan stopped before the end of the file, if it did.
    pub(crate) stop: Option<StopReason>,
}

/// Scans `file` from `from` to `file_len`, validating every batch and calling `on_batch` with
/// each valid batch's position and header. Stops at the first torn or corrupt batch, or the first
/// batch that does not start exactly at `expected` (for the first batch) or where the previous
/// batch ended. Segments are contiguous because the log rolls a new segment whenever an append
/// does not continue the active one; this catches a damaged `BaseOffset`, which the CRC does not
/// cover.
pub(crate) fn scan_batches(
    file: &File,
    path: &Path,
    from: FilePosition,
    file_len: u64,
    expected: Offset,
    mut on_batch: impl FnMut(FilePosition, &BatchHeader) -> Result<()>,
) -> Result<ScanOutcome> {
    let file_len = file_len.min(SEGMENT_BYTES_MAX);
    let mut reader = BufReader::with_capacity(SCAN_BUFFER_BYTES, file);
    reader
        .seek(SeekFrom::Start(from.as_u64()))
        .map_err(Error::io("seek", path))?;
    let mut outcome = ScanOutcome {
        valid_end: from,
        next_offset: expected,
        batches: 0,
        stop: None,
    };
    let mut buffer: Vec<u8> = Vec::with_capacity(64 * 1024);
    loop {
        let position = outcome.valid_end;
        let available = (file_len - position.as_u64()) as usize;
        if available == 0 {
            return Ok(outcome);
        }
        if available < LOG_OVERHEAD_BYTES {
            outcome.stop = Some(StopReason::TornBatch {
                position,
                needed: LOG_OVERHEAD_BYTES,
                available,
            });
            return Ok(outcome);
        }
        buffer.resize(LOG_OVERHEAD_BYTES, 0);
        reader
            .read_exact(&mut buffer)
            .map_err(Error::io("read segment", path))?;
        let size = match batch::batch_size(&buffer) {
            Ok(size) => size,
            Err(defect) => {
                outcome.stop = Some(StopReason::CorruptBatch { position, defect });
                return Ok(outcome);
            }
        };
        if size > available {
            outcome.stop = Some(StopReason::TornBatch {
                position,
                needed: size,
                available,
            });
            return Ok(outcome);
        }
        buffer.resize(size, 0);
        reader
            .read_exact(&mut buffer[LOG_OVERHEAD_BYTES..])
            .map_err(Error::io("read segment", path))?;
        let header = match batch::validate_batch(&buffer) {
            Ok(header) => header,
            Err(defect) => {
                outcome.stop = Some(StopReason::CorruptBatch { position, defect });
                return Ok(outcome);
            }
        };
        if header.base_offset != outcome.next_offset || header.last_offset_delta < 0 {
            outcome.stop = Some(StopReason::OffsetMismatch {
                position,
                base_offset: header.base_offset,
                expected: outcome.next_offset,
            });
            return Ok(outcome);
        }
        on_batch(position, &header)?;
        outcome.batches += 1;
        outcome.next_offset = header.next_offset();
        outcome.valid_end = FilePosition(position.0 + size as u32);
    }
}

/// Everything the loader needs to know about a partition before opening its segments.
pub(crate) struct LoadRequest<'a> {
    /// The partition.
    pub(crate) tp: &'a TopicPartition,
    /// The partition directory.
    pub(crate) dir: &'a Path,
    /// The log's configuration.
    pub(crate) config: &'a LogConfig,
    /// Whether the log dir was shut down cleanly.
    pub(crate) clean_shutdown: bool,
    /// Recovery point from the checkpoint (0 when absent).
    pub(crate) recovery_point: Offset,
    /// Log start offset from the checkpoint, used when the directory has no segments.
    pub(crate) log_start_offset: Offset,
}

/// Opens (and if needed recovers) every segment of a partition. `on_batch` sees every batch of
/// every fully scanned segment, so the caller can rebuild the leader-epoch cache. Returns the
/// surviving segments in offset order (never empty) and the report.
pub(crate) fn load_segments(
    request: &LoadRequest<'_>,
    mut on_batch: impl FnMut(&BatchHeader) -> Result<()>,
) -> Result<(Vec<LogSegment>, RecoveryReport)> {
    let bases = LogSegment::list_base_offsets(request.dir)?;
    let mut report = RecoveryReport {
        tp: request.tp.clone(),
        clean_shutdown: request.clean_shutdown,
        recovery_point: request.recovery_point,
        scanned_from_segment: None,
        segments_scanned: 0,
        batches_validated: 0,
        bytes_truncated: 0,
        segments_deleted: 0,
        stop: None,
        log_end_offset: request.log_start_offset,
    };
    if bases.is_empty() {
        let segment = LogSegment::create(request.dir, request.log_start_offset, request.config)?;
        return Ok((vec![segment], report));
    }
    // Unclean: scan from the segment holding the recovery point (or the first segment).
    let mut full_scan_from = if request.clean_shutdown {
        bases.len()
    } else {
        bases
            .partition_point(|base| *base <= request.recovery_point)
            .saturating_sub(1)
    };
    let mut segments: Vec<LogSegment> = Vec::with_capacity(bases.len());
    let mut next_offset = bases[0];
    for (index, base) in bases.iter().copied().enumerate() {
        if report.stop.is_some() {
            LogSegment::delete_files(request.dir, base)?;
            report.segments_deleted += 1;
            continue;
        }
        if base < next_offset {
            // A segment file overlapping its predecessor cannot be valid: it and all later
            // segments go, like data after a bad batch.
            tracing::warn!(tp = %request.tp, base = base.0, expected = next_offset.0, "segment overlaps its predecessor");
            report.stop = Some(StopReason::OffsetMismatch {
                position: FilePosition::START,
                base_offset: base,
                expected: next_offset,
            });
            LogSegment::delete_files(request.dir, base)?;
            report.segments_deleted += 1;
            continue;
        }
        let mut segment = LogSegment::open(request.dir, base, request.config)?;
        if index < full_scan_from && !segment.check_tail()? {
            tracing::warn!(tp = %request.tp, base = base.0, "segment failed its cheap check; scanning from it");
            full_scan_from = index;
        }
        if index >= full_scan_from {
            report.scanned_from_segment.get_or_insert(base);
            report.segments_scanned += 1;
            let recovered = segment.recover(&mut on_batch)?;
            report.batches_validated += recovered.batches;
            report.bytes_truncated += recovered.truncated_bytes;
            report.stop = recovered.stop;
        }
        next_offset = segment.next_offset();
        segments.push(segment);
    }
    report.log_end_offset = next_offset;
    Ok((segments, report))
}
