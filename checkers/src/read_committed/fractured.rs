//! `fractured-read`: a read_committed poll returned some records of transaction T on
//! partition p, and the range it read of p (`from..to`: every offset there was returned or
//! skipped as aborted data or a marker) held another record of T that it did not return.
//! Markers land per partition, so on one partition a transaction is visible all or none; a
//! record skipped inside the range was judged aborted while its sibling was delivered.
//!
//! T's records are its sends whose offset is known (acknowledged, or read by any op). A
//! failed T is left out: returning any of its records is already `aborted-read`.
//!
//! Across partitions Kafka promises no atomic visibility: a poll that returned T's records on
//! p while the same poll's answer for q put T's record on q at or above q's LSO (not yet
//! stable there: its marker or high watermark had not passed it) is counted
//! ([`super::ReadCommittedStats::cross_partition_partial`]), not reported. A poll merely
//! behind on q (its position short of T's record, which is below q's LSO) is not counted.

use std::collections::BTreeSet;

use logjam_history::{Offset, Outcome};

use super::{RcIndex, ReadCommittedStats};
use crate::anomaly::{Anomalies, Anomaly, AnomalyKind};

/// Reports `fractured-read` and counts cross-partition partial polls.
pub(crate) fn check(index: &RcIndex, stats: &mut ReadCommittedStats, out: &mut Anomalies) {
    let mut start = 0;
    while start < index.polls.len() {
        // The keys of one poll micro-op are consecutive.
        let (op, poll) = (index.polls[start].op, index.polls[start].poll);
        let end = start
            + index.polls[start..]
                .iter()
                .take_while(|p| p.op == op && p.poll == poll)
                .count();
        let reads = &index.polls[start..end];
        let mut writers = BTreeSet::new();
        for read in reads {
            for record in &read.records {
                if let Some(writer) = index.writer(read.key, record.value)
                    && index.op(writer).outcome != Outcome::Fail
                {
                    writers.insert((writer, read.key));
                }
            }
        }
        let mut partial: BTreeSet<u32> = BTreeSet::new();
        for &(writer, key) in &writers {
            let read = reads.iter().find(|r| r.key == key).expect("read of key");
            let returned: BTreeSet<Offset> = read.records.iter().map(|r| r.offset).collect();
            for &(send_key, value, _) in &index.op(writer).sends {
                let Some(offset) = index.offset_of(send_key, value) else {
                    continue;
                };
                if send_key == key {
                    if (read.fetch.from..read.fetch.to).contains(&offset)
                        && !returned.contains(&offset)
                    {
                        out.push(witness(index, read, writer, offset, value));
                    }
                } else if let Some(other) = reads.iter().find(|r| r.key == send_key)
                    && offset >= other.fetch.lso
                {
                    partial.insert(writer);
                }
            }
        }
        stats.cross_partition_partial += partial.len() as u64;
        start = end;
    }
}

fn witness(
    index: &RcIndex,
    read: &super::PollRead,
    writer: u32,
    offset: Offset,
    value: logjam_history::Value,
) -> Anomaly {
    let reader = &index.op(read.op).op_ref;
    let sender = &index.op(writer).op_ref;
    let returned: Vec<String> = read
        .records
        .iter()
        .filter(|r| index.writer(read.key, r.value) == Some(writer))
        .map(|r| format!("{} at {}", r.value, r.offset))
        .collect();
    let mut anomaly = Anomaly::new(
        AnomalyKind::FracturedRead,
        Some(read.key),
        format!(
            "op {} polled key {} read_committed from offset {} to {} and returned {} of op {}'s \
             transaction, but skipped its value {value} at offset {offset} inside that range: \
             one partition's records of a transaction are visible all or none",
            reader.index.0,
            read.key,
            read.fetch.from,
            read.fetch.to,
            returned.join(", "),
            sender.index.0
        ),
    );
    anomaly.ops = vec![sender.clone(), reader.clone()];
    anomaly.offsets = vec![offset];
    anomaly.values = vec![value];
    anomaly
}
