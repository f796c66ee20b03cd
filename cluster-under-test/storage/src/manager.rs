//! `LogManager`: one log dir. Owns the partition directories in it, the three offset checkpoint
//! files, and the `.kafka_cleanshutdown` marker (with the broker epoch it carries); opens (recovering) every partition at start,
//! creates logs, drives the `log.flush.interval.ms` tick, and shuts down cleanly. Per-partition
//! work happens in `log.rs`; each `Log` sits behind its own `std::sync::Mutex`.

use std::collections::BTreeMap;
use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard, RwLock};

use crate::checkpoint::{
    LOG_START_OFFSET_CHECKPOINT, OffsetCheckpointFile, RECOVERY_POINT_CHECKPOINT,
    REPLICATION_OFFSET_CHECKPOINT,
};
use crate::clean_shutdown;
use crate::config::LogConfig;
use crate::durable;
use crate::error::{Error, Result};
use crate::ids::Offset;
use crate::log::{LoadCheckpoints, Log};
use crate::recovery::RecoveryReport;
use crate::topic_partition::TopicPartition;

pub use crate::clean_shutdown::CLEAN_SHUTDOWN_MARKER;

/// A log shared between the node's tasks. Lock it for short, non-async critical sections.
pub type SharedLog = Arc<Mutex<Log>>;

/// Locks a shared log. A poisoned lock means a panic mid-operation left the log in an unknown
/// state; continuing could serve or persist garbage, so this panics too.
pub fn lock_log(log: &SharedLog) -> MutexGuard<'_, Log> {
    log.lock().expect("log mutex poisoned by an earlier panic")
}

/// All partition logs of one log dir. See the module docs.
#[derive(Debug)]
pub struct LogManager {
    log_dir: PathBuf,
    default_config: LogConfig,
    /// Whether the marker was present at open (the previous run shut down cleanly).
    had_clean_shutdown: bool,
    /// The broker epoch the marker held, when it was present and readable.
    clean_shutdown_broker_epoch: Option<i64>,
    /// The logs, by partition. A `RwLock` so lookups from many tasks do not contend.
    logs: RwLock<BTreeMap<TopicPartition, SharedLog>>,
    /// What loading each partition found; fixed after `open`.
    recovery_reports: BTreeMap<TopicPartition, RecoveryReport>,
    recovery_point_checkpoint: OffsetCheckpointFile,
    log_start_offset_checkpoint: OffsetCheckpointFile,
    replication_offset_checkpoint: OffsetCheckpointFile,
    /// Serialises checkpoint writers: the periodic checkpointer and a shutdown can overlap, and
    /// both write through the same temporary file names.
    checkpoint_lock: Mutex<()>,
}

impl LogManager {
    /// Opens `log_dir` (creating it if missing): reads the checkpoints, notes and removes the
    /// clean-shutdown marker, and opens every `<topic>-<partition>` directory with
    /// `default_config`, recovering unclean ones from their recovery point. Directories with
    /// other names are skipped with a warning.
    ///
    /// # Errors
    ///
    /// I/O errors, malformed checkpoint files (naming file and line).
    pub fn open(log_dir: &Path, default_config: LogConfig) -> Result<LogManager> {
        fs::create_dir_all(log_dir).map_err(Error::io("create dir", log_dir))?;
        let marker = log_dir.join(CLEAN_SHUTDOWN_MARKER);
        let had_clean_shutdown = marker.exists();
        let clean_shutdown_broker_epoch = if had_clean_shutdown {
            let bytes = fs::read(&marker).map_err(Error::io("read", &marker))?;
            let epoch = clean_shutdown::decode(&bytes);
            if epoch.is_none() {
                tracing::warn!(
                    marker = %marker.display(),
                    "clean-shutdown marker holds no readable broker epoch"
                );
            }
            epoch
        } else {
            None
        };
        let recovery_point_checkpoint =
            OffsetCheckpointFile::new(log_dir.join(RECOVERY_POINT_CHECKPOINT));
        let log_start_offset_checkpoint =
            OffsetCheckpointFile::new(log_dir.join(LOG_START_OFFSET_CHECKPOINT));
        let replication_offset_checkpoint =
            OffsetCheckpointFile::new(log_dir.join(REPLICATION_OFFSET_CHECKPOINT));
        let recovery_points = recovery_point_checkpoint.read()?;
        let log_starts = log_start_offset_checkpoint.read()?;
        let high_watermarks = replication_offset_checkpoint.read()?;

        let mut logs = BTreeMap::new();
        let mut recovery_reports = BTreeMap::new();
        for (tp, partition_dir) in partition_dirs(log_dir)? {
            let checkpoints = LoadCheckpoints {
                clean_shutdown: had_clean_shutdown,
                recovery_point: recovery_points.get(&tp).copied().unwrap_or(Offset::ZERO),
                log_start_offset: log_starts.get(&tp).copied().unwrap_or(Offset::ZERO),
                high_watermark: high_watermarks.get(&tp).copied().unwrap_or(Offset::ZERO),
            };
            let (log, report) = Log::open(
                &partition_dir,
                tp.clone(),
                default_config.clone(),
                checkpoints,
            )?;
            recovery_reports.insert(tp.clone(), report);
            logs.insert(tp, Arc::new(Mutex::new(log)));
        }
        // Remove the marker only after loading, and make the removal durable before any new
        // write: a marker resurrected by a crash would make us trust unflushed data.
        if had_clean_shutdown {
            fs::remove_file(&marker).map_err(Error::io("delete", &marker))?;
            durable::sync_dir(log_dir)?;
        }
        tracing::info!(
            log_dir = %log_dir.display(),
            partitions = logs.len(),
            had_clean_shutdown,
            ?clean_shutdown_broker_epoch,
            "log manager opened"
        );
        Ok(LogManager {
            log_dir: log_dir.to_path_buf(),
            default_config,
            had_clean_shutdown,
            clean_shutdown_broker_epoch,
            logs: RwLock::new(logs),
            recovery_reports,
            recovery_point_checkpoint,
            log_start_offset_checkpoint,
            replication_offset_checkpoint,
            checkpoint_lock: Mutex::new(()),
        })
    }

    /// The log dir.
    pub fn log_dir(&self) -> &Path {
        &self.log_dir
    }

    /// The configuration used for logs opened at start.
    pub fn default_config(&self) -> &LogConfig {
        &self.default_config
    }

    /// Whether the previous run left the clean-shutdown marker.
    pub fn had_clean_shutdown(&self) -> bool {
        self.had_clean_shutdown
    }

    /// The broker epoch the previous run's clean-shutdown marker held (Kafka's
    /// `readBrokerEpochFromCleanShutdownFiles`): `None` after a crash, or when the marker was
    /// unreadable. The broker sends it as `PreviousBrokerEpoch` (-1 for `None`).
    pub fn clean_shutdown_broker_epoch(&self) -> Option<i64> {
        self.clean_shutdown_broker_epoch
    }

    /// What loading each partition found at `open`.
    pub fn recovery_reports(&self) -> &BTreeMap<TopicPartition, RecoveryReport> {
        &self.recovery_reports
    }

    /// The recovery report of one partition loaded at `open`.
    pub fn recovery_report(&self, tp: &TopicPartition) -> Option<&RecoveryReport> {
        self.recovery_reports.get(tp)
    }

    /// Creates a new, empty log for `tp`.
    ///
    /// # Errors
    ///
    /// [`Error::LogAlreadyExists`] if the partition already has a log; I/O errors.
    pub fn create_log(&self, tp: TopicPartition, config: LogConfig) -> Result<SharedLog> {
        let mut logs = self.logs.write().expect("log map lock poisoned");
        if logs.contains_key(&tp) {
            return Err(Error::LogAlreadyExists { tp });
        }
        let partition_dir = self.log_dir.join(tp.dir_name());
        if partition_dir.exists() {
            return Err(Error::LogAlreadyExists { tp });
        }
        let (log, _) = Log::open(&partition_dir, tp.clone(), config, LoadCheckpoints::NEW)?;
        durable::sync_dir(&self.log_dir)?;
        let log = Arc::new(Mutex::new(log));
        logs.insert(tp, Arc::clone(&log));
        Ok(log)
    }

    /// Deletes the log of `tp` and its directory. Returns whether it existed.
    ///
    /// # Errors
    ///
    /// I/O errors.
    pub fn delete_log(&self, tp: &TopicPartition) -> Result<bool> {
        let removed = self.logs.write().expect("log map lock poisoned").remove(tp);
        let Some(log) = removed else {
            return Ok(false);
        };
        let dir = lock_log(&log).dir().to_path_buf();
        match fs::remove_dir_all(&dir) {
            Ok(()) => {}
            Err(error) if error.kind() == io::ErrorKind::NotFound => {}
            Err(error) => return Err(Error::io("delete dir", &dir)(error)),
        }
        durable::sync_dir(&self.log_dir)?;
        Ok(true)
    }

    /// The log of `tp`, if any.
    pub fn log(&self, tp: &TopicPartition) -> Option<SharedLog> {
        self.logs
            .read()
            .expect("log map lock poisoned")
            .get(tp)
            .cloned()
    }

    /// All logs, in partition order.
    pub fn logs(&self) -> Vec<(TopicPartition, SharedLog)> {
        self.logs
            .read()
            .expect("log map lock poisoned")
            .iter()
            .map(|(tp, log)| (tp.clone(), Arc::clone(log)))
            .collect()
    }

    /// Writes the three offset checkpoints (recovery point, log start offset, high watermark)
    /// for every log, each atomically.
    ///
    /// # Errors
    ///
    /// I/O errors.
    pub fn checkpoint(&self) -> Result<()> {
        let _writing = self
            .checkpoint_lock
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        let mut recovery_points = BTreeMap::new();
        let mut log_starts = BTreeMap::new();
        let mut high_watermarks = BTreeMap::new();
        for (tp, log) in self.logs() {
            let log = lock_log(&log);
            recovery_points.insert(tp.clone(), log.recovery_point());
            log_starts.insert(tp.clone(), log.log_start_offset());
            high_watermarks.insert(tp, log.high_watermark());
        }
        self.recovery_point_checkpoint.write(&recovery_points)?;
        self.log_start_offset_checkpoint.write(&log_starts)?;
        self.replication_offset_checkpoint.write(&high_watermarks)
    }

    /// The `log.flush.interval.ms` scheduler tick: flushes every log whose last flush is at
    /// least its interval old. Returns how many logs were flushed.
    ///
    /// # Errors
    ///
    /// The first I/O error; logs after it are not flushed in this tick.
    pub fn flush_due(&self, now_ms: i64) -> Result<usize> {
        let mut flushed = 0;
        for (_, log) in self.logs() {
            if lock_log(&log).flush_if_due(now_ms)? {
                flushed += 1;
            }
        }
        Ok(flushed)
    }

    /// Clean shutdown with no broker epoch to record (-1): see
    /// [`LogManager::shutdown_with_broker_epoch`].
    ///
    /// # Errors
    ///
    /// I/O errors; the marker is then not written, so the next start recovers.
    pub fn shutdown(&self) -> Result<()> {
        self.shutdown_with_broker_epoch(-1)
    }

    /// Clean shutdown: fsyncs every log, writes the checkpoints, then writes (and fsyncs) the
    /// clean-shutdown marker holding `broker_epoch`, so the next open skips full scans and the
    /// next registration can prove this shutdown was clean. Nothing may be appended after this
    /// returns.
    ///
    /// # Errors
    ///
    /// I/O errors; the marker is then not written, so the next start recovers.
    pub fn shutdown_with_broker_epoch(&self, broker_epoch: i64) -> Result<()> {
        for (_, log) in self.logs() {
            // Flush, then the producer snapshot at the log end (Kafka's close), so the next
            // open replays nothing.
            lock_log(&log).take_producer_snapshot()?;
        }
        self.checkpoint()?;
        let marker = self.log_dir.join(CLEAN_SHUTDOWN_MARKER);
        durable::replace_file(&marker, &clean_shutdown::encode(broker_epoch))?;
        tracing::info!(
            log_dir = %self.log_dir.display(),
            broker_epoch,
            "log manager shut down cleanly"
        );
        Ok(())
    }
}

/// The partition directories of a log dir, skipping files and non-partition names.
fn partition_dirs(log_dir: &Path) -> Result<Vec<(TopicPartition, PathBuf)>> {
    let mut dirs = Vec::new();
    for entry in fs::read_dir(log_dir).map_err(Error::io("list", log_dir))? {
        let entry = entry.map_err(Error::io("list", log_dir))?;
        let path = entry.path();
        if !entry
            .file_type()
            .map_err(Error::io("stat", &path))?
            .is_dir()
        {
            continue;
        }
        let name = entry.file_name();
        match name.to_str().map(TopicPartition::from_dir_name) {
            Some(Ok(tp)) => dirs.push((tp, path)),
            _ => {
                tracing::warn!(path = %path.display(), "skipping directory that is not <topic>-<partition>")
            }
        }
    }
    dirs.sort();
    Ok(dirs)
}
