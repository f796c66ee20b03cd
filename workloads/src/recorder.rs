//! The recorder: the one writer of a run's `history.jsonl`. Clients and the nemesis call it
//! from any task; each op is stamped with the next index and the time since the run started
//! and written whole, so a harness killed mid-run leaves a readable prefix and the order of
//! lines is the order of events.
//!
//! Group flush: a call flushes the file before it returns unless another call is already
//! waiting for the lock, which then writes its line and flushes both (or passes the flush on
//! in turn). So the file holds every line of every call that returned once the calls pause,
//! and a burst of concurrent calls costs one write to the OS instead of one per line.
//!
//! A `std::sync::Mutex` (not tokio's): the critical section is one short buffered write and
//! never awaits.

use std::fs::File;
use std::io::BufWriter;
use std::path::Path;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::Instant;

use logjam_history::{Function, Header, HistoryWriter, Op, OpIndex, OpType, OpValue, Process};

/// Why the history could not be written; a run stops on it (a history with holes is worse
/// than none).
#[derive(Debug, thiserror::Error)]
pub enum RecordError {
    /// Creating or writing the file failed.
    #[error("cannot write the history: {0}")]
    Write(#[from] logjam_history::WriteError),
    /// Creating the file failed.
    #[error("cannot create {path}: {source}")]
    Create {
        /// The file.
        path: String,
        /// The I/O error.
        source: std::io::Error,
    },
}

/// Shared by every client task and the nemesis of one run.
pub struct Recorder {
    start: Instant,
    writer: Mutex<HistoryWriter<BufWriter<File>>>,
    /// Calls waiting for the writer's lock: while one is, the holder leaves the flush to it.
    waiting: AtomicUsize,
    /// Client completions so far by type (ok, fail, info), for the live progress line.
    completions: [AtomicU64; 3],
}

/// Client completions recorded so far.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Completions {
    /// `ok` completions.
    pub ok: u64,
    /// `fail` completions.
    pub fail: u64,
    /// `info` completions.
    pub info: u64,
}

impl std::fmt::Debug for Recorder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Recorder")
            .field("start", &self.start)
            .finish_non_exhaustive()
    }
}

impl Recorder {
    /// Creates `path` and writes the header; op time 0 is now.
    ///
    /// # Errors
    /// [`RecordError`] when the file cannot be created or written.
    pub fn create(path: &Path, header: &Header) -> Result<Recorder, RecordError> {
        let file = File::create(path).map_err(|source| RecordError::Create {
            path: path.display().to_string(),
            source,
        })?;
        let writer = HistoryWriter::new(BufWriter::new(file), header)?;
        Ok(Recorder {
            start: Instant::now(),
            writer: Mutex::new(writer),
            waiting: AtomicUsize::new(0),
            completions: Default::default(),
        })
    }

    /// Nanoseconds since the run started.
    pub fn elapsed_ns(&self) -> u64 {
        u64::try_from(self.start.elapsed().as_nanos()).unwrap_or(u64::MAX)
    }

    /// Client completions recorded so far, by type.
    pub fn completions(&self) -> Completions {
        let load = |slot: usize| self.completions[slot].load(Ordering::Relaxed);
        Completions {
            ok: load(0),
            fail: load(1),
            info: load(2),
        }
    }

    /// Records one op and returns its index.
    ///
    /// # Errors
    /// [`RecordError`] when the line cannot be written.
    pub fn record(
        &self,
        process: Process,
        op_type: OpType,
        f: Function,
        value: OpValue,
        error: Option<serde_json::Value>,
    ) -> Result<OpIndex, RecordError> {
        self.waiting.fetch_add(1, Ordering::SeqCst);
        let mut writer = self
            .writer
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        self.waiting.fetch_sub(1, Ordering::SeqCst);
        // The time is taken under the lock so times never decrease along the file.
        let op = Op {
            index: writer.next_index(),
            time_ns: self.elapsed_ns(),
            process,
            op_type,
            f,
            value,
            error,
        };
        writer.append_op(&op)?;
        // A waiter increments `waiting` before it blocks on the lock we hold, so either we
        // see it here and it flushes after its own line, or we flush now.
        if self.waiting.load(Ordering::SeqCst) == 0 {
            writer.flush()?;
        }
        if let Process::Client(_) = process {
            let slot = match op_type {
                OpType::Ok => Some(0),
                OpType::Fail => Some(1),
                OpType::Info => Some(2),
                OpType::Invoke => None,
            };
            if let Some(slot) = slot {
                self.completions[slot].fetch_add(1, Ordering::Relaxed);
            }
        }
        Ok(op.index)
    }
}

#[cfg(test)]
mod tests {
    use logjam_history::{HistoryReader, Key, MicroOp, ProcessId, Value};

    use super::*;

    #[test]
    fn ops_are_numbered_timed_and_readable_back() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("history.jsonl");
        let recorder =
            Recorder::create(&path, &Header::new("queue", 7, "2026-11-29T00:00:00Z")).unwrap();
        let send = OpValue::MicroOps(vec![MicroOp::Send {
            key: Key(1),
            value: Value(2),
            offset: None,
        }]);
        let process = Process::Client(ProcessId(0));
        recorder
            .record(process, OpType::Invoke, Function::Send, send.clone(), None)
            .unwrap();
        recorder
            .record(
                process,
                OpType::Info,
                Function::Send,
                send,
                Some("timeout".into()),
            )
            .unwrap();
        recorder
            .record(
                Process::Nemesis,
                OpType::Info,
                Function::from_name("kill"),
                OpValue::Json(serde_json::json!({"targets": ["n1"]})),
                None,
            )
            .unwrap();
        let reader = HistoryReader::open(&path).unwrap();
        assert_eq!(reader.header().seed, 7);
        let ops: Vec<Op> = reader.map(|op| op.unwrap()).collect();
        assert_eq!(ops.len(), 3);
        assert!(
            ops.windows(2)
                .all(|pair| pair[0].index < pair[1].index && pair[0].time_ns <= pair[1].time_ns)
        );
        assert_eq!(ops[1].error, Some(serde_json::json!("timeout")));
        assert_eq!(
            recorder.completions(),
            Completions {
                ok: 0,
                fail: 0,
                info: 1
            }
        );
    }
}
