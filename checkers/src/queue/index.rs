//! The queue index: every client op in compact form plus, per key, the version order inferred
//! from offsets. Built in one streaming pass ([`QueueIndex::ingest`]) and one finishing pass
//! ([`QueueIndex::finish`]); every anomaly family reads it and none modifies it.
//!
//! Version order, as in Jepsen: per key, every offset observed maps to the values seen there.
//! Observations come from every poll (ok, info or fail: pollers only ever see data that was in
//! the log) and from sends with a known offset in ops that must have committed (`ok`, or
//! `info` with at least one of its sent values read by an ok op). Sorted offsets get dense
//! indices 0, 1, 2, ...: offsets may be sparse (transaction markers), indices never are. Each
//! index's *representative* value is the first value observed at that offset.

use std::ops::Range;

use logjam_history::{
    CompletedOp, Function, Key, MicroOp, Offset, OpValue, Outcome, Record, Value,
};

use crate::anomaly::OpRef;
use crate::fxhash::FxHashMap;
use crate::intmap::IntMap;

/// Position of an op in [`QueueIndex::ops`].
pub(crate) type OpId = u32;
/// Position of a key in [`QueueIndex::keys`].
pub(crate) type KeyId = u32;
/// Marker for "no dense index known".
pub(crate) const NO_INDEX: u32 = u32::MAX;
/// Marker for "no op".
pub(crate) const NO_OP: OpId = u32::MAX;

/// One client op, compact: its micro-ops live in the flat `sends` array and `reads` runs.
pub(crate) struct OpRecord {
    /// The paired op minus its value (the value was flattened into sends and reads).
    pub op: CompletedOp,
    /// This op's sends, in micro-op order.
    pub sends: Range<u32>,
    /// This op's reads (records returned by polls), in consumer order, as runs (positions in
    /// `reads.runs`; empty when the op read nothing).
    pub reads: Range<u32>,
    /// True when the op must have taken effect: `ok`, or `info` with a sent value read by an ok op.
    pub committed: bool,
}

/// One send micro-op.
#[derive(Clone, Copy)]
pub(crate) struct SendRecord {
    pub key: KeyId,
    pub value: Value,
    pub offset: Option<Offset>,
    /// Dense index: from the offset when known, else the value's first index, else `NO_INDEX`.
    pub index: u32,
}

/// Records one poll returned from one key at consecutive offsets, stored without their
/// values when each is its offset's representative (the first value observed there, so
/// always, unless offsets are inconsistent). The reads of an hour's run are tens of millions
/// of records, mostly the same offsets read again by each fresh consumer: as runs they take a
/// few bytes per poll instead of 32 per record, so checking memory follows the writes and the
/// polls, not the records read. [`QueueIndex::reads_of`] expands runs into [`ReadRecord`]s.
pub(crate) struct ReadRun {
    pub key: KeyId,
    /// Records in the run (at least one).
    pub len: u32,
    pub first_offset: Offset,
    /// Dense index of `first_offset` (resolved by `finish`); the run's records sit at
    /// consecutive dense indices, since every offset between its first and last was observed.
    pub first_index: u32,
    /// Where the run's values start in `Runs::odd_values` when some value is not its
    /// offset's representative, else `PLAIN`.
    pub values: u32,
}

/// The reads of every op: runs, and the values of runs that are not plain.
#[derive(Default)]
pub(crate) struct Runs {
    pub runs: Vec<ReadRun>,
    /// See [`ReadRun::values`].
    odd_values: Vec<Value>,
}

/// Marker for a run whose values are its offsets' representatives.
const PLAIN: u32 = u32::MAX;

/// One record a poll returned (expanded from a [`ReadRun`]).
#[derive(Clone, Copy)]
pub(crate) struct ReadRecord {
    pub key: KeyId,
    pub offset: Offset,
    pub value: Value,
    /// Dense index of `offset` (always known after `finish`).
    pub index: u32,
    /// The op that sent `value` (resolved by `finish`), or `NO_OP`.
    pub writer: OpId,
}

/// What is known about one value of one key.
#[derive(Clone, Copy)]
pub(crate) struct ValueInfo {
    /// The op that sent it (the first non-failed one when several did).
    pub writer: Option<OpId>,
    /// The first ok op that read it.
    pub ok_reader: Option<OpId>,
    /// Lowest dense index it appears at, or `NO_INDEX`.
    pub first_index: u32,
    /// Highest dense index it appears at, or `NO_INDEX`.
    pub last_index: u32,
    /// Number of distinct offsets it appears at.
    pub offset_count: u32,
}

impl Default for ValueInfo {
    fn default() -> Self {
        ValueInfo {
            writer: None,
            ok_reader: None,
            first_index: NO_INDEX,
            last_index: NO_INDEX,
            offset_count: 0,
        }
    }
}

/// One offset of a key's log and the values observed there.
pub(crate) struct Slot {
    pub offset: Offset,
    /// Representative value (first observed) and the op that observed it.
    pub value: Value,
    pub observer: OpId,
    /// The op that sent the representative value (resolved by `finish`), or `NO_OP`.
    pub writer: OpId,
    /// Further distinct values observed at this offset (inconsistent offsets), with observers.
    pub others: Vec<(Value, OpId)>,
}

/// One key's log.
pub(crate) struct KeyLog {
    pub key: Key,
    /// While ingesting: offset → slot. Drained into `log` by `finish`.
    pending: IntMap<Slot>,
    /// The version order: slots sorted by offset; position = dense index.
    pub log: Vec<Slot>,
    /// Offset → dense index.
    pub index_of_offset: IntMap<u32>,
    /// Value → what is known about it.
    pub values: IntMap<ValueInfo>,
}

impl KeyLog {
    fn new(key: Key) -> KeyLog {
        KeyLog {
            key,
            pending: IntMap::default(),
            log: Vec::new(),
            index_of_offset: IntMap::default(),
            values: IntMap::default(),
        }
    }

    /// Records `value` at `offset`; true when it is the offset's representative.
    fn observe(&mut self, offset: Offset, value: Value, observer: OpId) -> bool {
        let slot = self.pending.get_or_insert_with(offset.0, || Slot {
            offset,
            value,
            observer,
            writer: NO_OP,
            others: Vec::new(),
        });
        if slot.value == value {
            return true;
        }
        if !slot.others.iter().any(|(v, _)| *v == value) {
            slot.others.push((value, observer));
        }
        false
    }

    /// The value at a dense index (its representative).
    pub fn value_at(&self, index: u32) -> Option<Value> {
        self.log.get(index as usize).map(|s| s.value)
    }

    /// The offset at a dense index.
    pub fn offset_at(&self, index: u32) -> Option<Offset> {
        self.log.get(index as usize).map(|s| s.offset)
    }

    /// Info about a value, if it was sent or seen.
    pub fn value(&self, value: Value) -> Option<&ValueInfo> {
        self.values.get(value.0)
    }
}

/// Where the final reads found a key's log to end (the workload's `log-end` op).
#[derive(Clone, Copy, Debug)]
pub(crate) struct LogEnd {
    /// Every offset below it was read; the log had nothing at or past it.
    pub end: i64,
    /// When the `log-end` op was invoked: only writes acknowledged before it are judged by it
    /// (a send still running during the final reads may land past the end they saw).
    pub time_ns: u64,
}

impl LogEnd {
    /// True when a write acknowledged at `ack_ns` (`None`: never acknowledged) is judged by
    /// this end.
    pub fn covers_ack(&self, ack_ns: Option<u64>) -> bool {
        ack_ns.is_some_and(|ack| ack <= self.time_ns)
    }
}

/// A history folded into the shapes the analyses need.
pub(crate) struct QueueIndex {
    pub ops: Vec<OpRecord>,
    pub sends: Vec<SendRecord>,
    /// Every op's reads, as runs.
    pub reads: Runs,
    pub keys: Vec<KeyLog>,
    key_ids: FxHashMap<Key, KeyId>,
    /// Values sent by more than one op: `(key, value, first writer, other writer)`.
    pub repeated_sends: Vec<(KeyId, Value, OpId, OpId)>,
    /// Whether any op subscribed (relaxes the poll policy).
    pub saw_subscribe: bool,
    /// The keys of every `assign`/`subscribe` op, by op (only those ops carry keys).
    pub assignments: FxHashMap<OpId, Vec<Key>>,
    /// Per key, the log end the final reads read to (from the workload's `log-end` op): every
    /// offset below it was read, and the log had nothing at or past it.
    pub log_ends: FxHashMap<KeyId, LogEnd>,
}

impl QueueIndex {
    pub fn new() -> QueueIndex {
        QueueIndex {
            ops: Vec::new(),
            sends: Vec::new(),
            reads: Runs::default(),
            keys: Vec::new(),
            key_ids: FxHashMap::default(),
            repeated_sends: Vec::new(),
            saw_subscribe: false,
            assignments: FxHashMap::default(),
            log_ends: FxHashMap::default(),
        }
    }

    /// `{"ends": {"<key>": end}}` from a `log-end` op; anything else in it is ignored.
    fn ingest_log_ends(&mut self, value: &OpValue, time_ns: u64) {
        let OpValue::Json(json) = value else { return };
        let Some(ends) = json.get("ends").and_then(|ends| ends.as_object()) else {
            return;
        };
        for (key, end) in ends {
            if let (Ok(key), Some(end)) = (key.parse::<i64>(), end.as_i64()) {
                let id = self.key_id(Key(key));
                self.log_ends.insert(id, LogEnd { end, time_ns });
            }
        }
    }

    fn key_id(&mut self, key: Key) -> KeyId {
        if let Some(&id) = self.key_ids.get(&key) {
            return id;
        }
        let id = self.keys.len() as KeyId;
        self.keys.push(KeyLog::new(key));
        self.key_ids.insert(key, id);
        id
    }

    /// Folds one completed client op in.
    pub fn ingest(&mut self, mut op: CompletedOp) {
        let id = self.ops.len() as OpId;
        if op.f == Function::Subscribe {
            self.saw_subscribe = true;
        }
        if op.f == Function::LogEnd && op.outcome == Outcome::Ok {
            self.ingest_log_ends(&op.value, op.invoke_time_ns);
        }
        if let OpValue::Keys(keys) = &op.value
            && op.f.has_keys()
        {
            self.assignments.insert(id, keys.clone());
        }
        let sends_start = self.sends.len() as u32;
        let reads_start = self.reads.runs.len() as u32;
        let value = std::mem::take(&mut op.value);
        for micro in value.micro_ops() {
            match micro {
                MicroOp::Send { key, value, offset } => {
                    let key_id = self.key_id(*key);
                    self.sends.push(SendRecord {
                        key: key_id,
                        value: *value,
                        offset: *offset,
                        index: NO_INDEX,
                    });
                    let log = &mut self.keys[key_id as usize];
                    let info = log.values.get_or_insert_with(value.0, ValueInfo::default);
                    match info.writer {
                        None => info.writer = Some(id),
                        Some(previous) if previous == id => {}
                        Some(previous) => {
                            let failed = self.ops[previous as usize].op.outcome == Outcome::Fail;
                            if failed && op.outcome != Outcome::Fail {
                                info.writer = Some(id);
                            }
                            self.repeated_sends.push((key_id, *value, previous, id));
                        }
                    }
                }
                MicroOp::Poll { reads: Some(reads) } => {
                    for key_reads in reads {
                        let key_id = self.key_id(key_reads.key);
                        let log = &mut self.keys[key_id as usize];
                        let mut runs = RunBuilder::new(key_id);
                        for (at, record) in key_reads.records.iter().enumerate() {
                            let representative = log.observe(record.offset, record.value, id);
                            if op.outcome == Outcome::Ok {
                                let info = log
                                    .values
                                    .get_or_insert_with(record.value.0, ValueInfo::default);
                                if info.ok_reader.is_none() {
                                    info.ok_reader = Some(id);
                                }
                            }
                            runs.push(&key_reads.records, at, representative, &mut self.reads);
                        }
                        runs.end(&key_reads.records, &mut self.reads);
                    }
                }
                MicroOp::Poll { reads: None } => {}
            }
        }
        let committed = op.outcome == Outcome::Ok;
        self.ops.push(OpRecord {
            op,
            sends: sends_start..self.sends.len() as u32,
            reads: reads_start..self.reads.runs.len() as u32,
            committed,
        });
    }

    /// Decides which info ops committed, adds their known-offset sends to the version
    /// orders, sorts each key's log and resolves every dense index.
    pub fn finish(&mut self) {
        // 1. info ops whose sent values were read by an ok op must have committed.
        for record in &mut self.ops {
            if record.op.outcome == Outcome::Info {
                record.committed = self.sends[range(&record.sends)].iter().any(|s| {
                    self.keys[s.key as usize]
                        .values
                        .get(s.value.0)
                        .is_some_and(|v| v.ok_reader.is_some())
                });
            }
        }
        // 2. Sends with known offsets from committed ops are observations too.
        for (id, record) in self.ops.iter().enumerate() {
            if !record.committed {
                continue;
            }
            for send in &self.sends[range(&record.sends)] {
                if let Some(offset) = send.offset {
                    self.keys[send.key as usize].observe(offset, send.value, id as OpId);
                }
            }
        }
        // 3. Sort each log into its version order and index values.
        for log in &mut self.keys {
            let mut slots: Vec<Slot> = log.pending.drain().into_iter().map(|(_, s)| s).collect();
            slots.sort_unstable_by_key(|s| s.offset);
            for (index, slot) in slots.iter_mut().enumerate() {
                let index = index as u32;
                *log.index_of_offset
                    .get_or_insert_with(slot.offset.0, || index) = index;
                slot.writer = log
                    .values
                    .get(slot.value.0)
                    .and_then(|v| v.writer)
                    .unwrap_or(NO_OP);
                let values = std::iter::once(slot.value).chain(slot.others.iter().map(|o| o.0));
                for value in values {
                    let info = log.values.get_or_insert_with(value.0, ValueInfo::default);
                    if info.first_index == NO_INDEX {
                        info.first_index = index;
                    }
                    info.last_index = index;
                    info.offset_count += 1;
                }
            }
            log.log = slots;
        }
        // 4. Resolve the dense index of every read run and send.
        for run in &mut self.reads.runs {
            run.first_index = self.keys[run.key as usize]
                .index_of_offset
                .get(run.first_offset.0)
                .copied()
                .unwrap_or_else(|| unreachable!("every read offset was observed"));
        }
        for send in &mut self.sends {
            let log = &self.keys[send.key as usize];
            send.index = match send.offset {
                Some(offset) => log.index_of_offset.get(offset.0).copied(),
                None => log.values.get(send.value.0).map(|v| v.first_index),
            }
            .unwrap_or(NO_INDEX);
        }
    }

    /// Sends of an op.
    pub fn sends_of(&self, id: OpId) -> &[SendRecord] {
        &self.sends[range(&self.ops[id as usize].sends)]
    }

    /// Reads of an op, in consumer order (after `finish`).
    pub fn reads_of(&self, id: OpId) -> impl Iterator<Item = ReadRecord> + '_ {
        self.reads.runs[range(&self.ops[id as usize].reads)]
            .iter()
            .flat_map(move |run| (0..run.len).map(move |i| self.expand(run, i)))
    }

    /// Record `i` of a run.
    fn expand(&self, run: &ReadRun, i: u32) -> ReadRecord {
        let log = &self.keys[run.key as usize];
        let index = run.first_index + i;
        let slot = &log.log[index as usize];
        let (value, writer) = if run.values == PLAIN {
            (slot.value, slot.writer)
        } else {
            let value = self.reads.odd_values[(run.values + i) as usize];
            let writer = log.values.get(value.0).and_then(|v| v.writer);
            (value, writer.unwrap_or(NO_OP))
        };
        ReadRecord {
            key: run.key,
            offset: slot.offset,
            value,
            index,
            writer,
        }
    }

    /// The writer of a read if it must have committed.
    pub fn committed_writer_of(&self, read: &ReadRecord) -> Option<OpId> {
        (read.writer != NO_OP && self.ops[read.writer as usize].committed).then_some(read.writer)
    }

    /// The paired op behind an id.
    pub fn op(&self, id: OpId) -> &CompletedOp {
        &self.ops[id as usize].op
    }

    /// A witness reference to an op.
    pub fn op_ref(&self, id: OpId) -> OpRef {
        OpRef::from_op(self.op(id))
    }

    /// Short text naming an op, for explanations.
    pub fn describe(&self, id: OpId) -> String {
        self.op_ref(id).to_string()
    }

    /// The key behind a key id.
    pub fn key(&self, key: KeyId) -> Key {
        self.keys[key as usize].key
    }

    /// True when the op read anything (ok ops only).
    pub fn ok_reads_count(&self) -> u64 {
        self.ops
            .iter()
            .filter(|r| r.op.outcome == Outcome::Ok)
            .flat_map(|r| &self.reads.runs[range(&r.reads)])
            .map(|run| u64::from(run.len))
            .sum()
    }
}

pub(crate) fn range(r: &Range<u32>) -> Range<usize> {
    r.start as usize..r.end as usize
}

/// Cuts one poll's records of one key into [`ReadRun`]s: a run ends where the next offset is
/// not the previous plus one.
struct RunBuilder {
    key: KeyId,
    /// The run being built: its first offset, its first record's position in the poll's
    /// records, and its length.
    first: Option<(Offset, usize)>,
    len: u32,
    plain: bool,
}

impl RunBuilder {
    fn new(key: KeyId) -> RunBuilder {
        RunBuilder {
            key,
            first: None,
            len: 0,
            plain: true,
        }
    }

    /// Adds `records[at]`.
    fn push(&mut self, records: &[Record], at: usize, representative: bool, index: &mut Runs) {
        let offset = records[at].offset;
        let next = self
            .first
            .and_then(|(first, _)| first.0.checked_add(i64::from(self.len)));
        if next != Some(offset.0) {
            self.end(records, index);
            self.first = Some((offset, at));
        }
        self.len += 1;
        self.plain &= representative;
    }

    fn end(&mut self, records: &[Record], index: &mut Runs) {
        let Some((first_offset, at)) = self.first.take() else {
            return;
        };
        let values = if self.plain {
            PLAIN
        } else {
            let start = index.odd_values.len() as u32;
            let run = &records[at..at + self.len as usize];
            index.odd_values.extend(run.iter().map(|r| r.value));
            start
        };
        index.runs.push(ReadRun {
            key: self.key,
            len: self.len,
            first_offset,
            first_index: NO_INDEX,
            values,
        });
        self.len = 0;
        self.plain = true;
    }
}
