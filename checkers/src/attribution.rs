//! Loss attribution: for each acknowledged write the final reads lost, the mechanism that let
//! it go, decided only from what the history shows (the producer's `acks`, the leader
//! watcher's `leader-change` ops with the ISR they saw, the nemesis's `isr-shrunk`, power-loss
//! and kill ops). The first rule that the history proves wins, in this order:
//!
//! 1. `acks-1`: the producer used `acks=1` (or 0): the leader acknowledged before any follower
//!    had the write;
//! 2. `isr-of-one`: the ISR in force when the write was acknowledged (the last ISR the history
//!    shows for its partition before then) was the leader alone, so `acks=all` meant "the
//!    leader has it" (`min.insync.replicas=1`). The acknowledgement itself proves it for a
//!    write invoked after the nemesis cut (or paused) every follower of its partition's leader
//!    and acknowledged before that fault's `isr-shrunk` op (which records how long it waited
//!    from the cut): no follower could have fetched the write, so the ISR had already shrunk.
//!    Without this, the writes the shrink released all at once, acknowledged before the next
//!    metadata poll could show the new ISR, went to whichever later rule matched;
//! 3. `unclean-election`: between the acknowledgement and the final read, a leader outside the
//!    previous ISR was elected;
//! 4. `last-replica-truncated`: a node lost power after the acknowledgement and was then
//!    elected leader as the partition's only ISR member, so the others truncated to the log it
//!    had left;
//! 5. `unflushed-tail`: every member of the ISR in force at the acknowledgement lost power
//!    after it (the only up-to-date copies lost their unflushed tails);
//! 6. `divergent-truncation`: some other election happened between the acknowledgement and the
//!    final read, and the replicas truncated to the new leader's diverging log;
//! 7. `unattributed`: the history shows none of these.

use std::collections::BTreeMap;

use logjam_history::{LEADER_CHANGE, LeadershipChange, NemesisEvent};
use serde::Serialize;

/// Why an acknowledged write was lost.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Mechanism {
    /// Acknowledged by the leader alone (`acks=1`).
    #[serde(rename = "acks-1")]
    Acks1,
    /// Acknowledged while the ISR was the leader alone.
    IsrOfOne,
    /// A leader from outside the ISR was elected.
    UncleanElection,
    /// An in-sync replica that lost its tail was elected and the others truncated to it.
    LastReplicaTruncated,
    /// Every up-to-date copy lost power.
    UnflushedTail,
    /// Truncated to a new leader's diverging log after an election.
    DivergentTruncation,
    /// The history shows no mechanism.
    Unattributed,
}

impl Mechanism {
    /// The name used in summaries and report.json.
    pub fn name(self) -> &'static str {
        match self {
            Mechanism::Acks1 => "acks-1",
            Mechanism::IsrOfOne => "isr-of-one",
            Mechanism::UncleanElection => "unclean-election",
            Mechanism::LastReplicaTruncated => "last-replica-truncated",
            Mechanism::UnflushedTail => "unflushed-tail",
            Mechanism::DivergentTruncation => "divergent-truncation",
            Mechanism::Unattributed => "unattributed",
        }
    }
}

/// One partition's event, as the history shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Event {
    /// The ISR (and leader) the watcher or the nemesis saw.
    Isr {
        leader: Option<String>,
        isr: Vec<String>,
        /// An election of a leader outside the previous ISR.
        unclean: bool,
        /// A change of leader (or epoch) rather than of the ISR alone.
        election: bool,
    },
}

/// The history's evidence, per partition, to attribute losses with.
#[derive(Debug, Default)]
pub struct Evidence {
    acks_one: bool,
    /// (time, event) per partition number, sorted by time.
    partitions: BTreeMap<i64, Vec<(u64, Event)>>,
    /// (time, nodes that lost power), cluster-wide, sorted by time.
    power_losses: Vec<(u64, Vec<String>)>,
    /// Per partition number, (cut, shrink seen) times of the ISR-shrink faults: from the cut
    /// of every follower to the `isr-shrunk` op, the leader alone could acknowledge.
    isolations: BTreeMap<i64, Vec<(u64, u64)>>,
}

impl Evidence {
    /// Reads the evidence from the nemesis events and the producer's `acks` setting.
    pub fn new(acks: Option<&str>, nemesis: &[NemesisEvent]) -> Evidence {
        let mut evidence = Evidence {
            acks_one: matches!(acks.map(str::trim), Some("1" | "0")),
            ..Evidence::default()
        };
        for event in nemesis {
            let name = event.f.as_str();
            if name == LEADER_CHANGE {
                let Ok(change) = serde_json::from_value::<LeadershipChange>(event.value.clone())
                else {
                    continue;
                };
                let election = change.leader != change.previous_leader || change.leader.is_none();
                evidence
                    .partitions
                    .entry(change.partition)
                    .or_default()
                    .push((
                        event.time_ns,
                        Event::Isr {
                            leader: change.leader,
                            isr: change.isr,
                            unclean: change.unclean,
                            election,
                        },
                    ));
            } else if name == "isr-shrunk" {
                let partition = event.value.get("partition").and_then(|p| p.as_i64());
                let leader = event.value.get("leader").and_then(|l| l.as_str());
                let waited_ns = event
                    .value
                    .get("waited_ms")
                    .and_then(|w| w.as_u64())
                    .map(|ms| ms.saturating_mul(1_000_000));
                if let (Some(partition), Some(waited_ns)) = (partition, waited_ns) {
                    evidence
                        .isolations
                        .entry(partition)
                        .or_default()
                        .push((event.time_ns.saturating_sub(waited_ns), event.time_ns));
                }
                if let (Some(partition), Some(leader)) = (partition, leader) {
                    evidence.partitions.entry(partition).or_default().push((
                        event.time_ns,
                        Event::Isr {
                            leader: Some(leader.to_owned()),
                            isr: vec![leader.to_owned()],
                            unclean: false,
                            election: false,
                        },
                    ));
                }
            } else if name == "power-loss" || name == "isr-shrink-power-loss" {
                let lost: Vec<String> = if name == "power-loss" {
                    event.targets.clone()
                } else {
                    // The ISR-shrink fault powers off the leader only.
                    event
                        .value
                        .get("leader")
                        .and_then(|l| l.as_str())
                        .map(|l| vec![l.to_owned()])
                        .unwrap_or_default()
                };
                evidence.power_losses.push((event.time_ns, lost));
            }
        }
        for events in evidence.partitions.values_mut() {
            events.sort_by_key(|(time, _)| *time);
        }
        evidence.power_losses.sort_by_key(|(time, _)| *time);
        evidence
    }

    /// The mechanism that lost a write to `partition` invoked at `invoke_ns` and acknowledged
    /// at `ack_ns`, given the final read at `final_ns`.
    pub fn attribute(
        &self,
        partition: Option<i64>,
        invoke_ns: u64,
        ack_ns: u64,
        final_ns: u64,
    ) -> Mechanism {
        if self.acks_one {
            return Mechanism::Acks1;
        }
        let acknowledged_by_an_isolated_leader = partition
            .and_then(|p| self.isolations.get(&p))
            .is_some_and(|windows| {
                windows.iter().any(|&(cut, shrunk)| {
                    cut <= invoke_ns && invoke_ns <= ack_ns && ack_ns <= shrunk
                })
            });
        if acknowledged_by_an_isolated_leader {
            return Mechanism::IsrOfOne;
        }
        let events: &[(u64, Event)] = partition
            .and_then(|p| self.partitions.get(&p))
            .map_or(&[], Vec::as_slice);
        let isr_at_ack = events
            .iter()
            .take_while(|(time, _)| *time <= ack_ns)
            .map(|(_, Event::Isr { isr, .. })| isr)
            .last();
        if isr_at_ack.is_some_and(|isr| isr.len() == 1) {
            return Mechanism::IsrOfOne;
        }
        let after: Vec<&(u64, Event)> = events
            .iter()
            .filter(|(time, _)| *time > ack_ns && *time <= final_ns)
            .collect();
        if after
            .iter()
            .any(|(_, e)| matches!(e, Event::Isr { unclean: true, .. }))
        {
            return Mechanism::UncleanElection;
        }
        let losses: Vec<&(u64, Vec<String>)> = self
            .power_losses
            .iter()
            .filter(|(time, _)| *time > ack_ns && *time <= final_ns)
            .collect();
        let sole_leader_after_its_power_loss = after.iter().any(|(time, event)| match event {
            Event::Isr {
                leader: Some(leader),
                isr,
                ..
            } => {
                isr.as_slice() == std::slice::from_ref(leader)
                    && losses
                        .iter()
                        .any(|(lost_at, nodes)| lost_at < time && nodes.contains(leader))
            }
            Event::Isr { leader: None, .. } => false,
        });
        if sole_leader_after_its_power_loss {
            return Mechanism::LastReplicaTruncated;
        }
        if let Some(isr) = isr_at_ack
            && !isr.is_empty()
            && isr
                .iter()
                .all(|member| losses.iter().any(|(_, nodes)| nodes.contains(member)))
        {
            return Mechanism::UnflushedTail;
        }
        if after.iter().any(|(_, e)| {
            matches!(
                e,
                Event::Isr {
                    election: true,
                    leader: Some(_),
                    ..
                }
            )
        }) {
            return Mechanism::DivergentTruncation;
        }
        Mechanism::Unattributed
    }
}

/// Counts per mechanism, by name, for summaries and report.json.
pub fn counts(mechanisms: impl IntoIterator<Item = Mechanism>) -> BTreeMap<String, u64> {
    let mut counts = BTreeMap::new();
    for mechanism in mechanisms {
        *counts.entry(mechanism.name().to_owned()).or_insert(0) += 1;
    }
    counts
}

#[cfg(test)]
#[path = "attribution/tests.rs"]
mod tests;
