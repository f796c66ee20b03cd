//! Tests of the queue index's read runs: whatever the records a poll returned, expanding the
//! runs gives back exactly those records, in order, with their dense indices and writers.

use logjam_history::{
    CompletedOp, Function, Key, KeyReads, MicroOp, Offset, OpIndex, OpValue, Outcome, ProcessId,
    Record, Value,
};

use super::index::{NO_OP, QueueIndex};

fn op(index: u64, f: Function, outcome: Outcome, micro: Vec<MicroOp>) -> CompletedOp {
    CompletedOp {
        process: ProcessId(index),
        outcome,
        f,
        invoke_index: OpIndex(2 * index),
        complete_index: Some(OpIndex(2 * index + 1)),
        invoke_time_ns: 10 * index,
        complete_time_ns: Some(10 * index + 5),
        value: OpValue::MicroOps(micro),
        error: None,
    }
}

fn poll(key: i64, records: &[(i64, i64)]) -> KeyReads {
    KeyReads {
        key: Key(key),
        records: records
            .iter()
            .map(|&(offset, value)| Record {
                offset: Offset(offset),
                value: Value(value),
            })
            .collect(),
        fetch: None,
    }
}

#[test]
fn runs_expand_to_the_records_each_poll_returned() {
    let mut index = QueueIndex::new();
    // Writers of key 1: values 100..106 at offsets 0..6 (offset 3 is a marker: no record).
    let sends = [(0, 100), (1, 101), (2, 102), (4, 104), (5, 105), (6, 106)]
        .iter()
        .map(|&(offset, value)| MicroOp::Send {
            key: Key(1),
            value: Value(value),
            offset: Some(Offset(offset)),
        })
        .chain(std::iter::once(MicroOp::Send {
            key: Key(1),
            value: Value(999),
            offset: None,
        }))
        .collect();
    index.ingest(op(0, Function::Send, Outcome::Ok, sends));
    // A poll with a gap, a repeat, a step back, two keys and, at offset 5, a second value
    // (inconsistent offsets, sent by op 0 too), after an earlier poll fixed 105 as offset 5's
    // representative. The second poll ended `info`: its records count as observations all
    // the same.
    let first = vec![(4, 104), (5, 105)];
    let second = vec![
        (0, 100),
        (1, 101),
        (2, 102),
        (4, 104),
        (5, 999),
        (5, 999),
        (1, 101),
        (6, 106),
    ];
    let polls = [
        vec![poll(1, &first)],
        vec![poll(1, &second), poll(2, &[(0, 7), (1, 8)])],
    ];
    for (i, reads) in polls.iter().enumerate() {
        let micro = vec![MicroOp::Poll {
            reads: Some(reads.clone()),
        }];
        let outcome = [Outcome::Ok, Outcome::Info][i];
        index.ingest(op(1 + i as u64, Function::Poll, outcome, micro));
    }
    index.finish();
    for (i, reads) in polls.iter().enumerate() {
        let expected: Vec<(i64, i64, i64)> = reads
            .iter()
            .flat_map(|kr| {
                kr.records
                    .iter()
                    .map(move |r| (kr.key.0, r.offset.0, r.value.0))
            })
            .collect();
        let got: Vec<(i64, i64, i64)> = index
            .reads_of(1 + i as u32)
            .map(|r| (index.key(r.key).0, r.offset.0, r.value.0))
            .collect();
        assert_eq!(got, expected, "poll {i}");
    }
    let reads: Vec<_> = index.reads_of(2).collect();
    // Dense indices skip no offset that was observed: offset 3 was never observed.
    let dense: Vec<u32> = reads.iter().map(|r| r.index).collect();
    assert_eq!(dense, vec![0, 1, 2, 3, 4, 4, 1, 5, 0, 1]);
    // Writers: the send op for key 1's values, 999 included; none for key 2's, never sent.
    let writers: Vec<u32> = reads.iter().map(|r| r.writer).collect();
    assert_eq!(writers, vec![0, 0, 0, 0, 0, 0, 0, 0, NO_OP, NO_OP]);
    // Only the ok poll's records count as read by ok ops.
    assert_eq!(index.ok_reads_count(), 2);
}
