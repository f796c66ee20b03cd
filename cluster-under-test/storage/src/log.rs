//! `Log`: one partition's log. Owns the ordered segments, the log start offset, the recovery
//! point, the high watermark, the leader-epoch cache and the producer state with its snapshots
//! (`log/producer.rs`), and enforces their invariants (`log_start <= high_watermark <=
//! log_end`, `recovery_point <= log_end`, producer state built up to the log end). It validates
//! appends, assigns offsets, rolls segments, applies the flush policy, and serves reads. It is synchronous
//! and not thread-safe by itself: the node wraps each `Log` in a `std::sync::Mutex`
//! (`manager.rs` hands out `Arc<Mutex<Log>>`).

use std::fs;
use std::path::{Path, PathBuf};

use bytes::Bytes;

use crate::batch::{self, BatchHeader, TimestampType};
use crate::config::LogConfig;
use crate::durable;
use crate::epoch_cache::{EpochEndOffset, LeaderEpochCache};
use crate::error::{Error, Result};
use crate::ids::{LeaderEpoch, Offset};
use crate::producer_state_manager::ProducerStateManager;
use crate::recovery::{self, LoadRequest, RecoveryReport};
use crate::segment::LogSegment;
use crate::topic_partition::TopicPartition;

mod producer;
mod sync;
mod timestamps;
mod truncate;
mod txn;
mod validate;

use validate::{check_append_size, validate_producer_batches};

pub use producer::ProducerStateLoad;

/// What a successful append did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AppendInfo {
    /// Offset of the first record appended.
    pub first_offset: Offset,
    /// Offset of the last record appended.
    pub last_offset: Offset,
    /// Records appended (sum of the batches' `RecordsCount`).
    pub record_count: i64,
    /// Batches appended.
    pub batch_count: usize,
    /// Bytes appended.
    pub size_bytes: usize,
    /// Largest `MaxTimestamp` among the appended batches (after `LogAppendTime` stamping).
    pub max_timestamp_ms: i64,
    /// The broker time stamped into the batches when the log uses `LogAppendTime`; `None` for
    /// `CreateTime` (Kafka then answers `-1`).
    pub log_append_time_ms: Option<i64>,
    /// The log start offset after the append (for the produce response).
    pub log_start_offset: Offset,
    /// Whether a new segment was rolled (and the old one fsynced) for this append.
    pub rolled: bool,
    /// Whether the flush policy fsynced the log after this append.
    pub flushed: bool,
}

/// What a read returned.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReadInfo {
    /// Whole record batches exactly as stored, each having passed its CRC check.
    pub records: Bytes,
    /// Number of batches in `records`.
    pub batch_count: usize,
    /// Offset after the last returned batch (the requested start when nothing was returned).
    pub next_offset: Offset,
    /// Log start offset at the time of the read.
    pub log_start_offset: Offset,
    /// Log end offset at the time of the read.
    pub log_end_offset: Offset,
    /// High watermark at the time of the read.
    pub high_watermark: Offset,
}

/// Offsets loaded from the log dir's checkpoints, plus whether the last shutdown was clean.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LoadCheckpoints {
    /// `.kafka_cleanshutdown` was present: skip full scans.
    pub clean_shutdown: bool,
    /// From `recovery-point-offset-checkpoint` (0 when absent: scan everything).
    pub recovery_point: Offset,
    /// From `log-start-offset-checkpoint` (0 when absent).
    pub log_start_offset: Offset,
    /// From `replication-offset-checkpoint` (0 when absent).
    pub high_watermark: Offset,
}

impl LoadCheckpoints {
    /// Checkpoints of a brand-new log: nothing known, nothing to trust.
    pub const NEW: LoadCheckpoints = LoadCheckpoints {
        clean_shutdown: false,
        recovery_point: Offset::ZERO,
        log_start_offset: Offset::ZERO,
        high_watermark: Offset::ZERO,
    };
}

/// One partition's log. See the module docs.
#[derive(Debug)]
pub struct Log {
    tp: TopicPartition,
    /// The partition directory, `<log dir>/<topic>-<partition>`.
    dir: PathBuf,
    config: LogConfig,
    /// Segments in offset order; never empty; the last one is the active segment.
    segments: Vec<LogSegment>,
    /// First offset still readable (moved by `delete_records_before`).
    log_start_offset: Offset,
    /// Every offset below this is fsynced; recovery scans from its segment.
    recovery_point: Offset,
    /// Offsets below this are committed; set by the replication layer, clamped here.
    high_watermark: Offset,
    epoch_cache: LeaderEpochCache,
    /// Broker time of the last time-driven or message-driven flush; `None` until first known
    /// (Kafka starts the flush clock when the log is loaded).
    last_flush_ms: Option<i64>,
    /// Idempotent-producer state and its `.snapshot` files, kept in step with the segments.
    producers: ProducerStateManager,
    /// What the last producer-state rebuild did.
    producer_load: ProducerStateLoad,
}

impl Log {
    /// Opens (or creates) the log of `tp` in `partition_dir`, recovering it per `checkpoints`.
    ///
    /// # Errors
    ///
    /// I/O errors, or a malformed `leader-epoch-checkpoint`.
    pub fn open(
        partition_dir: &Path,
        tp: TopicPartition,
        config: LogConfig,
        checkpoints: LoadCheckpoints,
    ) -> Result<(Log, RecoveryReport)> {
        fs::create_dir_all(partition_dir).map_err(Error::io("create dir", partition_dir))?;
        remove_stray_files(partition_dir)?;
        let mut epoch_cache = LeaderEpochCache::load(partition_dir)?;
        let request = LoadRequest {
            tp: &tp,
            dir: partition_dir,
            config: &config,
            clean_shutdown: checkpoints.clean_shutdown,
            recovery_point: checkpoints.recovery_point,
            log_start_offset: checkpoints.log_start_offset,
        };
        let (segments, report) = recovery::load_segments(&request, |header| {
            epoch_cache
                .assign(header.partition_leader_epoch, header.base_offset)
                .map(|_| ())
        })?;
        let log_end = report.log_end_offset;
        epoch_cache.truncate_from_end(log_end)?;
        let first_base = segments[0].base_offset();
        let log_start_offset = checkpoints.log_start_offset.max(first_base).min(log_end);
        epoch_cache.truncate_from_start(log_start_offset)?;
        let recovery_point = if checkpoints.clean_shutdown && report.stop.is_none() {
            log_end
        } else {
            checkpoints.recovery_point.min(log_end)
        };
        let high_watermark = checkpoints.high_watermark.clamp(log_start_offset, log_end);
        let mut producers = ProducerStateManager::load(partition_dir)?;
        let bases: Vec<Offset> = segments.iter().map(LogSegment::base_offset).collect();
        producers.remove_stray_snapshots(&bases)?;
        if report.stop.is_some() || report.segments_deleted > 0 {
            tracing::warn!(%tp, ?report, "log recovered with truncation");
        } else {
            tracing::debug!(%tp, ?report, "log loaded");
        }
        let mut log = Log {
            tp,
            dir: partition_dir.to_path_buf(),
            config,
            segments,
            log_start_offset,
            recovery_point,
            high_watermark,
            epoch_cache,
            last_flush_ms: None,
            producers,
            producer_load: ProducerStateLoad::default(),
        };
        log.rebuild_producer_state(log_end)?;
        log.producers.on_high_watermark_updated(high_watermark);
        log.assert_invariants();
        Ok((log, report))
    }

    fn assert_invariants(&self) {
        let log_end = self.log_end_offset();
        assert!(
            !self.segments.is_empty(),
            "{}: a log always has a segment",
            self.tp
        );
        assert!(
            self.log_start_offset <= self.high_watermark && self.high_watermark <= log_end,
            "{}: log_start {} <= high_watermark {} <= log_end {} violated",
            self.tp,
            self.log_start_offset,
            self.high_watermark,
            log_end
        );
        assert!(
            self.recovery_point <= log_end,
            "{}: recovery point {} beyond log end {}",
            self.tp,
            self.recovery_point,
            log_end
        );
        assert_eq!(
            self.producers.map_end_offset(),
            log_end,
            "{}: producer state not built up to the log end",
            self.tp
        );
    }

    /// The partition this log belongs to.
    pub fn topic_partition(&self) -> &TopicPartition {
        &self.tp
    }

    /// The partition directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The log's configuration.
    pub fn config(&self) -> &LogConfig {
        &self.config
    }

    /// First offset still readable.
    pub fn log_start_offset(&self) -> Offset {
        self.log_start_offset
    }

    /// The next offset to be assigned (LEO).
    pub fn log_end_offset(&self) -> Offset {
        self.active().next_offset()
    }

    /// Offsets below this are committed.
    pub fn high_watermark(&self) -> Offset {
        self.high_watermark
    }

    /// Sets the high watermark, clamped to `[log_start, log_end]`; returns the value stored.
    pub fn set_high_watermark(&mut self, high_watermark: Offset) -> Offset {
        self.high_watermark = high_watermark.clamp(self.log_start_offset, self.log_end_offset());
        self.producers
            .on_high_watermark_updated(self.high_watermark);
        self.high_watermark
    }

    /// Every offset below this has been fsynced.
    pub fn recovery_point(&self) -> Offset {
        self.recovery_point
    }

    /// Base offsets of the segments, oldest first.
    pub fn segment_base_offsets(&self) -> Vec<Offset> {
        self.segments.iter().map(LogSegment::base_offset).collect()
    }

    /// Total bytes of batches across all segments.
    pub fn size_bytes(&self) -> u64 {
        self.segments
            .iter()
            .map(|segment| segment.size().as_u64())
            .sum()
    }

    /// The leader-epoch cache.
    pub fn leader_epoch_cache(&self) -> &LeaderEpochCache {
        &self.epoch_cache
    }

    /// The newest leader epoch in the cache.
    pub fn latest_epoch(&self) -> Option<LeaderEpoch> {
        self.epoch_cache.latest_epoch()
    }

    /// OffsetsForLeaderEpoch for `epoch` (see [`LeaderEpochCache::end_offset_for_epoch`]).
    pub fn end_offset_for_epoch(&self, epoch: LeaderEpoch) -> EpochEndOffset {
        self.epoch_cache
            .end_offset_for_epoch(epoch, self.log_end_offset())
    }

    /// Records that `epoch` starts at the current log end offset, as a new leader does before
    /// accepting writes (Kafka's `maybeAssignEpochStartOffset`).
    ///
    /// # Errors
    ///
    /// I/O errors writing `leader-epoch-checkpoint`.
    pub fn assign_epoch_start_offset(&mut self, epoch: LeaderEpoch) -> Result<()> {
        let log_end = self.log_end_offset();
        self.epoch_cache.assign(epoch, log_end).map(|_| ())
    }

    fn active(&self) -> &LogSegment {
        self.segments.last().expect("a log always has a segment")
    }

    fn active_mut(&mut self) -> &mut LogSegment {
        self.segments
            .last_mut()
            .expect("a log always has a segment")
    }

    /// Appends producer batches as the leader: validates every batch (framing, magic 2,
    /// CRC-32C, record count, codec, `message.max.bytes`, timestamp), then assigns offsets from
    /// the log end by rewriting `BaseOffset` and `PartitionLeaderEpoch` (outside the CRC), stamps
    /// `LogAppendTime` if configured, appends, records `leader_epoch` in the epoch cache, and
    /// applies the flush policy. An invalid batch rejects the whole append; nothing is written.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidBatch`], [`Error::MessageTooLarge`], [`Error::RecordListTooLarge`],
    /// [`Error::InvalidTimestamp`], [`Error::EmptyAppend`], [`Error::ControlBatchFromClient`]
    /// (control batches are the broker's: [`Log::append_marker_as_leader`]), or I/O errors.
    pub fn append_as_leader(
        &mut self,
        batches: &[u8],
        leader_epoch: LeaderEpoch,
        now_ms: i64,
    ) -> Result<AppendInfo> {
        let validated = validate_producer_batches(batches, &self.config, now_ms)?;
        if let Some(batch_index) = validated.iter().position(|(_, header)| header.is_control()) {
            return Err(Error::ControlBatchFromClient { batch_index });
        }
        self.append_validated_as_leader(batches, validated, leader_epoch, now_ms)
    }

    /// The leader append after validation: offsets, epochs, `LogAppendTime`, then the write.
    fn append_validated_as_leader(
        &mut self,
        batches: &[u8],
        validated: Vec<(usize, BatchHeader)>,
        leader_epoch: LeaderEpoch,
        now_ms: i64,
    ) -> Result<AppendInfo> {
        let mut bytes = batches.to_vec();
        let log_append_time_ms =
            (self.config.message_timestamp_type == TimestampType::LogAppendTime).then_some(now_ms);
        let mut next_offset = self.log_end_offset();
        let mut headers = Vec::with_capacity(validated.len());
        for (position, header) in validated {
            let stored = &mut bytes[position..position + header.size_bytes()];
            batch::set_base_offset(stored, next_offset);
            batch::set_partition_leader_epoch(stored, leader_epoch);
            if let Some(time_ms) = log_append_time_ms {
                batch::set_log_append_time(stored, time_ms);
            }
            let rewritten = BatchHeader::parse(stored).expect("header length was validated");
            debug_assert!(
                batch::validate_batch(stored).is_ok(),
                "rewrite broke the batch"
            );
            next_offset = rewritten.next_offset();
            headers.push(rewritten);
        }
        let mut info = self.append_validated(&bytes, &headers, now_ms)?;
        info.log_append_time_ms = log_append_time_ms;
        Ok(info)
    }

    /// Appends batches replicated from the leader, keeping their offsets and epochs. Each batch
    /// is checked for framing, magic and CRC (not `message.max.bytes`, like Kafka's replication
    /// path). The first must start at or after the log end (a jump ahead starts a new segment
    /// there) and each later one exactly where the previous ended. A fetch response may end with
    /// a partial batch: pass only [`batch::complete_batches_len`] bytes.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidBatch`], [`Error::UnexpectedBaseOffset`], [`Error::RecordListTooLarge`],
    /// [`Error::EmptyAppend`], or I/O errors.
    pub fn append_as_follower(&mut self, batches: &[u8], now_ms: i64) -> Result<AppendInfo> {
        let mut headers = Vec::new();
        let log_end = self.log_end_offset();
        let mut expected = log_end;
        for (batch_index, item) in batch::batches(batches).enumerate() {
            let (_, header) = item.map_err(|defect| Error::InvalidBatch {
                batch_index,
                defect,
            })?;
            if header.last_offset_delta < 0 {
                return Err(Error::InvalidBatch {
                    batch_index,
                    defect: batch::BatchDefect::NoRecords {
                        records_count: header.records_count,
                        last_offset_delta: header.last_offset_delta,
                    },
                });
            }
            let acceptable = if batch_index == 0 {
                header.base_offset >= log_end
            } else {
                header.base_offset == expected
            };
            if !acceptable {
                return Err(Error::UnexpectedBaseOffset {
                    batch_index,
                    base_offset: header.base_offset,
                    expected,
                });
            }
            expected = header.next_offset();
            headers.push(header);
        }
        if headers.is_empty() {
            return Err(Error::EmptyAppend);
        }
        check_append_size(batches.len(), &self.config)?;
        self.append_validated(batches, &headers, now_ms)
    }

    /// Shared tail of both append paths: roll if needed, write, update the epoch cache, flush
    /// by message count.
    fn append_validated(
        &mut self,
        bytes: &[u8],
        headers: &[BatchHeader],
        now_ms: i64,
    ) -> Result<AppendInfo> {
        let first = headers.first().expect("validated appends are non-empty");
        let last = headers.last().expect("validated appends are non-empty");
        let rolled = self.maybe_roll(bytes.len(), first.base_offset, last.last_offset())?;
        self.active_mut().append(bytes, headers)?;
        let mut position = 0;
        for header in headers {
            self.epoch_cache
                .assign(header.partition_leader_epoch, header.base_offset)?;
            let batch = &bytes[position..position + header.size_bytes()];
            position += header.size_bytes();
            self.record_producer_batch(header, batch)?;
        }
        let unflushed_messages = self.log_end_offset().distance_from(self.recovery_point);
        let flushed = unflushed_messages >= self.config.flush_interval_messages;
        if flushed {
            self.flush()?;
            self.last_flush_ms = Some(now_ms);
        }
        self.assert_invariants();
        Ok(AppendInfo {
            first_offset: first.base_offset,
            last_offset: last.last_offset(),
            record_count: headers.iter().map(|h| i64::from(h.records_count)).sum(),
            batch_count: headers.len(),
            size_bytes: bytes.len(),
            max_timestamp_ms: headers
                .iter()
                .map(|h| h.max_timestamp_ms)
                .max()
                .unwrap_or(-1),
            log_append_time_ms: None,
            log_start_offset: self.log_start_offset,
            rolled,
            flushed,
        })
    }

    /// Rolls to a new segment at `first_offset` when the active one cannot take the append, or
    /// when the append does not continue it (a follower jumping ahead): every segment holds
    /// contiguous batches starting at its base offset, which recovery checks.
    fn maybe_roll(
        &mut self,
        append_bytes: usize,
        first_offset: Offset,
        last_offset: Offset,
    ) -> Result<bool> {
        let active = self.active();
        if active.size().0 == 0 {
            // An empty active segment not starting at the append is replaced rather than
            // rolled: there is nothing in it to flush.
            if active.base_offset() != first_offset {
                let old = self.segments.pop().expect("a log always has a segment");
                old.delete()?;
                let segment = LogSegment::create(&self.dir, first_offset, &self.config)?;
                durable::sync_dir(&self.dir)?;
                self.segments.push(segment);
            }
            return Ok(false);
        }
        let continues = first_offset == active.next_offset();
        if continues && !active.should_roll(append_bytes, last_offset, self.config.segment_bytes) {
            return Ok(false);
        }
        self.roll(first_offset)?;
        Ok(true)
    }

    /// Fsyncs the current segments (Kafka's flush on roll), then starts a new active segment at
    /// `new_base` and moves the recovery point to it.
    fn roll(&mut self, new_base: Offset) -> Result<()> {
        assert!(new_base >= self.log_end_offset(), "roll below the log end");
        self.flush()?;
        let segment = LogSegment::create(&self.dir, new_base, &self.config)?;
        durable::sync_dir(&self.dir)?;
        tracing::debug!(tp = %self.tp, base = new_base.0, "rolled new segment");
        self.segments.push(segment);
        self.recovery_point = new_base;
        // The snapshot at the new base lets recovery start from this segment (Kafka's roll);
        // written after the flush, so it never describes data that is not on disk.
        self.producers.update_map_end_offset(new_base);
        self.producers.take_snapshot()?;
        Ok(())
    }

    /// Fsyncs every segment holding offsets at or after the recovery point, then advances the
    /// recovery point to the log end.
    ///
    /// # Errors
    ///
    /// I/O errors; the recovery point then stays where it was.
    pub fn flush(&mut self) -> Result<()> {
        let log_end = self.log_end_offset();
        if self.recovery_point >= log_end {
            return Ok(());
        }
        let first = self
            .segments
            .partition_point(|segment| segment.base_offset() <= self.recovery_point)
            .saturating_sub(1);
        for segment in &self.segments[first..] {
            segment.flush()?;
        }
        self.recovery_point = log_end;
        Ok(())
    }

    /// The `log.flush.interval.ms` check: flushes when the last flush is at least the interval
    /// old. The first call only starts the clock. Returns whether it flushed.
    ///
    /// # Errors
    ///
    /// I/O errors from [`Log::flush`].
    pub fn flush_if_due(&mut self, now_ms: i64) -> Result<bool> {
        let Some(interval_ms) = self.config.flush_interval_ms else {
            return Ok(false);
        };
        let Some(last_flush_ms) = self.last_flush_ms else {
            self.last_flush_ms = Some(now_ms);
            return Ok(false);
        };
        if now_ms.saturating_sub(last_flush_ms) < interval_ms {
            return Ok(false);
        }
        self.flush()?;
        self.last_flush_ms = Some(now_ms);
        Ok(true)
    }

    /// Reads whole batches starting with the batch that contains `start` (the client skips
    /// records before `start`), from one segment: up to `max_bytes`, but at least one batch when
    /// `min_one_batch` (KIP-74), and only batches whose last offset is below `upper_bound`
    /// (exclusive, e.g. the high watermark). `start == log_end` reads nothing.
    ///
    /// # Errors
    ///
    /// [`Error::OffsetOutOfRange`] when `start` is outside `[log_start, log_end]`;
    /// [`Error::CorruptStoredBatch`] when the first batch to serve fails its CRC (a later bad
    /// batch just ends the read); I/O errors.
    pub fn read(
        &self,
        start: Offset,
        max_bytes: usize,
        upper_bound: Offset,
        min_one_batch: bool,
    ) -> Result<ReadInfo> {
        let log_end = self.log_end_offset();
        if start < self.log_start_offset || start > log_end {
            return Err(Error::OffsetOutOfRange {
                requested: start,
                log_start: self.log_start_offset,
                log_end,
            });
        }
        let mut info = ReadInfo {
            records: Bytes::new(),
            batch_count: 0,
            next_offset: start,
            log_start_offset: self.log_start_offset,
            log_end_offset: log_end,
            high_watermark: self.high_watermark,
        };
        if start == log_end || start >= upper_bound {
            return Ok(info);
        }
        let first = self
            .segments
            .partition_point(|segment| segment.base_offset() <= start)
            .saturating_sub(1);
        for segment in &self.segments[first..] {
            if let Some(read) = segment.read(start, max_bytes, upper_bound, min_one_batch)? {
                info.records = Bytes::from(read.bytes);
                info.batch_count = read.batches;
                info.next_offset = read.next_offset;
                break;
            }
        }
        Ok(info)
    }
}

/// Removes leftovers of interrupted operations: temp files of atomic replaces, and index files
/// whose `.log` is gone.
fn remove_stray_files(dir: &Path) -> Result<()> {
    for entry in fs::read_dir(dir).map_err(Error::io("list", dir))? {
        let entry = entry.map_err(Error::io("list", dir))?;
        let path = entry.path();
        let Some(name) = path.file_name().and_then(|name| name.to_str()) else {
            continue;
        };
        let stray = if name.ends_with(durable::TEMP_SUFFIX) {
            true
        } else if let Some(stem) = name
            .strip_suffix(crate::segment::INDEX_SUFFIX)
            .or_else(|| name.strip_suffix(crate::txn_index::TXN_INDEX_SUFFIX))
        {
            !dir.join(format!("{stem}{}", crate::segment::LOG_SUFFIX))
                .exists()
        } else {
            false
        };
        if stray {
            tracing::info!(path = %path.display(), "removing stray file");
            fs::remove_file(&path).map_err(Error::io("delete", &path))?;
        }
    }
    Ok(())
}
