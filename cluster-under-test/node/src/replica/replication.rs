//! Pure decisions of partition replication (kafka-semantics.md §1.2–§1.4, §1.6): the leader's
//! per-follower bookkeeping (`lastCaughtUpTimeMs`), ISR shrink and expand, the high watermark,
//! acks=all completion, and the follower's truncation on a diverging epoch.
//!
//! Synchronous and deterministic: no I/O, no tokio, no clock (times are passed in). The shells
//! that call these live in `replica/partition/leader.rs` (the partition as leader), `api/fetch.rs` (follower
//! fetches served by the leader) and `replica/fetcher.rs` and `replica/partition.rs` (the follower side).

use std::collections::BTreeMap;

use logjam_storage::{EpochEndOffset, LeaderEpoch, Offset};

use crate::metadata::BrokerId;

/// What the leader knows of one follower (Kafka's `Replica` state snapshot).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FollowerState {
    /// The follower's log end offset: the offset of its last fetch.
    pub log_end_offset: Offset,
    /// When the follower last fetched (ms), or 0.
    pub last_fetch_time_ms: i64,
    /// The leader's log end offset at that fetch.
    pub last_fetch_leader_log_end_offset: Offset,
    /// The last time the follower was known caught up with the leader (ms), or 0.
    pub last_caught_up_time_ms: i64,
}

impl FollowerState {
    /// A follower the leader has not heard from yet: ISR members are presumed caught up now
    /// (Kafka resets them so on `makeLeader`), others never were.
    pub fn new(in_isr: bool, now_ms: i64) -> FollowerState {
        FollowerState {
            log_end_offset: Offset::UNDEFINED,
            last_fetch_time_ms: 0,
            last_fetch_leader_log_end_offset: Offset::UNDEFINED,
            last_caught_up_time_ms: if in_isr { now_ms } else { 0 },
        }
    }

    /// Records a fetch at `fetch_offset` at time `now_ms`, with the leader's log end offset
    /// `leader_log_end` at that moment (`Replica.updateFetchStateOrThrow`):
    /// caught up now if the fetch offset reaches the leader's log end; caught up as of the
    /// previous fetch if it reaches the log end the leader had then.
    pub fn record_fetch(&mut self, fetch_offset: Offset, leader_log_end: Offset, now_ms: i64) {
        if fetch_offset >= leader_log_end {
            self.last_caught_up_time_ms = self.last_caught_up_time_ms.max(now_ms);
        } else if fetch_offset >= self.last_fetch_leader_log_end_offset {
            self.last_caught_up_time_ms = self.last_caught_up_time_ms.max(self.last_fetch_time_ms);
        }
        self.log_end_offset = fetch_offset;
        self.last_fetch_leader_log_end_offset = leader_log_end;
        self.last_fetch_time_ms = now_ms;
    }

    /// `Replica.isCaughtUp`: at the leader's log end, or caught up within `lag_max_ms`.
    pub fn is_caught_up(&self, leader_log_end: Offset, now_ms: i64, lag_max_ms: i64) -> bool {
        self.log_end_offset == leader_log_end || now_ms - self.last_caught_up_time_ms <= lag_max_ms
    }
}

/// The followers to remove from the ISR: members (never the leader) that are not at the
/// leader's log end and have not been caught up for longer than `lag_max_ms`
/// (`Partition.getOutOfSyncReplicas`).
pub fn out_of_sync_replicas(
    leader: BrokerId,
    isr: &[BrokerId],
    followers: &BTreeMap<BrokerId, FollowerState>,
    leader_log_end: Offset,
    now_ms: i64,
    lag_max_ms: i64,
) -> Vec<BrokerId> {
    isr.iter()
        .copied()
        .filter(|id| *id != leader)
        .filter(|id| {
            followers.get(id).is_none_or(|state| {
                state.log_end_offset != leader_log_end
                    && now_ms - state.last_caught_up_time_ms > lag_max_ms
            })
        })
        .collect()
}

/// Whether a follower may join the ISR after a fetch (`Partition.isFollowerInSync` and the
/// conditions of `maybeExpandIsr`): not yet a member, no change in flight, an eligible
/// (registered, unfenced) broker, at or past the high watermark and into the current epoch.
pub fn should_expand_isr(
    in_isr: bool,
    change_pending: bool,
    eligible: bool,
    follower_log_end: Offset,
    high_watermark: Offset,
    leader_epoch_start_offset: Offset,
) -> bool {
    !in_isr
        && !change_pending
        && eligible
        && follower_log_end >= high_watermark
        && follower_log_end >= leader_epoch_start_offset
}

/// One replica's part in the high-watermark computation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ReplicaPosition {
    /// Its log end offset as last known.
    pub log_end_offset: Offset,
    /// A member of the maximal ISR (committed plus pending).
    pub in_maximal_isr: bool,
    /// Outside the ISR but caught up and ISR-eligible: the HW waits for it so it can join.
    pub caught_up_and_eligible: bool,
}

/// The leader's new high watermark (`Partition.maybeIncrementLeaderHW`), or `None` when it
/// does not move: the minimum log end over the leader, the maximal ISR and caught-up eligible
/// non-members; never backwards; and not at all while the committed ISR is below the
/// effective `min.insync.replicas` (strict min-ISR, KIP-966 part 1).
pub fn next_high_watermark(
    current: Offset,
    leader_log_end: Offset,
    followers: &[ReplicaPosition],
    committed_isr_size: usize,
    effective_min_isr: usize,
) -> Option<Offset> {
    if committed_isr_size < effective_min_isr {
        return None;
    }
    let candidate = followers
        .iter()
        .filter(|f| f.in_maximal_isr || f.caught_up_and_eligible)
        .map(|f| f.log_end_offset)
        .fold(leader_log_end, Offset::min);
    (candidate > current).then_some(candidate)
}

/// How a parked acks=all produce stands (`DelayedProduce.tryComplete`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AcksOutcome {
    /// The high watermark has not reached the batch yet.
    Waiting,
    /// Committed with enough replicas: answer `NONE`.
    Satisfied,
    /// Committed, but the maximal ISR is below the effective minimum:
    /// `NOT_ENOUGH_REPLICAS_AFTER_APPEND`.
    NotEnoughReplicasAfterAppend,
    /// This broker no longer leads the partition in the epoch of the append:
    /// `NOT_LEADER_OR_FOLLOWER`.
    NotLeader,
}

/// Decides a parked acks=all produce whose last record is just below `required_end`.
pub fn acks_outcome(
    still_leader_in_epoch: bool,
    high_watermark: Offset,
    required_end: Offset,
    maximal_isr_size: usize,
    effective_min_isr: usize,
) -> AcksOutcome {
    if !still_leader_in_epoch {
        AcksOutcome::NotLeader
    } else if high_watermark < required_end {
        AcksOutcome::Waiting
    } else if maximal_isr_size < effective_min_isr {
        AcksOutcome::NotEnoughReplicasAfterAppend
    } else {
        AcksOutcome::Satisfied
    }
}

/// The leader's check of a follower fetch (KIP-595, `Partition.readRecords`): given the
/// leader's `endOffsetFor(last_fetched_epoch)`, the diverging epoch to answer with, if any.
/// A follower that sends no last fetched epoch (-1) is not checked.
pub fn diverging_epoch(
    last_fetched_epoch: LeaderEpoch,
    fetch_offset: Offset,
    leader_end_for_epoch: EpochEndOffset,
) -> Option<EpochEndOffset> {
    if !last_fetched_epoch.is_defined() {
        return None;
    }
    (leader_end_for_epoch.leader_epoch < last_fetched_epoch
        || leader_end_for_epoch.end_offset < fetch_offset)
        .then_some(leader_end_for_epoch)
}

/// Where the follower truncates after a diverging epoch
/// (`AbstractFetcherThread.getOffsetTruncationState`): `own_end_for_epoch` is the follower's
/// `endOffsetFor(diverging.leader_epoch)`. Returns the offset and whether truncation is
/// complete (`false`: the follower did not know that epoch, truncated to the end of its largest
/// smaller epoch, and must ask again — the KIP-279 iteration).
pub fn follower_truncation_offset(
    diverging: EpochEndOffset,
    own_end_for_epoch: EpochEndOffset,
    own_log_end: Offset,
) -> (Offset, bool) {
    let leader_end = diverging.end_offset.max(Offset(0));
    if own_end_for_epoch.is_undefined() {
        return (leader_end.min(own_log_end), true);
    }
    if own_end_for_epoch.leader_epoch != diverging.leader_epoch {
        return (own_end_for_epoch.end_offset.min(own_log_end), false);
    }
    (
        own_end_for_epoch
            .end_offset
            .min(leader_end)
            .min(own_log_end),
        true,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn epoch_end(epoch: i32, end: i64) -> EpochEndOffset {
        EpochEndOffset {
            leader_epoch: LeaderEpoch(epoch),
            end_offset: Offset(end),
        }
    }

    #[test]
    fn last_caught_up_time_follows_kafkas_rule() {
        // (previous leader LEO at last fetch, previous fetch time, fetch offset, leader LEO now,
        //  now, expected last caught up)
        let cases = [
            (0, 0, 10, 10, 100, 100),  // at the log end now
            (8, 50, 8, 10, 100, 50),   // reached the log end of the previous fetch
            (9, 50, 8, 10, 100, 20),   // behind both: unchanged
            (5, 50, 12, 10, 100, 100), // beyond the log end (cannot happen, still caught up)
        ];
        for (prev_leo, prev_time, fetch, leo, now, expected) in cases {
            let mut state = FollowerState {
                log_end_offset: Offset(0),
                last_fetch_time_ms: prev_time,
                last_fetch_leader_log_end_offset: Offset(prev_leo),
                last_caught_up_time_ms: 20,
            };
            state.record_fetch(Offset(fetch), Offset(leo), now);
            assert_eq!(
                state.last_caught_up_time_ms, expected,
                "prev_leo={prev_leo} fetch={fetch} leo={leo}"
            );
            assert_eq!(state.log_end_offset, Offset(fetch));
        }
    }

    #[test]
    fn out_of_sync_replicas_are_lagging_isr_followers_only() {
        let follower = |leo, caught_up| FollowerState {
            log_end_offset: Offset(leo),
            last_fetch_time_ms: caught_up,
            last_fetch_leader_log_end_offset: Offset(leo),
            last_caught_up_time_ms: caught_up,
        };
        let followers = BTreeMap::from([
            (BrokerId(2), follower(5, 0)),    // behind, not caught up for 10 s: out
            (BrokerId(3), follower(10, 0)),   // at the log end: in, however old
            (BrokerId(4), follower(5, 9000)), // behind but caught up 1 s ago: in
        ]);
        let isr = [
            BrokerId(1),
            BrokerId(2),
            BrokerId(3),
            BrokerId(4),
            BrokerId(5),
        ];
        let out = out_of_sync_replicas(BrokerId(1), &isr, &followers, Offset(10), 10_000, 2000);
        // Broker 5 never fetched and has no state: out.
        assert_eq!(out, vec![BrokerId(2), BrokerId(5)]);
    }

    #[test]
    fn expand_requires_every_condition() {
        // (in_isr, pending, eligible, follower LEO, HW, epoch start, expected)
        let cases = [
            (false, false, true, 10, 10, 5, true),
            (true, false, true, 10, 10, 5, false),
            (false, true, true, 10, 10, 5, false),
            (false, false, false, 10, 10, 5, false),
            (false, false, true, 9, 10, 5, false),
            (false, false, true, 10, 8, 11, false),
        ];
        for (in_isr, pending, eligible, leo, hw, start, expected) in cases {
            assert_eq!(
                should_expand_isr(
                    in_isr,
                    pending,
                    eligible,
                    Offset(leo),
                    Offset(hw),
                    Offset(start)
                ),
                expected,
                "{in_isr} {pending} {eligible} {leo} {hw} {start}"
            );
        }
    }

    #[test]
    fn high_watermark_is_min_over_maximal_isr_and_respects_strict_min_isr() {
        let pos = |leo, isr, caught| ReplicaPosition {
            log_end_offset: Offset(leo),
            in_maximal_isr: isr,
            caught_up_and_eligible: caught,
        };
        // (current, leader LEO, followers, committed ISR size, min ISR, expected)
        type Case = (i64, i64, Vec<ReplicaPosition>, usize, usize, Option<i64>);
        let cases: Vec<Case> = vec![
            (0, 10, vec![], 1, 1, Some(10)),
            (
                0,
                10,
                vec![pos(7, true, false), pos(9, true, false)],
                3,
                2,
                Some(7),
            ),
            (0, 10, vec![pos(3, false, false)], 1, 1, Some(10)), // lagging non-member ignored
            (0, 10, vec![pos(4, false, true)], 1, 1, Some(4)),   // caught-up non-member waited for
            (8, 10, vec![pos(7, true, false)], 2, 1, None),      // never backwards
            (0, 10, vec![], 1, 2, None),                         // strict min ISR
            (5, 10, vec![pos(10, true, false)], 2, 2, Some(10)),
        ];
        for (current, leo, followers, isr, min_isr, expected) in cases {
            assert_eq!(
                next_high_watermark(Offset(current), Offset(leo), &followers, isr, min_isr),
                expected.map(Offset),
                "{current} {leo} {followers:?} {isr} {min_isr}"
            );
        }
    }

    #[test]
    fn acks_outcome_table() {
        use AcksOutcome::*;
        let cases = [
            (true, 5, 6, 3, 2, Waiting),
            (true, 6, 6, 3, 2, Satisfied),
            (true, 6, 6, 1, 2, NotEnoughReplicasAfterAppend),
            (false, 6, 6, 3, 2, NotLeader),
        ];
        for (leader, hw, required, isr, min_isr, expected) in cases {
            assert_eq!(
                acks_outcome(leader, Offset(hw), Offset(required), isr, min_isr),
                expected
            );
        }
    }

    #[test]
    fn diverging_epoch_when_epoch_unknown_or_log_longer() {
        // (last fetched epoch, fetch offset, leader's answer, expected)
        let cases = [
            (3, 10, epoch_end(3, 12), None), // same epoch, leader longer
            (3, 10, epoch_end(3, 10), None), // exactly caught up
            (3, 10, epoch_end(3, 8), Some(epoch_end(3, 8))), // follower has extra records
            (4, 10, epoch_end(2, 7), Some(epoch_end(2, 7))), // leader never had epoch 4
            (-1, 10, epoch_end(-1, -1), None), // no epoch: not checked
        ];
        for (epoch, offset, answer, expected) in cases {
            assert_eq!(
                diverging_epoch(LeaderEpoch(epoch), Offset(offset), answer),
                expected
            );
        }
    }

    #[test]
    fn follower_truncates_to_exact_divergence_point() {
        // (leader's diverging answer, follower's end for that epoch, follower LEO, expected)
        let cases = [
            (epoch_end(3, 8), epoch_end(3, 10), 10, (8, true)), // same epoch, leader shorter
            (epoch_end(2, 7), epoch_end(2, 5), 10, (5, true)),  // follower's epoch 2 ends first
            (epoch_end(2, 7), epoch_end(1, 4), 10, (4, false)), // follower never had epoch 2
            (epoch_end(2, 7), EpochEndOffset::UNDEFINED, 10, (7, true)),
            (epoch_end(2, 70), epoch_end(2, 90), 10, (10, true)), // never beyond own end
        ];
        for (diverging, own, leo, (offset, complete)) in cases {
            assert_eq!(
                follower_truncation_offset(diverging, own, Offset(leo)),
                (Offset(offset), complete),
                "{diverging:?} {own:?}"
            );
        }
    }
}
