//! Transaction markers: the one control record a COMMIT or ABORT control batch holds (Kafka's
//! `EndTransactionMarker`), encoded for the leader's append and decoded on every path that
//! records a batch (leader, follower, replay).
//!
//! ```text
//! control batch: attributes transactional | control, one record, ProducerId/Epoch of the txn
//!   record key:   Version i16 = 0 | Type i16 (0 ABORT, 1 COMMIT)
//!   record value: Version i16 = 0 | CoordinatorEpoch i32
//! ```
//!
//! Pure: bytes in, values out. Anything that is not a well-formed marker is a
//! [`MarkerDefect`], never a panic.

use crate::batch::{BatchHeader, HEADER_BYTES};
use crate::builder::BatchBuilder;

/// Which way a transaction ended (`ControlRecordType` ABORT = 0, COMMIT = 1).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ControlType {
    /// The transaction's records are to be skipped by read_committed consumers.
    Abort,
    /// The transaction's records are visible.
    Commit,
}

impl ControlType {
    /// The type's wire value.
    pub fn code(self) -> i16 {
        match self {
            ControlType::Abort => 0,
            ControlType::Commit => 1,
        }
    }
}

/// A decoded end-of-transaction marker (`EndTransactionMarker`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EndTxnMarker {
    /// Commit or abort.
    pub control_type: ControlType,
    /// The epoch of the coordinator that wrote it; an older coordinator is fenced.
    pub coordinator_epoch: i32,
}

/// Why a control batch is not a transaction marker this node reads.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MarkerDefect {
    /// The record or one of its fields ends before its length says.
    #[error("control record truncated")]
    Truncated,
    /// A control batch must hold exactly one record.
    #[error("control batch holds {records_count} records, not 1")]
    RecordCount {
        /// The batch's `RecordsCount`.
        records_count: i32,
    },
    /// A compressed control batch (Kafka writes them uncompressed).
    #[error("compressed control batch (codec {codec})")]
    Compressed {
        /// The codec bits.
        codec: u8,
    },
    /// The key's version or type is not a transaction marker's.
    #[error("control key version {version} type {control_type} is not a transaction marker")]
    NotATxnMarker {
        /// The key's version.
        version: i16,
        /// The key's type.
        control_type: i16,
    },
    /// The value's version is negative or the value is shorter than version + epoch.
    #[error("marker value malformed")]
    BadValue,
}

/// Encodes a marker control batch for `producer_id`/`producer_epoch` (offsets are assigned by
/// the append).
pub fn marker_batch(
    producer_id: i64,
    producer_epoch: i16,
    marker: EndTxnMarker,
    timestamp_ms: i64,
) -> Vec<u8> {
    let mut key = Vec::with_capacity(4);
    key.extend_from_slice(&0i16.to_be_bytes());
    key.extend_from_slice(&marker.control_type.code().to_be_bytes());
    let mut value = Vec::with_capacity(6);
    value.extend_from_slice(&0i16.to_be_bytes());
    value.extend_from_slice(&marker.coordinator_epoch.to_be_bytes());
    let mut builder = BatchBuilder::new(timestamp_ms);
    builder
        .producer(producer_id, producer_epoch, -1)
        .transactional(true)
        .control(true)
        .record(Some(&key), Some(&value));
    builder.build()
}

/// Decodes the marker of a control batch (`batch` is the whole batch, `header` its header).
///
/// # Errors
/// A [`MarkerDefect`] naming what is wrong.
pub fn parse_marker(header: &BatchHeader, batch: &[u8]) -> Result<EndTxnMarker, MarkerDefect> {
    if header.records_count != 1 {
        return Err(MarkerDefect::RecordCount {
            records_count: header.records_count,
        });
    }
    let codec = header.compression_codec();
    if codec != 0 {
        return Err(MarkerDefect::Compressed { codec });
    }
    let end = header.size_bytes().min(batch.len());
    let mut reader = Reader(
        batch
            .get(HEADER_BYTES..end)
            .ok_or(MarkerDefect::Truncated)?,
    );
    let length = reader.varint()?;
    let record = reader.take(usize::try_from(length).map_err(|_| MarkerDefect::Truncated)?)?;
    let mut record = Reader(record);
    record.take(1)?; // attributes
    record.varint()?; // timestamp delta
    record.varint()?; // offset delta
    let key = record.bytes()?.ok_or(MarkerDefect::Truncated)?;
    let value = record.bytes()?.ok_or(MarkerDefect::BadValue)?;
    let mut key = Reader(key);
    let version = key.i16()?;
    let type_code = key.i16()?;
    let control_type = match (version, type_code) {
        (0, 0) => ControlType::Abort,
        (0, 1) => ControlType::Commit,
        _ => {
            return Err(MarkerDefect::NotATxnMarker {
                version,
                control_type: type_code,
            });
        }
    };
    let mut value = Reader(value);
    let value_version = value.i16().map_err(|_| MarkerDefect::BadValue)?;
    if value_version < 0 {
        return Err(MarkerDefect::BadValue);
    }
    let coordinator_epoch = value.i32().map_err(|_| MarkerDefect::BadValue)?;
    Ok(EndTxnMarker {
        control_type,
        coordinator_epoch,
    })
}

/// A cursor over a byte slice; every read checks the length.
struct Reader<'a>(&'a [u8]);

impl<'a> Reader<'a> {
    fn take(&mut self, len: usize) -> Result<&'a [u8], MarkerDefect> {
        if self.0.len() < len {
            return Err(MarkerDefect::Truncated);
        }
        let (head, tail) = self.0.split_at(len);
        self.0 = tail;
        Ok(head)
    }

    fn i16(&mut self) -> Result<i16, MarkerDefect> {
        let bytes = self.take(2)?;
        Ok(i16::from_be_bytes([bytes[0], bytes[1]]))
    }

    fn i32(&mut self) -> Result<i32, MarkerDefect> {
        let bytes = self.take(4)?;
        Ok(i32::from_be_bytes([bytes[0], bytes[1], bytes[2], bytes[3]]))
    }

    /// A zig-zag varint (at most 5 bytes).
    fn varint(&mut self) -> Result<i64, MarkerDefect> {
        let mut value: u64 = 0;
        for shift in (0..35).step_by(7) {
            let byte = self.take(1)?[0];
            value |= u64::from(byte & 0x7f) << shift;
            if byte & 0x80 == 0 {
                return Ok(((value >> 1) as i64) ^ -((value & 1) as i64));
            }
        }
        Err(MarkerDefect::Truncated)
    }

    /// A varint-length byte string; `None` for length -1.
    fn bytes(&mut self) -> Result<Option<&'a [u8]>, MarkerDefect> {
        let length = self.varint()?;
        if length < 0 {
            return Ok(None);
        }
        let length = usize::try_from(length).map_err(|_| MarkerDefect::Truncated)?;
        self.take(length).map(Some)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::batch;

    #[test]
    fn a_marker_round_trips_through_its_control_batch() {
        for control_type in [ControlType::Abort, ControlType::Commit] {
            let marker = EndTxnMarker {
                control_type,
                coordinator_epoch: 7,
            };
            let bytes = marker_batch(42, 3, marker, 1_000);
            let header = batch::validate_batch(&bytes).unwrap();
            assert!(header.is_control() && header.is_transactional());
            assert_eq!((header.producer_id, header.producer_epoch), (42, 3));
            assert_eq!(parse_marker(&header, &bytes), Ok(marker));
        }
    }

    #[test]
    fn malformed_control_records_are_defects() {
        let mut builder = BatchBuilder::new(0);
        builder
            .control(true)
            .record(Some(&[0, 0, 0, 9]), Some(&[0, 0, 0, 0, 0, 1]));
        let unknown_type = builder.build();
        let header = batch::validate_batch(&unknown_type).unwrap();
        assert!(matches!(
            parse_marker(&header, &unknown_type),
            Err(MarkerDefect::NotATxnMarker {
                control_type: 9,
                ..
            })
        ));

        let mut builder = BatchBuilder::new(0);
        builder
            .control(true)
            .record(Some(&[0, 0, 0, 1]), Some(&[0, 0]));
        let short_value = builder.build();
        let header = batch::validate_batch(&short_value).unwrap();
        assert_eq!(
            parse_marker(&header, &short_value),
            Err(MarkerDefect::BadValue)
        );

        let mut builder = BatchBuilder::new(0);
        builder.control(true).record(None, None).record(None, None);
        let two = builder.build();
        let header = batch::validate_batch(&two).unwrap();
        assert_eq!(
            parse_marker(&header, &two),
            Err(MarkerDefect::RecordCount { records_count: 2 })
        );

        let good = marker_batch(
            1,
            0,
            EndTxnMarker {
                control_type: ControlType::Commit,
                coordinator_epoch: 0,
            },
            0,
        );
        let header = batch::validate_batch(&good).unwrap();
        assert_eq!(
            parse_marker(&header, &good[..good.len() - 3]),
            Err(MarkerDefect::Truncated)
        );
    }
}
