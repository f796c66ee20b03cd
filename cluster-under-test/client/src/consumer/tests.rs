//! Unit tests of the consumer without groups: truncation detection, batch parsing, read_committed
//! filtering and seeking.

use super::*;

#[test]
fn truncation_is_detected_when_the_epoch_ends_below_the_position() {
    assert_eq!(truncation_point(Offset(10), LeaderEpoch(3), 3, 12), None);
    assert_eq!(truncation_point(Offset(10), LeaderEpoch(3), 3, 10), None);
    assert_eq!(
        truncation_point(Offset(10), LeaderEpoch(3), 3, 7),
        Some(Offset(7))
    );
    assert_eq!(
        truncation_point(Offset(10), LeaderEpoch(3), 2, 8),
        Some(Offset(8))
    );
    assert_eq!(truncation_point(Offset(10), LeaderEpoch(3), -1, -1), None);
}

fn encoded_batch(first_offset: i64, values: &[&str]) -> Bytes {
    use indexmap::IndexMap;
    use kafka_protocol::records::{
        Compression, Record, RecordBatchEncoder, RecordEncodeOptions, TimestampType,
    };
    let records: Vec<Record> = values
        .iter()
        .enumerate()
        .map(|(i, value)| Record {
            transactional: false,
            control: false,
            delete_horizon: false,
            partition_leader_epoch: 0,
            producer_id: -1,
            producer_epoch: -1,
            timestamp_type: TimestampType::Creation,
            offset: first_offset + i as i64,
            sequence: (first_offset + i as i64) as i32,
            timestamp: 0,
            key: None,
            value: Some(Bytes::from(value.to_string())),
            headers: IndexMap::new(),
        })
        .collect();
    let mut buf = bytes::BytesMut::new();
    let options = RecordEncodeOptions {
        version: 2,
        compression: Compression::None,
    };
    RecordBatchEncoder::encode(&mut buf, &records, &options).unwrap();
    buf.freeze()
}

/// A consumer with `properties` (beside an unreachable bootstrap), assigned `t-0` at offset 0.
fn at_start(properties: &[(&str, &str)]) -> (Consumer, TopicPartition) {
    let mut consumer = Consumer::from_properties(
        [("bootstrap.servers", "127.0.0.1:1")]
            .into_iter()
            .chain(properties.iter().copied()),
    )
    .unwrap();
    let tp = TopicPartition::new("t", 0);
    consumer.assign([tp.clone()]);
    consumer.seek(&tp, SeekTo::Offset(Offset(0))).unwrap();
    (consumer, tp)
}

/// `take_records` over fetched `data` with the answer's `aborted` transactions; the offsets
/// returned.
fn take(
    consumer: &mut Consumer,
    tp: &TopicPartition,
    data: Bytes,
    aborted: Vec<(i64, i64)>,
) -> Vec<i64> {
    let filter = AbortedTransactionFilter::new(consumer.config.isolation_level, aborted);
    let mut out = Vec::new();
    consumer.take_records(tp, data, filter, answer(), &mut out);
    out.iter().map(|record| record.offset.0).collect()
}

fn answer() -> buffer::Answer {
    buffer::Answer {
        last_stable_offset: -1,
        high_watermark: 10,
        leader_epoch: LeaderEpoch(0),
    }
}

/// A poll capped by `max.poll.records` in the middle of a batch keeps the answer from that
/// batch on, at the position it stopped: decoding it again skips what was returned.
#[test]
fn the_rest_of_a_capped_answer_is_kept_from_the_batch_it_stopped_in() {
    let (mut consumer, tp) = at_start(&[("max.poll.records", "3")]);
    let second = encoded_batch(2, &["c", "d", "e"]);
    let data = Bytes::from([encoded_batch(0, &["a", "b"]).to_vec(), second.to_vec()].concat());
    assert_eq!(take(&mut consumer, &tp, data, Vec::new()), vec![0, 1, 2]);
    assert_eq!(consumer.position(&tp), Some(Offset(3)));
    let kept = consumer.kept.remove(&tp).expect("the rest is kept");
    assert_eq!((kept.position, &kept.data), (Offset(3), &second));
    let mut out = Vec::new();
    consumer.take_records(&tp, kept.data, kept.filter, kept.answer, &mut out);
    let offsets: Vec<i64> = out.iter().map(|record| record.offset.0).collect();
    assert_eq!(
        offsets,
        vec![3, 4],
        "the returned record of the batch is skipped"
    );
    assert!(consumer.kept.is_empty(), "nothing left to keep");
}

/// read_committed keeps nothing: every poll's fetch ranges must carry the LSO of an answer
/// given during that poll (the read-committed checker dates it by the poll).
#[test]
fn a_read_committed_consumer_keeps_nothing_of_a_capped_answer() {
    let (mut consumer, tp) = at_start(&[
        ("max.poll.records", "1"),
        ("isolation.level", "read_committed"),
    ]);
    let data = encoded_batch(0, &["a", "b"]);
    assert_eq!(take(&mut consumer, &tp, data, Vec::new()), vec![0]);
    assert_eq!(consumer.position(&tp), Some(Offset(1)));
    assert!(consumer.kept.is_empty());
}

/// Regression: a fetch ending in a partial batch (a broker cutting by bytes) used to be
/// dropped whole, so the consumer never moved and every later record looked unseen.
#[test]
fn complete_batches_before_a_partial_one_are_taken() {
    let (mut consumer, tp) = at_start(&[]);
    let first = encoded_batch(0, &["a", "b"]);
    let second = encoded_batch(2, &["c", "d"]);
    let mut data = first.to_vec();
    data.extend_from_slice(&second[..second.len() / 2]);
    assert_eq!(
        take(&mut consumer, &tp, Bytes::from(data), Vec::new()),
        vec![0, 1]
    );
    assert_eq!(consumer.position(&tp), Some(Offset(2)));
}

/// read_committed: the aborted batch's records are not returned and the position moves
/// past it and its marker; read_uncommitted returns them.
#[test]
fn read_committed_skips_aborted_batches_and_moves_past_them() {
    use kafka_protocol::records::{
        Compression, Record, RecordBatchEncoder, RecordEncodeOptions, TimestampType,
    };
    let encode = |offset: i64, control: bool, value: &[u8]| {
        let record = Record {
            transactional: true,
            control,
            delete_horizon: false,
            partition_leader_epoch: 0,
            producer_id: 7,
            producer_epoch: 0,
            timestamp_type: TimestampType::Creation,
            offset: 0,
            sequence: 0,
            timestamp: 0,
            // An ABORT marker's key: version 0, type 0.
            key: control.then(|| Bytes::from_static(&[0, 0, 0, 0])),
            value: Some(Bytes::copy_from_slice(value)),
            headers: indexmap::IndexMap::new(),
        };
        let mut buf = bytes::BytesMut::new();
        let options = RecordEncodeOptions {
            version: 2,
            compression: Compression::None,
        };
        RecordBatchEncoder::encode(&mut buf, &[record], &options).unwrap();
        buf[0..8].copy_from_slice(&offset.to_be_bytes());
        buf.to_vec()
    };
    let data = Bytes::from([encode(0, false, b"aborted"), encode(1, true, &[0; 6])].concat());
    for (level, expected) in [("read_committed", 0), ("read_uncommitted", 1)] {
        let (mut consumer, tp) = at_start(&[("isolation.level", level)]);
        let taken = take(&mut consumer, &tp, data.clone(), vec![(7, 0)]);
        assert_eq!(taken.len(), expected, "{level}");
        assert_eq!(consumer.position(&tp), Some(Offset(2)), "{level}");
    }
}

#[test]
fn seek_on_an_unassigned_partition_is_an_error() {
    let mut consumer = Consumer::from_properties([("bootstrap.servers", "127.0.0.1:1")]).unwrap();
    let tp = TopicPartition::new("t", 0);
    assert!(matches!(
        consumer.seek(&tp, SeekTo::Earliest),
        Err(Error::NotAssigned { .. })
    ));
    consumer.assign([tp.clone()]);
    consumer.seek(&tp, SeekTo::Offset(Offset(5))).unwrap();
    assert_eq!(consumer.position(&tp), Some(Offset(5)));
}
