//! `isolation.level`: what a consumer may see of transactions. Pure; `consumer.rs` sends the
//! level in Fetch and ListOffsets and asks [`AbortedTransactionFilter`] about every fetched
//! batch.
//!
//! With `read_committed` the leader answers only up to the last stable offset (LSO) and lists
//! the aborted transactions overlapping the fetched range; the consumer then drops the records
//! of those transactions with Kafka's algorithm (`CompletedFetch`): the aborted list sorted by
//! first offset; before each batch that has a producer id, every aborted entry whose first
//! offset is at or below the batch's last offset puts its producer id in the aborted set; a
//! transactional batch of a producer in the set is skipped; that producer's ABORT marker takes
//! it out of the set again. Control batches (the markers) are never returned, at either level.
//!
//! The LSO bound itself is the leader's job: like Kafka's client, this one does not second-guess
//! it, so a leader that returns records above the LSO is visible to the checkers.

use std::collections::HashSet;

use bytes::Bytes;
use kafka_protocol::records::{Record, RecordBatchDecoder};

use crate::ids::TopicPartition;

/// `isolation.level`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum IsolationLevel {
    /// Every record up to the high watermark, aborted ones included (Kafka's default).
    #[default]
    ReadUncommitted,
    /// Only records of committed transactions (and non-transactional ones), up to the LSO.
    ReadCommitted,
}

impl IsolationLevel {
    /// Parses Kafka's spellings.
    pub fn parse(value: &str) -> Option<IsolationLevel> {
        match value.trim() {
            "read_uncommitted" => Some(IsolationLevel::ReadUncommitted),
            "read_committed" => Some(IsolationLevel::ReadCommitted),
            _ => None,
        }
    }

    /// The wire value of Fetch's and ListOffsets' `isolation_level`.
    pub fn to_wire(self) -> i8 {
        match self {
            IsolationLevel::ReadUncommitted => 0,
            IsolationLevel::ReadCommitted => 1,
        }
    }
}

/// The control record type of an ABORT marker (`ControlRecordType.ABORT`).
const CONTROL_TYPE_ABORT: i16 = 0;

/// One fetched record batch: its header facts and its records.
#[derive(Debug, Clone)]
pub struct FetchedBatch {
    /// The producer id, -1 for none.
    pub producer_id: i64,
    /// The transactional attribute bit.
    pub transactional: bool,
    /// The control attribute bit (a COMMIT or ABORT marker).
    pub control: bool,
    /// The batch's last offset (`base_offset + last_offset_delta`), even when compaction
    /// removed records from it.
    pub last_offset: i64,
    /// The records.
    pub records: Vec<Record>,
}

impl FetchedBatch {
    /// Whether this is an ABORT marker (a control batch whose record's key says ABORT).
    pub fn is_abort_marker(&self) -> bool {
        self.control
            && self.records.first().is_some_and(|record| {
                record.key.as_ref().is_some_and(|key| {
                    key.len() >= 4 && i16::from_be_bytes([key[2], key[3]]) == CONTROL_TYPE_ABORT
                })
            })
    }
}

/// Decodes the batches of a fetch response one at a time, as they are asked for, keeping every
/// batch before the first that does not decode (a broker may cut the last batch short by
/// bytes). Lazy as Kafka's `CompletedFetch`: a poll that stops at `max.poll.records` leaves
/// the rest of a (up to `max.partition.fetch.bytes`) response undecoded.
pub fn decode_batches(data: Bytes, partition: &TopicPartition) -> DecodedBatches<'_> {
    DecodedBatches { data, partition }
}

/// The batches of one partition's fetch data, decoded on demand (see [`decode_batches`]).
#[derive(Debug)]
pub struct DecodedBatches<'a> {
    data: Bytes,
    partition: &'a TopicPartition,
}

impl DecodedBatches<'_> {
    /// How many bytes are not decoded yet: the next batch and everything after it.
    pub fn remaining(&self) -> usize {
        self.data.len()
    }
}

impl Iterator for DecodedBatches<'_> {
    type Item = FetchedBatch;

    fn next(&mut self) -> Option<FetchedBatch> {
        let data = &mut self.data;
        // Header: base offset (8), length (4), leader epoch (4), magic (1), crc (4),
        // attributes (2), last offset delta (4).
        if data.len() < 27 {
            return None;
        }
        let base_offset = i64::from_be_bytes(data[0..8].try_into().expect("8 bytes"));
        let last_offset_delta = i32::from_be_bytes(data[23..27].try_into().expect("4 bytes"));
        match RecordBatchDecoder::decode(data) {
            Ok(set) => {
                let first = set.records.first();
                Some(FetchedBatch {
                    producer_id: first.map_or(-1, |r| r.producer_id),
                    transactional: first.is_some_and(|r| r.transactional),
                    control: first.is_some_and(|r| r.control),
                    last_offset: base_offset + i64::from(last_offset_delta),
                    records: set.records,
                })
            }
            Err(error) => {
                tracing::debug!(%error, partition = %self.partition, "undecodable tail of fetch data");
                self.data = Bytes::new();
                None
            }
        }
    }
}

/// What to do with one fetched batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BatchVerdict {
    /// Return its records.
    Deliver,
    /// Skip it: it belongs to an aborted transaction.
    SkipAborted,
    /// Skip it: a control batch (transaction marker).
    SkipControl,
}

/// Kafka's aborted-transaction filtering for one partition's fetched data.
#[derive(Debug)]
pub struct AbortedTransactionFilter {
    level: IsolationLevel,
    /// Aborted transactions not reached yet, as (first offset, producer id), sorted so the
    /// lowest first offset is last (popped first).
    pending: Vec<(i64, i64)>,
    /// Producers whose batches are skipped until their ABORT marker.
    aborted_producers: HashSet<i64>,
}

impl AbortedTransactionFilter {
    /// A filter for data fetched at `level` with the response's aborted transactions, as
    /// (producer id, first offset) pairs.
    pub fn new(
        level: IsolationLevel,
        aborted: impl IntoIterator<Item = (i64, i64)>,
    ) -> AbortedTransactionFilter {
        let mut pending: Vec<(i64, i64)> = aborted
            .into_iter()
            .map(|(producer_id, first_offset)| (first_offset, producer_id))
            .collect();
        pending.sort_unstable_by(|a, b| b.cmp(a));
        AbortedTransactionFilter {
            level,
            pending,
            aborted_producers: HashSet::new(),
        }
    }

    /// The verdict for the next batch, in log order.
    pub fn verdict(&mut self, batch: &FetchedBatch) -> BatchVerdict {
        if self.level == IsolationLevel::ReadCommitted && batch.producer_id >= 0 {
            while self
                .pending
                .last()
                .is_some_and(|(first_offset, _)| *first_offset <= batch.last_offset)
            {
                let (_, producer_id) = self.pending.pop().expect("checked");
                self.aborted_producers.insert(producer_id);
            }
            if batch.is_abort_marker() {
                self.aborted_producers.remove(&batch.producer_id);
            } else if batch.transactional && self.aborted_producers.contains(&batch.producer_id) {
                return BatchVerdict::SkipAborted;
            }
        }
        if batch.control {
            BatchVerdict::SkipControl
        } else {
            BatchVerdict::Deliver
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::BytesMut;
    use indexmap::IndexMap;
    use kafka_protocol::records::{
        Compression, RecordBatchEncoder, RecordEncodeOptions, TimestampType,
    };

    /// One encoded batch: `values` from `producer_id` at `base_offset` (transactional when
    /// `transactional`), or a control marker when `marker` is Some(type).
    fn batch(
        base_offset: i64,
        producer_id: i64,
        transactional: bool,
        marker: Option<i16>,
        values: &[&str],
    ) -> Bytes {
        let records: Vec<Record> = if let Some(kind) = marker {
            let mut key = Vec::new();
            key.extend_from_slice(&0i16.to_be_bytes());
            key.extend_from_slice(&kind.to_be_bytes());
            let mut value = Vec::new();
            value.extend_from_slice(&0i16.to_be_bytes());
            value.extend_from_slice(&5i32.to_be_bytes());
            vec![record(
                base_offset,
                producer_id,
                true,
                true,
                Some(key),
                Some(value),
            )]
        } else {
            values
                .iter()
                .enumerate()
                .map(|(i, v)| {
                    record(
                        base_offset + i as i64,
                        producer_id,
                        transactional,
                        false,
                        None,
                        Some(v.as_bytes().to_vec()),
                    )
                })
                .collect()
        };
        let mut buf = BytesMut::new();
        RecordBatchEncoder::encode(
            &mut buf,
            &records,
            &RecordEncodeOptions {
                version: 2,
                compression: Compression::None,
            },
        )
        .unwrap();
        // The encoder writes offsets relative to the first record: set the base offset.
        buf[0..8].copy_from_slice(&base_offset.to_be_bytes());
        buf.freeze()
    }

    fn record(
        offset: i64,
        producer_id: i64,
        transactional: bool,
        control: bool,
        key: Option<Vec<u8>>,
        value: Option<Vec<u8>>,
    ) -> Record {
        Record {
            transactional,
            control,
            delete_horizon: false,
            partition_leader_epoch: 0,
            producer_id,
            producer_epoch: 0,
            timestamp_type: TimestampType::Creation,
            offset,
            sequence: if producer_id >= 0 { offset as i32 } else { -1 },
            timestamp: 0,
            key: key.map(Bytes::from),
            value: value.map(Bytes::from),
            headers: IndexMap::new(),
        }
    }

    const ABORT: Option<i16> = Some(0);
    const COMMIT: Option<i16> = Some(1);

    /// The log: pid 7 writes a (0..=1), aborted at 4; pid 8 writes b (2..=3) committed at 5;
    /// plain c at 6; pid 7 writes d (7) and commits at 8; pid 9 writes e (9), still open.
    fn log() -> Bytes {
        let parts = [
            batch(0, 7, true, None, &["a0", "a1"]),
            batch(2, 8, true, None, &["b2", "b3"]),
            batch(4, 7, true, ABORT, &[]),
            batch(5, 8, true, COMMIT, &[]),
            batch(6, -1, false, None, &["c6"]),
            batch(7, 7, true, None, &["d7"]),
            batch(8, 7, true, COMMIT, &[]),
            batch(9, 9, true, None, &["e9"]),
        ];
        let mut all = BytesMut::new();
        for part in parts {
            all.extend_from_slice(&part);
        }
        all.freeze()
    }

    fn delivered(level: IsolationLevel, aborted: &[(i64, i64)], data: Bytes) -> Vec<String> {
        let tp = TopicPartition::new("t", 0);
        let mut filter = AbortedTransactionFilter::new(level, aborted.iter().copied());
        decode_batches(data, &tp)
            .filter(|b| filter.verdict(b) == BatchVerdict::Deliver)
            .flat_map(|b| b.records)
            .map(|r| String::from_utf8(r.value.unwrap().to_vec()).unwrap())
            .collect()
    }

    #[test]
    fn read_committed_drops_the_aborted_transaction_and_the_markers() {
        let got = delivered(IsolationLevel::ReadCommitted, &[(7, 0)], log());
        assert_eq!(got, ["b2", "b3", "c6", "d7", "e9"]);
    }

    /// The same producer's later, committed transaction is delivered: its ABORT marker took it
    /// out of the aborted set.
    #[test]
    fn the_abort_marker_ends_a_producers_aborted_range() {
        let got = delivered(IsolationLevel::ReadCommitted, &[(7, 0)], log());
        assert!(got.contains(&"d7".to_owned()));
    }

    #[test]
    fn read_uncommitted_sees_aborted_records_but_never_markers() {
        let got = delivered(IsolationLevel::ReadUncommitted, &[(7, 0)], log());
        assert_eq!(got, ["a0", "a1", "b2", "b3", "c6", "d7", "e9"]);
    }

    /// Without the aborted list (a leader that lost it) read_committed cannot drop anything:
    /// the filter relies on the leader's list, as Kafka's consumer does.
    #[test]
    fn only_listed_transactions_are_dropped() {
        let got = delivered(IsolationLevel::ReadCommitted, &[], log());
        assert_eq!(got, ["a0", "a1", "b2", "b3", "c6", "d7", "e9"]);
    }

    /// An aborted entry whose first offset lies beyond a batch does not affect that batch.
    #[test]
    fn an_aborted_entry_applies_from_its_first_offset_only() {
        let data = [
            batch(0, 7, true, None, &["x0"]),
            batch(1, 7, true, COMMIT, &[]),
            batch(2, 7, true, None, &["y2"]),
            batch(3, 7, true, ABORT, &[]),
        ]
        .concat();
        let got = delivered(IsolationLevel::ReadCommitted, &[(7, 2)], Bytes::from(data));
        assert_eq!(got, ["x0"]);
    }

    #[test]
    fn batch_facts_come_from_the_header() {
        let tp = TopicPartition::new("t", 0);
        let batches: Vec<FetchedBatch> = decode_batches(log(), &tp).collect();
        assert_eq!(batches.len(), 8);
        assert_eq!(batches[0].last_offset, 1);
        assert!(batches[2].is_abort_marker() && batches[2].control);
        assert!(!batches[3].is_abort_marker() && batches[3].control);
        assert_eq!(batches[4].producer_id, -1);
        let mut truncated = log().to_vec();
        truncated.truncate(truncated.len() - 5);
        assert_eq!(decode_batches(Bytes::from(truncated), &tp).count(), 7);
    }

    #[test]
    fn level_spellings_and_wire_values() {
        assert_eq!(
            IsolationLevel::parse("read_committed"),
            Some(IsolationLevel::ReadCommitted)
        );
        assert_eq!(IsolationLevel::parse("committed"), None);
        assert_eq!(IsolationLevel::ReadCommitted.to_wire(), 1);
        assert_eq!(IsolationLevel::default().to_wire(), 0);
    }
}
