//! The durability report: acknowledged writes lost, per key (topic-partition), with when each
//! was acknowledged and which faults happened between that moment and the final read.
//!
//! An acknowledged write is an `ok` send micro-op. It is **lost** when the final reads (see
//! `queue::loss` for how they are chosen) did not return it and any of these holds:
//! it is a `lost-write` or `unseen-lost` anomaly; or one final read of its key returned records
//! on both sides of its offset but not it (it was in the log once, e.g. read during the run,
//! and recovery truncated it); or it was acknowledged, before the workload's `log-end` op, at
//! an offset at or past the end of the log that the final reads read to (that op says they
//! read every offset below that end, so the log no longer holds it). Otherwise, when the final reads never
//! reached its offset, it is counted as **unconfirmed**: maybe late, maybe lost, the history
//! cannot tell.
//!
//! Nemesis events listed for a lost write are those whose completion time lies between its
//! acknowledgement and the last final read of its key (or the end of the history).

use std::collections::BTreeMap;

use logjam_history::{Header, Key, NemesisEvent, Offset, OpIndex, Outcome, TopicPartition, Value};
use serde::Serialize;

use crate::anomaly::AnomalyKind;
use crate::attribution::{Evidence, Mechanism, counts};
use crate::availability::{Unavailable, unavailable};
use crate::fxhash::FxHashMap;
use crate::queue::index::{KeyId, NO_INDEX, QueueIndex};
use crate::queue::loss::{FinalReadSource, FinalReads};

/// A run of lost offsets that are adjacent in the key's log.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct OffsetRange {
    /// First offset of the run.
    pub first: Offset,
    /// Last offset of the run (inclusive).
    pub last: Offset,
    /// Lost writes in the run.
    pub count: u64,
}

/// One acknowledged write that the final reads did not return.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct LostWrite {
    /// The value sent.
    pub value: Value,
    /// Its offset, when known (from the acknowledgement or an earlier read).
    pub offset: Option<Offset>,
    /// The send op (completion index).
    pub op: OpIndex,
    /// When it was acknowledged, ns since start.
    pub ack_time_ns: u64,
    /// Why it counts as lost.
    pub reason: String,
    /// Nemesis events (their indices) between the acknowledgement and the final read.
    pub nemesis_between: Vec<OpIndex>,
    /// The mechanism that let it go, from what the history shows (`crate::attribution`).
    pub mechanism: Mechanism,
}

/// Losses on one key (topic-partition).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PartitionDurability {
    /// The key.
    pub key: Key,
    /// Its topic-partition, when the header maps it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub topic_partition: Option<TopicPartition>,
    /// Acknowledged writes to this key.
    pub acknowledged: u64,
    /// Of which lost.
    pub lost_count: u64,
    /// Of which neither returned nor reached by the final reads.
    pub unconfirmed: u64,
    /// Lost offsets as runs adjacent in the log.
    pub offset_ranges: Vec<OffsetRange>,
    /// Every lost write, by offset then value.
    pub lost: Vec<LostWrite>,
    /// Completion time of the last final read of this key, if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub final_read_time_ns: Option<u64>,
}

/// Acknowledged writes lost, across the run.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DurabilityReport {
    /// Which ops served as the final reads.
    pub final_reads: FinalReadSource,
    /// Acknowledged writes in the history.
    pub acknowledged: u64,
    /// Of which lost.
    pub lost: u64,
    /// Lost writes per mechanism (`acks-1`, `isr-of-one`, ..., `unattributed`).
    pub lost_by_mechanism: BTreeMap<String, u64>,
    /// Of which unconfirmed (late or lost: unknown).
    pub unconfirmed: u64,
    /// Keys with at least one lost or unconfirmed write.
    pub partitions: Vec<PartitionDurability>,
    /// The nemesis events that lost writes refer to.
    pub nemesis_events: Vec<NemesisEvent>,
    /// Partitions still without a leader after the heal (`crate::availability`).
    pub unavailable: Vec<Unavailable>,
}

impl DurabilityReport {
    /// An empty report (nothing acknowledged).
    pub fn empty() -> DurabilityReport {
        DurabilityReport {
            final_reads: FinalReadSource::None,
            acknowledged: 0,
            lost: 0,
            lost_by_mechanism: BTreeMap::new(),
            unconfirmed: 0,
            partitions: Vec::new(),
            nemesis_events: Vec::new(),
            unavailable: Vec::new(),
        }
    }
}

/// Per key while building: acknowledged, unconfirmed, lost writes with their dense index.
type KeyTally = (u64, u64, Vec<(u32, LostWrite)>);

pub(crate) fn report(
    header: &Header,
    index: &QueueIndex,
    finals: &FinalReads,
    proven_lost: &FxHashMap<(KeyId, Value), AnomalyKind>,
    nemesis: &[NemesisEvent],
    end_time_ns: u64,
) -> DurabilityReport {
    let mut report = DurabilityReport::empty();
    report.final_reads = finals.source;
    // Per key: acknowledged count, unconfirmed count, lost writes with their dense index.
    let mut per_key: BTreeMap<KeyId, KeyTally> = BTreeMap::new();
    let mut nemesis_times: Vec<u64> = nemesis.iter().map(|n| n.time_ns).collect();
    nemesis_times.sort_unstable();
    let mut nemesis_sorted: Vec<&NemesisEvent> = nemesis.iter().collect();
    nemesis_sorted.sort_by_key(|n| n.time_ns);
    let mut referenced = vec![false; nemesis_sorted.len()];
    let acks = header
        .config
        .get("client")
        .and_then(|client| client.get("acks"))
        .and_then(|acks| acks.as_str());
    let evidence = Evidence::new(acks, nemesis);
    for record in &index.ops {
        if record.op.outcome != Outcome::Ok {
            continue;
        }
        let ack_time_ns = record
            .op
            .complete_time_ns
            .unwrap_or(record.op.invoke_time_ns);
        for send in &index.sends[crate::queue::index::range(&record.sends)] {
            report.acknowledged += 1;
            let entry = per_key.entry(send.key).or_default();
            entry.0 += 1;
            let kf = &finals.keys[send.key as usize];
            if kf.values.contains(&send.value) {
                continue;
            }
            let covered = send.index != NO_INDEX && kf.spans_index(send.index);
            let log_end = index
                .log_ends
                .get(&send.key)
                .filter(|end| end.covers_ack(Some(ack_time_ns)) && kf.read_whole_log_below(end.end))
                .map(|end| end.end);
            let beyond_end = send
                .offset
                .zip(log_end)
                .is_some_and(|(offset, end)| offset.0 >= end);
            let detail = if covered {
                Some(
                    "a final read returned records on both sides of it but not it (truncated)"
                        .to_owned(),
                )
            } else if beyond_end {
                Some(format!(
                    "acknowledged at an offset the log no longer has: the final reads read the \
                     whole log, which ends at {}",
                    log_end.unwrap_or_default()
                ))
            } else {
                None
            };
            let reason = match (proven_lost.get(&(send.key, send.value)), detail) {
                (Some(kind), Some(detail)) => format!("{kind}: {detail}"),
                (Some(kind), None) => kind.to_string(),
                (None, Some(detail)) => detail,
                (None, None) => {
                    entry.1 += 1;
                    report.unconfirmed += 1;
                    continue;
                }
            };
            let final_time = kf.last_time_ns.unwrap_or(end_time_ns);
            let from = nemesis_times.partition_point(|&t| t < ack_time_ns);
            let to = nemesis_times.partition_point(|&t| t <= final_time);
            let between: Vec<OpIndex> = (from..to.max(from))
                .map(|i| {
                    referenced[i] = true;
                    nemesis_sorted[i].index
                })
                .collect();
            let log = &index.keys[send.key as usize];
            let partition = header
                .topic_partition(index.key(send.key))
                .map(|tp| i64::from(tp.partition));
            let mechanism =
                evidence.attribute(partition, record.op.invoke_time_ns, ack_time_ns, final_time);
            report.lost += 1;
            entry.2.push((
                send.index,
                LostWrite {
                    value: send.value,
                    offset: send.offset.or_else(|| log.offset_at(send.index)),
                    op: record.op.index(),
                    ack_time_ns,
                    reason,
                    nemesis_between: between,
                    mechanism,
                },
            ));
        }
    }
    for (key_id, (acknowledged, unconfirmed, mut lost)) in per_key {
        if lost.is_empty() && unconfirmed == 0 {
            continue;
        }
        lost.sort_by_key(|(i, w)| (w.offset, *i, w.value));
        let mut ranges: Vec<OffsetRange> = Vec::new();
        let mut previous_index: Option<u32> = None;
        for (i, w) in &lost {
            let Some(offset) = w.offset else { continue };
            match ranges.last_mut() {
                Some(range)
                    if previous_index.is_some_and(|p| *i != NO_INDEX && *i <= p + 1)
                        || range.last.0 + 1 == offset.0 =>
                {
                    range.last = offset;
                    range.count += 1;
                }
                _ => ranges.push(OffsetRange {
                    first: offset,
                    last: offset,
                    count: 1,
                }),
            }
            previous_index = Some(*i);
        }
        let key = index.key(key_id);
        report.partitions.push(PartitionDurability {
            key,
            topic_partition: header.topic_partition(key),
            acknowledged,
            lost_count: lost.len() as u64,
            unconfirmed,
            offset_ranges: ranges,
            lost: lost.into_iter().map(|(_, w)| w).collect(),
            final_read_time_ns: finals.keys[key_id as usize].last_time_ns,
        });
    }
    report.lost_by_mechanism = counts(
        report
            .partitions
            .iter()
            .flat_map(|p| p.lost.iter().map(|w| w.mechanism)),
    );
    report.unavailable = unavailable(nemesis);
    report.nemesis_events = nemesis_sorted
        .into_iter()
        .zip(referenced)
        .filter(|(_, r)| *r)
        .map(|(n, _)| n.clone())
        .collect();
    report
}
