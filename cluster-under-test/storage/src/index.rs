//! The sparse offset index of one segment (`<base offset>.index`): 8-byte entries of
//! (offset relative to the segment's base `u32`, file position `u32`), big-endian like Kafka's.
//! Entries are kept in memory and appended to the file with positioned writes (no mmap, so no
//! `unsafe`). The index is a hint: recovery rebuilds it from the `.log` (`segment.rs`), and a
//! file that fails [`OffsetIndex::open`]'s sanity checks is simply rebuilt.

use std::fs::{File, OpenOptions};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use crate::error::{Error, Result};
use crate::ids::{FilePosition, Offset};

/// Bytes per index entry.
pub const ENTRY_BYTES: usize = 8;

/// One index entry: the batch starting at `offset` begins at `position` in the `.log`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct IndexEntry {
    /// Base offset of an indexed batch (absolute).
    pub(crate) offset: Offset,
    /// Byte position of that batch in the segment's `.log`.
    pub(crate) position: FilePosition,
}

/// In-memory mirror of a segment's `.index` file.
#[derive(Debug)]
pub(crate) struct OffsetIndex {
    path: PathBuf,
    file: File,
    /// The segment's base offset; entries store offsets relative to it.
    base_offset: Offset,
    /// Entries in increasing offset and position order.
    entries: Vec<IndexEntry>,
    /// Capacity from `segment.index.bytes`; a full index forces a segment roll.
    max_entries: usize,
}

impl OffsetIndex {
    /// Creates an empty index file, replacing any existing one.
    pub(crate) fn create(path: &Path, base_offset: Offset, max_entries: usize) -> Result<Self> {
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(path)
            .map_err(Error::io("create index", path))?;
        Ok(OffsetIndex {
            path: path.to_path_buf(),
            file,
            base_offset,
            entries: Vec::new(),
            max_entries,
        })
    }

    /// Opens an existing index and loads its entries. Returns `None` (and leaves the file
    /// alone) when the file is missing or fails a sanity check: a partial entry, offsets or
    /// positions not strictly increasing, or a position at or past `log_size`. The caller then
    /// rebuilds it.
    pub(crate) fn open(
        path: &Path,
        base_offset: Offset,
        max_entries: usize,
        log_size: FilePosition,
    ) -> Result<Option<Self>> {
        let bytes = match std::fs::read(path) {
            Ok(bytes) => bytes,
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(error) => return Err(Error::io("read index", path)(error)),
        };
        if bytes.len() % ENTRY_BYTES != 0 {
            return Ok(None);
        }
        let mut entries: Vec<IndexEntry> = Vec::with_capacity(bytes.len() / ENTRY_BYTES);
        for raw in bytes.chunks_exact(ENTRY_BYTES) {
            let relative = u32::from_be_bytes([raw[0], raw[1], raw[2], raw[3]]);
            let position = FilePosition(u32::from_be_bytes([raw[4], raw[5], raw[6], raw[7]]));
            let entry = IndexEntry {
                offset: base_offset.plus(i64::from(relative)),
                position,
            };
            let increasing = entries
                .last()
                .is_none_or(|last| last.offset < entry.offset && last.position < entry.position);
            if !increasing || position >= log_size {
                return Ok(None);
            }
            entries.push(entry);
        }
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .open(path)
            .map_err(Error::io("open index", path))?;
        Ok(Some(OffsetIndex {
            path: path.to_path_buf(),
            file,
            base_offset,
            entries,
            max_entries,
        }))
    }

    /// Whether another entry would exceed `segment.index.bytes`.
    pub(crate) fn is_full(&self) -> bool {
        self.entries.len() >= self.max_entries
    }

    /// The newest entry, if any.
    pub(crate) fn last_entry(&self) -> Option<IndexEntry> {
        self.entries.last().copied()
    }

    /// Appends an entry for a batch starting at `offset` at `position`. Both must be beyond the
    /// last entry, and `offset` must be within `u32` of the base (the segment rolls before that).
    pub(crate) fn append(&mut self, offset: Offset, position: FilePosition) -> Result<()> {
        let relative = offset.distance_from(self.base_offset);
        assert!(
            (0..=i64::from(u32::MAX)).contains(&relative),
            "index entry offset {offset} not representable relative to base {}",
            self.base_offset
        );
        if let Some(last) = self.entries.last() {
            assert!(last.offset < offset, "index offsets must increase");
            assert!(last.position < position, "index positions must increase");
        }
        let mut raw = [0u8; ENTRY_BYTES];
        raw[..4].copy_from_slice(&(relative as u32).to_be_bytes());
        raw[4..].copy_from_slice(&position.0.to_be_bytes());
        let at = (self.entries.len() * ENTRY_BYTES) as u64;
        self.file
            .write_all_at(&raw, at)
            .map_err(Error::io("write index", &self.path))?;
        self.entries.push(IndexEntry { offset, position });
        Ok(())
    }

    /// The entry with the largest offset `<= target`, or the segment start when there is none.
    pub(crate) fn lookup(&self, target: Offset) -> IndexEntry {
        let after = self.entries.partition_point(|entry| entry.offset <= target);
        match after.checked_sub(1) {
            Some(index) => self.entries[index],
            None => IndexEntry {
                offset: self.base_offset,
                position: FilePosition::START,
            },
        }
    }

    /// Drops entries at or beyond `position` (the `.log` was truncated there).
    pub(crate) fn truncate_to_position(&mut self, position: FilePosition) -> Result<()> {
        let keep = self
            .entries
            .partition_point(|entry| entry.position < position);
        self.truncate_entries(keep)
    }

    /// Drops every entry (before a rebuild).
    pub(crate) fn reset(&mut self) -> Result<()> {
        self.truncate_entries(0)
    }

    fn truncate_entries(&mut self, keep: usize) -> Result<()> {
        self.entries.truncate(keep);
        self.file
            .set_len((keep * ENTRY_BYTES) as u64)
            .map_err(Error::io("truncate index", &self.path))
    }

    /// Fsyncs the index file.
    pub(crate) fn flush(&self) -> Result<()> {
        self.file
            .sync_data()
            .map_err(Error::io("fsync index", &self.path))
    }

    /// Where the index file lives.
    pub(crate) fn path(&self) -> &Path {
        &self.path
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lookup_finds_floor_entry_and_reload_keeps_entries() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("00000000000000000100.index");
        let mut index = OffsetIndex::create(&path, Offset(100), 10).unwrap();
        index.append(Offset(110), FilePosition(4000)).unwrap();
        index.append(Offset(130), FilePosition(8200)).unwrap();
        assert_eq!(index.lookup(Offset(105)).position, FilePosition(0));
        assert_eq!(index.lookup(Offset(110)).position, FilePosition(4000));
        assert_eq!(index.lookup(Offset(129)).position, FilePosition(4000));
        assert_eq!(index.lookup(Offset(500)).position, FilePosition(8200));
        let reloaded = OffsetIndex::open(&path, Offset(100), 10, FilePosition(9000))
            .unwrap()
            .unwrap();
        assert_eq!(reloaded.entries, index.entries);
        // An entry pointing past the log is a reason to rebuild.
        assert!(
            OffsetIndex::open(&path, Offset(100), 10, FilePosition(8200))
                .unwrap()
                .is_none()
        );
        index.truncate_to_position(FilePosition(8200)).unwrap();
        assert_eq!(std::fs::metadata(&path).unwrap().len(), 8);
    }
}
