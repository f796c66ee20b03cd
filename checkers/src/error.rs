//! Harness errors: the history could not be read or is malformed. These say the recorder (or
//! whoever wrote the file) is broken; they are never anomalies of the cluster and never a
//! verdict.

use std::path::PathBuf;

use logjam_history::{PairingError, ReadError};

/// Why a history could not be checked at all.
#[derive(Debug, thiserror::Error)]
pub enum HarnessError {
    /// The file could not be read or a line is malformed.
    #[error("{path}: {source}")]
    Read {
        /// The history file.
        path: PathBuf,
        /// What went wrong, with its line number.
        source: ReadError,
    },
    /// The ops do not pair into a well-formed history.
    #[error("{path}: malformed history: {source}")]
    Pairing {
        /// The history file (or `<memory>`).
        path: PathBuf,
        /// The pairing violation.
        source: PairingError,
    },
    /// A run directory without a `history.jsonl`.
    #[error("{path}: no history.jsonl in this run directory")]
    NoHistory {
        /// The directory given.
        path: PathBuf,
    },
    /// No checker exists for the header's workload yet.
    #[error("no checker for workload {workload:?} (known: {known})")]
    UnsupportedWorkload {
        /// The header's workload.
        workload: String,
        /// The registered workloads.
        known: String,
    },
}
