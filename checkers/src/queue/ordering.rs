//! Order of sends and polls, inside one op (`int-` kinds) and across one process's ops.
//! All comparisons use dense indices in the key's version order, so sparse offsets
//! (transaction markers) never look like skips. When an index is unknown, nothing is reported.
//!
//! Inside one op (any outcome but `fail` for sends; any outcome for polls), for consecutive
//! records of the same key with indices i then j, `delta = j − i`:
//!
//! - **int-poll-skip**: reads with `delta > 1`: the consumer jumped over records.
//! - **int-nonmonotonic-poll**: reads with `delta < 1`: it went back or repeated.
//! - **int-send-skip**: sends with `delta > 1`: another producer's records landed between
//!   them (normal in Kafka; the queue policy allows it).
//! - **int-nonmonotonic-send**: sends with `delta < 1`: one op's sends landed out of order.
//!
//! Across a process's ops, in history order (tracking is per process and per key):
//!
//! - **poll-skip** / **nonmonotonic-poll**: the first index this op read from k, compared
//!   with the last index the process's previous *ok* read of k returned: `delta > 1` skipped
//!   records, `delta < 1` rewound. The current op may have any outcome. An `ok` or `info`
//!   `assign`/`subscribe` forgets the positions of keys it no longer covers and keeps the rest
//!   (Jepsen's rule: `info` may have taken effect); any `crash` forgets them all, and so does
//!   a process's first `final-poll` (the final phase reads with a fresh consumer from the
//!   start of every log).
//! - **nonmonotonic-send**: the first index this op (ok or info) sent to k is at or before the
//!   last index the process's previous *ok* send to k landed at. A send begun after another was
//!   acknowledged must land after it. (Jepsen has no external send-skip check, and neither do
//!   we: other producers interleave.) Unlike Jepsen, assignments do not reset send positions:
//!   they change what a consumer reads, never where a producer's records land.
//!
//! Source: Jepsen `jepsen.tests.kafka` (`poll-skip+nonmonotonic-cases-per-process`,
//! `int-poll-skip+nonmonotonic-cases`, `int-send-skip+nonmonotonic-cases`,
//! `nonmonotonic-send-cases`); Maelstrom's kafka workload docs.

use logjam_history::{Function, Outcome, ProcessId, Value};

use crate::anomaly::{Anomalies, Anomaly, AnomalyKind};
use crate::fxhash::FxHashMap;
use crate::queue::index::{KeyId, NO_INDEX, OpId, QueueIndex};

/// Skipped values listed in one explanation, at most.
const SKIPPED_LISTED_MAX: u32 = 16;

/// Last position a process saw for a key: (index, value, op).
type Position = (u32, Value, OpId);

#[derive(Default)]
struct ProcessState {
    /// True once the process began its final reads.
    in_final: bool,
    last_read: FxHashMap<KeyId, Position>,
    last_send: FxHashMap<KeyId, Position>,
}

/// Reports the six ordering kinds.
pub(crate) fn check(index: &QueueIndex, out: &mut Anomalies) {
    let mut processes: FxHashMap<ProcessId, ProcessState> = FxHashMap::default();
    // Per-op scratch: key → (first, last) position seen in this op.
    let mut firsts: Vec<(KeyId, Position, Position)> = Vec::new();
    for (id, record) in index.ops.iter().enumerate() {
        let id = id as OpId;
        let op = &record.op;
        let state = processes.entry(op.process).or_default();
        if op.f == Function::Crash {
            // A fresh client replaces the crashed one: it starts from wherever it is told.
            state.last_read.clear();
            continue;
        }
        if op.f == Function::FinalPoll && !state.in_final {
            // The final phase reads with a fresh consumer from the start of every log (the
            // queue workload retires the old one and seeks to the beginning): a new consumer,
            // so the positions of the old one do not carry over.
            state.in_final = true;
            state.last_read.clear();
        }
        if op.f.has_keys() {
            // An assignment keeps the position of every key it still covers (the consumer
            // does, as Kafka's does) and drops the rest. `info` may have been applied, so it
            // counts as applied: a skip it might explain is never reported; `fail` was not.
            // Send positions are kept: an assignment moves where this process reads, not
            // where its records land (Jepsen resets those too; logjam does not).
            if op.outcome != Outcome::Fail {
                let kept = index.assignments.get(&id).map_or(&[][..], Vec::as_slice);
                state
                    .last_read
                    .retain(|key, _| kept.contains(&index.key(*key)));
            }
            continue;
        }

        // Reads: internal checks, then external against the process's previous ok read.
        firsts.clear();
        for read in index.reads_of(id) {
            let here = (read.index, read.value, id);
            match firsts.iter_mut().find(|f| f.0 == read.key) {
                None => firsts.push((read.key, here, here)),
                Some(entry) => {
                    let previous = entry.2;
                    report_pair(index, out, id, read.key, previous, here, Pair::IntPoll);
                    entry.2 = here;
                }
            }
        }
        for &(key, first, last) in &firsts {
            if let Some(&previous) = state.last_read.get(&key) {
                report_pair(index, out, id, key, previous, first, Pair::ExtPoll);
            }
            if op.outcome == Outcome::Ok {
                state.last_read.insert(key, last);
            }
        }

        // Sends: failed sends never landed.
        if op.outcome == Outcome::Fail {
            continue;
        }
        firsts.clear();
        for send in index.sends_of(id) {
            if send.index == NO_INDEX {
                continue;
            }
            let here = (send.index, send.value, id);
            match firsts.iter_mut().find(|f| f.0 == send.key) {
                None => firsts.push((send.key, here, here)),
                Some(entry) => {
                    let previous = entry.2;
                    report_pair(index, out, id, send.key, previous, here, Pair::IntSend);
                    entry.2 = here;
                }
            }
        }
        for &(key, first, last) in &firsts {
            if let Some(&previous) = state.last_send.get(&key) {
                report_pair(index, out, id, key, previous, first, Pair::ExtSend);
            }
            if op.outcome == Outcome::Ok {
                state.last_send.insert(key, last);
            }
        }
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Pair {
    IntPoll,
    ExtPoll,
    IntSend,
    ExtSend,
}

fn report_pair(
    index: &QueueIndex,
    out: &mut Anomalies,
    op: OpId,
    key: KeyId,
    previous: Position,
    current: Position,
    pair: Pair,
) {
    let delta = i64::from(current.0) - i64::from(previous.0);
    let kind = match (pair, delta) {
        (_, 1) => return,
        (Pair::IntPoll, d) if d > 1 => AnomalyKind::IntPollSkip,
        (Pair::IntPoll, _) => AnomalyKind::IntNonmonotonicPoll,
        (Pair::ExtPoll, d) if d > 1 => AnomalyKind::PollSkip,
        (Pair::ExtPoll, _) => AnomalyKind::NonmonotonicPoll,
        (Pair::IntSend, d) if d > 1 => AnomalyKind::IntSendSkip,
        (Pair::IntSend, _) => AnomalyKind::IntNonmonotonicSend,
        (Pair::ExtSend, d) if d > 1 => return, // other producers interleave: no external send-skip
        (Pair::ExtSend, _) => AnomalyKind::NonmonotonicSend,
    };
    let log = &index.keys[key as usize];
    let offset_of = |i: u32| {
        log.offset_at(i)
            .map_or_else(|| "?".to_owned(), |o| o.to_string())
    };
    let (prev_text, cur_text) = (
        format!("value {} (offset {})", previous.1, offset_of(previous.0)),
        format!("value {} (offset {})", current.1, offset_of(current.0)),
    );
    let what = match pair {
        Pair::IntPoll | Pair::ExtPoll => "read",
        Pair::IntSend | Pair::ExtSend => "sent",
    };
    let context = match pair {
        Pair::IntPoll | Pair::IntSend => format!("within {}", index.describe(op)),
        Pair::ExtPoll => format!(
            "{} then {}, same process",
            index.describe(previous.2),
            index.describe(op)
        ),
        Pair::ExtSend => format!(
            "{} then {}, same process",
            index.describe(previous.2),
            index.describe(op)
        ),
    };
    let verdict = if delta > 1 {
        let skipped: Vec<String> = (previous.0 + 1..current.0)
            .take(SKIPPED_LISTED_MAX as usize)
            .filter_map(|i| log.value_at(i).map(|v| v.to_string()))
            .collect();
        format!(
            "{} record(s) of the log lie between them (values {}{})",
            delta - 1,
            skipped.join(", "),
            if delta - 1 > i64::from(SKIPPED_LISTED_MAX) {
                ", ..."
            } else {
                ""
            }
        )
    } else if delta == 0 {
        "the second is the same position again".to_owned()
    } else {
        format!("the second sits {} position(s) before the first", -delta)
    };
    let mut anomaly = Anomaly::new(
        kind,
        Some(log.key),
        format!(
            "key {}: {context}: {what} {prev_text} and then {cur_text}; {verdict}",
            log.key
        ),
    );
    anomaly.ops = if previous.2 == op {
        vec![index.op_ref(op)]
    } else {
        vec![index.op_ref(previous.2), index.op_ref(op)]
    };
    anomaly.offsets = [previous.0, current.0]
        .iter()
        .filter_map(|&i| log.offset_at(i))
        .collect();
    anomaly.values = vec![previous.1, current.1];
    out.push(anomaly);
}
