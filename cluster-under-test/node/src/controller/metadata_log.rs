//! [`MetadataLogStore`]: the durable side of the Raft replica, in
//! `<metadata.log.dir or first log.dirs>/__cluster_metadata-0/`:
//!
//! - `00000000000000000000.log`: the entries as Kafka record batches (`entry_codec.rs`),
//!   fsynced on every append, as KRaft flushes the metadata log on every append;
//! - `<20-digit end offset>-<10-digit epoch>.checkpoint`: the latest snapshot (the image's
//!   JSON, not record batches), written temp + fsync + rename;
//! - `quorum-state`: JSON `{leaderId, leaderEpoch, votedId, data_version}` written temp +
//!   fsync + rename before any message of the same step is sent.
//!
//! Truncation and trimming below a snapshot rewrite the log file (temp + fsync + rename): both
//! are rare, and the metadata log is small. A mirror [`RaftLog`] driven by the same
//! [`LogOp`]s decides what the file holds, so the file and the Raft node never disagree.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};

use bytes::Bytes;
use logjam_raft::{Epoch, LogOp, NodeId, Offset, QuorumState, RaftLog, Snapshot, SnapshotId};
use serde::{Deserialize, Serialize};

use crate::controller::entry_codec::{decode_entries_prefix, encode_entries};

/// Directory name of the metadata partition.
pub const METADATA_DIR: &str = "__cluster_metadata-0";
const LOG_FILE: &str = "00000000000000000000.log";
const QUORUM_STATE_FILE: &str = "quorum-state";

/// A metadata log operation that failed on disk. The node stops the quorum on it: going on
/// without a durable log would break Raft's promises.
#[derive(Debug, thiserror::Error)]
#[error("metadata log {path}: {source}")]
pub struct MetadataLogError {
    /// The file.
    pub path: PathBuf,
    /// The I/O error.
    pub source: std::io::Error,
}

#[derive(Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct QuorumStateFile {
    leader_id: i32,
    leader_epoch: u32,
    voted_id: i32,
    #[serde(rename = "data_version")]
    data_version: i32,
}

/// The on-disk metadata log, quorum state and snapshot.
#[derive(Debug)]
pub struct MetadataLogStore {
    dir: PathBuf,
    file: File,
    mirror: RaftLog,
}

impl MetadataLogStore {
    /// Opens (creating) the directory and recovers: the quorum state, the latest snapshot, and
    /// the entries after it; a torn tail is cut off.
    ///
    /// # Errors
    /// [`MetadataLogError`] when the files cannot be read or written.
    pub fn open(dir: &Path) -> Result<(MetadataLogStore, QuorumState, RaftLog), MetadataLogError> {
        let io = |path: &Path| {
            let path = path.to_owned();
            move |source| MetadataLogError { path, source }
        };
        std::fs::create_dir_all(dir).map_err(io(dir))?;
        let quorum_path = dir.join(QUORUM_STATE_FILE);
        let quorum = match std::fs::read(&quorum_path) {
            Ok(bytes) => {
                let file: QuorumStateFile =
                    serde_json::from_slice(&bytes).map_err(|error| MetadataLogError {
                        path: quorum_path.clone(),
                        source: std::io::Error::other(error),
                    })?;
                QuorumState {
                    epoch: Epoch(file.leader_epoch),
                    voted_for: u32::try_from(file.voted_id).ok().map(NodeId),
                    leader_id: u32::try_from(file.leader_id).ok().map(NodeId),
                }
            }
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => QuorumState::default(),
            Err(error) => return Err(io(&quorum_path)(error)),
        };
        let mut log = RaftLog::new();
        // The newest checkpoint wins; older ones are leftovers of an interrupted cleanup.
        let mut snapshot: Option<Snapshot> = None;
        for dirent in std::fs::read_dir(dir).map_err(io(dir))? {
            let dirent = dirent.map_err(io(dir))?;
            let name = dirent.file_name().to_string_lossy().into_owned();
            let Some(id) = parse_checkpoint_name(&name) else {
                continue;
            };
            if snapshot
                .as_ref()
                .is_none_or(|s| s.id.end_offset < id.end_offset)
            {
                let data = std::fs::read(dirent.path()).map_err(io(&dirent.path()))?;
                snapshot = Some(Snapshot { id, data });
            }
        }
        if let Some(snapshot) = snapshot {
            log.apply(&LogOp::Snapshot(snapshot));
        }
        let log_path = dir.join(LOG_FILE);
        let bytes = match std::fs::read(&log_path) {
            Ok(bytes) => bytes,
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => Vec::new(),
            Err(error) => return Err(io(&log_path)(error)),
        };
        let total = bytes.len();
        let (entries, consumed) = decode_entries_prefix(Bytes::from(bytes));
        let start = log.end_offset();
        let entries: Vec<_> = entries.into_iter().filter(|e| e.offset >= start).collect();
        let contiguous = entries
            .first()
            .is_none_or(|first| first.offset == log.end_offset());
        if contiguous && !entries.is_empty() {
            log.apply(&LogOp::Append(entries));
        }
        let file = OpenOptions::new()
            .create(true)
            .append(true)
            .open(&log_path)
            .map_err(io(&log_path))?;
        let mut store = MetadataLogStore {
            dir: dir.to_owned(),
            file,
            mirror: log.clone(),
        };
        if consumed != total || !contiguous {
            tracing::warn!(
                consumed,
                total,
                "metadata log had a torn or stale tail; rewriting"
            );
            store.rewrite()?;
        }
        Ok((store, quorum, log))
    }

    /// Persists the election state: temp file, fsync, rename, fsync of the directory.
    ///
    /// # Errors
    /// [`MetadataLogError`].
    pub fn write_quorum_state(&self, quorum: &QuorumState) -> Result<(), MetadataLogError> {
        let file = QuorumStateFile {
            leader_id: quorum.leader_id.map_or(-1, |id| id.0 as i32),
            leader_epoch: quorum.epoch.0,
            voted_id: quorum.voted_for.map_or(-1, |id| id.0 as i32),
            data_version: 0,
        };
        let bytes = serde_json::to_vec(&file).expect("serializes");
        self.write_atomically(&self.dir.join(QUORUM_STATE_FILE), &bytes)
    }

    /// Applies one log operation durably (fsync before returning).
    ///
    /// # Errors
    /// [`MetadataLogError`].
    pub fn apply(&mut self, op: &LogOp) -> Result<(), MetadataLogError> {
        self.mirror.apply(op);
        match op {
            LogOp::Append(entries) => {
                let bytes = encode_entries(entries);
                let path = self.dir.join(LOG_FILE);
                self.file
                    .write_all(&bytes)
                    .and_then(|()| self.file.sync_data())
                    .map_err(|source| MetadataLogError { path, source })
            }
            LogOp::TruncateTo(_) => self.rewrite(),
            LogOp::Snapshot(snapshot) => {
                let name = checkpoint_name(snapshot.id);
                self.write_atomically(&self.dir.join(&name), &snapshot.data)?;
                self.rewrite()?;
                // Older checkpoints are superseded.
                if let Ok(dir) = std::fs::read_dir(&self.dir) {
                    for dirent in dir.flatten() {
                        let other = dirent.file_name().to_string_lossy().into_owned();
                        if other != name && parse_checkpoint_name(&other).is_some() {
                            let _ = std::fs::remove_file(dirent.path());
                        }
                    }
                }
                Ok(())
            }
        }
    }

    /// Rewrites the log file from the mirror.
    fn rewrite(&mut self) -> Result<(), MetadataLogError> {
        let path = self.dir.join(LOG_FILE);
        let bytes = encode_entries(self.mirror.entries());
        self.write_atomically(&path, &bytes)?;
        self.file = OpenOptions::new()
            .append(true)
            .open(&path)
            .map_err(|source| MetadataLogError { path, source })?;
        Ok(())
    }

    fn write_atomically(&self, path: &Path, bytes: &[u8]) -> Result<(), MetadataLogError> {
        let error = |source| MetadataLogError {
            path: path.to_owned(),
            source,
        };
        let temp = path.with_extension("tmp");
        let mut file = File::create(&temp).map_err(error)?;
        file.write_all(bytes).map_err(error)?;
        file.sync_all().map_err(error)?;
        std::fs::rename(&temp, path).map_err(error)?;
        File::open(&self.dir)
            .and_then(|dir| dir.sync_all())
            .map_err(error)
    }
}

/// `<20-digit end offset>-<10-digit epoch>.checkpoint`, as Kafka's `Snapshots.filenameFromSnapshotId`.
pub fn checkpoint_name(id: SnapshotId) -> String {
    format!("{:020}-{:010}.checkpoint", id.end_offset.0, id.epoch.0)
}

fn parse_checkpoint_name(name: &str) -> Option<SnapshotId> {
    let stem = name.strip_suffix(".checkpoint")?;
    let (offset, epoch) = stem.split_once('-')?;
    Some(SnapshotId {
        end_offset: Offset(offset.parse().ok()?),
        epoch: Epoch(epoch.parse().ok()?),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use logjam_raft::{Entry, EntryKind};

    fn entry(offset: u64, epoch: u32) -> Entry {
        Entry {
            offset: Offset(offset),
            epoch: Epoch(epoch),
            kind: EntryKind::Data(vec![offset as u8]),
        }
    }

    #[test]
    fn log_quorum_state_and_snapshot_survive_reopen() {
        let dir = tempfile::tempdir().unwrap();
        let (mut store, quorum, log) = MetadataLogStore::open(dir.path()).unwrap();
        assert_eq!(quorum, QuorumState::default());
        assert_eq!(log.end_offset(), Offset(0));
        store
            .apply(&LogOp::Append(vec![entry(0, 1), entry(1, 1), entry(2, 2)]))
            .unwrap();
        store.apply(&LogOp::TruncateTo(Offset(2))).unwrap();
        store
            .apply(&LogOp::Append(vec![entry(2, 3), entry(3, 3)]))
            .unwrap();
        let state = QuorumState {
            epoch: Epoch(3),
            voted_for: Some(NodeId(2)),
            leader_id: Some(NodeId(2)),
        };
        store.write_quorum_state(&state).unwrap();
        drop(store);
        let (mut store, quorum, log) = MetadataLogStore::open(dir.path()).unwrap();
        assert_eq!(quorum, state);
        assert_eq!(
            log.entries(),
            &[entry(0, 1), entry(1, 1), entry(2, 3), entry(3, 3)]
        );
        let snapshot = Snapshot {
            id: SnapshotId {
                end_offset: Offset(3),
                epoch: Epoch(3),
            },
            data: b"image".to_vec(),
        };
        store.apply(&LogOp::Snapshot(snapshot.clone())).unwrap();
        drop(store);
        let (_, _, log) = MetadataLogStore::open(dir.path()).unwrap();
        assert_eq!(log.snapshot(), Some(&snapshot));
        assert_eq!(log.start_offset(), Offset(3));
        assert_eq!(log.entries(), &[entry(3, 3)]);
    }
}
