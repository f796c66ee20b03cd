//! The streaming history reader: header first, then one [`Op`] per line with 1-based line
//! numbers in every error. A last line without a newline that does not parse is a torn tail
//! (the harness died mid-write): reported as [`ReadError::TornTail`], a warning, not a failure.
//! Pairing invokes with completions is `pairing`'s job, not this one's.

use std::fs::File;
use std::io::{self, BufRead, BufReader};
use std::path::{Path, PathBuf};

use crate::header::{Header, SCHEMA_VERSION, VersionProbe};
use crate::ids::OpIndex;
use crate::op::{Op, OpDecodeError};

/// Everything that can go wrong while reading a history file.
#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    /// The file could not be opened.
    #[error("cannot open history {path}: {source}")]
    Open {
        /// The path given.
        path: PathBuf,
        /// The OS error.
        source: io::Error,
    },
    /// Reading failed part-way.
    #[error("line {line}: read error: {source}")]
    Io {
        /// The line being read.
        line: u64,
        /// The OS error.
        source: io::Error,
    },
    /// The file is empty: not even a header.
    #[error("empty history: line 1 must be the header")]
    MissingHeader,
    /// Line 1 is not a valid v1 header.
    #[error("line 1: malformed header: {source}")]
    MalformedHeader {
        /// The JSON error.
        source: serde_json::Error,
    },
    /// The header names a schema major version this reader does not know.
    #[error(
        "line 1: unsupported schema_version {found} (this logjam reads schema_version {supported}); \
         re-check with a logjam build that knows version {found}"
    )]
    UnsupportedSchemaVersion {
        /// The version found, as written.
        found: String,
        /// The version this reader supports.
        supported: u32,
    },
    /// A line is not valid UTF-8.
    #[error("line {line}: not valid UTF-8")]
    NotUtf8 {
        /// The offending line.
        line: u64,
    },
    /// A line is not a well-formed op.
    #[error("line {line}: malformed op: {source}")]
    MalformedOp {
        /// The offending line.
        line: u64,
        /// What was wrong with it.
        source: OpDecodeError,
    },
    /// An op's index is not greater than the previous op's.
    #[error("line {line}: op index {index} is not greater than the previous index {previous}")]
    IndexNotIncreasing {
        /// The offending line.
        line: u64,
        /// Its index.
        index: OpIndex,
        /// The previous op's index.
        previous: OpIndex,
    },
    /// The last line has no newline and does not parse: the writer was cut off mid-line.
    /// A warning: every op before it is intact.
    #[error("line {line}: torn last line (no trailing newline, does not parse); ignored")]
    TornTail {
        /// The torn line.
        line: u64,
    },
}

impl ReadError {
    /// True for [`ReadError::TornTail`], which callers should report as a warning.
    pub fn is_torn_tail(&self) -> bool {
        matches!(self, ReadError::TornTail { .. })
    }
}

/// Streams ops out of a JSONL history. Construct it with [`HistoryReader::open`] or
/// [`HistoryReader::new`]; both read and validate the header before returning.
///
/// Iterating yields `Ok(op)` per op line, `Err(e)` per bad line (iteration continues after a
/// bad line so callers can collect every error), and a final `Err(TornTail)` when the last
/// line was cut off. Blank lines are skipped.
pub struct HistoryReader<R> {
    /// The byte source, buffered so lines can be pulled one at a time.
    source: R,
    /// The parsed line 1.
    header: Header,
    /// 1-based number of the last line read.
    line: u64,
    /// Reused line buffer, so reading a million lines does not allocate a million times.
    buffer: Vec<u8>,
    /// Index of the last op returned, to enforce strictly increasing indices.
    last_index: Option<OpIndex>,
    /// Set once the end of input (or a torn tail) was reached.
    finished: bool,
    /// The torn line, when one was found.
    torn_tail: Option<u64>,
}

impl HistoryReader<BufReader<File>> {
    /// Opens a history file and reads its header.
    ///
    /// # Errors
    /// [`ReadError::Open`] when the file cannot be opened, or any header error.
    pub fn open(path: impl AsRef<Path>) -> Result<Self, ReadError> {
        let path = path.as_ref();
        let file = File::open(path).map_err(|source| ReadError::Open {
            path: path.to_owned(),
            source,
        })?;
        HistoryReader::new(BufReader::with_capacity(1 << 16, file))
    }
}

impl<R: BufRead> HistoryReader<R> {
    /// Wraps a buffered source and reads its header line.
    ///
    /// # Errors
    /// [`ReadError::MissingHeader`], [`ReadError::MalformedHeader`],
    /// [`ReadError::UnsupportedSchemaVersion`] or an I/O error.
    pub fn new(mut source: R) -> Result<Self, ReadError> {
        let mut buffer = Vec::with_capacity(256);
        let n = source
            .read_until(b'\n', &mut buffer)
            .map_err(|source| ReadError::Io { line: 1, source })?;
        if n == 0 || buffer.iter().all(u8::is_ascii_whitespace) {
            return Err(ReadError::MissingHeader);
        }
        let header = parse_header(&buffer)?;
        Ok(HistoryReader {
            source,
            header,
            line: 1,
            buffer,
            last_index: None,
            finished: false,
            torn_tail: None,
        })
    }

    /// The header (line 1).
    pub fn header(&self) -> &Header {
        &self.header
    }

    /// The line number of the torn last line, once iteration has reached it.
    pub fn torn_tail(&self) -> Option<u64> {
        self.torn_tail
    }

    /// The number of lines read so far, header included.
    pub fn lines_read(&self) -> u64 {
        self.line
    }
}

fn parse_header(bytes: &[u8]) -> Result<Header, ReadError> {
    let probe: VersionProbe =
        serde_json::from_slice(bytes).map_err(|source| ReadError::MalformedHeader { source })?;
    match probe.schema_version.as_u64() {
        Some(v) if v == u64::from(SCHEMA_VERSION) => {}
        _ => {
            return Err(ReadError::UnsupportedSchemaVersion {
                found: probe.schema_version.to_string(),
                supported: SCHEMA_VERSION,
            });
        }
    }
    serde_json::from_slice(bytes).map_err(|source| ReadError::MalformedHeader { source })
}

impl<R: BufRead> Iterator for HistoryReader<R> {
    type Item = Result<Op, ReadError>;

    fn next(&mut self) -> Option<Self::Item> {
        loop {
            if self.finished {
                return None;
            }
            self.buffer.clear();
            let line = self.line + 1;
            let n = match self.source.read_until(b'\n', &mut self.buffer) {
                Ok(n) => n,
                Err(source) => {
                    self.finished = true;
                    return Some(Err(ReadError::Io { line, source }));
                }
            };
            if n == 0 {
                self.finished = true;
                return None;
            }
            self.line = line;
            let terminated = self.buffer.last() == Some(&b'\n');
            if self.buffer.iter().all(u8::is_ascii_whitespace) {
                continue;
            }
            let result = match std::str::from_utf8(&self.buffer) {
                Err(_) => Err(ReadError::NotUtf8 { line }),
                Ok(text) => Op::from_json_line(text)
                    .map_err(|source| ReadError::MalformedOp { line, source }),
            };
            return Some(match result {
                Err(_) if !terminated => {
                    self.finished = true;
                    self.torn_tail = Some(line);
                    Err(ReadError::TornTail { line })
                }
                Err(e) => Err(e),
                Ok(op) => match self.last_index {
                    Some(previous) if op.index <= previous => Err(ReadError::IndexNotIncreasing {
                        line,
                        index: op.index,
                        previous,
                    }),
                    _ => {
                        self.last_index = Some(op.index);
                        Ok(op)
                    }
                },
            });
        }
    }
}
