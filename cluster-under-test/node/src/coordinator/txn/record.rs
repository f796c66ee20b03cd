//! The records of `__transaction_state` in Kafka's own format (`TransactionLogKey` v0 and
//! `TransactionLogValue` v0/v1, each prefixed by its version as Kafka's `MessageUtil` writes
//! them), so a Kafka tool reading this topic sees what Kafka would have written. Pure codec.
//!
//! Key: `version: int16 = 0`, `TransactionalId: string`. Value v0: `ProducerId int64`,
//! `ProducerEpoch int16`, `TransactionTimeoutMs int32`, `TransactionStatus int8`,
//! `TransactionPartitions [Topic string, PartitionIds [int32]]` (nullable),
//! `TransactionLastUpdateTimestampMs int64`, `TransactionStartTimestampMs int64`. Value v1 is
//! the flexible form of the same fields (compact strings and arrays, tagged fields; tag 0
//! `PreviousProducerId`, tag 1 `NextProducerId`, tag 2 `ClientTransactionVersion`). A null
//! value is a tombstone (an expired transactional id).

use std::collections::BTreeSet;

use bytes::{BufMut, Bytes, BytesMut};
use kafka_protocol::ResponseError;

/// The statuses as `TransactionStatus` codes them in the log.
pub const STATUS_EMPTY: i8 = 0;
/// Ongoing.
pub const STATUS_ONGOING: i8 = 1;
/// PrepareCommit.
pub const STATUS_PREPARE_COMMIT: i8 = 2;
/// PrepareAbort.
pub const STATUS_PREPARE_ABORT: i8 = 3;
/// CompleteCommit.
pub const STATUS_COMPLETE_COMMIT: i8 = 4;
/// CompleteAbort.
pub const STATUS_COMPLETE_ABORT: i8 = 5;
/// Dead.
pub const STATUS_DEAD: i8 = 6;
/// PrepareEpochFence (never written by Kafka: it logs PrepareAbort).
pub const STATUS_PREPARE_EPOCH_FENCE: i8 = 7;

/// One `TransactionLogValue`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TxnLogValue {
    /// `ProducerId`.
    pub producer_id: i64,
    /// `PreviousProducerId` (v1 tag 0; -1 when none).
    pub previous_producer_id: i64,
    /// `NextProducerId` (v1 tag 1; -1 when none).
    pub next_producer_id: i64,
    /// `ProducerEpoch`.
    pub producer_epoch: i16,
    /// `TransactionTimeoutMs`.
    pub timeout_ms: i32,
    /// `TransactionStatus`.
    pub status: i8,
    /// `TransactionPartitions`, as (topic, partition).
    pub partitions: BTreeSet<(String, i32)>,
    /// `TransactionLastUpdateTimestampMs`.
    pub last_update_ms: i64,
    /// `TransactionStartTimestampMs`.
    pub start_ms: i64,
    /// `ClientTransactionVersion` (v1 tag 2): 2 when the client uses KIP-890's TV2.
    pub client_transaction_version: i16,
}

/// Whether `transactional_id` fits a key: its length is an INT16 there, so a longer id would
/// wrap and could decode as another id, whose state it would overwrite.
///
/// # Errors
/// `INVALID_REQUEST` for an id longer than `i16::MAX` bytes.
pub fn check_transactional_id(transactional_id: &str) -> Result<(), ResponseError> {
    if transactional_id.len() > i16::MAX as usize {
        return Err(ResponseError::InvalidRequest);
    }
    Ok(())
}

/// Encodes the key of `transactional_id` (one [`check_transactional_id`] accepted).
pub fn encode_key(transactional_id: &str) -> Bytes {
    let mut buf = BytesMut::new();
    buf.put_i16(0);
    put_string(&mut buf, transactional_id);
    buf.freeze()
}

/// Decodes a key.
///
/// # Errors
/// A message when the bytes are not a `TransactionLogKey` v0.
pub fn decode_key(bytes: &[u8]) -> Result<String, String> {
    let mut reader = Reader(bytes);
    let version = reader.i16()?;
    if version != 0 {
        return Err(format!("transaction log key version {version} is not 0"));
    }
    let id = reader.string()?;
    if !reader.0.is_empty() {
        return Err(format!(
            "transaction log key has {} bytes after the id",
            reader.0.len()
        ));
    }
    Ok(id)
}

/// Encodes a value: v1 (flexible, with the tagged fields) when `client_transaction_version`
/// is 2 or a previous/next producer id is set, v0 otherwise, as Kafka picks the version.
pub fn encode_value(value: &TxnLogValue) -> Bytes {
    let flexible = value.client_transaction_version >= 2
        || value.previous_producer_id != -1
        || value.next_producer_id != -1;
    let mut buf = BytesMut::new();
    buf.put_i16(i16::from(flexible));
    buf.put_i64(value.producer_id);
    buf.put_i16(value.producer_epoch);
    buf.put_i32(value.timeout_ms);
    buf.put_i8(value.status);
    // Topics grouped in order.
    let mut topics: Vec<(&str, Vec<i32>)> = Vec::new();
    for (topic, partition) in &value.partitions {
        match topics.last_mut() {
            Some((last, ids)) if last == topic => ids.push(*partition),
            _ => topics.push((topic.as_str(), vec![*partition])),
        }
    }
    if flexible {
        put_uvarint(&mut buf, topics.len() as u32 + 1);
        for (topic, ids) in &topics {
            put_compact_string(&mut buf, topic);
            put_uvarint(&mut buf, ids.len() as u32 + 1);
            ids.iter().for_each(|id| buf.put_i32(*id));
            put_uvarint(&mut buf, 0);
        }
    } else {
        buf.put_i32(topics.len() as i32);
        for (topic, ids) in &topics {
            put_string(&mut buf, topic);
            buf.put_i32(ids.len() as i32);
            ids.iter().for_each(|id| buf.put_i32(*id));
        }
    }
    buf.put_i64(value.last_update_ms);
    buf.put_i64(value.start_ms);
    if flexible {
        let mut tags: Vec<(u32, Vec<u8>)> = Vec::new();
        if value.previous_producer_id != -1 {
            tags.push((0, value.previous_producer_id.to_be_bytes().to_vec()));
        }
        if value.next_producer_id != -1 {
            tags.push((1, value.next_producer_id.to_be_bytes().to_vec()));
        }
        if value.client_transaction_version != 0 {
            tags.push((2, value.client_transaction_version.to_be_bytes().to_vec()));
        }
        put_uvarint(&mut buf, tags.len() as u32);
        for (tag, data) in tags {
            put_uvarint(&mut buf, tag);
            put_uvarint(&mut buf, data.len() as u32);
            buf.put_slice(&data);
        }
    }
    buf.freeze()
}

/// Decodes a value.
///
/// # Errors
/// A message naming what is wrong when the bytes are not a `TransactionLogValue` v0 or v1.
pub fn decode_value(bytes: &[u8]) -> Result<TxnLogValue, String> {
    let mut r = Reader(bytes);
    let version = r.i16()?;
    if !(0..=1).contains(&version) {
        return Err(format!(
            "transaction log value version {version} is unknown"
        ));
    }
    let flexible = version == 1;
    let producer_id = r.i64()?;
    let producer_epoch = r.i16()?;
    let timeout_ms = r.i32()?;
    let status = r.i8()?;
    if !(0..=7).contains(&status) {
        return Err(format!("transaction status {status} is unknown"));
    }
    let mut partitions = BTreeSet::new();
    let topics = if flexible {
        i64::from(r.uvarint()?) - 1
    } else {
        i64::from(r.i32()?)
    };
    for _ in 0..topics.max(0) {
        let topic = if flexible {
            r.compact_string()?
        } else {
            r.string()?
        };
        let count = if flexible {
            i64::from(r.uvarint()?) - 1
        } else {
            i64::from(r.i32()?)
        };
        for _ in 0..count.max(0) {
            partitions.insert((topic.clone(), r.i32()?));
        }
        if flexible {
            r.skip_tags()?;
        }
    }
    let last_update_ms = r.i64()?;
    let start_ms = r.i64()?;
    let mut value = TxnLogValue {
        producer_id,
        previous_producer_id: -1,
        next_producer_id: -1,
        producer_epoch,
        timeout_ms,
        status,
        partitions,
        last_update_ms,
        start_ms,
        client_transaction_version: 0,
    };
    if flexible {
        let count = r.uvarint()?;
        for _ in 0..count {
            let tag = r.uvarint()?;
            let size = r.uvarint()? as usize;
            let data = r.take(size)?;
            match (tag, size) {
                (0, 8) => value.previous_producer_id = i64::from_be_bytes(fixed(data)),
                (1, 8) => value.next_producer_id = i64::from_be_bytes(fixed(data)),
                (2, 2) => value.client_transaction_version = i16::from_be_bytes(fixed(data)),
                _ => {}
            }
        }
    }
    Ok(value)
}

fn fixed<const N: usize>(data: &[u8]) -> [u8; N] {
    let mut out = [0; N];
    out.copy_from_slice(data);
    out
}

fn put_string(buf: &mut BytesMut, text: &str) {
    buf.put_i16(text.len() as i16);
    buf.put_slice(text.as_bytes());
}

fn put_compact_string(buf: &mut BytesMut, text: &str) {
    put_uvarint(buf, text.len() as u32 + 1);
    buf.put_slice(text.as_bytes());
}

fn put_uvarint(buf: &mut BytesMut, mut value: u32) {
    while value >= 0x80 {
        buf.put_u8((value as u8) | 0x80);
        value >>= 7;
    }
    buf.put_u8(value as u8);
}

/// A bounds-checked reader over a record's bytes.
struct Reader<'a>(&'a [u8]);

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], String> {
        if self.0.len() < n {
            return Err(format!("record ends {} bytes early", n - self.0.len()));
        }
        let (head, rest) = self.0.split_at(n);
        self.0 = rest;
        Ok(head)
    }
    fn i8(&mut self) -> Result<i8, String> {
        Ok(self.take(1)?[0] as i8)
    }
    fn i16(&mut self) -> Result<i16, String> {
        Ok(i16::from_be_bytes(fixed(self.take(2)?)))
    }
    fn i32(&mut self) -> Result<i32, String> {
        Ok(i32::from_be_bytes(fixed(self.take(4)?)))
    }
    fn i64(&mut self) -> Result<i64, String> {
        Ok(i64::from_be_bytes(fixed(self.take(8)?)))
    }
    fn uvarint(&mut self) -> Result<u32, String> {
        let mut value = 0u32;
        for shift in (0..35).step_by(7) {
            let byte = self.take(1)?[0];
            value |= u32::from(byte & 0x7f) << shift;
            if byte & 0x80 == 0 {
                return Ok(value);
            }
        }
        Err("varint longer than 5 bytes".to_owned())
    }
    fn utf8(&mut self, len: usize) -> Result<String, String> {
        String::from_utf8(self.take(len)?.to_vec()).map_err(|_| "string is not UTF-8".to_owned())
    }
    fn string(&mut self) -> Result<String, String> {
        let len = self.i16()?;
        let len = usize::try_from(len).map_err(|_| format!("string length {len}"))?;
        self.utf8(len)
    }
    fn compact_string(&mut self) -> Result<String, String> {
        let len = self.uvarint()?;
        let len = len
            .checked_sub(1)
            .ok_or_else(|| "null compact string".to_owned())?;
        self.utf8(len as usize)
    }
    fn skip_tags(&mut self) -> Result<(), String> {
        for _ in 0..self.uvarint()? {
            self.uvarint()?;
            let size = self.uvarint()? as usize;
            self.take(size)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn value(tv: i16) -> TxnLogValue {
        TxnLogValue {
            producer_id: 100,
            previous_producer_id: -1,
            next_producer_id: -1,
            producer_epoch: 50,
            timeout_ms: 500,
            status: STATUS_ONGOING,
            partitions: [
                ("a".to_owned(), 1),
                ("a".to_owned(), 0),
                ("b".to_owned(), 3),
            ]
            .into_iter()
            .collect(),
            last_update_ms: 1000,
            start_ms: 750,
            client_transaction_version: tv,
        }
    }

    #[test]
    fn keys_and_values_round_trip_in_both_versions() {
        assert_eq!(decode_key(&encode_key("TXNID")).unwrap(), "TXNID");
        for tv in [0, 2] {
            let v = value(tv);
            let bytes = encode_value(&v);
            assert_eq!(bytes[1], u8::from(tv == 2), "version prefix");
            assert_eq!(decode_value(&bytes).unwrap(), v);
        }
        let mut moved = value(2);
        moved.previous_producer_id = 7;
        moved.next_producer_id = 9;
        assert_eq!(decode_value(&encode_value(&moved)).unwrap(), moved);
    }

    /// The exact bytes Kafka's `TransactionLogValue` v0 has for the value of Kafka's own
    /// tool test (producer 100, epoch 50, timeout 500, CompleteCommit, no partitions).
    #[test]
    fn the_v0_layout_is_kafkas() {
        let mut v = value(0);
        v.status = STATUS_COMPLETE_COMMIT;
        v.partitions.clear();
        let bytes = encode_value(&v);
        let mut expected = vec![0, 0];
        expected.extend_from_slice(&100i64.to_be_bytes());
        expected.extend_from_slice(&50i16.to_be_bytes());
        expected.extend_from_slice(&500i32.to_be_bytes());
        expected.push(4);
        expected.extend_from_slice(&0i32.to_be_bytes());
        expected.extend_from_slice(&1000i64.to_be_bytes());
        expected.extend_from_slice(&750i64.to_be_bytes());
        assert_eq!(&bytes[..], &expected[..]);
        assert_eq!(&encode_key("T")[..], &[0, 0, 0, 1, b'T']);
    }

    #[test]
    fn malformed_records_are_errors_not_panics() {
        let bytes = encode_value(&value(2));
        for cut in 0..bytes.len() {
            assert!(decode_value(&bytes[..cut]).is_err(), "cut at {cut}");
        }
        assert!(decode_key(&[0, 1, 0, 1]).is_err());
        // Issue #13: leftover bytes are an error, not another id's key.
        let mut key = encode_key("a").to_vec();
        key.push(b'b');
        assert!(decode_key(&key).is_err());
    }

    #[test]
    fn ids_whose_length_does_not_fit_an_int16_are_refused() {
        assert_eq!(check_transactional_id(&"x".repeat(32_767)), Ok(()));
        assert_eq!(
            check_transactional_id(&"x".repeat(32_768)),
            Err(ResponseError::InvalidRequest)
        );
        assert!(decode_value(&[0, 9]).is_err());
    }
}
