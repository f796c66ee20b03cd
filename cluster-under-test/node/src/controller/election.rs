//! Partition leadership and ISR decisions of the active controller, as pure functions: the
//! election order of Kafka's `PartitionChangeBuilder` (kafka-semantics §1.7), ELR maintenance
//! (§1.8), and the changes a fencing (§5.5) and an unclean-shutdown re-registration (§5.6)
//! produce. Table-driven tests below.
//!
//! Order of [`build_change`]'s election (`electAnyLeader`):
//! 1. keep the current leader if it is in the target ISR and acceptable;
//! 2. else the first replica, in assignment order, in the target ISR and acceptable;
//! 3. else, when ELR is enabled and the target ISR is empty, the first acceptable ELR member
//!    (a clean election: it becomes the sole ISR member and leaves the ELR);
//! 4. else, when ELR is enabled, the ISR and ELR are empty and `LastKnownElr` names one
//!    acceptable broker (the leader when the ISR became empty): that last known leader, as an
//!    unclean election (ISR := [it], `RECOVERING`, ELR cleared);
//! 5. else, when `unclean.leader.election.enable` is true, the first acceptable replica
//!    (ISR := [it], `RECOVERING`, ELR and LastKnownELR cleared);
//! 6. else no leader (-1).
//!
//! `LastKnownElr` holds the last leader (Kafka's `useLastKnownLeaderInBalancedRecovery`, its
//! default): set when the ISR first becomes empty, cleared once the partition has a leader.
//!
//! "Acceptable" means registered and unfenced (controlled shutdown and log-dir failures do not
//! exist in this cluster yet).

use crate::metadata::{BrokerId, LeaderRecoveryState, PartitionChangeRecord, PartitionState};

/// What the election may use.
#[derive(Clone, Copy, Debug)]
pub struct ElectionPolicy {
    /// KIP-966 eligible leader replicas (`eligible.leader.replicas.enable`).
    pub elr_enabled: bool,
    /// `unclean.leader.election.enable` for the topic (topic config, else broker config).
    pub unclean_enabled: bool,
    /// The topic's `min.insync.replicas`, for ELR maintenance.
    pub min_insync_replicas: usize,
}

/// The change that moves `state` to `target_isr`, with a leader elected in Kafka's order; `None`
/// when nothing would change. `acceptable` says whether a broker may lead or join the ISR.
pub fn build_change(
    state: &PartitionState,
    target_isr: &[BrokerId],
    acceptable: &dyn Fn(BrokerId) -> bool,
    policy: ElectionPolicy,
) -> Option<PartitionChangeRecord> {
    build_change_after_unclean_shutdown(state, target_isr, acceptable, policy, &[])
}

/// [`build_change`] when `unclean` replicas just re-registered after an unclean shutdown
/// (`PartitionChangeBuilder.setUncleanShutdownReplicas`): they may have lost committed records,
/// so they are kept out of the new ELR (`targetElr = (ELR ∪ ISR) − targetIsr − unclean`).
pub fn build_change_after_unclean_shutdown(
    state: &PartitionState,
    target_isr: &[BrokerId],
    acceptable: &dyn Fn(BrokerId) -> bool,
    policy: ElectionPolicy,
    unclean: &[BrokerId],
) -> Option<PartitionChangeRecord> {
    let mut isr: Vec<BrokerId> = target_isr.to_vec();
    let mut recovery = state.leader_recovery_state;
    let mut elr = target_elr(state, &isr, policy, unclean);
    let mut unclean_election = false;
    let leader =
        if state.leader.is_some() && isr.contains(&state.leader) && acceptable(state.leader) {
            state.leader
        } else if let Some(first) = state
            .replicas
            .iter()
            .copied()
            .find(|replica| isr.contains(replica) && acceptable(*replica))
        {
            first
        } else if let Some(member) = elr
            .iter()
            .copied()
            .find(|member| policy.elr_enabled && isr.is_empty() && acceptable(*member))
        {
            elr.retain(|other| *other != member);
            isr = vec![member];
            member
        } else if let Some(last) = last_known_leader(state, &isr, &elr, acceptable, policy) {
            // KIP-966's last known leader: nobody else can lead cleanly, the last leader is
            // back; it may have lost its tail, so the election is flagged unclean.
            isr = vec![last];
            unclean_election = true;
            last
        } else if let Some(any) = state
            .replicas
            .iter()
            .copied()
            .find(|replica| policy.unclean_enabled && acceptable(*replica))
        {
            isr = vec![any];
            unclean_election = true;
            any
        } else {
            BrokerId::NONE
        };
    if unclean_election {
        elr.clear();
        recovery = LeaderRecoveryState::Recovering;
    }
    // `maybeUpdateLastKnownLeader`: the leader is remembered when the ISR first becomes empty,
    // and forgotten once the partition has a leader again.
    let last_known_elr = if !policy.elr_enabled {
        Vec::new()
    } else if isr.is_empty()
        && !state.isr.is_empty()
        && state.leader.is_some()
        && state.last_known_elr != [state.leader]
    {
        vec![state.leader]
    } else if leader.is_some() {
        Vec::new()
    } else {
        state.last_known_elr.clone()
    };
    let change = PartitionChangeRecord {
        topic_id: uuid::Uuid::nil(),
        partition: 0,
        leader: (leader != state.leader).then_some(leader),
        isr: (isr != state.isr).then_some(isr),
        elr: (elr != state.elr).then_some(elr),
        last_known_elr: (last_known_elr != state.last_known_elr).then_some(last_known_elr),
        leader_recovery_state: (recovery != state.leader_recovery_state).then_some(recovery),
    };
    let unchanged = change.leader.is_none()
        && change.isr.is_none()
        && change.elr.is_none()
        && change.last_known_elr.is_none()
        && change.leader_recovery_state.is_none();
    (!unchanged).then_some(change)
}

/// ELR maintenance (`maybePopulateTargetElr`): empty while the target ISR holds at least
/// `min.insync.replicas`; below it, the old ELR and ISR members outside the target ISR, minus
/// the replicas that just had an unclean shutdown.
fn target_elr(
    state: &PartitionState,
    target_isr: &[BrokerId],
    policy: ElectionPolicy,
    unclean: &[BrokerId],
) -> Vec<BrokerId> {
    if !policy.elr_enabled || target_isr.len() >= policy.min_insync_replicas {
        return Vec::new();
    }
    let mut elr: Vec<BrokerId> = Vec::new();
    for broker in state.elr.iter().chain(&state.isr) {
        if !target_isr.contains(broker) && !elr.contains(broker) && !unclean.contains(broker) {
            elr.push(*broker);
        }
    }
    elr
}

/// KIP-966's last-known-leader step (`canElectLastKnownLeader`): with ELR on, an empty ISR and
/// an empty ELR, the one broker `LastKnownElr` remembers, if it is acceptable. (Kafka's
/// snapshot elects it even when it is not acceptable, which leaves the partition led by a
/// broker that cannot serve; here it waits until the broker is back.)
fn last_known_leader(
    state: &PartitionState,
    target_isr: &[BrokerId],
    target_elr: &[BrokerId],
    acceptable: &dyn Fn(BrokerId) -> bool,
    policy: ElectionPolicy,
) -> Option<BrokerId> {
    match state.last_known_elr.as_slice() {
        [last]
            if policy.elr_enabled
                && target_isr.is_empty()
                && target_elr.is_empty()
                && acceptable(*last) =>
        {
            Some(*last)
        }
        _ => None,
    }
}

/// The target ISR after `fenced` is fenced: it leaves the ISR, except as the last member
/// standing when ELR is off (with ELR on, the ISR may become empty and the broker moves to
/// the ELR).
pub fn isr_without_fenced(
    state: &PartitionState,
    fenced: BrokerId,
    elr_enabled: bool,
) -> Vec<BrokerId> {
    let remaining: Vec<BrokerId> = state.isr.iter().copied().filter(|b| *b != fenced).collect();
    if remaining.is_empty() && !elr_enabled {
        state.isr.clone()
    } else {
        remaining
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ids(list: &[i32]) -> Vec<BrokerId> {
        list.iter().copied().map(BrokerId).collect()
    }

    fn state(replicas: &[i32], isr: &[i32], elr: &[i32], leader: i32) -> PartitionState {
        PartitionState {
            replicas: ids(replicas),
            isr: ids(isr),
            elr: ids(elr),
            last_known_elr: vec![],
            leader: BrokerId(leader),
            leader_epoch: 3,
            partition_epoch: 5,
            leader_recovery_state: LeaderRecoveryState::Recovered,
        }
    }

    /// (name, state, fenced broker, live brokers, elr, unclean, min isr,
    ///  expected leader, expected isr, expected recovering)
    #[test]
    fn fencing_elects_in_kafkas_order() {
        #[allow(clippy::type_complexity)]
        let table: &[(
            &str,
            PartitionState,
            i32,
            &[i32],
            bool,
            bool,
            usize,
            i32,
            &[i32],
            bool,
        )] = &[
            (
                "follower fenced: leader kept, isr shrinks",
                state(&[1, 2, 3], &[1, 2, 3], &[], 1),
                3,
                &[1, 2],
                false,
                false,
                1,
                1,
                &[1, 2],
                false,
            ),
            (
                "leader fenced: first isr replica in assignment order",
                state(&[1, 2, 3], &[3, 2, 1], &[], 1),
                1,
                &[2, 3],
                false,
                false,
                1,
                2,
                &[3, 2],
                false,
            ),
            (
                "last replica standing stays in isr, partition leaderless",
                state(&[1, 2], &[1], &[], 1),
                1,
                &[2],
                false,
                false,
                1,
                -1,
                &[1],
                false,
            ),
            (
                "unclean election picks a live out-of-sync replica",
                state(&[1, 2], &[1], &[], 1),
                1,
                &[2],
                false,
                true,
                1,
                2,
                &[2],
                true,
            ),
            (
                "elr on: isr may empty, member moves to elr, nobody eligible",
                state(&[1, 2], &[1], &[2], 1),
                1,
                &[],
                true,
                false,
                2,
                -1,
                &[],
                false,
            ),
            (
                "elr on: live elr member elected cleanly",
                state(&[1, 2], &[1], &[2], 1),
                1,
                &[2],
                true,
                false,
                2,
                2,
                &[2],
                false,
            ),
        ];
        for (name, before, fenced, live, elr, unclean, min_isr, leader, isr, recovering) in table {
            let live: Vec<BrokerId> = ids(live);
            let policy = ElectionPolicy {
                elr_enabled: *elr,
                unclean_enabled: *unclean,
                min_insync_replicas: *min_isr,
            };
            let target = isr_without_fenced(before, BrokerId(*fenced), *elr);
            let mut after = before.clone();
            if let Some(change) = build_change(before, &target, &|b| live.contains(&b), policy) {
                after.apply_change(&change);
            }
            assert_eq!(after.leader, BrokerId(*leader), "{name}: leader");
            assert_eq!(after.isr, ids(isr), "{name}: isr");
            assert_eq!(
                after.leader_recovery_state == LeaderRecoveryState::Recovering,
                *recovering,
                "{name}: recovery state"
            );
            let leader_changed = before.leader != after.leader;
            assert_eq!(
                after.leader_epoch,
                before.leader_epoch + i32::from(leader_changed),
                "{name}: leader epoch bumps exactly on a leader change"
            );
        }
    }

    /// KIP-966's last known leader: the last ISR member is fenced (ISR empties, it is
    /// remembered), re-registers after an unclean shutdown (it leaves the ELR, nobody is
    /// eligible), and once it is acceptable again it is elected, flagged unclean; a clean ELR
    /// member would be preferred.
    #[test]
    fn the_last_known_leader_is_elected_uncleanly_when_nobody_is_eligible() {
        let policy = ElectionPolicy {
            elr_enabled: true,
            unclean_enabled: false,
            min_insync_replicas: 2,
        };
        let mut partition = state(&[1, 2, 3], &[1], &[], 1);
        let fenced = isr_without_fenced(&partition, BrokerId(1), true);
        partition.apply_change(&build_change(&partition, &fenced, &|_| false, policy).unwrap());
        assert_eq!(partition.leader, BrokerId::NONE);
        assert_eq!(
            (partition.isr.clone(), partition.elr.clone()),
            (vec![], ids(&[1]))
        );
        assert_eq!(
            partition.last_known_elr,
            ids(&[1]),
            "the last leader is remembered"
        );
        let change =
            build_change_after_unclean_shutdown(&partition, &[], &|_| false, policy, &ids(&[1]));
        partition.apply_change(&change.unwrap());
        assert_eq!(partition.elr, vec![], "it left the ELR");
        assert_eq!(partition.last_known_elr, ids(&[1]), "still remembered");
        assert!(build_change(&partition, &[], &|_| false, policy).is_none());
        // With a clean ELR member available, that member leads instead.
        let mut with_elr = partition.clone();
        with_elr.elr = ids(&[3]);
        let change = build_change(&with_elr, &[], &|_| true, policy).unwrap();
        assert_eq!(change.leader, Some(BrokerId(3)));
        // Broker 1 back and acceptable: elected uncleanly, the memory cleared.
        let change = build_change(&partition, &[], &|b| b == BrokerId(1), policy).unwrap();
        partition.apply_change(&change);
        assert_eq!(
            (partition.leader, partition.isr.clone()),
            (BrokerId(1), ids(&[1]))
        );
        assert_eq!(
            partition.leader_recovery_state,
            LeaderRecoveryState::Recovering
        );
        assert_eq!(partition.last_known_elr, vec![]);
        // Without ELR there is no such step.
        let off = ElectionPolicy {
            elr_enabled: false,
            ..policy
        };
        let mut leaderless = state(&[1, 2], &[], &[], -1);
        leaderless.last_known_elr = ids(&[1]);
        assert_eq!(
            build_change(&leaderless, &[], &|_| true, off).and_then(|c| c.leader),
            None
        );
    }

    #[test]
    fn unfencing_elects_a_leader_for_a_leaderless_partition() {
        let before = state(&[1, 2], &[1], &[], -1);
        let policy = ElectionPolicy {
            elr_enabled: false,
            unclean_enabled: false,
            min_insync_replicas: 1,
        };
        let change = build_change(&before, &before.isr, &|b| b == BrokerId(1), policy).unwrap();
        assert_eq!(change.leader, Some(BrokerId(1)));
        assert_eq!(change.isr, None);
        assert!(build_change(&before, &before.isr, &|_| false, policy).is_none());
    }
}
