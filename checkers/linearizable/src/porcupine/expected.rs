//! The corpus verdict table `expected.tsv`: one row per history file with
//! its expected verdict and Porcupine's (Go) measured times, which the
//! corpus test asserts against and the benchmark compares with.

use crate::porcupine::{ImportError, read_text};
use std::path::Path;

/// One row of `expected.tsv`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ExpectedRow {
    /// Path relative to the corpus directory, e.g. `jepsen/etcd_000.log`.
    pub file: String,
    /// File size in bytes.
    pub bytes: u64,
    /// Expected verdict: `Some(true)` linearizable, `Some(false)` not,
    /// `None` no verdict (the empty `etcd_095.log`).
    pub linearizable: Option<bool>,
    /// Operations invoked.
    pub ops_invoked: u64,
    /// Go benchmark time per check, in nanoseconds.
    pub go_bench_ns_per_op: Option<u64>,
    /// Go single-run time, best of five, in microseconds.
    pub go_single_run_us: Option<u64>,
}

/// Reads and parses `expected.tsv`.
///
/// # Errors
///
/// [`ImportError`] naming the file and line.
pub fn read_expected(path: &Path) -> Result<Vec<ExpectedRow>, ImportError> {
    parse_expected(&path.display().to_string(), &read_text(path)?)
}

/// Parses the text of `expected.tsv` (columns found by header name).
///
/// # Errors
///
/// [`ImportError`] naming `source` and the line.
pub fn parse_expected(source: &str, text: &str) -> Result<Vec<ExpectedRow>, ImportError> {
    let mut lines = text.lines().enumerate();
    let malformed = |line: usize, reason: &'static str, text: &str| ImportError::MalformedLine {
        file: source.to_owned(),
        line,
        reason,
        text: text.to_owned(),
    };
    let (_, header) = lines
        .next()
        .ok_or_else(|| malformed(1, "missing header", ""))?;
    let columns: Vec<&str> = header.split('\t').collect();
    let column = |name: &str| {
        columns
            .iter()
            .position(|column| *column == name)
            .ok_or_else(|| malformed(1, "missing a required column", header))
    };
    let file_column = column("file")?;
    let bytes_column = column("bytes")?;
    let invoked_column = column("ops_invoked")?;
    let expected_column = column("expected_linearizable")?;
    let bench_column = column("porcupine_go_bench_ns_per_op")?;
    let single_column = column("porcupine_go_single_run_us_best_of_5")?;
    let mut rows = Vec::new();
    for (index, raw) in lines {
        let line = index + 1;
        if raw.trim().is_empty() {
            continue;
        }
        let fields: Vec<&str> = raw.split('\t').collect();
        let field = |column: usize| fields.get(column).copied().unwrap_or("");
        let optional_number = |column: usize| -> Result<Option<u64>, ImportError> {
            match field(column) {
                "" => Ok(None),
                text => text
                    .parse::<u64>()
                    .map(Some)
                    .map_err(|_| malformed(line, "expected a number", raw)),
            }
        };
        rows.push(ExpectedRow {
            file: field(file_column).to_owned(),
            bytes: optional_number(bytes_column)?.unwrap_or(0),
            linearizable: match field(expected_column) {
                "true" => Some(true),
                "false" => Some(false),
                "" => None,
                _ => return Err(malformed(line, "expected true, false or empty", raw)),
            },
            ops_invoked: optional_number(invoked_column)?.unwrap_or(0),
            go_bench_ns_per_op: optional_number(bench_column)?,
            go_single_run_us: optional_number(single_column)?,
        });
    }
    Ok(rows)
}
