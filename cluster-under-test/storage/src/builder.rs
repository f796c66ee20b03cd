//! `BatchBuilder`: encodes uncompressed record batch v2 bytes (records with zig-zag varints, the
//! header and its CRC-32C). The broker needs it to write its own control batches (transaction
//! markers); tests and benchmarks use it to make real batches without the `kafka-protocol`
//! crate. Decoding records is not this crate's business; `batch.rs` owns the header.

use crate::batch::{HEADER_BYTES, LOG_OVERHEAD_BYTES, MAGIC_V2};
use crate::ids::{LeaderEpoch, Offset};

const TRANSACTIONAL_BIT: i16 = 0x10;
const CONTROL_BIT: i16 = 0x20;

/// Builds one uncompressed v2 record batch.
///
/// ```
/// use logjam_storage::{BatchBuilder, batch};
/// let mut builder = BatchBuilder::new(1_000);
/// builder.record(Some(b"key"), Some(b"value"));
/// builder.record(None, Some(b"second"));
/// let bytes = builder.build();
/// let header = batch::validate_batch(&bytes).unwrap();
/// assert_eq!(header.records_count, 2);
/// assert_eq!(header.last_offset_delta, 1);
/// ```
#[derive(Debug, Clone)]
pub struct BatchBuilder {
    base_offset: Offset,
    partition_leader_epoch: LeaderEpoch,
    attributes: i16,
    base_timestamp_ms: i64,
    max_timestamp_ms: i64,
    producer_id: i64,
    producer_epoch: i16,
    base_sequence: i32,
    records_count: i32,
    /// Encoded records, appended as they are pushed.
    records: Vec<u8>,
}

impl BatchBuilder {
    /// A batch whose first record has timestamp `base_timestamp_ms`, no producer id, offset 0.
    pub fn new(base_timestamp_ms: i64) -> Self {
        BatchBuilder {
            base_offset: Offset::ZERO,
            partition_leader_epoch: LeaderEpoch::UNDEFINED,
            attributes: 0,
            base_timestamp_ms,
            max_timestamp_ms: base_timestamp_ms,
            producer_id: -1,
            producer_epoch: -1,
            base_sequence: -1,
            records_count: 0,
            records: Vec::new(),
        }
    }

    /// Sets the base offset (producers send 0; followers receive real offsets).
    pub fn base_offset(&mut self, base_offset: Offset) -> &mut Self {
        self.base_offset = base_offset;
        self
    }

    /// Sets the partition leader epoch stamped in the header.
    pub fn leader_epoch(&mut self, epoch: LeaderEpoch) -> &mut Self {
        self.partition_leader_epoch = epoch;
        self
    }

    /// Sets the idempotent producer id, epoch and first sequence.
    pub fn producer(
        &mut self,
        producer_id: i64,
        producer_epoch: i16,
        base_sequence: i32,
    ) -> &mut Self {
        self.producer_id = producer_id;
        self.producer_epoch = producer_epoch;
        self.base_sequence = base_sequence;
        self
    }

    /// Marks the batch transactional.
    pub fn transactional(&mut self, transactional: bool) -> &mut Self {
        self.set_flag(TRANSACTIONAL_BIT, transactional)
    }

    /// Marks the batch as a control batch (transaction marker).
    pub fn control(&mut self, control: bool) -> &mut Self {
        self.set_flag(CONTROL_BIT, control)
    }

    fn set_flag(&mut self, bit: i16, on: bool) -> &mut Self {
        if on {
            self.attributes |= bit;
        } else {
            self.attributes &= !bit;
        }
        self
    }

    /// Adds a record with the base timestamp and no headers.
    pub fn record(&mut self, key: Option<&[u8]>, value: Option<&[u8]>) -> &mut Self {
        self.record_at(self.base_timestamp_ms, key, value, &[])
    }

    /// Adds a record with its own timestamp and headers.
    pub fn record_at(
        &mut self,
        timestamp_ms: i64,
        key: Option<&[u8]>,
        value: Option<&[u8]>,
        headers: &[(&str, Option<&[u8]>)],
    ) -> &mut Self {
        let mut body =
            Vec::with_capacity(16 + key.map_or(0, <[u8]>::len) + value.map_or(0, <[u8]>::len));
        body.push(0); // record attributes, unused
        put_varlong(&mut body, timestamp_ms - self.base_timestamp_ms);
        put_varlong(&mut body, i64::from(self.records_count));
        put_bytes(&mut body, key);
        put_bytes(&mut body, value);
        put_varlong(&mut body, headers.len() as i64);
        for (header_key, header_value) in headers {
            put_bytes(&mut body, Some(header_key.as_bytes()));
            put_bytes(&mut body, *header_value);
        }
        put_varlong(&mut self.records, body.len() as i64);
        self.records.extend_from_slice(&body);
        self.records_count += 1;
        self.max_timestamp_ms = self.max_timestamp_ms.max(timestamp_ms);
        self
    }

    /// Number of records added so far.
    pub fn len(&self) -> usize {
        self.records_count as usize
    }

    /// Whether no record was added.
    pub fn is_empty(&self) -> bool {
        self.records_count == 0
    }

    /// Encodes the batch: header, records, CRC-32C.
    pub fn build(&self) -> Vec<u8> {
        let total = HEADER_BYTES + self.records.len();
        let mut out = Vec::with_capacity(total);
        out.extend_from_slice(&self.base_offset.0.to_be_bytes());
        out.extend_from_slice(&((total - LOG_OVERHEAD_BYTES) as i32).to_be_bytes());
        out.extend_from_slice(&self.partition_leader_epoch.0.to_be_bytes());
        out.push(MAGIC_V2 as u8);
        out.extend_from_slice(&[0; 4]); // CRC, filled below
        out.extend_from_slice(&self.attributes.to_be_bytes());
        out.extend_from_slice(&(self.records_count - 1).max(0).to_be_bytes());
        out.extend_from_slice(&self.base_timestamp_ms.to_be_bytes());
        out.extend_from_slice(&self.max_timestamp_ms.to_be_bytes());
        out.extend_from_slice(&self.producer_id.to_be_bytes());
        out.extend_from_slice(&self.producer_epoch.to_be_bytes());
        out.extend_from_slice(&self.base_sequence.to_be_bytes());
        out.extend_from_slice(&self.records_count.to_be_bytes());
        out.extend_from_slice(&self.records);
        let crc = crate::batch::compute_crc(&out);
        out[17..21].copy_from_slice(&crc.to_be_bytes());
        out
    }
}

/// Zig-zag varint encoding of a signed 64-bit value (Kafka's varlong; varints use the same bytes
/// for values that fit in 32 bits).
fn put_varlong(out: &mut Vec<u8>, value: i64) {
    let mut zigzag = ((value << 1) ^ (value >> 63)) as u64;
    while zigzag >= 0x80 {
        out.push((zigzag as u8 & 0x7f) | 0x80);
        zigzag >>= 7;
    }
    out.push(zigzag as u8);
}

/// A length-prefixed byte string; `None` is length -1.
fn put_bytes(out: &mut Vec<u8>, bytes: Option<&[u8]>) {
    match bytes {
        Some(bytes) => {
            put_varlong(out, bytes.len() as i64);
            out.extend_from_slice(bytes);
        }
        None => put_varlong(out, -1),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn varlong_matches_kafka_zigzag_examples() {
        let cases: [(i64, &[u8]); 5] = [
            (0, &[0x00]),
            (-1, &[0x01]),
            (1, &[0x02]),
            (63, &[0x7e]),
            (300, &[0xd8, 0x04]),
        ];
        for (value, expected) in cases {
            let mut out = Vec::new();
            put_varlong(&mut out, value);
            assert_eq!(out, expected, "varlong({value})");
        }
    }
}
