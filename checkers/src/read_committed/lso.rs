//! `read-above-lso` and `lso-regression`.
//!
//! - **read-above-lso**: a read_committed Fetch answer holds data only below the last stable
//!   offset at the moment the leader read its log (KIP-98), and the records a poll returns for
//!   a key come from its last answer for that key (earlier rounds of the same poll returned
//!   nothing at all). The LSO the answer *reports* is captured before that read (Kafka's
//!   `Partition.readRecords` takes `initialLastStableOffset` before `localLog.read`, which is
//!   bounded by the LSO at read time), so a record at or above the reported LSO may be
//!   legitimate: the LSO moved between the two. The proof uses the same process's next answer
//!   for the key in the same leader epoch instead: it was captured after this read, and one
//!   leader's LSO never goes back, so it bounds the read-time LSO from above. A returned
//!   record at or above *that* LSO was handed out above the LSO; one only above its own
//!   answer's LSO is counted ([`super::ReadCommittedStats::lso_capture_races`]).
//! - **lso-regression**: the LSO is `min(high watermark, first offset of any open
//!   transaction)` on the partition's leader. Within one leader epoch the leader is one
//!   process whose high watermark only grows and whose new transactions begin at its log end,
//!   so the LSO it answers never goes back; one process's answers are ordered in real time,
//!   so a later answer in the same epoch with a lower LSO is a regression. A new leader's
//!   high watermark may start behind its predecessor's, so across epochs a drop is only
//!   counted ([`super::ReadCommittedStats::lso_drops_across_epochs`]).

use std::collections::BTreeMap;

use logjam_history::{Key, Offset, ProcessId};

use logjam_history::Record;

use super::{PollRead, RcIndex, ReadCommittedStats};
use crate::anomaly::{Anomalies, Anomaly, AnomalyKind};

/// Reports both kinds.
pub(crate) fn check(index: &RcIndex, stats: &mut ReadCommittedStats, out: &mut Anomalies) {
    // Walking backwards: (process, key) → the next answer's (epoch, LSO, poll).
    let mut next: BTreeMap<(ProcessId, Key), (i32, Offset, usize)> = BTreeMap::new();
    let mut found = Vec::new();
    for (i, poll) in index.polls.iter().enumerate().rev() {
        let process = index.op(poll.op).process;
        let later = next.insert((process, poll.key), (poll.fetch.epoch, poll.fetch.lso, i));
        for record in &poll.records {
            if record.offset < poll.fetch.lso {
                continue;
            }
            match later {
                Some((epoch, lso, at))
                    if epoch == poll.fetch.epoch && epoch >= 0 && record.offset >= lso =>
                {
                    found.push(read_above(index, poll, record, &index.polls[at]));
                }
                _ => stats.lso_capture_races += 1,
            }
        }
    }
    for anomaly in found.into_iter().rev() {
        out.push(anomaly);
    }
    // (process, key) → (epoch, highest LSO seen in it, the poll that saw it).
    let mut last: BTreeMap<(ProcessId, Key), (i32, Offset, usize)> = BTreeMap::new();
    for (i, poll) in index.polls.iter().enumerate() {
        let process = index.op(poll.op).process;
        let seen = (poll.fetch.epoch, poll.fetch.lso, i);
        let Some(previous) = last.get_mut(&(process, poll.key)) else {
            last.insert((process, poll.key), seen);
            continue;
        };
        let (epoch, lso, at) = *previous;
        if poll.fetch.epoch == epoch && epoch >= 0 && poll.fetch.lso < lso {
            let before = &index.op(index.polls[at].op).op_ref;
            let after = &index.op(poll.op).op_ref;
            let mut anomaly = Anomaly::new(
                AnomalyKind::LsoRegression,
                Some(poll.key),
                format!(
                    "process {} polled key {} read_committed: op {} was answered last stable \
                     offset {lso} in leader epoch {epoch}, then op {} was answered {} in the \
                     same epoch; one leader's LSO never moves back",
                    process.0, poll.key, before.index.0, after.index.0, poll.fetch.lso
                ),
            );
            anomaly.ops = vec![before.clone(), after.clone()];
            anomaly.offsets = vec![lso, poll.fetch.lso];
            out.push(anomaly);
            continue;
        }
        if poll.fetch.epoch > epoch && poll.fetch.lso < lso {
            stats.lso_drops_across_epochs += 1;
        }
        if poll.fetch.epoch != epoch || poll.fetch.lso > lso {
            *previous = seen;
        }
    }
}

/// A `read-above-lso` witness: `poll` returned `record`, and `later` (the same process's next
/// answer for the key in the same leader epoch) still put the LSO at or below it.
fn read_above(index: &RcIndex, poll: &PollRead, record: &Record, later: &PollRead) -> Anomaly {
    let op = &index.op(poll.op).op_ref;
    let after = &index.op(later.op).op_ref;
    let mut anomaly = Anomaly::new(
        AnomalyKind::ReadAboveLso,
        Some(poll.key),
        format!(
            "op {} (process {}) polled key {} read_committed and got value {} at offset {}, \
             but the leader (epoch {}) answered last stable offset {} then and still {} to \
             the process's next fetch (op {}): records at or above the LSO may belong to open \
             transactions and must not be returned",
            op.index.0,
            op.process.0,
            poll.key,
            record.value,
            record.offset,
            poll.fetch.epoch,
            poll.fetch.lso,
            later.fetch.lso,
            after.index.0,
        ),
    );
    anomaly.ops = vec![op.clone(), after.clone()];
    anomaly.offsets = vec![record.offset, poll.fetch.lso, later.fetch.lso];
    anomaly.values = vec![record.value];
    anomaly
}
