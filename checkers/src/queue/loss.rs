//! Committed writes that were never read: `lost-write`, `unseen-lost` and `unseen` (late).
//!
//! A write is *committed* when its op is `ok`, or `info` with another of its sent values read
//! by an ok op (transactions are atomic: one visible write means all are). Let `R` be the
//! values of key k read by ok ops. "Lost" is claimed only where reads reached w's position;
//! a write whose position lies beyond everything the reads covered is `unseen`.
//!
//! - **lost-write**: `bound` is the highest first-index of any value in `R`. A committed value
//!   w ∉ `R` whose known last index is ≤ `bound` is lost: reads returned records after its
//!   position but never it. (Jepsen's `lost-write-cases`; tolerant of duplicates and
//!   inconsistent offsets because it uses first/last indices.)
//! - **unseen-lost**: a committed value w ∉ `R` that is not a lost-write, and one of:
//!   - its position is known and the *final reads* returned a record at or past it;
//!   - w was acknowledged before the workload's `log-end` op, which says the final reads read
//!     the key's whole log (every offset below its end, nothing at or past it), so the log no
//!     longer holds w;
//!   - its position is unknown, it was acknowledged before the send of a value L the final
//!     reads returned was invoked (so the log, when linearizable, holds w before L), the key's
//!     log was checked linearizable by `queue::realtime`, and the final reads covered every
//!     index from the log's start (offset 0) up to L's.
//!
//!   The real-time argument is never used for a write whose offset is known: the offset says
//!   where w sits, and when that is past every final read, a later send read earlier only
//!   shows the log is not linearizable (reported as `nonlinearizable-log`), not that w is gone.
//! - **unseen**: every other committed, never-read value: nothing read far enough to tell lost
//!   from late. Jepsen's `unseen`, minus the cases proven lost above.
//!
//! *Final reads* are, in order of preference: ok `final-poll` ops; else ok reads invoked after
//! the last nemesis event; else (no nemesis at all) every ok read.

use logjam_history::{Function, Outcome, Value};
use serde::Serialize;

use crate::anomaly::{Anomalies, Anomaly, AnomalyKind};
use crate::fxhash::{FxHashMap, FxHashSet};
use crate::queue::index::{KeyId, NO_INDEX, OpId, QueueIndex};

/// Which ops were taken as the final reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum FinalReadSource {
    /// Ok ops with `f = final-poll`.
    FinalPoll,
    /// Ok reads invoked after the last nemesis event.
    AfterLastNemesis,
    /// No nemesis events: every ok read.
    AllReads,
    /// Nothing qualified.
    None,
}

/// What the final reads saw of one key.
#[derive(Default)]
pub(crate) struct KeyFinalReads {
    pub max_index: Option<u32>,
    /// Values of this key the final reads returned.
    pub values: FxHashSet<Value>,
    /// The returned value whose writer was invoked latest:
    /// (invoke time, writer, value, reader, dense index read at).
    pub latest_writer: Option<(u64, OpId, Value, OpId, u32)>,
    /// Completion time of the last final read that returned this key.
    pub last_time_ns: Option<u64>,
    /// A final read that returned the key's highest index.
    pub reader_at_max: Option<OpId>,
    /// Index ranges final reads read across (each op's first to last index of this key),
    /// sorted and merged once `compute` finishes.
    pub spans: Vec<(u32, u32)>,
    /// The same in offsets, merged only when adjacent in offset.
    pub offset_spans: Vec<(i64, i64)>,
}

impl KeyFinalReads {
    /// True when the final reads read every offset from 0 through `offset`: one read's records
    /// cover the offsets between its first and last, and reads join only when their offsets
    /// are adjacent (an offset no read returned may hold a write whose offset is unknown).
    pub fn covers_offsets_to(&self, offset: i64) -> bool {
        self.offset_spans
            .first()
            .is_some_and(|&(first, last)| first == 0 && last >= offset)
    }

    /// True when the recorded final reads returned every offset below `end`: the premise of
    /// the workload's `log-end` op, checked against the history rather than trusted.
    pub fn read_whole_log_below(&self, end: i64) -> bool {
        end <= 0 || self.covers_offsets_to(end - 1)
    }

    /// True when some final read of this key read across dense index `index`.
    pub fn spans_index(&self, index: u32) -> bool {
        let after = self.spans.partition_point(|&(first, _)| first <= index);
        after > 0 && self.spans[after - 1].1 >= index
    }
}

/// The final reads, per key.
pub(crate) struct FinalReads {
    pub source: FinalReadSource,
    pub keys: Vec<KeyFinalReads>,
}

impl FinalReads {
    pub fn compute(index: &QueueIndex, last_nemesis_time_ns: Option<u64>) -> FinalReads {
        let readers =
            |r: &&crate::queue::index::OpRecord| r.op.outcome == Outcome::Ok && !r.reads.is_empty();
        // Only final polls that returned something count: a run whose final polls all failed
        // falls back to the reads after the last fault instead of having no final reads.
        let source = if index
            .ops
            .iter()
            .filter(readers)
            .any(|r| r.op.f == Function::FinalPoll)
        {
            FinalReadSource::FinalPoll
        } else if let Some(t) = last_nemesis_time_ns {
            if index
                .ops
                .iter()
                .filter(readers)
                .any(|r| r.op.invoke_time_ns >= t)
            {
                FinalReadSource::AfterLastNemesis
            } else {
                FinalReadSource::None
            }
        } else {
            FinalReadSource::AllReads
        };
        let mut keys: Vec<KeyFinalReads> = index
            .keys
            .iter()
            .map(|_| KeyFinalReads::default())
            .collect();
        for (id, record) in index.ops.iter().enumerate() {
            let id = id as OpId;
            if !readers(&record) {
                continue;
            }
            let selected = match source {
                FinalReadSource::FinalPoll => record.op.f == Function::FinalPoll,
                FinalReadSource::AfterLastNemesis => {
                    record.op.invoke_time_ns >= last_nemesis_time_ns.unwrap_or(0)
                }
                FinalReadSource::AllReads => true,
                FinalReadSource::None => false,
            };
            if !selected {
                continue;
            }
            let mut span_owner: Option<(OpId, KeyId)> = None;
            let time = record
                .op
                .complete_time_ns
                .unwrap_or(record.op.invoke_time_ns);
            for read in index.reads_of(id) {
                let kf = &mut keys[read.key as usize];
                let offset = read.offset.0;
                match (kf.spans.last_mut(), kf.offset_spans.last_mut()) {
                    (Some(span), Some(offsets)) if span_owner == Some((id, read.key)) => {
                        span.0 = span.0.min(read.index);
                        span.1 = span.1.max(read.index);
                        offsets.0 = offsets.0.min(offset);
                        offsets.1 = offsets.1.max(offset);
                    }
                    _ => {
                        kf.spans.push((read.index, read.index));
                        kf.offset_spans.push((offset, offset));
                    }
                }
                span_owner = Some((id, read.key));
                if kf.max_index.is_none_or(|m| read.index >= m) {
                    kf.max_index = Some(read.index);
                    kf.reader_at_max = Some(id);
                }
                kf.values.insert(read.value);
                kf.last_time_ns = Some(kf.last_time_ns.map_or(time, |t| t.max(time)));
                let log = &index.keys[read.key as usize];
                if let Some(writer) = log.value(read.value).and_then(|v| v.writer) {
                    let invoked = index.op(writer).invoke_time_ns;
                    if kf.latest_writer.is_none_or(|(t, ..)| invoked > t) {
                        kf.latest_writer = Some((invoked, writer, read.value, id, read.index));
                    }
                }
            }
        }
        for kf in &mut keys {
            kf.spans.sort_unstable();
            let mut merged: Vec<(u32, u32)> = Vec::with_capacity(kf.spans.len());
            for &(first, last) in &kf.spans {
                match merged.last_mut() {
                    Some(m) if first <= m.1.saturating_add(1) => m.1 = m.1.max(last),
                    _ => merged.push((first, last)),
                }
            }
            kf.spans = merged;
            kf.offset_spans.sort_unstable();
            let mut merged: Vec<(i64, i64)> = Vec::with_capacity(kf.offset_spans.len());
            for &(first, last) in &kf.offset_spans {
                match merged.last_mut() {
                    Some(m) if first <= m.1.saturating_add(1) => m.1 = m.1.max(last),
                    _ => merged.push((first, last)),
                }
            }
            kf.offset_spans = merged;
        }
        FinalReads { source, keys }
    }
}

/// Reports the three kinds; returns the values proven lost, for the durability report.
///
/// `linearizable[k]` is true when `queue::realtime` decided key k's log and found it
/// linearizable: only then does the real-time argument for unknown offsets hold.
pub(crate) fn check(
    index: &QueueIndex,
    finals: &FinalReads,
    linearizable: &[bool],
    out: &mut Anomalies,
) -> FxHashMap<(KeyId, Value), AnomalyKind> {
    let mut lost = FxHashMap::default();
    for (key_id, log) in index.keys.iter().enumerate() {
        let key_id = key_id as KeyId;
        // bound: highest first-index of any value an ok op read.
        let bound = log
            .values
            .iter()
            .filter(|(_, info)| info.ok_reader.is_some() && info.first_index != NO_INDEX)
            .max_by_key(|(_, info)| info.first_index)
            .map(|(v, info)| (Value(v), *info));
        let mut missing: Vec<(Value, OpId, u32)> = log
            .values
            .iter()
            .filter_map(|(v, info)| {
                let writer = info.writer?;
                let committed = index.ops[writer as usize].committed;
                (committed && info.ok_reader.is_none()).then_some((
                    Value(v),
                    writer,
                    info.last_index,
                ))
            })
            .collect();
        missing.sort_unstable_by_key(|m| m.0);
        let kf = &finals.keys[key_id as usize];
        for (value, writer, last_index) in missing {
            let writer_op = index.op(writer);
            let offset = log.offset_at(last_index);
            let position =
                offset.map_or_else(|| "an unknown offset".to_owned(), |o| format!("offset {o}"));
            if let Some((bound_value, bound_info)) = bound
                && last_index != NO_INDEX
                && last_index <= bound_info.first_index
            {
                let reader = bound_info.ok_reader.unwrap_or(writer);
                let bound_offset = log.offset_at(bound_info.first_index);
                let mut anomaly = Anomaly::new(
                    AnomalyKind::LostWrite,
                    Some(log.key),
                    format!(
                        "value {value} of key {} was committed by {} at {position}, but no ok read \
                         ever returned it, although {} read value {bound_value} at offset {}, \
                         later in the log",
                        log.key,
                        index.describe(writer),
                        index.describe(reader),
                        bound_offset.map_or_else(|| "?".to_owned(), |o| o.to_string()),
                    ),
                );
                anomaly.ops = vec![index.op_ref(writer), index.op_ref(reader)];
                anomaly.offsets = offset.into_iter().chain(bound_offset).collect();
                anomaly.values = vec![value, bound_value];
                out.push(anomaly);
                lost.insert((key_id, value), AnomalyKind::LostWrite);
                continue;
            }
            let known = last_index != NO_INDEX;
            let past_index = kf
                .max_index
                .filter(|&m| known && last_index <= m)
                .and(kf.reader_at_max);
            let ack_time = (writer_op.outcome == Outcome::Ok)
                .then_some(writer_op.complete_time_ns)
                .flatten();
            let log_end = index
                .log_ends
                .get(&key_id)
                .filter(|end| end.covers_ack(ack_time) && kf.read_whole_log_below(end.end))
                .map(|end| end.end);
            // Only for writes whose offset is unknown; see the module doc.
            let past_realtime = match (ack_time, kf.latest_writer) {
                (Some(ack), Some((invoked, later_writer, later_value, reader, later_index)))
                    if !known
                        && invoked > ack
                        && linearizable[key_id as usize]
                        && log
                            .offset_at(later_index)
                            .is_some_and(|o| kf.covers_offsets_to(o.0)) =>
                {
                    Some((later_writer, later_value, reader))
                }
                _ => None,
            };
            if let Some(reader) = past_index {
                let mut anomaly = Anomaly::new(
                    AnomalyKind::UnseenLost,
                    Some(log.key),
                    format!(
                        "value {value} of key {} was committed by {} at {position}, and the final \
                         read {} read past that offset without returning it",
                        log.key,
                        index.describe(writer),
                        index.describe(reader)
                    ),
                );
                anomaly.ops = vec![index.op_ref(writer), index.op_ref(reader)];
                anomaly.offsets = offset.into_iter().collect();
                anomaly.values = vec![value];
                out.push(anomaly);
                lost.insert((key_id, value), AnomalyKind::UnseenLost);
            } else if let Some(end) = log_end {
                let mut anomaly = Anomaly::new(
                    AnomalyKind::UnseenLost,
                    Some(log.key),
                    format!(
                        "value {value} of key {} was committed by {} at {position}, but the final \
                         reads read the whole log of key {}, which ends at offset {end} (the \
                         log-end op), and never returned it: the log no longer holds it",
                        log.key,
                        index.describe(writer),
                        log.key,
                    ),
                );
                anomaly.ops = vec![index.op_ref(writer)];
                anomaly.offsets = offset.into_iter().collect();
                anomaly.values = vec![value];
                out.push(anomaly);
                lost.insert((key_id, value), AnomalyKind::UnseenLost);
            } else if let Some((later_writer, later_value, reader)) = past_realtime {
                let mut anomaly = Anomaly::new(
                    AnomalyKind::UnseenLost,
                    Some(log.key),
                    format!(
                        "value {value} of key {} was acknowledged by {} at {position} and never \
                         read; the final reads read the log from offset 0 up to value \
                         {later_value}, sent by {} which began after that acknowledgement, so in \
                         this key's linearizable log {value} must precede it: it is lost, not \
                         late",
                        log.key,
                        index.describe(writer),
                        index.describe(later_writer)
                    ),
                );
                anomaly.ops = vec![
                    index.op_ref(writer),
                    index.op_ref(later_writer),
                    index.op_ref(reader),
                ];
                anomaly.offsets = offset.into_iter().collect();
                anomaly.values = vec![value, later_value];
                out.push(anomaly);
                lost.insert((key_id, value), AnomalyKind::UnseenLost);
            } else {
                let mut anomaly = Anomaly::new(
                    AnomalyKind::Unseen,
                    Some(log.key),
                    format!(
                        "value {value} of key {} was committed by {} at {position} but no ok read \
                         returned it, and no final read reached far enough to tell lost from late",
                        log.key,
                        index.describe(writer)
                    ),
                );
                anomaly.ops = vec![index.op_ref(writer)];
                anomaly.offsets = offset.into_iter().collect();
                anomaly.values = vec![value];
                out.push(anomaly);
            }
        }
    }
    lost
}
