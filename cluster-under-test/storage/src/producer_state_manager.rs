//! `ProducerStateManager`: one partition's producer table plus its `.snapshot` files (Kafka's
//! `ProducerStateManager`): which snapshots exist, up to which offset the table is built (the
//! map end offset), taking a snapshot, and reloading from the latest usable snapshot at or below
//! an offset after a truncation or at open. Reading the log to replay batches is the log's job
//! (`log/producer.rs`); this module never reads segments.
//!
//! Snapshots kept, as in Kafka: one per segment roll (named by the new segment's base offset),
//! one at clean shutdown and one after each rebuild (at the log end), all deleted when above a
//! truncation point, at or below the log start on reload, or with their segment; a stray one
//! below the last segment is removed at open. A defective snapshot is logged, deleted and
//! skipped for the next older one; with none left the table starts empty at the log start.
//!
//! It also keeps the transactions completed above the high watermark (Kafka's
//! `unreplicatedTxns`): until the high watermark passes its marker, a completed transaction
//! still holds the first unstable offset at its first record.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use crate::batch::BatchHeader;
use crate::control;
use crate::error::Result;
use crate::ids::Offset;
use crate::producer_snapshot;
use crate::producer_state::{
    CompletedTxn, ProducerBatch, ProducerEpoch, ProducerId, ProducerStateTable, VerificationGuard,
    VerificationGuards,
};

/// One partition's producer state and snapshots. See the module docs.
#[derive(Debug)]
pub struct ProducerStateManager {
    /// The partition directory the snapshots live in.
    dir: PathBuf,
    table: ProducerStateTable,
    /// Offsets of the snapshot files on disk.
    snapshots: BTreeSet<Offset>,
    /// The table holds every producer batch below this offset (Kafka's `lastMapOffset`).
    map_end_offset: Offset,
    /// The offset of the last snapshot written or loaded (Kafka's `lastSnapOffset`).
    last_snapshot_offset: Offset,
    /// Transactions completed whose marker the high watermark has not passed, by first offset.
    unreplicated: BTreeSet<(Offset, Offset)>,
    /// KIP-890 verification guards (transient, leader-side).
    verifications: VerificationGuards,
}

impl ProducerStateManager {
    /// An empty table over the snapshot files found in `dir`.
    ///
    /// # Errors
    /// I/O errors listing `dir`.
    pub(crate) fn load(dir: &Path) -> Result<ProducerStateManager> {
        Ok(ProducerStateManager {
            dir: dir.to_path_buf(),
            table: ProducerStateTable::new(),
            snapshots: producer_snapshot::list(dir)?.into_iter().collect(),
            map_end_offset: Offset::ZERO,
            last_snapshot_offset: Offset::ZERO,
            unreplicated: BTreeSet::new(),
            verifications: VerificationGuards::default(),
        })
    }

    /// The producer table.
    pub fn table(&self) -> &ProducerStateTable {
        &self.table
    }

    /// The table holds every producer batch below this offset.
    pub fn map_end_offset(&self) -> Offset {
        self.map_end_offset
    }

    /// Offsets of the snapshot files, oldest first.
    pub fn snapshot_offsets(&self) -> Vec<Offset> {
        self.snapshots.iter().copied().collect()
    }

    /// The newest snapshot's offset.
    pub fn latest_snapshot_offset(&self) -> Option<Offset> {
        self.snapshots.last().copied()
    }

    /// Removes snapshots that belong to no segment (Kafka's `removeStraySnapshots`), except the
    /// newest stray one when it is above every segment base (the clean-shutdown snapshot).
    ///
    /// # Errors
    /// I/O errors deleting.
    pub(crate) fn remove_stray_snapshots(&mut self, segment_bases: &[Offset]) -> Result<()> {
        let strays: Vec<Offset> = self
            .snapshots
            .iter()
            .copied()
            .filter(|offset| !segment_bases.contains(offset))
            .collect();
        let max_base = segment_bases.iter().max().copied();
        let keep = strays
            .last()
            .copied()
            .filter(|stray| max_base.is_none_or(|max| *stray > max));
        for stray in strays {
            if Some(stray) != keep {
                self.delete_snapshot(stray)?;
            }
        }
        Ok(())
    }

    /// Kafka's `truncateAndReload`: deletes the snapshots above `log_end` or at or below
    /// `log_start`; when the table is not already built up to `log_end`, clears it and loads
    /// the newest usable snapshot (or starts empty at `log_start`). Returns the snapshot
    /// loaded, if any. The caller then replays the log from [`Self::map_end_offset`].
    ///
    /// # Errors
    /// I/O errors reading or deleting snapshots.
    pub(crate) fn truncate_and_reload(
        &mut self,
        log_start: Offset,
        log_end: Offset,
    ) -> Result<Option<Offset>> {
        let out_of_range: Vec<Offset> = self
            .snapshots
            .iter()
            .copied()
            .filter(|offset| *offset > log_end || *offset <= log_start)
            .collect();
        for offset in out_of_range {
            self.delete_snapshot(offset)?;
        }
        if log_end == self.map_end_offset {
            self.on_log_start_offset_incremented(log_start);
            return Ok(None);
        }
        self.table.clear();
        self.verifications.clear_all();
        self.unreplicated.clear();
        self.load_latest_snapshot(log_start)
    }

    /// Loads the newest snapshot that decodes, deleting defective ones on the way.
    fn load_latest_snapshot(&mut self, log_start: Offset) -> Result<Option<Offset>> {
        while let Some(offset) = self.latest_snapshot_offset() {
            match producer_snapshot::read(&self.dir, offset)? {
                Ok(table) => {
                    tracing::debug!(dir = %self.dir.display(), offset = offset.0,
                        producers = table.len(), "loaded producer snapshot");
                    self.table = table;
                    self.map_end_offset = offset;
                    self.last_snapshot_offset = offset;
                    return Ok(Some(offset));
                }
                Err(defect) => {
                    tracing::warn!(dir = %self.dir.display(), offset = offset.0, %defect,
                        "ignoring unusable producer snapshot");
                    self.delete_snapshot(offset)?;
                }
            }
        }
        self.map_end_offset = log_start;
        self.last_snapshot_offset = log_start;
        Ok(None)
    }

    /// Records one batch now in the log (replication, replay and leader appends alike;
    /// `batch` is its bytes): producer batches go into the table, a transaction marker closes
    /// its producer's transaction (returned when there was one), and the map end moves past
    /// it. A control batch that is not a readable marker changes no state (logged).
    pub(crate) fn record(&mut self, header: &BatchHeader, batch: &[u8]) -> Option<CompletedTxn> {
        self.map_end_offset = header.next_offset();
        if !header.is_control() {
            if let Some(batch) = ProducerBatch::from_header(header) {
                if batch.is_transactional {
                    // The transaction is open now (or already was): the guard is spent.
                    self.verifications.clear(batch.producer_id);
                }
                self.table
                    .record(&batch, header.base_offset, header.last_offset());
            }
            return None;
        }
        if header.producer_id < 0 {
            return None;
        }
        self.verifications.clear(ProducerId(header.producer_id));
        let marker = match control::parse_marker(header, batch) {
            Ok(marker) => marker,
            Err(defect) => {
                tracing::warn!(dir = %self.dir.display(), offset = header.base_offset.0,
                    %defect, "control batch is not a transaction marker; ignored");
                return None;
            }
        };
        let completed = self.table.record_marker(
            ProducerId(header.producer_id),
            ProducerEpoch(header.producer_epoch),
            marker,
            header.base_offset,
            header.max_timestamp_ms,
        );
        if let Some(txn) = completed {
            self.unreplicated
                .insert((txn.first_offset, txn.last_offset));
        }
        completed
    }

    /// Takes the producer's KIP-890 verification guard (see [`VerificationGuards`]).
    pub(crate) fn start_verification(&mut self, producer_id: ProducerId) -> VerificationGuard {
        self.verifications.start(producer_id)
    }

    /// Whether `guard` is still the producer's: no marker and no opening append since.
    pub(crate) fn verification_holds(
        &self,
        producer_id: ProducerId,
        guard: VerificationGuard,
    ) -> bool {
        self.verifications.holds(producer_id, guard)
    }

    /// The first offset of a transaction that is open or whose marker is not yet below the
    /// high watermark (Kafka's `firstUnstableOffset`), if any.
    pub fn first_unstable_offset(&self) -> Option<Offset> {
        let ongoing = self
            .table
            .open_transactions()
            .first()
            .map(|(first, _)| *first);
        let unreplicated = self.unreplicated.first().map(|(first, _)| *first);
        match (ongoing, unreplicated) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// The high watermark moved: completed transactions whose marker is below it are stable.
    pub(crate) fn on_high_watermark_updated(&mut self, high_watermark: Offset) {
        self.unreplicated
            .retain(|(_, last_offset)| *last_offset >= high_watermark);
    }

    /// The last stable offset recorded in the aborted-transaction index for `completed`
    /// (Kafka's `lastStableOffset(completedTxn)`): the first offset of the earliest other open
    /// transaction, else the offset after the marker.
    pub(crate) fn last_stable_offset_at_completion(&self, completed: &CompletedTxn) -> Offset {
        self.table
            .open_transactions()
            .into_iter()
            .find(|(_, producer)| *producer != completed.producer_id)
            .map_or(completed.last_offset.next(), |(first, _)| first)
    }

    /// Moves the map end to `offset` (a roll or a gap: nothing between holds batches).
    pub(crate) fn update_map_end_offset(&mut self, offset: Offset) {
        self.map_end_offset = offset;
    }

    /// Writes a snapshot at the map end offset unless the last one is already there (Kafka's
    /// `takeSnapshot`). Returns whether it wrote one.
    ///
    /// # Errors
    /// I/O errors writing it.
    pub(crate) fn take_snapshot(&mut self) -> Result<bool> {
        if self.map_end_offset <= self.last_snapshot_offset {
            return Ok(false);
        }
        producer_snapshot::write(&self.dir, self.map_end_offset, &self.table)?;
        tracing::debug!(dir = %self.dir.display(), offset = self.map_end_offset.0,
            producers = self.table.len(), "wrote producer snapshot");
        self.snapshots.insert(self.map_end_offset);
        self.last_snapshot_offset = self.map_end_offset;
        Ok(true)
    }

    /// Empties the table and deletes every snapshot; the map restarts at `offset`.
    ///
    /// # Errors
    /// I/O errors deleting.
    pub(crate) fn truncate_fully_and_start_at(&mut self, offset: Offset) -> Result<()> {
        self.table.clear();
        self.verifications.clear_all();
        self.unreplicated.clear();
        for snapshot in self.snapshot_offsets() {
            self.delete_snapshot(snapshot)?;
        }
        self.last_snapshot_offset = Offset::ZERO;
        self.map_end_offset = offset;
        Ok(())
    }

    /// After the log start moved: the map end is at least the log start, and the last
    /// snapshot is the newest one left.
    pub(crate) fn on_log_start_offset_incremented(&mut self, log_start: Offset) {
        self.map_end_offset = self.map_end_offset.max(log_start);
        self.last_snapshot_offset = self.latest_snapshot_offset().unwrap_or(log_start);
    }

    /// Deletes the snapshot at `offset` (with its segment, or out of range).
    ///
    /// # Errors
    /// I/O errors deleting.
    pub(crate) fn delete_snapshot(&mut self, offset: Offset) -> Result<()> {
        producer_snapshot::delete(&self.dir, offset)?;
        self.snapshots.remove(&offset);
        Ok(())
    }
}
