//! LSO stalls, counted, and `hanging-transaction`, proven.
//!
//! The LSO is `min(high watermark, first offset of any open transaction)`. A read_committed
//! answer's LSO `L` on a partition proves a transaction held it only when the history also
//! proves the high watermark was past `L`: an acknowledged send at offset `L` or later
//! (transactional producers are idempotent, so `acks=all`: the acknowledgement came after the
//! high watermark passed it) whose op completed before the answer was asked for. Then the
//! transaction whose first record is at `L` was open on the partition when the answer was
//! captured, and it began before the earliest-completing op acknowledged at `L` or later
//! completed: offsets are handed out in append order.
//!
//! - **stalls** (counted, [`crate::findings::ReadCommittedStats::lso_stalls`]): per key and held
//!   offset, from the first such answer to the last; a producer stopped mid-transaction
//!   stalls every read_committed reader until its coordinator aborts it, which is Kafka's
//!   design (the hanging-transaction scenario reports how long).
//! - **hanging-transaction** (bad): the stall outlived every clock that ends a transaction.
//!   It began before `c` (above); whatever became of it, its coordinator had ended it by `c + transaction.timeout.ms + the broker's timed-out-transaction sweep
//!   interval` (an unfinished transaction is aborted when the sweep finds it past its
//!   timeout, a finished one already was), and its markers were written within
//!   [`MARKER_GRACE_NS`] of that, or [`FAULT_GRACE_NS`] of the last fault's end when later (a
//!   partitioned or restarted leader takes markers late, not never). An answer still holding `L` after
//!   both bounds saw a transaction its coordinator no longer knows as open: a lost or skipped
//!   marker (KAFKA-17754's class) keeps the partition's readers stuck for good.

use std::collections::BTreeMap;

use logjam_history::{Key, Offset};

use super::RcIndex;
use crate::anomaly::{Anomalies, Anomaly, AnomalyKind};
pub use crate::findings::LsoStall;

/// Kafka's `transaction.abort.timed.out.transaction.cleanup.interval.ms` default: how often a
/// coordinator looks for transactions past their timeout.
pub const SWEEP_INTERVAL_NS: u64 = 10_000_000_000;

/// How long markers may take once the coordinator has decided and the network is whole.
pub const MARKER_GRACE_NS: u64 = 5_000_000_000;

/// How long after the last fault ended markers may still be on their way: a restarted node
/// catching up, a new coordinator loading its log, an ISR regrowing before a marker's append
/// is acknowledged.
pub const FAULT_GRACE_NS: u64 = 15_000_000_000;

/// Kafka's `transaction.max.timeout.ms` default: no producer's `transaction.timeout.ms` can
/// exceed it, so it bounds a history whose header does not say the timeout.
pub const MAX_TRANSACTION_TIMEOUT_MS: u64 = 900_000;

/// Stalls shorter than this are not listed (a marker's ordinary latency).
const LISTED_STALL_NS: u64 = 1_000_000_000;

/// At most this many stalls are listed in the report, longest first.
const LISTED_STALLS: usize = 20;

/// The clocks the check needs: the producer's `transaction.timeout.ms` (from the header) and
/// when the last fault ended.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Clocks {
    pub transaction_timeout_ns: u64,
    pub last_fault_ns: u64,
}

/// Counts the stalls into `stalls` and reports `hanging-transaction`s to `out`.
pub(crate) fn check(
    index: &RcIndex,
    clocks: Clocks,
    stalls: &mut Vec<LsoStall>,
    out: &mut Anomalies,
) {
    // Per key: acknowledged offsets in order, each with the earliest completion of an op
    // acknowledged at it or any later offset (and that op).
    let mut acked: BTreeMap<Key, Vec<(Offset, u32)>> = BTreeMap::new();
    let mut at: BTreeMap<(Key, Offset), u32> = BTreeMap::new();
    for (id, op) in index.ops.iter().enumerate() {
        if op.complete_ns.is_none() {
            continue;
        }
        for (key, _, offset) in &op.sends {
            if let Some(offset) = offset {
                acked.entry(*key).or_default().push((*offset, id as u32));
                at.entry((*key, *offset)).or_insert(id as u32);
            }
        }
    }
    let done = |op: u32| index.op(op).complete_ns.unwrap_or(u64::MAX);
    let mut earliest: BTreeMap<Key, Vec<(Offset, u32)>> = BTreeMap::new();
    for (key, mut sends) in acked {
        sends.sort_unstable();
        let mut best: Option<u32> = None;
        let mut suffix = Vec::with_capacity(sends.len());
        for &(offset, op) in sends.iter().rev() {
            if best.is_none_or(|b| done(op) < done(b)) {
                best = Some(op);
            }
            suffix.push((offset, best.unwrap_or(op)));
        }
        suffix.reverse();
        earliest.insert(key, suffix);
    }
    // (key, LSO) → (the op bounding its holder's start, earliest proving ask, latest ask and
    // its op).
    let mut held: BTreeMap<(Key, Offset), (u32, u64, u64, u32)> = BTreeMap::new();
    for poll in &index.polls {
        let Some(suffix) = earliest.get(&poll.key) else {
            continue;
        };
        let at = suffix.partition_point(|&(offset, _)| offset < poll.fetch.lso);
        let Some(&(_, bound_op)) = suffix.get(at) else {
            continue;
        };
        let asked = index.op(poll.op).invoke_ns;
        if done(bound_op) > asked {
            continue;
        }
        let entry = held
            .entry((poll.key, poll.fetch.lso))
            .or_insert((bound_op, asked, asked, poll.op));
        entry.1 = entry.1.min(asked);
        if asked >= entry.2 {
            (entry.2, entry.3) = (asked, poll.op);
        }
    }
    let mut found = Vec::new();
    for ((key, offset), (bound_op, from, to, last)) in held {
        // The op acknowledged at the held offset itself, when one was.
        let holder = at.get(&(key, offset)).map(|&op| op as usize);
        let bounding = index.op(bound_op);
        if to - from >= LISTED_STALL_NS {
            stalls.push(LsoStall {
                key,
                offset,
                held_by_op: holder.map(|h| index.ops[h].op_ref.index.0),
                from_ms: from / 1_000_000,
                to_ms: to / 1_000_000,
                duration_ms: (to - from) / 1_000_000,
            });
        }
        let began_by = done(bound_op);
        let ended_by = began_by
            .saturating_add(clocks.transaction_timeout_ns)
            .saturating_add(SWEEP_INTERVAL_NS);
        let bound = ended_by
            .saturating_add(MARKER_GRACE_NS)
            .max(clocks.last_fault_ns.saturating_add(FAULT_GRACE_NS));
        if to > bound {
            let poll = &index.op(last).op_ref;
            let writer = match holder {
                Some(h) => format!(
                    "op {}'s transaction ({:?})",
                    index.ops[h].op_ref.index.0, index.ops[h].outcome
                ),
                None => "a transaction whose record there no op saw acknowledged".to_owned(),
            };
            let mut anomaly = Anomaly::new(
                AnomalyKind::HangingTransaction,
                Some(key),
                format!(
                    "key {key}'s last stable offset was held at {offset} by {writer}, begun \
                     before op {} completed at {} ms (acknowledged at offset {offset} or \
                     later), until op {} asked at {} ms, {} ms after its coordinator must \
                     have ended it (transaction.timeout.ms {} ms + the {} ms timeout sweep; \
                     markers {} ms after that, or {} ms after the last fault): the partition \
                     still holds a transaction no coordinator has open, and every \
                     read_committed reader stops there",
                    bounding.op_ref.index.0,
                    began_by / 1_000_000,
                    poll.index.0,
                    to / 1_000_000,
                    (to - ended_by) / 1_000_000,
                    clocks.transaction_timeout_ns / 1_000_000,
                    SWEEP_INTERVAL_NS / 1_000_000,
                    MARKER_GRACE_NS / 1_000_000,
                    FAULT_GRACE_NS / 1_000_000,
                ),
            );
            anomaly.ops = match holder {
                Some(h) if h as u32 != bound_op => vec![
                    index.ops[h].op_ref.clone(),
                    bounding.op_ref.clone(),
                    poll.clone(),
                ],
                _ => vec![bounding.op_ref.clone(), poll.clone()],
            };
            anomaly.offsets = vec![offset];
            found.push(anomaly);
        }
    }
    for anomaly in found {
        out.push(anomaly);
    }
    stalls.sort_by(|a, b| {
        b.duration_ms
            .cmp(&a.duration_ms)
            .then(a.key.cmp(&b.key))
            .then(a.offset.cmp(&b.offset))
    });
    stalls.truncate(LISTED_STALLS);
}
