//! The aborted-transaction index, `<base offset>.txnindex` beside each segment (Kafka's
//! `TransactionIndex`): one 34-byte entry per transaction whose ABORT marker is in the segment,
//! in marker order, so a read_committed fetch can be told which producers' records to skip.
//!
//! ```text
//! entry: Version i16 = 0 | ProducerId i64 | FirstOffset i64 | LastOffset i64 (the marker)
//!        | LastStableOffset i64 (the LSO when the transaction completed)
//! ```
//!
//! The entries are kept in memory and appended to the file (created on the first entry, as
//! Kafka does). A torn tail (a length not a multiple of 34) or an entry of another version is
//! cut at open: the producer-state replay after a crash writes the entries again.

use std::cell::Cell;
use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};

use crate::error::{Error, Result};
use crate::ids::Offset;
use crate::producer_state::ProducerId;

/// Suffix of aborted-transaction index files.
pub const TXN_INDEX_SUFFIX: &str = ".txnindex";

/// Bytes of one entry.
pub const ENTRY_BYTES: usize = 2 + 8 + 8 + 8 + 8;

/// The only entry version.
const VERSION: i16 = 0;

/// An aborted transaction (`AbortedTxn`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AbortedTxn {
    /// Whose transaction.
    pub producer_id: ProducerId,
    /// Its first record.
    pub first_offset: Offset,
    /// Its ABORT marker.
    pub last_offset: Offset,
    /// The partition's last stable offset when it completed.
    pub last_stable_offset: Offset,
}

impl AbortedTxn {
    /// The entry's bytes.
    pub fn encode(&self) -> [u8; ENTRY_BYTES] {
        let mut out = [0u8; ENTRY_BYTES];
        out[0..2].copy_from_slice(&VERSION.to_be_bytes());
        out[2..10].copy_from_slice(&self.producer_id.0.to_be_bytes());
        out[10..18].copy_from_slice(&self.first_offset.0.to_be_bytes());
        out[18..26].copy_from_slice(&self.last_offset.0.to_be_bytes());
        out[26..34].copy_from_slice(&self.last_stable_offset.0.to_be_bytes());
        out
    }

    /// An entry from its bytes; `None` for another version.
    pub fn decode(bytes: &[u8; ENTRY_BYTES]) -> Option<AbortedTxn> {
        let i64_at = |at: usize| i64::from_be_bytes(bytes[at..at + 8].try_into().expect("8 bytes"));
        (i16::from_be_bytes([bytes[0], bytes[1]]) == VERSION).then(|| AbortedTxn {
            producer_id: ProducerId(i64_at(2)),
            first_offset: Offset(i64_at(10)),
            last_offset: Offset(i64_at(18)),
            last_stable_offset: Offset(i64_at(26)),
        })
    }
}

/// One segment's aborted-transaction index.
#[derive(Debug)]
pub(crate) struct TransactionIndex {
    path: PathBuf,
    entries: Vec<AbortedTxn>,
    /// How many of the file's bytes are known durable (read at open, or fsynced since): what
    /// a power loss keeps. Crash tests cut the file to it to drop the unsynced writes.
    synced_len: Cell<u64>,
}

impl TransactionIndex {
    /// The path of the index of the segment at `base_offset`.
    pub(crate) fn path_for(dir: &Path, base_offset: Offset) -> PathBuf {
        dir.join(format!(
            "{}{TXN_INDEX_SUFFIX}",
            crate::segment::file_stem(base_offset)
        ))
    }

    /// An empty index, removing a leftover file of the same name.
    ///
    /// # Errors
    /// I/O errors deleting.
    pub(crate) fn create(dir: &Path, base_offset: Offset) -> Result<TransactionIndex> {
        let index = TransactionIndex {
            path: Self::path_for(dir, base_offset),
            entries: Vec::new(),
            synced_len: Cell::new(0),
        };
        index.delete_file()?;
        Ok(index)
    }

    /// Loads the index file if there is one, cutting a torn or unreadable tail.
    ///
    /// # Errors
    /// I/O errors.
    pub(crate) fn open(dir: &Path, base_offset: Offset) -> Result<TransactionIndex> {
        let path = Self::path_for(dir, base_offset);
        let bytes = match fs::read(&path) {
            Ok(bytes) => bytes,
            Err(error) if error.kind() == io::ErrorKind::NotFound => Vec::new(),
            Err(error) => return Err(Error::io("read", &path)(error)),
        };
        let entries: Vec<AbortedTxn> = bytes
            .chunks_exact(ENTRY_BYTES)
            .map_while(|chunk| AbortedTxn::decode(chunk.try_into().expect("chunk size")))
            .collect();
        let index = TransactionIndex {
            path,
            entries,
            synced_len: Cell::new(bytes.len() as u64),
        };
        if index.entries.len() * ENTRY_BYTES != bytes.len() {
            tracing::warn!(path = %index.path.display(), len = bytes.len(),
                kept = index.entries.len(), "cutting a torn aborted-transaction index");
            index.cut_file()?;
        }
        Ok(index)
    }

    /// The entries, in marker order.
    pub(crate) fn entries(&self) -> &[AbortedTxn] {
        &self.entries
    }

    /// Appends an entry (the file is flushed with the segment, or by [`Self::flush`] before
    /// anything durable depends on it).
    ///
    /// # Errors
    /// I/O errors writing.
    pub(crate) fn append(&mut self, entry: AbortedTxn) -> Result<()> {
        let mut file = OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.path)
            .map_err(Error::io("open", &self.path))?;
        file.write_all(&entry.encode())
            .map_err(Error::io("write", &self.path))?;
        self.entries.push(entry);
        Ok(())
    }

    /// Removes every entry whose marker is at or after `offset`.
    ///
    /// # Errors
    /// I/O errors rewriting the file.
    pub(crate) fn truncate_to(&mut self, offset: Offset) -> Result<()> {
        let kept = self
            .entries
            .partition_point(|entry| entry.last_offset < offset);
        if kept == self.entries.len() {
            return Ok(());
        }
        self.entries.truncate(kept);
        self.cut_file()
    }

    /// Fsyncs the file, if there is one.
    ///
    /// # Errors
    /// I/O errors.
    pub(crate) fn flush(&self) -> Result<()> {
        match File::open(&self.path) {
            Ok(file) => {
                file.sync_data().map_err(Error::io("fsync", &self.path))?;
                let len = file
                    .metadata()
                    .map_err(Error::io("stat", &self.path))?
                    .len();
                self.synced_len.set(len);
                Ok(())
            }
            Err(error) if error.kind() == io::ErrorKind::NotFound => Ok(()),
            Err(error) => Err(Error::io("open", &self.path)(error)),
        }
    }

    /// Deletes the file.
    ///
    /// # Errors
    /// I/O errors other than the file being absent.
    pub(crate) fn delete_file(&self) -> Result<()> {
        match fs::remove_file(&self.path) {
            Ok(()) => Ok(()),
            Err(error) if error.kind() == io::ErrorKind::NotFound => Ok(()),
            Err(error) => Err(Error::io("delete", &self.path)(error)),
        }
    }

    /// The bytes of the file known durable (see the field).
    pub(crate) fn synced_len(&self) -> u64 {
        self.synced_len.get()
    }

    /// Cuts the file in place to the kept entries and fsyncs it (an empty index deletes it,
    /// durably): the kept entries, already in the file, are never rewritten, so a crash
    /// during the cut cannot lose them (a truncate-then-write could).
    fn cut_file(&self) -> Result<()> {
        if self.entries.is_empty() {
            self.delete_file()?;
            if let Some(dir) = self.path.parent() {
                crate::durable::sync_dir(dir)?;
            }
            self.synced_len.set(0);
            return Ok(());
        }
        let len = (self.entries.len() * ENTRY_BYTES) as u64;
        let file = OpenOptions::new()
            .write(true)
            .open(&self.path)
            .map_err(Error::io("open", &self.path))?;
        file.set_len(len)
            .map_err(Error::io("truncate", &self.path))?;
        file.sync_data().map_err(Error::io("fsync", &self.path))?;
        self.synced_len.set(len);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn txn(pid: i64, first: i64, last: i64) -> AbortedTxn {
        AbortedTxn {
            producer_id: ProducerId(pid),
            first_offset: Offset(first),
            last_offset: Offset(last),
            last_stable_offset: Offset(last + 1),
        }
    }

    #[test]
    fn entries_are_34_bytes_in_kafkas_order() {
        let bytes = txn(0x0102, 3, 9).encode();
        assert_eq!(bytes.len(), 34);
        assert_eq!(&bytes[..2], &[0, 0]);
        assert_eq!(&bytes[2..10], &0x0102i64.to_be_bytes());
        assert_eq!(&bytes[26..], &10i64.to_be_bytes());
        assert_eq!(AbortedTxn::decode(&bytes), Some(txn(0x0102, 3, 9)));
    }

    #[test]
    fn reopen_truncate_and_torn_tail() {
        let dir = tempfile::tempdir().unwrap();
        let mut index = TransactionIndex::create(dir.path(), Offset(0)).unwrap();
        for entry in [txn(1, 0, 4), txn(2, 2, 8), txn(3, 9, 12)] {
            index.append(entry).unwrap();
        }
        let reopened = TransactionIndex::open(dir.path(), Offset(0)).unwrap();
        assert_eq!(reopened.entries().len(), 3);

        assert_eq!(
            index.synced_len(),
            0,
            "appends are not durable until flushed"
        );
        index.truncate_to(Offset(8)).unwrap();
        assert_eq!(index.entries(), &[txn(1, 0, 4)]);
        assert_eq!(
            index.synced_len(),
            ENTRY_BYTES as u64,
            "the cut is fsynced in place"
        );
        let reopened = TransactionIndex::open(dir.path(), Offset(0)).unwrap();
        assert_eq!(reopened.entries(), &[txn(1, 0, 4)]);

        // A torn append: half an entry after the first.
        let path = TransactionIndex::path_for(dir.path(), Offset(0));
        let mut bytes = fs::read(&path).unwrap();
        bytes.extend_from_slice(&txn(5, 5, 5).encode()[..17]);
        fs::write(&path, &bytes).unwrap();
        let reopened = TransactionIndex::open(dir.path(), Offset(0)).unwrap();
        assert_eq!(reopened.entries(), &[txn(1, 0, 4)]);
        assert_eq!(fs::read(&path).unwrap().len(), ENTRY_BYTES);

        index.truncate_to(Offset(0)).unwrap();
        assert!(!path.exists());
    }
}
