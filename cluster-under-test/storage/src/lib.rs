//! `logjam-storage`: the built-in cluster's on-disk log, in Kafka's shape and with Kafka's
//! durability (see `docs/kafka-semantics.md` §7). Synchronous, no tokio: the node calls it from
//! behind one `std::sync::Mutex` per partition.
//!
//! Record batches (v2, magic 2) are stored exactly as validated: the only bytes the log changes
//! are `BaseOffset` and `PartitionLeaderEpoch` (outside the CRC), plus the timestamp fields and
//! CRC when a topic uses `LogAppendTime`. Like Kafka it does not fsync data by default: data is
//! fsynced on segment roll, on `log.flush.interval.messages` / `log.flush.interval.ms`, and on
//! clean shutdown. After a crash, every segment from the recovery point on is re-validated
//! batch by batch and cut at the first torn or corrupt batch; reads re-check each batch's CRC,
//! so a batch failing its CRC is never served.
//!
//! # Layout
//!
//! ```text
//! <log dir>/
//!   recovery-point-offset-checkpoint   log-start-offset-checkpoint   replication-offset-checkpoint
//!   .kafka_cleanshutdown               {"version":0,"brokerEpoch":N}, only between a clean
//!                                      shutdown and the next open
//!   <topic>-<partition>/
//!     00000000000000000000.log         whole record batches, as validated
//!     00000000000000000000.index       sparse (relative offset u32, position u32) entries
//!     00000000000000000000.txnindex    aborted transactions whose ABORT marker is in the
//!                                      segment (34-byte entries), absent when none
//!     00000000000000001234.log/.index  next segment, named by its base offset
//!     00000000000000001234.snapshot    producer state below offset 1234 (written at the roll
//!                                      that started that segment, and at clean shutdown)
//!     leader-epoch-checkpoint          epoch -> start offset
//! ```
//!
//! Modules, one concept each:
//!
//! - [`manager`]: `LogManager`, one log dir: open and recover all partitions, create logs,
//!   checkpoints, the flush tick, clean shutdown.
//! - [`log`]: `Log`, one partition: append (leader and follower), read, flush, truncate, log
//!   start offset, high watermark, recovery point, and its producer state (`log/producer.rs`:
//!   rebuild from the latest snapshot at or below a point plus a tail replay).
//! - [`producer_state`]: the idempotent producer's table and checks (pure);
//!   [`producer_state_manager`]: the table plus its snapshot files (take, reload, delete);
//!   [`producer_snapshot`]: Kafka's version-1 `.snapshot` format and file names.
//! - `segment`: one `.log` + `.index` pair; positioned reads and writes. `index`: the sparse
//!   offset index. [`txn_index`]: the `.txnindex` of aborted transactions.
//! - [`control`]: transaction markers (COMMIT/ABORT control records). Transactions in the
//!   producer state, the last stable offset and the aborted list of a read live in
//!   `producer_state/txn.rs` and `log/txn.rs`.
//! - `recovery`: the batch scanner and the decision of where to cut; [`RecoveryReport`].
//! - [`batch`]: the v2 header: parse, validate (CRC-32C), rewrite offsets and epochs.
//! - [`builder`]: encode v2 batches (control markers, tests, benchmarks).
//! - [`epoch_cache`]: the leader-epoch cache and its checkpoint (KIP-101/279).
//! - [`checkpoint`]: Kafka's text checkpoint format. [`clean_shutdown`]: the
//!   `.kafka_cleanshutdown` content (the broker epoch, for KIP-966).
//! - [`config`], [`error`], `ids` (offset and epoch newtypes), `topic_partition`, `durable`
//!   (fsync helpers).
//!
//! # Data flow
//!
//! ```text
//!  produce ──▶ Log::append_as_leader ──validate──▶ assign offsets ──▶ active segment (.log/.index)
//!  fetch   ──▶ Log::append_as_follower ─validate─────────────────────▶        │ roll: fsync old
//!                                            epoch cache ◀─ batch epochs      ▼
//!  Log::read ◀── index lookup + scan ◀──────────────────────────────── segments ──▶ flush: fsync,
//!                                                                                  recovery point
//!  LogManager::open ──▶ checkpoints + marker ──▶ Log::open ──▶ recovery scan from recovery point
//!                                                             ──▶ producer state: latest .snapshot
//!                                                                 ≤ log end + replay after it
//! ```
//!
//! # Example
//!
//! ```
//! use logjam_storage::{BatchBuilder, LeaderEpoch, LogConfig, LogManager, Offset, TopicPartition};
//! let dir = tempfile::tempdir().unwrap();
//! let manager = LogManager::open(dir.path(), LogConfig::default()).unwrap();
//! let tp = TopicPartition::new("orders", 0);
//! let log = manager.create_log(tp.clone(), LogConfig::default()).unwrap();
//! let mut builder = BatchBuilder::new(0);
//! builder.record(None, Some(b"hello"));
//! let info = log.lock().unwrap().append_as_leader(&builder.build(), LeaderEpoch(0), 0).unwrap();
//! assert_eq!(info.first_offset, Offset(0));
//! let read = log.lock().unwrap().read(Offset(0), 1 << 20, Offset(1), true).unwrap();
//! assert_eq!(read.batch_count, 1);
//! manager.shutdown().unwrap();
//! ```

pub mod batch;
pub mod builder;
pub mod checkpoint;
pub mod clean_shutdown;
pub mod config;
pub mod control;
mod durable;
pub mod epoch_cache;
pub mod error;
mod ids;
mod index;
pub mod log;
pub mod manager;
pub mod producer_snapshot;
pub mod producer_state;
pub mod producer_state_manager;
mod recovery;
mod segment;
mod topic_partition;
pub mod txn_index;

pub use batch::{BatchDefect, BatchHeader, TimestampType};
pub use builder::BatchBuilder;
pub use checkpoint::{CheckpointDefect, OffsetCheckpointFile};
pub use config::LogConfig;
pub use control::{ControlType, EndTxnMarker};
pub use epoch_cache::{EpochEndOffset, EpochEntry, LeaderEpochCache};
pub use error::{Error, Result};
pub use ids::{FilePosition, LeaderEpoch, Offset};
pub use log::{AppendInfo, LoadCheckpoints, Log, ProducerStateLoad, ReadInfo};
pub use manager::{LogManager, SharedLog, lock_log};
pub use producer_snapshot::SnapshotDefect;
pub use producer_state::{
    BatchMetadata, CompletedTxn, ProducerBatch, ProducerEntry, ProducerEpoch, ProducerId,
    ProducerStateError, ProducerStateTable, Sequence, Verdict, VerificationGuard,
};
pub use producer_state_manager::ProducerStateManager;
pub use recovery::{RecoveryReport, StopReason};
pub use segment::file_stem as segment_file_stem;
pub use topic_partition::TopicPartition;
pub use txn_index::AbortedTxn;
