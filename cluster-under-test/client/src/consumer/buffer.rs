//! What a fetch answered beyond what one poll could return, kept for the next polls: Kafka's
//! consumer keeps each partition's fetched data (`CompletedFetch` in its `FetchBuffer`) and
//! serves later polls from it without fetching again.
//!
//! Why it matters: a fetch answers up to `max.partition.fetch.bytes` (1 MiB) per partition,
//! while a poll returns at most `max.poll.records` (500). A consumer reading an old log from
//! the start would otherwise fetch a MiB a partition for every 500 records and drop the rest,
//! costing the broker and the client ~30 times the bytes they deliver.
//!
//! What is kept per partition: the undecoded rest of the answer from the first batch not
//! wholly returned (records below the position are skipped again on the next decode), the
//! aborted-transaction filter mid-way through it (read_committed), and what the answer said
//! (high watermark, last stable offset, the epoch it was fetched with) for the fetch ranges.
//! A kept answer is served only while the partition's position is still where the last poll
//! left it and its leader epoch is still the one it was fetched in: a seek, a reset or a new
//! assignment that moves the position elsewhere, unassigning the partition, or a leader change
//! (which may have truncated the log under it: an unclean election) drops it, as Kafka's
//! consumer drops a completed fetch whose offset no longer matches the position or whose
//! partition is awaiting validation. One that lands on the same offset in the same epoch keeps
//! it: the log holds the same records there.
//!
//! While any partition has kept data, polls serve it and fetch nothing, so a partition without
//! kept data waits until the rest is drained (Kafka's consumer fetches it meanwhile): a delay,
//! never a wrong answer.
//!
//! Polls serve kept data first and fetch only once none is left, so every fetch starts with
//! no kept data (which the error path of a poll relies on).
//!
//! A read_committed consumer keeps nothing and fetches for every poll, as before: its fetch
//! ranges carry the last stable offset of the answer, which the read-committed checker takes
//! as the LSO at the time of the poll. Records served from an older answer would date its LSO
//! late, making an LSO stall look longer than it was (a false `hanging-transaction`).

use bytes::Bytes;

use super::isolation::{AbortedTransactionFilter, IsolationLevel};
use super::{Consumer, FetchRange};
use crate::ids::{LeaderEpoch, Offset, TopicPartition};

/// The rest of one partition's fetch answer.
#[derive(Debug)]
pub(super) struct Kept {
    /// The partition's position when it was kept: it is served only from there.
    pub(super) position: Offset,
    /// The undecoded rest, from the first batch not wholly returned.
    pub(super) data: Bytes,
    /// The aborted-transaction filter, at the batch `data` starts with.
    pub(super) filter: AbortedTransactionFilter,
    /// What the answer said.
    pub(super) answer: Answer,
}

/// What a fetch answer said about its partition, for the fetch ranges of records served
/// from it later.
#[derive(Debug, Clone, Copy)]
pub(super) struct Answer {
    pub(super) last_stable_offset: i64,
    pub(super) high_watermark: i64,
    pub(super) leader_epoch: LeaderEpoch,
}

impl Consumer {
    /// Serves the next poll from kept answers: up to `max.poll.records` records, partition by
    /// partition. `None` when none is kept (or all that was kept was skipped: aborted data
    /// and markers move the position without returning records), so the poll fetches.
    pub(super) fn take_kept(&mut self) -> Option<Vec<super::ConsumerRecord>> {
        let partitions = &self.partitions;
        let cluster = &self.cluster;
        self.kept.retain(|tp, kept| {
            let epoch = cluster
                .with_metadata(|m| m.leader(tp))
                .map(|(_, epoch)| epoch);
            partitions
                .get(tp)
                .is_some_and(|state| state.position == Some(kept.position))
                && epoch == Some(kept.answer.leader_epoch)
        });
        let mut records = Vec::new();
        let tps: Vec<TopicPartition> = self.kept.keys().cloned().collect();
        for tp in tps {
            if records.len() >= self.config.max_poll_records {
                break;
            }
            let kept = self.kept.remove(&tp).expect("listed");
            let from = kept.position;
            let answer = kept.answer;
            self.take_records(&tp, kept.data, kept.filter, answer, &mut records);
            if let Some(to) = self.position(&tp) {
                self.note_fetch(&tp, from, to, answer.range(from, to));
            }
        }
        (!records.is_empty()).then_some(records)
    }

    /// Keeps the rest of `tp`'s answer for the next polls, when there is any.
    pub(super) fn keep(
        &mut self,
        tp: &TopicPartition,
        data: Bytes,
        filter: AbortedTransactionFilter,
        answer: Answer,
    ) {
        let Some(position) = self.position(tp) else {
            return;
        };
        if data.is_empty() || self.config.isolation_level == IsolationLevel::ReadCommitted {
            return;
        }
        self.kept.insert(
            tp.clone(),
            Kept {
                position,
                data,
                filter,
                answer,
            },
        );
    }
}

impl Answer {
    /// The fetch range of records `from..to` served from this answer.
    pub(super) fn range(self, from: Offset, to: Offset) -> FetchRange {
        FetchRange {
            from,
            to,
            last_stable_offset: self.last_stable_offset,
            high_watermark: self.high_watermark,
            leader_epoch: self.leader_epoch,
        }
    }
}
