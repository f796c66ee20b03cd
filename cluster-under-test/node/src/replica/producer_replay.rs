//! The idempotent producer's state rebuilt from the log: every producer batch of appended
//! records is recorded, and a partition's whole log is replayed when it opens and after a
//! truncation.

use crate::producer_state::{ProducerBatch, ProducerStateTable};

/// Records every producer batch of `records` (whole batches as stored, offsets assigned).
pub(crate) fn record_producer_batches(table: &mut ProducerStateTable, records: &[u8]) {
    for item in logjam_storage::batch::batches(records) {
        let Ok((_, header)) = item else { break };
        if header.is_control() {
            continue;
        }
        if let Some(batch) = ProducerBatch::from_header(&header) {
            table.record(&batch, header.base_offset, header.last_offset());
        }
    }
}

/// Rebuilds a partition's producer state by replaying its whole log, from the log start to
/// the log end. There are no producer snapshots (kafka-semantics.md §7.4): on open this reads
/// every segment once, which is acceptable for the logs a test run writes.
///
/// # Errors
/// A storage error from reading the log.
pub(crate) fn replay_producer_state(
    log: &logjam_storage::Log,
) -> Result<ProducerStateTable, logjam_storage::Error> {
    const READ_BYTES: usize = 1 << 20;
    let mut table = ProducerStateTable::new();
    let end = log.log_end_offset();
    let mut position = log.log_start_offset();
    while position < end {
        let read = log.read(position, READ_BYTES, end, true)?;
        if read.batch_count == 0 || read.next_offset <= position {
            // A gap (a follower's log can jump ahead to a new segment): go to the next one.
            match log
                .segment_base_offsets()
                .into_iter()
                .find(|base| *base > position)
            {
                Some(base) => {
                    position = base;
                    continue;
                }
                None => break,
            }
        }
        record_producer_batches(&mut table, &read.records);
        position = read.next_offset;
    }
    Ok(table)
}
