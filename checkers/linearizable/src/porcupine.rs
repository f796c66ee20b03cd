//! Importers for Porcupine's test corpus (`checkers/linearizable/corpus/porcupine`):
//! the etcd Jepsen logs (`jepsen/etcd_NNN.log`, checked with
//! [`CasRegister`](crate::models::cas::CasRegister)), the key-value
//! histories (`kv/cNN-*.txt`, checked with
//! [`KvModel`](crate::models::kv::KvModel) or
//! [`KvMapModel`](crate::models::kv_map::KvMapModel)), and the verdict table
//! `expected.tsv`.
//!
//! This module owns parsing only; it never runs the checker. Every parse
//! error names the file and the 1-based line.
//!
//! Timestamps are line numbers: the files are event logs in real-time order
//! and only the order matters. How `:info` and `:fail` events map to
//! [`Outcome`](crate::Outcome)s is documented on each parser, and matches
//! the corpus README's description of Porcupine's own test parser.

pub mod etcd;
pub mod expected;
pub mod kv;

use std::path::{Path, PathBuf};

pub use etcd::{parse_etcd_log, read_etcd_log};
pub use expected::{ExpectedRow, parse_expected, read_expected};
pub use kv::{parse_kv_log, read_kv_log};

/// A corpus file that cannot be read or parsed.
#[derive(Debug, thiserror::Error)]
pub enum ImportError {
    /// The file could not be read.
    #[error("{}: cannot read: {source}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// The underlying error.
        source: std::io::Error,
    },
    /// A line does not have the expected shape.
    #[error("{file}:{line}: {reason}: {text:?}")]
    MalformedLine {
        /// The file (or source name).
        file: String,
        /// 1-based line number.
        line: usize,
        /// What was wrong.
        reason: &'static str,
        /// The offending line.
        text: String,
    },
    /// A completion for a process that has no open call.
    #[error("{file}:{line}: process {process} completes an operation it never invoked")]
    CompletionWithoutInvoke {
        /// The file.
        file: String,
        /// 1-based line number.
        line: usize,
        /// The Jepsen process id.
        process: u64,
    },
    /// An invoke for a process whose previous call is still open.
    #[error(
        "{file}:{line}: process {process} invokes while its call from line {open_line} is open"
    )]
    ProcessBusy {
        /// The file.
        file: String,
        /// 1-based line number.
        line: usize,
        /// The Jepsen process id.
        process: u64,
        /// Where the open call was invoked.
        open_line: usize,
    },
    /// A completion whose function differs from the invoke's.
    #[error("{file}:{line}: process {process} invoked {invoked} but completed {completed}")]
    MismatchedCompletion {
        /// The file.
        file: String,
        /// 1-based line number.
        line: usize,
        /// The Jepsen process id.
        process: u64,
        /// The invoked function.
        invoked: &'static str,
        /// The completed function.
        completed: &'static str,
    },
}

/// Reads a whole file, mapping failure to [`ImportError::Io`].
pub(crate) fn read_text(path: &Path) -> Result<String, ImportError> {
    std::fs::read_to_string(path).map_err(|source| ImportError::Io {
        path: path.to_path_buf(),
        source,
    })
}

/// The Porcupine corpus directory: `$LOGJAM_CORPORA/porcupine` if that
/// variable is set, else the copy in the repository, `corpus/porcupine` in
/// this crate (found from its manifest directory at compile time).
pub fn corpus_dir() -> PathBuf {
    match std::env::var_os("LOGJAM_CORPORA") {
        Some(root) => PathBuf::from(root).join("porcupine"),
        None => Path::new(env!("CARGO_MANIFEST_DIR")).join("corpus/porcupine"),
    }
}
