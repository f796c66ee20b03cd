//! The single history writer: header first, then one op per line, each line encoded whole
//! before any byte of it is written, and flushed (by `write_op`, or by the caller's `flush`
//! after `append_op`s), so a harness killed mid-run leaves a readable prefix (at worst a torn
//! last line, which the reader tolerates).

use std::io::{self, Write};

use crate::header::{Header, SCHEMA_VERSION};
use crate::ids::OpIndex;
use crate::op::Op;

/// Errors from [`HistoryWriter`].
#[derive(Debug, thiserror::Error)]
pub enum WriteError {
    /// The underlying writer failed.
    #[error("cannot write history line {line}: {source}")]
    Io {
        /// The 1-based line being written.
        line: u64,
        /// The OS error.
        source: io::Error,
    },
    /// An op could not be encoded (should not happen for well-formed values).
    #[error("cannot encode history line {line}: {source}")]
    Encode {
        /// The 1-based line being written.
        line: u64,
        /// The JSON error.
        source: serde_json::Error,
    },
    /// The header asks for a schema version this writer does not produce.
    #[error("this writer produces schema_version {supported}, header says {found}")]
    UnsupportedSchemaVersion {
        /// The header's version.
        found: u32,
        /// The version this writer produces.
        supported: u32,
    },
    /// Op indices must strictly increase.
    #[error("op index {index} is not greater than the previous index {previous}")]
    IndexNotIncreasing {
        /// The rejected index.
        index: OpIndex,
        /// The last index written.
        previous: OpIndex,
    },
}

/// Writes a history: call [`HistoryWriter::new`] (writes the header) then
/// [`HistoryWriter::write_op`] per op. There must be exactly one writer per history.
pub struct HistoryWriter<W: Write> {
    /// Destination; flushed after every line.
    out: W,
    /// Reused encoding buffer: a line is encoded fully before any byte is written.
    line_buffer: Vec<u8>,
    /// 1-based number of the last line written.
    line: u64,
    /// Last index written, to keep indices strictly increasing.
    last_index: Option<OpIndex>,
}

impl<W: Write> HistoryWriter<W> {
    /// Writes and flushes the header line.
    ///
    /// # Errors
    /// [`WriteError::UnsupportedSchemaVersion`] when `header.schema_version` is not
    /// [`SCHEMA_VERSION`]; I/O or encoding errors.
    pub fn new(out: W, header: &Header) -> Result<Self, WriteError> {
        if header.schema_version != SCHEMA_VERSION {
            return Err(WriteError::UnsupportedSchemaVersion {
                found: header.schema_version,
                supported: SCHEMA_VERSION,
            });
        }
        let mut writer = HistoryWriter {
            out,
            line_buffer: Vec::with_capacity(256),
            line: 0,
            last_index: None,
        };
        writer.write_line(header)?;
        Ok(writer)
    }

    /// Writes and flushes one op line.
    ///
    /// # Errors
    /// [`WriteError::IndexNotIncreasing`] when `op.index` does not exceed the previous index;
    /// I/O or encoding errors.
    pub fn write_op(&mut self, op: &Op) -> Result<(), WriteError> {
        self.append_op(op)?;
        self.flush()
    }

    /// Like [`HistoryWriter::write_op`] without flushing: the caller flushes (a recorder
    /// with more lines about to follow writes them in one go).
    ///
    /// # Errors
    /// As [`HistoryWriter::write_op`].
    pub fn append_op(&mut self, op: &Op) -> Result<(), WriteError> {
        if let Some(previous) = self.last_index
            && op.index <= previous
        {
            return Err(WriteError::IndexNotIncreasing {
                index: op.index,
                previous,
            });
        }
        self.encode_line(op)?;
        self.last_index = Some(op.index);
        Ok(())
    }

    /// Flushes every line written so far.
    ///
    /// # Errors
    /// [`WriteError::Io`] naming the last line written.
    pub fn flush(&mut self) -> Result<(), WriteError> {
        let line = self.line;
        self.out
            .flush()
            .map_err(|source| WriteError::Io { line, source })
    }

    /// The index the next op should carry (0 first, then one past the last written).
    pub fn next_index(&self) -> OpIndex {
        self.last_index.map_or(OpIndex(0), |i| OpIndex(i.0 + 1))
    }

    /// Returns the underlying writer.
    pub fn into_inner(self) -> W {
        self.out
    }

    fn write_line<T: serde::Serialize>(&mut self, item: &T) -> Result<(), WriteError> {
        self.encode_line(item)?;
        self.flush()
    }

    /// Encodes one whole line, then hands it to `out` in one write (no flush).
    fn encode_line<T: serde::Serialize>(&mut self, item: &T) -> Result<(), WriteError> {
        let line = self.line + 1;
        self.line_buffer.clear();
        serde_json::to_writer(&mut self.line_buffer, item)
            .map_err(|source| WriteError::Encode { line, source })?;
        self.line_buffer.push(b'\n');
        self.out
            .write_all(&self.line_buffer)
            .map_err(|source| WriteError::Io { line, source })?;
        self.line = line;
        Ok(())
    }
}
