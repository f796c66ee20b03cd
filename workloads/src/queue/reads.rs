//! How a poll becomes the history's reads ([`key_reads`], [`polled_reads`]) and the final
//! reads' targets every ok read raises ([`Targets`]), shared by the queue, group and txn
//! workloads.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicI64, Ordering};

use logjam_client::consumer::isolation::IsolationLevel;
use logjam_client::consumer::{Consumer, ConsumerRecord};
use logjam_history::{Key, KeyReads, Record, Value};

/// The highest offset any ok op observed per key: the target of the final reads.
#[derive(Debug, Default)]
pub struct Targets {
    highest: BTreeMap<i64, AtomicI64>,
}

impl Targets {
    /// Targets for `keys` keys, all "nothing seen yet".
    pub fn new(keys: u32) -> Targets {
        Targets {
            highest: (0..i64::from(keys))
                .map(|key| (key, AtomicI64::new(-1)))
                .collect(),
        }
    }

    /// Raises `key`'s target to `offset` if it is higher.
    pub fn observe(&self, key: Key, offset: i64) {
        // A load first: most reads are below the target, and a read leaves the line shared.
        if let Some(highest) = self.highest.get(&key.0)
            && highest.load(Ordering::Relaxed) < offset
        {
            highest.fetch_max(offset, Ordering::Relaxed);
        }
    }

    /// The highest offset seen for each key (-1 when none).
    pub fn snapshot(&self) -> BTreeMap<i64, i64> {
        self.highest
            .iter()
            .map(|(key, offset)| (*key, offset.load(Ordering::Relaxed)))
            .collect()
    }
}

/// What one poll returned, per key, as the history records it (a value that is not a
/// number is recorded as `i64::MIN`, which no op sent); raises the final reads' targets.
pub(crate) fn key_reads(records: Vec<ConsumerRecord>, targets: &Targets) -> Vec<KeyReads> {
    let mut by_key: BTreeMap<i64, Vec<Record>> = BTreeMap::new();
    for record in records {
        let key = i64::from(record.partition.partition.0);
        let value = record
            .value
            .as_deref()
            .and_then(|bytes| std::str::from_utf8(bytes).ok())
            .and_then(|text| text.parse::<i64>().ok())
            .unwrap_or(i64::MIN);
        by_key.entry(key).or_default().push(Record {
            offset: logjam_history::Offset(record.offset.0),
            value: Value(value),
        });
    }
    by_key
        .into_iter()
        .map(|(key, records)| {
            // Once per key, not per record: the targets are shared by every process, and an
            // atomic maximum per record bounced their cache line between cores (issue 19).
            if let Some(highest) = records.iter().map(|r| r.offset.0).max() {
                targets.observe(Key(key), highest);
            }
            KeyReads {
                key: Key(key),
                records,
                fetch: None,
            }
        })
        .collect()
}

/// What one successful poll of `consumer` returned ([`key_reads`]), with what its fetches
/// covered per key ([`logjam_history::Fetched`]) when the consumer reads read_committed: the
/// read-committed checker's evidence. Keys fetched with nothing returned get an entry with no
/// records; an answer without a last stable offset (`-1`) is left out.
pub(crate) fn polled_reads(
    consumer: &mut Consumer,
    records: Vec<ConsumerRecord>,
    targets: &Targets,
) -> Vec<KeyReads> {
    let ranges = consumer.take_fetch_ranges();
    let mut reads = key_reads(records, targets);
    if consumer.isolation_level() != IsolationLevel::ReadCommitted {
        return reads;
    }
    for (tp, range) in ranges {
        if range.last_stable_offset < 0 || range.from.0 < 0 {
            continue;
        }
        let key = Key(i64::from(tp.partition.0));
        let fetch = Some(logjam_history::Fetched {
            from: logjam_history::Offset(range.from.0),
            to: logjam_history::Offset(range.to.0),
            lso: logjam_history::Offset(range.last_stable_offset),
            epoch: range.leader_epoch.0,
        });
        match reads.iter_mut().find(|kr| kr.key == key) {
            Some(kr) => kr.fetch = fetch,
            None => reads.push(KeyReads {
                key,
                records: Vec::new(),
                fetch,
            }),
        }
    }
    reads.sort_by_key(|kr| kr.key);
    reads
}
