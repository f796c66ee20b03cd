//! Reads of data that should not be visible: `aborted-read` (G1a) and `precommitted-read`.
//!
//! - **aborted-read (G1a)**: an op read value v of key k, and the only op that sent v ended
//!   `fail` (it certainly did not take effect, e.g. an aborted transaction).
//! - **precommitted-read**: an op read a value that the same op sent. Kafka consumers never
//!   see a transaction's records before it commits, so reading your own pending write means
//!   uncommitted data was exposed.
//!
//! Whatever became of the reading op: a transaction that failed or whose commit is unknown
//! still recorded what its consumer's polls returned, and a read_committed consumer handing
//! out an aborted record is a bug whatever the reader did next (Jepsen looks only at `ok`
//! readers; a read is an observation of the log either way). A failed op reading its own
//! aborted send is reported once, as `precommitted-read`.
//!
//! Source: Jepsen `jepsen.tests.kafka` (`g1a-cases`, `precommitted-read-cases`); Adya's G1a.

use logjam_history::Outcome;

use crate::anomaly::{Anomalies, Anomaly, AnomalyKind};
use crate::queue::index::{NO_OP, OpId, QueueIndex};

/// Reports both kinds.
pub(crate) fn check(index: &QueueIndex, out: &mut Anomalies) {
    for (id, record) in index.ops.iter().enumerate() {
        let id = id as OpId;
        if record.reads.is_empty() {
            continue;
        }
        let sends = index.sends_of(id);
        for read in index.reads_of(id) {
            let log = &index.keys[read.key as usize];
            let writer = read.writer;
            if writer != NO_OP && writer != id && index.op(writer).outcome == Outcome::Fail {
                let mut anomaly = Anomaly::new(
                    AnomalyKind::AbortedRead,
                    Some(log.key),
                    format!(
                        "{} read value {} of key {} at offset {}, but {} sent it and failed, so it \
                         must never have been visible",
                        index.describe(id),
                        read.value,
                        log.key,
                        read.offset,
                        index.describe(writer)
                    ),
                );
                anomaly.ops = vec![index.op_ref(writer), index.op_ref(id)];
                anomaly.offsets.push(read.offset);
                anomaly.values.push(read.value);
                out.push(anomaly);
            }
            if !sends.is_empty()
                && sends
                    .iter()
                    .any(|s| s.key == read.key && s.value == read.value)
            {
                let mut anomaly = Anomaly::new(
                    AnomalyKind::PrecommittedRead,
                    Some(log.key),
                    format!(
                        "{} read value {} of key {} at offset {}, which it sent itself before \
                         committing; uncommitted records must not be visible",
                        index.describe(id),
                        read.value,
                        log.key,
                        read.offset
                    ),
                );
                anomaly.ops = vec![index.op_ref(id)];
                anomaly.offsets.push(read.offset);
                anomaly.values.push(read.value);
                out.push(anomaly);
            }
        }
    }
}
