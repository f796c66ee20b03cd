//! One log segment: the `<base offset>.log` file of whole record batches, its sparse
//! `<base offset>.index` and its `<base offset>.txnindex` of aborted transactions. Owns positioned reads and writes of batch bytes, index maintenance,
//! truncation and fsync of its two files. It knows nothing about the partition's offsets beyond
//! its own; `log.rs` chooses which segment to touch and when to roll.

use std::fs::{self, File, OpenOptions};
use std::io;
use std::ops::ControlFlow;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use crate::batch::{self, BatchHeader, HEADER_BYTES};
use crate::config::LogConfig;
use crate::error::{Error, Result};
use crate::ids::{FilePosition, Offset};
use crate::index::OffsetIndex;
use crate::recovery::{self, StopReason};
use crate::txn_index::{TXN_INDEX_SUFFIX, TransactionIndex};

/// Suffix of segment data files.
pub const LOG_SUFFIX: &str = ".log";
/// Suffix of offset index files.
pub const INDEX_SUFFIX: &str = ".index";

/// File name stem of the segment starting at `base_offset`: 20 zero-padded digits.
pub fn file_stem(base_offset: Offset) -> String {
    format!("{:020}", base_offset.0)
}

/// What a full scan of a segment did.
#[derive(Debug)]
pub(crate) struct SegmentRecovery {
    /// Valid batches kept.
    pub(crate) batches: u64,
    /// Bytes cut off the end of the file.
    pub(crate) truncated_bytes: u64,
    /// Why the scan stopped early, if it did.
    pub(crate) stop: Option<StopReason>,
}

/// A contiguous run of whole batches read from a segment.
#[derive(Debug)]
pub(crate) struct SegmentRead {
    /// The batch bytes, exactly as stored.
    pub(crate) bytes: Vec<u8>,
    /// Number of batches in `bytes`.
    pub(crate) batches: usize,
    /// Offset after the last returned batch.
    pub(crate) next_offset: Offset,
}

/// One segment's files and in-memory state.
#[derive(Debug)]
pub(crate) struct LogSegment {
    /// Offset the segment is named after; every batch in it starts at or after this.
    base_offset: Offset,
    log_path: PathBuf,
    /// The `.log` file, written only with positioned writes at `size`.
    log: File,
    index: OffsetIndex,
    /// Bytes of valid batches; the file may be longer only transiently after a failed write.
    size: FilePosition,
    /// Offset after the last batch (`base_offset` when empty).
    next_offset: Offset,
    /// Bytes appended since the last index entry (Kafka's `bytesSinceLastIndexEntry`).
    bytes_since_last_index_entry: usize,
    /// `log.index.interval.bytes`.
    index_interval_bytes: usize,
    /// `false` until the index passed a sanity check or was rebuilt.
    index_trusted: bool,
    /// Aborted transactions whose marker is in this segment.
    pub(crate) txn_index: TransactionIndex,
    /// The header of the first batch holding the segment's largest timestamp (`None` when
    /// empty), as Kafka keeps `maxTimestampAndOffsetSoFar`: learned by one scan of the headers
    /// on first use, kept up to date by appends, forgotten by truncation.
    largest: OnceLock<Option<BatchHeader>>,
}

impl LogSegment {
    /// Base offsets of all `.log` files in `dir`, sorted. Ignores other files.
    pub(crate) fn list_base_offsets(dir: &Path) -> Result<Vec<Offset>> {
        let mut bases = Vec::new();
        for entry in fs::read_dir(dir).map_err(Error::io("list", dir))? {
            let entry = entry.map_err(Error::io("list", dir))?;
            let name = entry.file_name();
            let Some(stem) = name.to_str().and_then(|name| name.strip_suffix(LOG_SUFFIX)) else {
                continue;
            };
            if stem.len() == 20
                && stem.bytes().all(|b| b.is_ascii_digit())
                && let Ok(base) = stem.parse::<i64>()
            {
                bases.push(Offset(base));
            }
        }
        bases.sort();
        Ok(bases)
    }

    /// Creates a new, empty segment at `base_offset`, replacing any files of that name.
    pub(crate) fn create(dir: &Path, base_offset: Offset, config: &LogConfig) -> Result<Self> {
        let stem = file_stem(base_offset);
        let log_path = dir.join(format!("{stem}{LOG_SUFFIX}"));
        let log = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(&log_path)
            .map_err(Error::io("create segment", &log_path))?;
        let index_path = dir.join(format!("{stem}{INDEX_SUFFIX}"));
        let index = OffsetIndex::create(&index_path, base_offset, config.max_index_entries())?;
        Ok(LogSegment {
            base_offset,
            log_path,
            log,
            index,
            size: FilePosition::START,
            next_offset: base_offset,
            bytes_since_last_index_entry: 0,
            index_interval_bytes: config.index_interval_bytes,
            index_trusted: true,
            txn_index: TransactionIndex::create(dir, base_offset)?,
            largest: OnceLock::from(None),
        })
    }

    /// Opens an existing segment without scanning it. `next_offset` is not known until
    /// [`LogSegment::check_tail`] or [`LogSegment::recover`] runs.
    pub(crate) fn open(dir: &Path, base_offset: Offset, config: &LogConfig) -> Result<Self> {
        let stem = file_stem(base_offset);
        let log_path = dir.join(format!("{stem}{LOG_SUFFIX}"));
        let log = OpenOptions::new()
            .read(true)
            .write(true)
            .open(&log_path)
            .map_err(Error::io("open segment", &log_path))?;
        let file_len = log
            .metadata()
            .map_err(Error::io("stat segment", &log_path))?
            .len();
        let size = FilePosition(file_len.min(i32::MAX as u64) as u32);
        let index_path = dir.join(format!("{stem}{INDEX_SUFFIX}"));
        let max_entries = config.max_index_entries();
        let (index, index_trusted) =
            match OffsetIndex::open(&index_path, base_offset, max_entries, size)? {
                Some(index) => (index, true),
                None => (
                    OffsetIndex::create(&index_path, base_offset, max_entries)?,
                    false,
                ),
            };
        Ok(LogSegment {
            base_offset,
            log_path,
            log,
            index,
            size,
            next_offset: base_offset,
            bytes_since_last_index_entry: 0,
            index_interval_bytes: config.index_interval_bytes,
            index_trusted,
            txn_index: TransactionIndex::open(dir, base_offset)?,
            largest: OnceLock::new(),
        })
    }

    /// Deletes the `.log`, `.index` and `.txnindex` files of the segment at `base_offset`.
    pub(crate) fn delete_files(dir: &Path, base_offset: Offset) -> Result<()> {
        let stem = file_stem(base_offset);
        for suffix in [LOG_SUFFIX, INDEX_SUFFIX, TXN_INDEX_SUFFIX] {
            let path = dir.join(format!("{stem}{suffix}"));
            match fs::remove_file(&path) {
                Ok(()) => {}
                Err(error) if error.kind() == io::ErrorKind::NotFound => {}
                Err(error) => return Err(Error::io("delete", &path)(error)),
            }
        }
        Ok(())
    }

    /// The clean-shutdown sanity check: validates the batches after the last index entry (at
    /// most about `log.index.interval.bytes` plus one batch) and learns `next_offset`. Returns
    /// `false` when the index was unusable or the tail is bad; the caller then runs
    /// [`LogSegment::recover`].
    pub(crate) fn check_tail(&mut self) -> Result<bool> {
        if !self.index_trusted {
            return Ok(false);
        }
        let start = self.index.lookup(Offset(i64::MAX));
        let outcome = recovery::scan_batches(
            &self.log,
            &self.log_path,
            start.position,
            self.size.as_u64(),
            start.offset,
            |_, _| Ok(()),
        )?;
        if outcome.stop.is_some() || outcome.valid_end != self.size {
            return Ok(false);
        }
        self.next_offset = outcome.next_offset.max(self.base_offset);
        self.bytes_since_last_index_entry = self.size.as_usize() - start.position.as_usize();
        Ok(true)
    }

    /// Full recovery: validates every batch from the start (the first must start at the base
    /// offset, each later one where the previous ended), rebuilds the index, and truncates the
    /// file at the first bad batch.
    pub(crate) fn recover(
        &mut self,
        on_batch: &mut impl FnMut(&BatchHeader) -> Result<()>,
    ) -> Result<SegmentRecovery> {
        self.index.reset()?;
        self.bytes_since_last_index_entry = 0;
        let file_len = self
            .log
            .metadata()
            .map_err(Error::io("stat segment", &self.log_path))?
            .len();
        let index = &mut self.index;
        let bytes_since = &mut self.bytes_since_last_index_entry;
        let interval = self.index_interval_bytes;
        let outcome = recovery::scan_batches(
            &self.log,
            &self.log_path,
            FilePosition::START,
            file_len,
            self.base_offset,
            |position, header| {
                if *bytes_since > interval && !index.is_full() {
                    index.append(header.base_offset, position)?;
                    *bytes_since = 0;
                }
                *bytes_since += header.size_bytes();
                on_batch(header)
            },
        )?;
        let truncated_bytes = file_len - outcome.valid_end.as_u64();
        if truncated_bytes > 0 {
            tracing::warn!(
                segment = %self.log_path.display(),
                valid_bytes = outcome.valid_end.0,
                truncated_bytes,
                stop = ?outcome.stop,
                "truncating segment at first invalid batch"
            );
            self.log
                .set_len(outcome.valid_end.as_u64())
                .map_err(Error::io("truncate segment", &self.log_path))?;
        }
        self.size = outcome.valid_end;
        self.largest = OnceLock::new();
        self.next_offset = if outcome.batches == 0 {
            self.base_offset
        } else {
            outcome.next_offset
        };
        self.index_trusted = true;
        Ok(SegmentRecovery {
            batches: outcome.batches,
            truncated_bytes,
            stop: outcome.stop,
        })
    }

    /// Offset the segment is named after.
    pub(crate) fn base_offset(&self) -> Offset {
        self.base_offset
    }

    /// Offset after the last batch.
    pub(crate) fn next_offset(&self) -> Offset {
        self.next_offset
    }

    /// Bytes of batches in the segment.
    pub(crate) fn size(&self) -> FilePosition {
        self.size
    }

    /// Whether appending `append_bytes` more bytes whose last offset is `last_offset` needs a
    /// new segment: size limit, full index, or an offset too far from the base for the index.
    pub(crate) fn should_roll(
        &self,
        append_bytes: usize,
        last_offset: Offset,
        segment_bytes: usize,
    ) -> bool {
        if self.size.0 == 0 {
            return false;
        }
        let too_big = self.size.as_usize() + append_bytes > segment_bytes;
        let offset_overflow = last_offset.distance_from(self.base_offset) > i64::from(i32::MAX);
        too_big || self.index.is_full() || offset_overflow
    }

    /// Appends already validated batches (`headers` describe them in order, with their final
    /// offsets) at the end of the file, adding sparse index entries as Kafka does.
    pub(crate) fn append(&mut self, bytes: &[u8], headers: &[BatchHeader]) -> Result<()> {
        let Some(last) = headers.last() else {
            return Ok(());
        };
        assert!(
            headers[0].base_offset >= self.next_offset,
            "append at {} below segment next offset {}",
            headers[0].base_offset,
            self.next_offset
        );
        let end = self.size.as_usize() + bytes.len();
        assert!(
            end <= i32::MAX as usize,
            "segment would exceed i32::MAX bytes"
        );
        if let Err(error) = self.log.write_all_at(bytes, self.size.as_u64()) {
            // Cut off whatever part of the write landed, so the file holds whole batches only.
            let _ = self.log.set_len(self.size.as_u64());
            return Err(Error::io("append segment", &self.log_path)(error));
        }
        let mut position = self.size;
        for header in headers {
            if self.bytes_since_last_index_entry > self.index_interval_bytes
                && !self.index.is_full()
            {
                self.index.append(header.base_offset, position)?;
                self.bytes_since_last_index_entry = 0;
            }
            self.bytes_since_last_index_entry += header.size_bytes();
            position = FilePosition(position.0 + header.size_bytes() as u32);
        }
        debug_assert_eq!(position.as_usize(), end);
        self.size = position;
        self.next_offset = last.next_offset();
        if let Some(largest) = self.largest.get_mut() {
            for header in headers {
                if largest.is_none_or(|known| header.max_timestamp_ms > known.max_timestamp_ms) {
                    *largest = Some(*header);
                }
            }
        }
        Ok(())
    }

    /// The header of the first batch holding this segment's largest timestamp; `None` when
    /// the segment is empty. Scans the headers once, on first use.
    pub(crate) fn largest_timestamp_batch(&self) -> Result<Option<BatchHeader>> {
        if let Some(known) = self.largest.get() {
            return Ok(*known);
        }
        let mut largest: Option<BatchHeader> = None;
        let _ = self.visit_headers(self.base_offset, &mut |header| {
            if largest.is_none_or(|known| header.max_timestamp_ms > known.max_timestamp_ms) {
                largest = Some(*header);
            }
            ControlFlow::Continue(())
        })?;
        Ok(*self.largest.get_or_init(|| largest))
    }

    /// Reads the header of the stored batch at `position`, checking its framing.
    fn read_header_at(&self, position: FilePosition) -> Result<BatchHeader> {
        let available = self.size.as_usize() - position.as_usize();
        let corrupt = |defect| Error::CorruptStoredBatch {
            file: self.log_path.clone(),
            position,
            defect,
        };
        if available < HEADER_BYTES {
            return Err(corrupt(batch::BatchDefect::Truncated {
                needed: HEADER_BYTES,
                available,
            }));
        }
        let mut raw = [0u8; HEADER_BYTES];
        self.log
            .read_exact_at(&mut raw, position.as_u64())
            .map_err(Error::io("read segment", &self.log_path))?;
        let size = batch::batch_size(&raw).map_err(corrupt)?;
        if size > available {
            return Err(corrupt(batch::BatchDefect::Truncated {
                needed: size,
                available,
            }));
        }
        BatchHeader::parse(&raw).map_err(corrupt)
    }

    /// Position and header of the first batch whose last offset is `>= target`, or `None` when
    /// every batch in the segment ends before `target`.
    fn find_batch(&self, target: Offset) -> Result<Option<(FilePosition, BatchHeader)>> {
        let mut position = self.index.lookup(target).position;
        while position < self.size {
            let header = self.read_header_at(position)?;
            if header.last_offset() >= target {
                return Ok(Some((position, header)));
            }
            position = FilePosition(position.0 + header.size_bytes() as u32);
        }
        Ok(None)
    }

    /// Calls `visit` with the header of every batch whose last offset is `>= from`, in order,
    /// until it breaks; returns whether it broke. Reads headers only (one positioned read each),
    /// starting from the offset index's entry for `from`.
    pub(crate) fn visit_headers(
        &self,
        from: Offset,
        visit: &mut dyn FnMut(&BatchHeader) -> ControlFlow<()>,
    ) -> Result<ControlFlow<()>> {
        let mut position = self.index.lookup(from).position;
        while position < self.size {
            let header = self.read_header_at(position)?;
            if header.last_offset() >= from && visit(&header).is_break() {
                return Ok(ControlFlow::Break(()));
            }
            position = FilePosition(position.0 + header.size_bytes() as u32);
        }
        Ok(ControlFlow::Continue(()))
    }

    /// Reads whole batches starting with the one containing `start`: at most `max_bytes`
    /// (but the first batch regardless when `min_one_batch`), and only batches whose last offset
    /// is below `upper_bound`. Every returned batch passed its CRC check here; a corrupt batch
    /// ends the read before it, or is an error if it would be the first. `None` when no batch of
    /// this segment reaches `start`.
    pub(crate) fn read(
        &self,
        start: Offset,
        max_bytes: usize,
        upper_bound: Offset,
        min_one_batch: bool,
    ) -> Result<Option<SegmentRead>> {
        let Some((first_position, first_header)) = self.find_batch(start)? else {
            return Ok(None);
        };
        let empty = SegmentRead {
            bytes: Vec::new(),
            batches: 0,
            next_offset: start,
        };
        if first_header.last_offset() >= upper_bound {
            return Ok(Some(empty));
        }
        let remaining = self.size.as_usize() - first_position.as_usize();
        let mut want = max_bytes.min(remaining);
        if min_one_batch {
            want = want.max(first_header.size_bytes());
        }
        if want < first_header.size_bytes() {
            return Ok(Some(empty));
        }
        let mut bytes = vec![0u8; want];
        self.log
            .read_exact_at(&mut bytes, first_position.as_u64())
            .map_err(Error::io("read segment", &self.log_path))?;
        let mut end = 0;
        let mut batches = 0;
        let mut next_offset = start;
        while end < bytes.len() {
            let Ok(size) = batch::batch_size(&bytes[end..]) else {
                // Framing damage inside the window: served prefix ends here (validated below).
                if batches == 0 {
                    let defect = batch::validate_batch(&bytes[end..]).unwrap_err();
                    return Err(self.corrupt_at(first_position, end, defect));
                }
                break;
            };
            if end + size > bytes.len() {
                break;
            }
            let header = match batch::validate_batch(&bytes[end..end + size]) {
                Ok(header) => header,
                Err(defect) => {
                    tracing::error!(
                        segment = %self.log_path.display(),
                        position = first_position.as_usize() + end,
                        %defect,
                        "stored batch failed validation on read; not serving it"
                    );
                    if batches == 0 {
                        return Err(self.corrupt_at(first_position, end, defect));
                    }
                    break;
                }
            };
            if header.last_offset() >= upper_bound {
                break;
            }
            end += size;
            batches += 1;
            next_offset = header.next_offset();
        }
        bytes.truncate(end);
        Ok(Some(SegmentRead {
            bytes,
            batches,
            next_offset,
        }))
    }

    fn corrupt_at(
        &self,
        first: FilePosition,
        relative: usize,
        defect: batch::BatchDefect,
    ) -> Error {
        Error::CorruptStoredBatch {
            file: self.log_path.clone(),
            position: FilePosition(first.0 + relative as u32),
            defect,
        }
    }

    /// Removes every batch whose last offset is `>= offset` (a batch containing `offset` goes
    /// entirely). Returns the number of bytes removed.
    pub(crate) fn truncate_to(&mut self, offset: Offset) -> Result<u64> {
        let Some((position, header)) = self.find_batch(offset)? else {
            return Ok(0);
        };
        let removed = u64::from(self.size.0 - position.0);
        self.largest = OnceLock::new();
        self.log
            .set_len(position.as_u64())
            .map_err(Error::io("truncate segment", &self.log_path))?;
        self.index.truncate_to_position(position)?;
        self.txn_index.truncate_to(header.base_offset)?;
        self.size = position;
        // The first removed batch starts where the kept data ends.
        self.next_offset = if position.0 == 0 {
            self.base_offset
        } else {
            header.base_offset
        };
        self.bytes_since_last_index_entry = match self.index.last_entry() {
            Some(entry) => self.size.as_usize() - entry.position.as_usize(),
            None => self.size.as_usize(),
        };
        Ok(removed)
    }

    /// Fsyncs the `.log` and `.index` files.
    pub(crate) fn flush(&self) -> Result<()> {
        self.log
            .sync_data()
            .map_err(Error::io("fsync segment", &self.log_path))?;
        self.txn_index.flush()?;
        self.index.flush()
    }

    /// Deletes this segment's files.
    pub(crate) fn delete(self) -> Result<()> {
        let LogSegment {
            log_path,
            log,
            index,
            txn_index,
            ..
        } = self;
        txn_index.delete_file()?;
        let index_path = index.path().to_path_buf();
        drop(log);
        drop(index);
        for path in [log_path, index_path] {
            match fs::remove_file(&path) {
                Ok(()) => {}
                Err(error) if error.kind() == io::ErrorKind::NotFound => {}
                Err(error) => return Err(Error::io("delete", &path)(error)),
            }
        }
        Ok(())
    }
}
