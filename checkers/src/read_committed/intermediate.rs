//! `intermediate-read` (G1b): a read_committed poll returned a record of transaction T, and
//! the poll's op completed before T's op was invoked. T had not begun, so its commit (invoked
//! inside T's op, after its sends) cannot have happened: the reader saw a state of T that was
//! never committed at that moment. This is the only "read before commit" the history proves:
//! T's commit is invoked at an unrecorded moment inside its op, so a read that overlaps T's
//! op in real time proves nothing. Reading one's own transaction's record is the queue
//! checker's `precommitted-read`.

use super::RcIndex;
use crate::anomaly::{Anomalies, Anomaly, AnomalyKind};

/// Reports `intermediate-read`.
pub(crate) fn check(index: &RcIndex, out: &mut Anomalies) {
    for read in &index.polls {
        let reader = index.op(read.op);
        let Some(completed) = reader.complete_ns else {
            continue;
        };
        for record in &read.records {
            let Some(writer) = index.writer(read.key, record.value) else {
                continue;
            };
            let sender = index.op(writer);
            if writer == read.op || completed >= sender.invoke_ns {
                continue;
            }
            let mut anomaly = Anomaly::new(
                AnomalyKind::IntermediateRead,
                Some(read.key),
                format!(
                    "op {} polled key {} read_committed and got value {} at offset {}, and \
                     completed at {} ns, before op {} (the transaction that sent it) was \
                     invoked at {} ns: no commit of it could have happened yet",
                    reader.op_ref.index.0,
                    read.key,
                    record.value,
                    record.offset,
                    completed,
                    sender.op_ref.index.0,
                    sender.invoke_ns
                ),
            );
            anomaly.ops = vec![sender.op_ref.clone(), reader.op_ref.clone()];
            anomaly.offsets = vec![record.offset];
            anomaly.values = vec![record.value];
            out.push(anomaly);
        }
    }
}
