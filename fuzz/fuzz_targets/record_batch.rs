//! Fuzz target: arbitrary bytes as record batches, through every parser a produced or replicated
//! batch meets: the storage's framing, header and CRC checks (`batches`, `validate_batch`,
//! `complete_batches_len`, `check_producer_batch`), kafka-protocol's decoder (the vendored
//! copy the node uses), and a real log's leader and follower appends. Whatever a log accepts
//! must read back as batches that pass their CRC. The log is replaced every 256 inputs so it
//! stays small.

#![no_main]

use std::cell::RefCell;

use bytes::Bytes;
use kafka_protocol::records::RecordBatchDecoder;
use libfuzzer_sys::fuzz_target;
use logjam_storage::{
    LeaderEpoch, LogConfig, LogManager, Offset, SharedLog, TopicPartition, batch, lock_log,
};

struct Fresh {
    inputs: u32,
    log: Option<(tempfile::TempDir, LogManager, SharedLog)>,
}

thread_local! {
    static LOG: RefCell<Fresh> = const { RefCell::new(Fresh { inputs: 0, log: None }) };
}

fn open_log() -> (tempfile::TempDir, LogManager, SharedLog) {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let config = LogConfig {
        segment_bytes: 64 * 1024,
        ..LogConfig::default()
    };
    let manager = LogManager::open(dir.path(), config.clone()).expect("an empty log dir opens");
    let log = manager
        .create_log(TopicPartition::new("fuzz", 0), config)
        .expect("a log is created");
    (dir, manager, log)
}

/// Every batch from `from` to the log end passes its CRC, with contiguous offsets.
fn reads_back(log: &SharedLog, from: Offset) {
    let log = lock_log(log);
    let end = log.log_end_offset();
    let mut next = from.max(log.log_start_offset());
    while next < end {
        let read = log
            .read(next, 1 << 20, end, true)
            .unwrap_or_else(|error| panic!("an accepted batch does not read back: {error}"));
        assert!(read.batch_count > 0, "no progress reading at {next}");
        for item in batch::batches(&read.records) {
            item.unwrap_or_else(|defect| panic!("a stored batch fails its checks: {defect}"));
        }
        next = read.next_offset;
    }
}

fuzz_target!(|data: &[u8]| {
    for item in batch::batches(data) {
        if let Ok((_, header)) = item {
            let _ = batch::check_producer_batch(&header);
            let _ = (header.last_offset(), header.next_offset(), header.timestamp_type());
        }
    }
    let complete = batch::complete_batches_len(data);
    assert!(complete <= data.len());
    let _ = batch::validate_batch(data);
    let mut bytes = Bytes::copy_from_slice(data);
    let _ = RecordBatchDecoder::decode_all(&mut bytes);

    LOG.with_borrow_mut(|fresh| {
        fresh.inputs += 1;
        if fresh.inputs % 256 == 1 {
            fresh.log = Some(open_log());
        }
        let Some((_, _, log)) = &fresh.log else {
            unreachable!("opened above");
        };
        let end = lock_log(log).log_end_offset();
        let leader = lock_log(log).append_as_leader(data, LeaderEpoch(1), 1_000);
        if leader.is_ok() {
            reads_back(log, end);
        }
        let end = lock_log(log).log_end_offset();
        let follower = lock_log(log).append_as_follower(&data[..complete], 1_000);
        if follower.is_ok() {
            reads_back(log, end);
        }
    });
});
