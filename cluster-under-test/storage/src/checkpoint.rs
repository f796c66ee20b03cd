//! Kafka's text checkpoint files: a version line `0`, an entry-count line, then one entry per
//! line. The log dir holds three offset checkpoints (`recovery-point-offset-checkpoint`,
//! `log-start-offset-checkpoint`, `replication-offset-checkpoint`) with `topic partition offset`
//! entries; each partition dir holds a `leader-epoch-checkpoint` (`epoch start_offset`, see
//! `epoch_cache.rs`). Files are replaced atomically (`durable.rs`). Parsing is strict: a malformed
//! file is an error naming the file and line, never silently ignored.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use crate::durable;
use crate::error::{Error, Result};
use crate::ids::Offset;
use crate::topic_partition::TopicPartition;

/// File name of the per-log-dir recovery-point checkpoint.
pub const RECOVERY_POINT_CHECKPOINT: &str = "recovery-point-offset-checkpoint";
/// File name of the per-log-dir log-start-offset checkpoint.
pub const LOG_START_OFFSET_CHECKPOINT: &str = "log-start-offset-checkpoint";
/// File name of the per-log-dir high-watermark checkpoint.
pub const REPLICATION_OFFSET_CHECKPOINT: &str = "replication-offset-checkpoint";

/// The only checkpoint format version Kafka writes.
const VERSION: &str = "0";

/// What is wrong with a line of a checkpoint file.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CheckpointDefect {
    /// The file ends before the version or count line, or before all declared entries.
    #[error("unexpected end of file")]
    MissingLine,
    /// The version line is not `0`.
    #[error("unsupported version {found:?}")]
    VersionUnsupported {
        /// The version line as found.
        found: String,
    },
    /// The count line is not a non-negative integer.
    #[error("entry count {found:?} is not a non-negative integer")]
    CountInvalid {
        /// The count line as found.
        found: String,
    },
    /// An entry line has the wrong number of whitespace-separated fields.
    #[error("expected {expected} fields, found {found}")]
    FieldCountWrong {
        /// Fields per entry for this file kind.
        expected: usize,
        /// Fields on the line.
        found: usize,
    },
    /// A numeric field does not parse.
    #[error("field {field} {found:?} is not a valid number")]
    NumberInvalid {
        /// Which field (`"partition"`, `"offset"`, `"epoch"`, ...).
        field: &'static str,
        /// The field as found.
        found: String,
    },
    /// Non-empty lines follow the declared entries.
    #[error("more entries than the declared count {declared}")]
    ExtraEntries {
        /// The declared entry count.
        declared: usize,
    },
}

/// One parsed entry line: its one-based line number and its fields.
pub(crate) struct CheckpointLine<'a> {
    /// One-based line number in the file.
    pub(crate) line: usize,
    /// Whitespace-separated fields, exactly `fields_per_entry` of them.
    pub(crate) fields: Vec<&'a str>,
}

/// Reads a checkpoint file's text, or `None` when the file does not exist.
pub(crate) fn read_text(path: &Path) -> Result<Option<String>> {
    match fs::read_to_string(path) {
        Ok(text) => Ok(Some(text)),
        Err(error) if error.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(error) => Err(Error::io("read", path)(error)),
    }
}

/// Splits checkpoint text into entry lines, checking version, count and field counts.
pub(crate) fn parse_lines<'a>(
    path: &Path,
    text: &'a str,
    fields_per_entry: usize,
) -> Result<Vec<CheckpointLine<'a>>> {
    let malformed = |line: usize, defect: CheckpointDefect| Error::MalformedCheckpoint {
        path: path.to_path_buf(),
        line,
        defect,
    };
    let mut lines = text
        .lines()
        .enumerate()
        .map(|(index, line)| (index + 1, line.trim()));
    let (line, version) = lines
        .next()
        .ok_or_else(|| malformed(1, CheckpointDefect::MissingLine))?;
    if version != VERSION {
        return Err(malformed(
            line,
            CheckpointDefect::VersionUnsupported {
                found: version.to_owned(),
            },
        ));
    }
    let (line, count) = lines
        .next()
        .ok_or_else(|| malformed(2, CheckpointDefect::MissingLine))?;
    let declared: usize = count.parse().map_err(|_| {
        malformed(
            line,
            CheckpointDefect::CountInvalid {
                found: count.to_owned(),
            },
        )
    })?;
    let mut entries = Vec::with_capacity(declared.min(1 << 16));
    let mut last_line = line;
    for _ in 0..declared {
        let (line, text) = lines
            .next()
            .ok_or_else(|| malformed(last_line + 1, CheckpointDefect::MissingLine))?;
        last_line = line;
        let fields: Vec<&str> = text.split_whitespace().collect();
        if fields.len() != fields_per_entry {
            return Err(malformed(
                line,
                CheckpointDefect::FieldCountWrong {
                    expected: fields_per_entry,
                    found: fields.len(),
                },
            ));
        }
        entries.push(CheckpointLine { line, fields });
    }
    if let Some((line, _)) = lines.find(|(_, text)| !text.is_empty()) {
        return Err(malformed(line, CheckpointDefect::ExtraEntries { declared }));
    }
    Ok(entries)
}

/// Parses one numeric field of an entry, naming the file, line and field on failure.
pub(crate) fn parse_field<T: std::str::FromStr>(
    path: &Path,
    line: &CheckpointLine<'_>,
    index: usize,
    field: &'static str,
) -> Result<T> {
    let raw = line.fields[index];
    raw.parse().map_err(|_| Error::MalformedCheckpoint {
        path: path.to_path_buf(),
        line: line.line,
        defect: CheckpointDefect::NumberInvalid {
            field,
            found: raw.to_owned(),
        },
    })
}

/// Renders entry lines in the checkpoint format and replaces the file atomically.
pub(crate) fn write_lines(path: &Path, entries: &[String]) -> Result<()> {
    let mut text = String::with_capacity(16 + entries.len() * 32);
    let _ = writeln!(text, "{VERSION}");
    let _ = writeln!(text, "{}", entries.len());
    for entry in entries {
        let _ = writeln!(text, "{entry}");
    }
    durable::replace_file(path, text.as_bytes())
}

/// One of the log dir's `topic partition offset` checkpoint files.
#[derive(Debug, Clone)]
pub struct OffsetCheckpointFile {
    path: PathBuf,
}

impl OffsetCheckpointFile {
    /// A checkpoint file at `path` (nothing is read or created yet).
    pub fn new(path: impl Into<PathBuf>) -> Self {
        OffsetCheckpointFile { path: path.into() }
    }

    /// Where the file lives.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Reads all entries; a missing file reads as empty.
    ///
    /// # Errors
    ///
    /// [`Error::MalformedCheckpoint`] naming the file and line, or [`Error::Io`].
    pub fn read(&self) -> Result<BTreeMap<TopicPartition, Offset>> {
        let Some(text) = read_text(&self.path)? else {
            return Ok(BTreeMap::new());
        };
        let mut offsets = BTreeMap::new();
        for line in parse_lines(&self.path, &text, 3)? {
            let partition: i32 = parse_field(&self.path, &line, 1, "partition")?;
            let offset: i64 = parse_field(&self.path, &line, 2, "offset")?;
            let tp = TopicPartition::new(line.fields[0], partition);
            offsets.insert(tp, Offset(offset));
        }
        Ok(offsets)
    }

    /// Replaces the file with `offsets` (temp file, fsync, rename).
    ///
    /// # Errors
    ///
    /// [`Error::Io`].
    pub fn write(&self, offsets: &BTreeMap<TopicPartition, Offset>) -> Result<()> {
        let entries: Vec<String> = offsets
            .iter()
            .map(|(tp, offset)| format!("{} {} {}", tp.topic, tp.partition, offset))
            .collect();
        write_lines(&self.path, &entries)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn offset_checkpoint_round_trips_in_kafka_text_format() {
        let dir = tempfile::tempdir().unwrap();
        let file = OffsetCheckpointFile::new(dir.path().join(RECOVERY_POINT_CHECKPOINT));
        assert!(
            file.read().unwrap().is_empty(),
            "missing file reads as empty"
        );
        let mut offsets = BTreeMap::new();
        offsets.insert(TopicPartition::new("a-b", 0), Offset(42));
        offsets.insert(TopicPartition::new("c", 7), Offset(0));
        file.write(&offsets).unwrap();
        let text = fs::read_to_string(file.path()).unwrap();
        assert_eq!(text, "0\n2\na-b 0 42\nc 7 0\n");
        assert_eq!(file.read().unwrap(), offsets);
    }

    #[test]
    fn malformed_checkpoint_names_file_and_line() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(REPLICATION_OFFSET_CHECKPOINT);
        let cases: [(&str, usize); 6] = [
            ("1\n0\n", 1),
            ("0\nx\n", 2),
            ("0\n2\nt 0 1\n", 4),
            ("0\n1\nt 0\n", 3),
            ("0\n1\nt zero 5\n", 3),
            ("0\n1\nt 0 5\nt 1 6\n", 4),
        ];
        for (text, expected_line) in cases {
            fs::write(&path, text).unwrap();
            match OffsetCheckpointFile::new(&path).read() {
                Err(Error::MalformedCheckpoint { path: p, line, .. }) => {
                    assert_eq!(p, path);
                    assert_eq!(line, expected_line, "for {text:?}");
                }
                other => panic!("{text:?} gave {other:?}"),
            }
        }
    }
}
