//! The producer-state snapshot file, `<20-digit offset>.snapshot` (kafka-semantics.md §7.4):
//! Kafka's version-1 layout, its file names, and reading and writing one file. The offset in
//! the name is exclusive: the snapshot holds the state of every batch below it.
//!
//! ```text
//! Version i16 = 1 | Crc u32 (CRC-32C of every byte after it) | Count i32 | Count entries:
//!   ProducerId i64, Epoch i16, LastSequence i32, LastOffset i64, OffsetDelta i32,
//!   Timestamp i64, CoordinatorEpoch i32, CurrentTxnFirstOffset i64 (-1: none)
//! ```
//!
//! Like Kafka, an entry carries only the producer's **last** batch (LastOffset -1 when it has
//! none): after loading a snapshot the dedupe window is one batch until later batches are
//! replayed. Writes go through a temporary file, fsync and rename; a file that is short, of
//! another version, of the wrong length or failing its CRC is a [`SnapshotDefect`], never a
//! panic.

use std::collections::VecDeque;
use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use crate::durable;
use crate::error::{Error, Result};
use crate::ids::Offset;
use crate::producer_state::{
    BatchMetadata, ProducerEntry, ProducerEpoch, ProducerId, ProducerStateTable, Sequence,
};

/// Suffix of producer-state snapshot files.
pub const SNAPSHOT_SUFFIX: &str = ".snapshot";

/// The only snapshot version Kafka writes and reads.
pub const SNAPSHOT_VERSION: i16 = 1;

/// Bytes before the CRC-covered part: version and CRC.
const CRC_COVERED_FROM: usize = 2 + 4;
/// Bytes before the entries: version, CRC and count.
const HEADER_BYTES: usize = CRC_COVERED_FROM + 4;
/// Bytes of one entry.
const ENTRY_BYTES: usize = 8 + 2 + 4 + 8 + 4 + 8 + 4 + 8;

/// Why a snapshot file cannot be used; the file is then ignored (and deleted) and an older
/// snapshot or a log replay takes its place.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SnapshotDefect {
    /// Shorter than the header.
    #[error("{len} bytes, shorter than the {HEADER_BYTES}-byte header")]
    TooShort {
        /// The file's length.
        len: usize,
    },
    /// A version this code does not read.
    #[error("unknown snapshot version {version}")]
    UnknownVersion {
        /// The version found.
        version: i16,
    },
    /// The stored CRC does not match the content (a torn or corrupted write).
    #[error("CRC mismatch: stored {stored:#010x}, computed {computed:#010x}")]
    CrcMismatch {
        /// The CRC in the file.
        stored: u32,
        /// The CRC of the bytes after it.
        computed: u32,
    },
    /// The length does not match the entry count.
    #[error("{len} bytes do not hold {count} entries")]
    WrongLength {
        /// The file's length.
        len: usize,
        /// The entry count in the header.
        count: i32,
    },
}

/// The file name of the snapshot at `offset`: the offset in 20 digits, like a segment's.
pub fn file_name(offset: Offset) -> String {
    format!("{}{SNAPSHOT_SUFFIX}", crate::segment::file_stem(offset))
}

/// The offset a snapshot file name stands for, if it is one (`00000000000000001234.snapshot`).
pub fn offset_from_file_name(name: &str) -> Option<Offset> {
    let stem = name.strip_suffix(SNAPSHOT_SUFFIX)?;
    if stem.len() != 20 || !stem.bytes().all(|byte| byte.is_ascii_digit()) {
        return None;
    }
    stem.parse().ok().map(Offset)
}

/// Encodes `table` in Kafka's version-1 layout, producers by ascending id.
pub fn encode(table: &ProducerStateTable) -> Vec<u8> {
    let entries = table.entries();
    let mut bytes = Vec::with_capacity(HEADER_BYTES + entries.len() * ENTRY_BYTES);
    bytes.extend_from_slice(&SNAPSHOT_VERSION.to_be_bytes());
    bytes.extend_from_slice(&[0; 4]);
    let count = i32::try_from(entries.len()).expect("fewer than 2^31 producers");
    bytes.extend_from_slice(&count.to_be_bytes());
    for (producer_id, entry) in entries {
        let last = entry.batches.back();
        bytes.extend_from_slice(&producer_id.0.to_be_bytes());
        bytes.extend_from_slice(&entry.epoch.0.to_be_bytes());
        bytes.extend_from_slice(&last.map_or(-1, |batch| batch.last_sequence.0).to_be_bytes());
        bytes.extend_from_slice(&last.map_or(-1, |batch| batch.last_offset.0).to_be_bytes());
        let offset_delta = last.map_or(0, |batch| {
            i32::try_from(batch.last_offset.distance_from(batch.first_offset))
                .expect("a batch spans fewer than 2^31 offsets")
        });
        bytes.extend_from_slice(&offset_delta.to_be_bytes());
        bytes.extend_from_slice(&entry.last_timestamp_ms.to_be_bytes());
        bytes.extend_from_slice(&entry.coordinator_epoch.to_be_bytes());
        let txn_first = entry.current_txn_first_offset.map_or(-1, |offset| offset.0);
        bytes.extend_from_slice(&txn_first.to_be_bytes());
    }
    let crc = crc32c::crc32c(&bytes[CRC_COVERED_FROM..]);
    bytes[2..CRC_COVERED_FROM].copy_from_slice(&crc.to_be_bytes());
    bytes
}

/// Decodes a snapshot written by [`encode`] (or by Kafka).
///
/// # Errors
/// A [`SnapshotDefect`] naming what is wrong.
pub fn decode(bytes: &[u8]) -> Result<ProducerStateTable, SnapshotDefect> {
    if bytes.len() < HEADER_BYTES {
        return Err(SnapshotDefect::TooShort { len: bytes.len() });
    }
    let mut reader = Reader(bytes);
    let version = reader.i16();
    if version != SNAPSHOT_VERSION {
        return Err(SnapshotDefect::UnknownVersion { version });
    }
    let stored = reader.i32() as u32;
    let computed = crc32c::crc32c(&bytes[CRC_COVERED_FROM..]);
    if stored != computed {
        return Err(SnapshotDefect::CrcMismatch { stored, computed });
    }
    let count = reader.i32();
    let expected_len = usize::try_from(count)
        .ok()
        .and_then(|count| count.checked_mul(ENTRY_BYTES))
        .and_then(|entries| entries.checked_add(HEADER_BYTES));
    if expected_len != Some(bytes.len()) {
        return Err(SnapshotDefect::WrongLength {
            len: bytes.len(),
            count,
        });
    }
    let mut table = ProducerStateTable::new();
    for _ in 0..count {
        let producer_id = ProducerId(reader.i64());
        let epoch = ProducerEpoch(reader.i16());
        let last_sequence = Sequence(reader.i32());
        let last_offset = Offset(reader.i64());
        let offset_delta = reader.i32();
        let timestamp_ms = reader.i64();
        let coordinator_epoch = reader.i32();
        let txn_first = reader.i64();
        let mut batches = VecDeque::new();
        if last_offset.0 >= 0 {
            batches.push_back(BatchMetadata {
                first_sequence: last_sequence.minus(offset_delta),
                last_sequence,
                first_offset: last_offset.plus(-i64::from(offset_delta)),
                last_offset,
                timestamp_ms,
            });
        }
        let entry = ProducerEntry {
            epoch,
            batches,
            coordinator_epoch,
            current_txn_first_offset: (txn_first >= 0).then_some(Offset(txn_first)),
            last_timestamp_ms: timestamp_ms,
        };
        table.insert(producer_id, entry);
    }
    Ok(table)
}

/// Big-endian reads from a buffer whose length was checked first.
struct Reader<'a>(&'a [u8]);

impl Reader<'_> {
    fn take<const N: usize>(&mut self) -> [u8; N] {
        let (head, tail) = self.0.split_at(N);
        self.0 = tail;
        head.try_into().expect("split_at gives N bytes")
    }

    fn i16(&mut self) -> i16 {
        i16::from_be_bytes(self.take())
    }

    fn i32(&mut self) -> i32 {
        i32::from_be_bytes(self.take())
    }

    fn i64(&mut self) -> i64 {
        i64::from_be_bytes(self.take())
    }
}

/// The snapshot files in a partition directory, by offset (other names are ignored).
///
/// # Errors
/// I/O errors listing the directory.
pub fn list(dir: &Path) -> Result<Vec<Offset>> {
    let mut offsets = Vec::new();
    for entry in fs::read_dir(dir).map_err(Error::io("list", dir))? {
        let entry = entry.map_err(Error::io("list", dir))?;
        if let Some(offset) = entry.file_name().to_str().and_then(offset_from_file_name) {
            offsets.push(offset);
        }
    }
    offsets.sort();
    Ok(offsets)
}

/// The path of the snapshot at `offset` in `dir`.
pub fn path(dir: &Path, offset: Offset) -> PathBuf {
    dir.join(file_name(offset))
}

/// Writes the snapshot of `table` at `offset` atomically (temporary file, fsync, rename, fsync
/// the directory).
///
/// # Errors
/// I/O errors; an older snapshot then stays the latest.
pub fn write(dir: &Path, offset: Offset, table: &ProducerStateTable) -> Result<()> {
    durable::replace_file(&path(dir, offset), &encode(table))
}

/// Reads the snapshot at `offset`: `Ok(Err(defect))` when the file is unusable.
///
/// # Errors
/// I/O errors reading it.
pub fn read(dir: &Path, offset: Offset) -> Result<Result<ProducerStateTable, SnapshotDefect>> {
    let path = path(dir, offset);
    let bytes = fs::read(&path).map_err(Error::io("read", &path))?;
    Ok(decode(&bytes))
}

/// Deletes the snapshot at `offset` if it exists.
///
/// # Errors
/// I/O errors other than the file being gone already.
pub fn delete(dir: &Path, offset: Offset) -> Result<()> {
    let path = path(dir, offset);
    match fs::remove_file(&path) {
        Ok(()) => Ok(()),
        Err(error) if error.kind() == io::ErrorKind::NotFound => Ok(()),
        Err(error) => Err(Error::io("delete", &path)(error)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn entry(epoch: i16, last: Option<(i32, i64, i32)>, txn: Option<i64>) -> ProducerEntry {
        let mut entry = ProducerEntry::new(ProducerEpoch(epoch));
        if let Some((last_sequence, last_offset, delta)) = last {
            entry.batches.push_back(BatchMetadata {
                first_sequence: Sequence(last_sequence).minus(delta),
                last_sequence: Sequence(last_sequence),
                first_offset: Offset(last_offset - i64::from(delta)),
                last_offset: Offset(last_offset),
                timestamp_ms: 1_700_000_000_000,
            });
            entry.last_timestamp_ms = 1_700_000_000_000;
        }
        entry.current_txn_first_offset = txn.map(Offset);
        entry.coordinator_epoch = if txn.is_some() { 3 } else { -1 };
        entry
    }

    #[test]
    fn names_are_kafkas() {
        assert_eq!(file_name(Offset(1234)), "00000000000000001234.snapshot");
        assert_eq!(
            offset_from_file_name("00000000000000001234.snapshot"),
            Some(Offset(1234))
        );
        assert_eq!(offset_from_file_name("1234.snapshot"), None);
        assert_eq!(offset_from_file_name("00000000000000001234.log"), None);
        assert_eq!(offset_from_file_name("0000000000000000123x.snapshot"), None);
    }

    #[test]
    fn the_layout_is_kafkas_version_1() {
        let mut table = ProducerStateTable::new();
        table.insert(ProducerId(7), entry(2, Some((9, 104, 4)), Some(100)));
        let bytes = encode(&table);
        assert_eq!(bytes.len(), 10 + 46);
        assert_eq!(&bytes[0..2], &[0, 1], "version 1");
        assert_eq!(
            u32::from_be_bytes(bytes[2..6].try_into().unwrap()),
            crc32c::crc32c(&bytes[6..])
        );
        assert_eq!(&bytes[6..10], &[0, 0, 0, 1], "one entry");
        assert_eq!(i64::from_be_bytes(bytes[10..18].try_into().unwrap()), 7);
        assert_eq!(i16::from_be_bytes(bytes[18..20].try_into().unwrap()), 2);
        assert_eq!(i32::from_be_bytes(bytes[20..24].try_into().unwrap()), 9);
        assert_eq!(i64::from_be_bytes(bytes[24..32].try_into().unwrap()), 104);
        assert_eq!(i32::from_be_bytes(bytes[32..36].try_into().unwrap()), 4);
        assert_eq!(
            i64::from_be_bytes(bytes[36..44].try_into().unwrap()),
            1_700_000_000_000
        );
        assert_eq!(i32::from_be_bytes(bytes[44..48].try_into().unwrap()), 3);
        assert_eq!(i64::from_be_bytes(bytes[48..56].try_into().unwrap()), 100);
    }

    #[test]
    fn only_the_last_batch_of_each_producer_is_kept() {
        let mut table = ProducerStateTable::new();
        let mut full = entry(0, Some((4, 4, 4)), None);
        full.batches.push_back(BatchMetadata {
            first_sequence: Sequence(5),
            last_sequence: Sequence(6),
            first_offset: Offset(10),
            last_offset: Offset(11),
            timestamp_ms: 5,
        });
        full.last_timestamp_ms = 5;
        table.insert(ProducerId(1), full.clone());
        let decoded = decode(&encode(&table)).unwrap();
        let got = decoded.entry(ProducerId(1)).unwrap();
        assert_eq!(got.batches.len(), 1);
        assert_eq!(got.batches[0], full.batches[1]);
    }

    #[test]
    fn every_defect_is_reported_not_panicked_on() {
        let mut table = ProducerStateTable::new();
        table.insert(ProducerId(1), entry(0, Some((4, 4, 4)), None));
        table.insert(ProducerId(2), entry(1, None, None));
        let good = encode(&table);
        assert!(matches!(
            decode(&good[..5]),
            Err(SnapshotDefect::TooShort { len: 5 })
        ));
        let mut other_version = good.clone();
        other_version[1] = 2;
        assert!(matches!(
            decode(&other_version),
            Err(SnapshotDefect::UnknownVersion { version: 2 })
        ));
        for cut in [HEADER_BYTES, good.len() - 1, good.len() - ENTRY_BYTES] {
            assert!(
                matches!(
                    decode(&good[..cut]),
                    Err(SnapshotDefect::CrcMismatch { .. })
                ),
                "torn at {cut}"
            );
        }
        let mut flipped = good.clone();
        flipped[30] ^= 0x10;
        assert!(matches!(
            decode(&flipped),
            Err(SnapshotDefect::CrcMismatch { .. })
        ));
        // A consistent CRC over a lying count is still refused.
        let mut lying = good[..HEADER_BYTES + ENTRY_BYTES].to_vec();
        lying[6..10].copy_from_slice(&2i32.to_be_bytes());
        let crc = crc32c::crc32c(&lying[CRC_COVERED_FROM..]);
        lying[2..6].copy_from_slice(&crc.to_be_bytes());
        assert!(matches!(
            decode(&lying),
            Err(SnapshotDefect::WrongLength { count: 2, .. })
        ));
    }

    proptest! {
        /// Whatever the table, decoding its snapshot gives back each producer's epoch, last
        /// batch, coordinator epoch, open transaction and timestamp.
        #[test]
        fn round_trip(entries in proptest::collection::btree_map(
            any::<i64>().prop_map(|id| id.abs()),
            (any::<i16>(), proptest::option::of((any::<i32>().prop_map(i32::abs), 0i64..1 << 40, 0i32..1000)),
             proptest::option::of(0i64..1 << 40)),
            0..20,
        )) {
            let mut table = ProducerStateTable::new();
            for (id, (epoch, last, txn)) in &entries {
                let last = last.map(|(seq, offset, delta)| (seq, offset + i64::from(delta), delta));
                table.insert(ProducerId(*id), entry(*epoch, last, *txn));
            }
            let decoded = decode(&encode(&table)).unwrap();
            prop_assert_eq!(decoded, table);
        }

        /// Any byte flipped anywhere in a snapshot makes it refused, never misread.
        #[test]
        fn any_flipped_byte_is_caught(position in 0usize..(HEADER_BYTES + 2 * ENTRY_BYTES), bit in 0u8..8) {
            let mut table = ProducerStateTable::new();
            table.insert(ProducerId(1), entry(0, Some((4, 4, 4)), None));
            table.insert(ProducerId(2), entry(1, Some((0, 9, 0)), Some(9)));
            let mut bytes = encode(&table);
            bytes[position] ^= 1 << bit;
            prop_assert!(decode(&bytes).is_err());
        }
    }
}
