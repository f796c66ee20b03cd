//! `nonlinearizable-log`: each partition's log checked for linearizability in real time, the
//! order Jepsen's Kafka checker leaves out (it whitelists `G0-realtime`).
//!
//! The sequential object is one log: a send appends its value and answers its offset; a read
//! from offset `f` returns records `f..f+n` as they stood at one moment. The contents of each
//! offset are already fixed by what was observed there (a key with inconsistent offsets is
//! skipped: that anomaly is reported on its own), so what remains to decide is *when* each
//! offset came into existence, and the question has an exact linear-time answer instead of a
//! search:
//!
//! - the send that wrote offset `o` (an `ok` send acknowledged at `o`, or an `info` send whose
//!   value was read at `o`) takes effect at some instant `t_o` inside its interval (an `info`
//!   send's interval never closes), and offsets come into existence in order, so
//!   `t_0 <= t_1 <= ...`. The earliest choice, `t_o = max(t_{o-1}, invoke_o)`, is best for
//!   every later constraint, so the log is linearizable iff, with it, every `t_o` is at or
//!   before its send returned
//! - and every ok read of records `f..f+n` returned at or after `t_{f+n-1}`: no record is
//!   visible before the send that wrote it took effect. Reads never change the log, and
//!   returning fewer records than exist is allowed (a fetch is bounded), so a consumer's
//!   prefetching never looks stale.
//!
//! Intervals are closed (an op may take effect at the very instant another returns), as in
//! `logjam-linearizable`. The model needs offsets dense from 0: transactional histories
//! (markers take offsets) and keys whose observed offsets have gaps are skipped with a reason,
//! as are offsets no surviving send could have written (reported as aborted reads).

use logjam_history::{Function, Key, Outcome as OpOutcome};
use serde::Serialize;

use crate::anomaly::{Anomalies, Anomaly, AnomalyKind};
use crate::queue::index::{KeyLog, OpId, QueueIndex};

/// What the linearizability analysis covered.
#[derive(Debug, Clone, Default, Serialize)]
pub struct LinearizabilitySummary {
    /// Keys whose logs were decided (linearizable or not).
    pub keys_decided: u64,
    /// Keys not checked, with the reason.
    pub keys_skipped: Vec<(Key, String)>,
}

/// The send that wrote one offset: when it was invoked and when it returned (`None`: never).
#[derive(Clone, Copy)]
struct Writer {
    op: OpId,
    invoke_ns: u64,
    return_ns: Option<u64>,
}

/// Per key id: true when `check_logs` decided the key's log and reported no
/// `nonlinearizable-log` on it (call after `check_logs`, with the anomalies it reported into).
pub(crate) fn linearizable_keys(
    index: &QueueIndex,
    summary: &LinearizabilitySummary,
    out: &Anomalies,
) -> Vec<bool> {
    index
        .keys
        .iter()
        .map(|log| {
            !summary.keys_skipped.iter().any(|(k, _)| *k == log.key)
                && !out.has_key(AnomalyKind::NonlinearizableLog, log.key)
        })
        .collect()
}

/// Checks every key's log; reports `nonlinearizable-log` anomalies into `out`.
pub(crate) fn check_logs(index: &QueueIndex, out: &mut Anomalies) -> LinearizabilitySummary {
    let mut summary = LinearizabilitySummary::default();
    if index.ops.iter().any(|record| record.op.f == Function::Txn) {
        for log in &index.keys {
            summary.keys_skipped.push((
                log.key,
                "transactional history: control markers make offsets sparse".to_owned(),
            ));
        }
        return summary;
    }
    let mut schedules: Vec<Option<Schedule>> = Vec::with_capacity(index.keys.len());
    for (log, writers) in index.keys.iter().zip(writers(index)) {
        let schedule = match writers {
            _ if log.log.is_empty() => None,
            Err(reason) => {
                summary.keys_skipped.push((log.key, reason));
                None
            }
            Ok(writers) => {
                summary.keys_decided += 1;
                schedule(index, log, &writers, out)
            }
        };
        schedules.push(schedule);
    }
    check_reads(index, &schedules, out);
    summary
}

/// The earliest instant each offset of a key can exist, and whose invoke fixed it.
struct Schedule {
    earliest_ns: Vec<u64>,
    cause: Vec<OpId>,
}

/// The writer of every observed offset of every key, or why a key cannot be checked.
fn writers(index: &QueueIndex) -> Vec<Result<Vec<Writer>, String>> {
    let mut all: Vec<Result<Vec<Option<Writer>>, String>> = index
        .keys
        .iter()
        .map(|log| {
            for (position, slot) in log.log.iter().enumerate() {
                if slot.offset.0 != position as i64 {
                    return Err(format!(
                        "observed offsets are not dense (gap before {})",
                        slot.offset
                    ));
                }
                if !slot.others.is_empty() {
                    return Err("inconsistent offsets (reported as such)".to_owned());
                }
            }
            Ok(vec![None; log.log.len()])
        })
        .collect();
    for (id, record) in index.ops.iter().enumerate() {
        let op = &record.op;
        if op.outcome == OpOutcome::Fail {
            continue;
        }
        for send in index.sends_of(id as OpId) {
            let Ok(writers) = &mut all[send.key as usize] else {
                continue;
            };
            let log = &index.keys[send.key as usize];
            // Where this send's value sits: its acknowledged offset, else where it was read.
            let position = match send.offset {
                Some(offset) => usize::try_from(offset.0).ok(),
                None => log.value(send.value).map(|info| info.first_index as usize),
            };
            let Some(position) = position.filter(|at| *at < writers.len()) else {
                continue; // never observed: it may have landed past the end, or nowhere
            };
            let return_ns = match op.outcome {
                OpOutcome::Ok if send.offset.is_some() => op.complete_time_ns,
                _ => None,
            };
            writers[position] = Some(Writer {
                op: id as OpId,
                invoke_ns: op.invoke_time_ns,
                return_ns,
            });
        }
    }
    all.into_iter()
        .map(|writers| {
            writers?
                .into_iter()
                .enumerate()
                .map(|(offset, writer)| {
                    writer.ok_or_else(|| {
                        format!(
                            "no send that could have taken effect wrote offset {offset} \
                             (see aborted-read)"
                        )
                    })
                })
                .collect()
        })
        .collect()
}

/// The greedy earliest schedule of one key; reports a send acknowledged before its offset
/// could exist. `None` when the key already failed (later offsets inherit the contradiction).
fn schedule(
    index: &QueueIndex,
    log: &KeyLog,
    writers: &[Writer],
    out: &mut Anomalies,
) -> Option<Schedule> {
    let mut earliest_ns: Vec<u64> = Vec::with_capacity(writers.len());
    let mut cause: Vec<OpId> = Vec::with_capacity(writers.len());
    for (offset, writer) in writers.iter().enumerate() {
        let (time, by) = match offset.checked_sub(1) {
            Some(previous) if earliest_ns[previous] > writer.invoke_ns => {
                (earliest_ns[previous], cause[previous])
            }
            _ => (writer.invoke_ns, writer.op),
        };
        earliest_ns.push(time);
        cause.push(by);
        if let Some(returned) = writer.return_ns.filter(|returned| *returned < time) {
            let mut anomaly = Anomaly::new(
                AnomalyKind::NonlinearizableLog,
                Some(log.key),
                format!(
                    "{} was acknowledged at offset {offset} of key {} at {returned} ns, but \
                     offset {offset} could not exist before {time} ns, when {} was invoked to \
                     write an earlier offset: a send acknowledged earlier sits later in the log",
                    index.describe(writer.op),
                    log.key,
                    index.describe(by),
                ),
            );
            anomaly.ops = vec![index.op_ref(by), index.op_ref(writer.op)];
            anomaly.offsets.push(log.log[offset].offset);
            anomaly.values.push(log.log[offset].value);
            out.push(anomaly);
            return None;
        }
    }
    Some(Schedule { earliest_ns, cause })
}

/// Every ok read must return after the highest record it returned could exist.
fn check_reads(index: &QueueIndex, schedules: &[Option<Schedule>], out: &mut Anomalies) {
    for (id, record) in index.ops.iter().enumerate() {
        if record.op.outcome != OpOutcome::Ok {
            continue;
        }
        let Some(returned) = record.op.complete_time_ns else {
            continue;
        };
        for read in index.reads_of(id as OpId) {
            let Some(schedule) = &schedules[read.key as usize] else {
                continue;
            };
            let offset = read.offset.0 as usize;
            if schedule.earliest_ns[offset] <= returned {
                continue;
            }
            let log = &index.keys[read.key as usize];
            let mut anomaly = Anomaly::new(
                AnomalyKind::NonlinearizableLog,
                Some(log.key),
                format!(
                    "{} returned value {} at offset {} of key {} at {returned} ns, but that \
                     record could not exist before {} ns, when {} was invoked: a read saw a \
                     record before it was written",
                    index.describe(id as OpId),
                    read.value,
                    read.offset,
                    log.key,
                    schedule.earliest_ns[offset],
                    index.describe(schedule.cause[offset]),
                ),
            );
            anomaly.ops = vec![
                index.op_ref(schedule.cause[offset]),
                index.op_ref(id as OpId),
            ];
            anomaly.offsets.push(read.offset);
            anomaly.values.push(read.value);
            out.push(anomaly);
            break; // one witness per op is enough
        }
    }
}
