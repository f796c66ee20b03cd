//! The faults phase of a run: the nemesis. Draws faults on the seeded schedule (or follows a
//! script), resolves scripted roles (`leader:0`, `followers:0`) against the cluster's metadata,
//! injects and undoes them on the lab, and records each as a nemesis op; undoing one fault
//! never brings back a node another fault in force holds down.

use std::time::Duration;

use logjam_client::Admin;
use logjam_history::{Function, OpType, OpValue, Process};
use logjam_workloads::recorder::Recorder;
use rand::rngs::StdRng;
use rand::{RngExt, SeedableRng};
use serde_json::json;
use tokio::time::Instant;

use super::cuts;
use super::isr_shrink::{self, ShrinkTiming};
use super::member_faults;
use crate::lab::Lab;
use crate::nemesis::{self, Fault, PartitionKind};
use crate::timeline::{Action, Step, Targets as ScriptTargets};

/// The nemesis of one run: its schedule (random or scripted) and the faults in force.
pub(super) struct Nemesis<'a> {
    faults: &'a [Fault],
    script: Option<std::iter::Peekable<std::slice::Iter<'a, Step>>>,
    rng: StdRng,
    interval: Duration,
    timing: ShrinkTiming,
    /// When the workload phase ends: an ISR-shrink fault is not begun when its wait for the
    /// shrink could outlast it.
    deadline: Option<Instant>,
    start: Instant,
    next_fault: Instant,
    active: Vec<Active>,
    /// The run's member pool, for member steps and `coordinator` targets.
    pub(super) members: Option<super::members::MemberPool>,
}

impl<'a> Nemesis<'a> {
    /// The nemesis of a run seeded with `seed`, starting its schedule now: random faults
    /// drawn from `faults` every `interval` (fault, undo, fault, ...), or `script`'s steps.
    pub(super) fn new(
        seed: u64,
        faults: &'a [Fault],
        script: Option<&'a [Step]>,
        interval: Duration,
        timing: ShrinkTiming,
    ) -> Nemesis<'a> {
        let start = Instant::now();
        Nemesis {
            faults,
            script: script.map(|steps| steps.iter().peekable()),
            rng: StdRng::seed_from_u64(seed.rotate_left(7) ^ 0x6e656d65),
            interval,
            timing,
            deadline: None,
            start,
            next_fault: start + interval,
            active: Vec::new(),
            members: None,
        }
    }

    /// Ends the workload phase at `deadline`, for the schedule's ISR-shrink faults.
    pub(super) fn with_deadline(mut self, deadline: Instant) -> Nemesis<'a> {
        self.deadline = Some(deadline);
        self
    }

    /// The faults in force, for the progress line.
    pub(super) fn describe(&self, lab: &Lab) -> Vec<String> {
        self.active.iter().map(|a| a.describe(lab)).collect()
    }

    /// Does whatever the schedule says is due by now.
    pub(super) async fn step(
        &mut self,
        lab: &mut Lab,
        recorder: &Recorder,
        bootstrap: &str,
        topic: &str,
    ) -> anyhow::Result<()> {
        if let Some(steps) = &mut self.script {
            let start = self.start;
            while let Some(step) = steps.next_if(|step| start + step.at <= Instant::now()) {
                match &step.action {
                    Action::Undo(name) => {
                        let (due, kept): (Vec<Active>, Vec<Active>) =
                            std::mem::take(&mut self.active)
                                .into_iter()
                                .partition(|a| a.fault.undo_name() == *name);
                        self.active = kept;
                        if due.is_empty() {
                            eprintln!("logjam: script line {}: nothing to {name}", step.line);
                        }
                        for fault in due {
                            undo(lab, recorder, fault, &self.active)?;
                        }
                    }
                    Action::Member(fault, targets) => match self.members.as_mut() {
                        Some(pool) => {
                            member_faults::apply(pool, *fault, targets, &mut self.rng, recorder)
                                .await?;
                        }
                        None => eprintln!(
                            "logjam: script line {}: no member pool (--members) to act on",
                            step.line
                        ),
                    },
                    Action::AddPartitions(count) => {
                        let added =
                            member_faults::add_partitions(bootstrap, topic, *count, recorder)
                                .await?;
                        if let (Some(pool), Some((from, to))) = (&self.members, added) {
                            pool.note(json!({"event": "partitions-added", "from": from, "to": to}));
                        }
                    }
                    Action::MemberUndo(name) => match self.members.as_mut() {
                        Some(pool) => member_faults::undo(pool, name, recorder)?,
                        None => eprintln!(
                            "logjam: script line {}: no member pool (--members) to act on",
                            step.line
                        ),
                    },
                    Action::Cut(a, b) => {
                        let a = resolve(lab, a, &mut self.rng, bootstrap, topic).await;
                        let b = resolve(lab, b, &mut self.rng, bootstrap, topic).await;
                        self.active.extend(cuts::cut(lab, recorder, vec![a, b])?);
                    }
                    Action::CutClients(targets, new_only) => {
                        let nodes = resolve(lab, targets, &mut self.rng, bootstrap, topic).await;
                        self.active
                            .extend(cuts::cut_clients(lab, recorder, nodes, *new_only)?);
                    }
                    Action::Fault(fault @ Fault::IsrShrink(ending), targets) => {
                        // `leader:k` names the partition; anything else, a random one.
                        let partition = match targets {
                            ScriptTargets::Leader(partition) => *partition,
                            _ => None,
                        };
                        let at = Where {
                            bootstrap,
                            topic,
                            partition,
                            timing: self.timing,
                        };
                        self.active.extend(
                            inject_isr_shrink(lab, recorder, *fault, *ending, &mut self.rng, at)
                                .await?,
                        );
                    }
                    Action::Fault(fault, targets) => {
                        let chosen = resolve(lab, targets, &mut self.rng, bootstrap, topic).await;
                        if let Some(pool) = &self.members {
                            pool.note(json!({
                                "event": "node-fault",
                                "fault": fault.to_string(),
                                "nodes": names(lab, &chosen),
                                "coordinator": *targets == ScriptTargets::Coordinator,
                            }));
                        }
                        self.active.extend(
                            inject(
                                lab,
                                recorder,
                                *fault,
                                Some(chosen),
                                &mut self.rng,
                                bootstrap,
                                topic,
                            )
                            .await?,
                        );
                    }
                }
            }
            return Ok(());
        }
        if self.faults.is_empty() || Instant::now() < self.next_fault {
            return Ok(());
        }
        self.next_fault += self.interval;
        match self.active.pop() {
            Some(fault) => undo(lab, recorder, fault, &self.active)?,
            None => {
                let fault = self.faults[self.rng.random_range(0..self.faults.len())];
                let too_late = self.deadline.is_some_and(|deadline| {
                    Instant::now()
                        + self.timing.expected(lab.has_network())
                        + isr_shrink::HOLD_AFTER_SHRINK
                        > deadline
                });
                let injected = match fault {
                    // Its wait for the shrink could outlast the run: this slot stays empty.
                    Fault::IsrShrink(_) if too_late => None,
                    Fault::IsrShrink(ending) => {
                        let at = Where {
                            bootstrap,
                            topic,
                            partition: None,
                            timing: self.timing,
                        };
                        inject_isr_shrink(lab, recorder, fault, ending, &mut self.rng, at).await?
                    }
                    _ => {
                        inject(lab, recorder, fault, None, &mut self.rng, bootstrap, topic).await?
                    }
                };
                self.active.extend(injected);
            }
        }
        Ok(())
    }

    /// Undoes every fault still in force, last first.
    pub(super) fn heal_all(&mut self, lab: &mut Lab, recorder: &Recorder) -> anyhow::Result<()> {
        while let Some(fault) = self.active.pop() {
            undo(lab, recorder, fault, &self.active)?;
        }
        Ok(())
    }
}

/// A fault in force, waiting for its undo.
#[derive(Debug)]
pub(super) struct Active {
    pub(super) fault: Fault,
    /// The nodes it hit; for an ISR shrink, the leader first, then the followers.
    pub(super) targets: Vec<usize>,
}

/// Where an ISR-shrink fault aims: the workload's topic, one partition of it (a random one when
/// `None`), and how long Kafka's settings make the shrink take.
struct Where<'s> {
    bootstrap: &'s str,
    topic: &'s str,
    partition: Option<u32>,
    timing: ShrinkTiming,
}

/// Injects an ISR-shrink fault and records it like [`inject`] does: `info` once the leader is
/// down, `fail` with the reason when it could not complete (the lab is put right at once).
async fn inject_isr_shrink(
    lab: &mut Lab,
    recorder: &Recorder,
    fault: Fault,
    ending: nemesis::Ending,
    rng: &mut StdRng,
    at: Where<'_>,
) -> anyhow::Result<Option<Active>> {
    let mut value = serde_json::Map::new();
    let mut shrunk = None;
    let outcome = isr_shrink::inject(
        lab,
        recorder,
        ending,
        at.partition,
        at.timing,
        rng,
        at.bootstrap,
        at.topic,
        &mut value,
        &mut shrunk,
    )
    .await;
    let targets: Vec<usize> = shrunk
        .iter()
        .flat_map(|s| std::iter::once(s.leader).chain(s.followers.iter().copied()))
        .collect();
    value.insert("targets".into(), json!(names(lab, &targets)));
    let active = Active { fault, targets };
    match outcome {
        Ok(()) => {
            recorder.record(
                Process::Nemesis,
                OpType::Info,
                Function::from_name(&fault.to_string()),
                OpValue::Json(serde_json::Value::Object(value)),
                None,
            )?;
            eprintln!("logjam: nemesis {}", active.describe(lab));
            Ok(Some(active))
        }
        Err(error) => {
            eprintln!(
                "logjam: nemesis {fault} could not complete: {}",
                crate::error_text::chain(&error)
            );
            recorder.record(
                Process::Nemesis,
                OpType::Fail,
                Function::from_name(&fault.to_string()),
                OpValue::Json(serde_json::Value::Object(value)),
                Some(json!(crate::error_text::chain(&error))),
            )?;
            restore(lab, &active, &[])?;
            Ok(None)
        }
    }
}

impl Active {
    fn describe(&self, lab: &Lab) -> String {
        format!("{} {}", self.fault, names(lab, &self.targets).join(","))
    }
}

pub(super) fn names(lab: &Lab, nodes: &[usize]) -> Vec<String> {
    nodes.iter().map(|node| lab.nodes[*node].name()).collect()
}

/// The node leading a random partition of the workload's topic, if one is known.
async fn leader_of_some_partition(bootstrap: &str, topic: &str, rng: &mut StdRng) -> Option<usize> {
    roles_of(bootstrap, topic, None, rng)
        .await
        .map(|(leader, _)| leader)
}

/// How long one request of a role lookup waits for its answer.
pub(super) const ROLE_REQUEST_TIMEOUT_MS: &str = "1000";
/// How long a role lookup may take in all before the step falls back to a random node.
pub(super) const ROLE_LOOKUP_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(5);

/// The leader and the other replicas of partition `partition` (a random one when `None`),
/// as node indexes, if the cluster answers.
async fn roles_of(
    bootstrap: &str,
    topic: &str,
    partition: Option<u32>,
    rng: &mut StdRng,
) -> Option<(usize, Vec<usize>)> {
    // Short: a step aimed at a role must run on time even while another step has a node
    // paused or cut off (a request to it would otherwise wait Kafka's 30 s).
    let admin = Admin::from_properties([
        ("bootstrap.servers", bootstrap),
        ("request.timeout.ms", ROLE_REQUEST_TIMEOUT_MS),
    ])
    .ok()?;
    let topics = tokio::time::timeout(ROLE_LOOKUP_TIMEOUT, admin.describe_topics(&[topic]))
        .await
        .ok()?
        .ok()?;
    let partitions = &topics.first()?.partitions;
    let index = match partition {
        Some(partition) => partition as usize,
        None => rng.random_range(0..partitions.len().max(1)),
    };
    let chosen = partitions.get(index)?;
    let leader = chosen.leader?.0;
    let to_index = |id: i32| usize::try_from(id - 1).ok();
    let followers = chosen
        .replicas
        .iter()
        .filter(|replica| replica.0 != leader)
        .filter_map(|replica| to_index(replica.0))
        .collect();
    Some((to_index(leader)?, followers))
}

fn role_fallback(targets: &ScriptTargets, shuffled: &[usize]) -> Vec<usize> {
    eprintln!("logjam: no leader known for {targets:?}; choosing a random node");
    shuffled[..1].to_vec()
}

/// The nodes a scripted step names. A role the cluster cannot answer for (no leader right
/// now) falls back to a seeded random node, and says so.
async fn resolve(
    lab: &Lab,
    targets: &ScriptTargets,
    rng: &mut StdRng,
    bootstrap: &str,
    topic: &str,
) -> Vec<usize> {
    let nodes = lab.nodes.len();
    let mut shuffled: Vec<usize> = (0..nodes).collect();
    rand::seq::SliceRandom::shuffle(shuffled.as_mut_slice(), rng);
    let mut chosen = match targets {
        ScriptTargets::All => shuffled,
        ScriptTargets::Majority => shuffled[..nodes / 2 + 1].to_vec(),
        ScriptTargets::Minority => shuffled[..((nodes - 1) / 2).max(1)].to_vec(),
        ScriptTargets::One => shuffled[..1].to_vec(),
        ScriptTargets::Leader(partition) => match roles_of(bootstrap, topic, *partition, rng).await
        {
            Some((leader, _)) => vec![leader],
            None => role_fallback(targets, &shuffled),
        },
        ScriptTargets::Followers(partition) => {
            match roles_of(bootstrap, topic, Some(*partition), rng).await {
                Some((_, followers)) => followers,
                None => role_fallback(targets, &shuffled),
            }
        }
        ScriptTargets::NotReplica(partition) => {
            match roles_of(bootstrap, topic, Some(*partition), rng).await {
                Some((leader, followers)) => {
                    match (0..nodes).find(|node| *node != leader && !followers.contains(node)) {
                        Some(node) => vec![node],
                        None => role_fallback(targets, &shuffled),
                    }
                }
                None => role_fallback(targets, &shuffled),
            }
        }
        ScriptTargets::Nodes(list) => list.clone(),
        ScriptTargets::Coordinator | ScriptTargets::NotCoordinator => {
            match member_faults::coordinator(bootstrap).await {
                Some(coordinator) if *targets == ScriptTargets::Coordinator => vec![coordinator],
                Some(coordinator) => shuffled
                    .iter()
                    .copied()
                    .filter(|node| *node != coordinator)
                    .take(1)
                    .collect(),
                None => role_fallback(targets, &shuffled),
            }
        }
    };
    chosen.sort_unstable();
    chosen
}

/// Injects `fault` (on `chosen` nodes, else on nodes the seeded schedule picks) and records it as a nemesis op (`info`: it happened; `fail`: it could not
/// be injected, with the reason). Returns the fault to undo later.
async fn inject(
    lab: &mut Lab,
    recorder: &Recorder,
    fault: Fault,
    chosen: Option<Vec<usize>>,
    rng: &mut StdRng,
    bootstrap: &str,
    topic: &str,
) -> anyhow::Result<Option<Active>> {
    let nodes = lab.nodes.len();
    // Nodes already down (killed or stopped by a fault still in force) stay down if this
    // fault cannot be injected and is put right.
    let down_before: Vec<usize> = (0..nodes)
        .filter(|&node| !lab.nodes[node].is_running())
        .collect();
    let mut value = serde_json::Map::new();
    let (targets, outcome) = match fault {
        Fault::Partition(kind) => {
            let focus = match (&chosen, kind) {
                (Some(chosen), _) => chosen.first().copied(),
                (None, PartitionKind::Leader) => {
                    let leader = leader_of_some_partition(bootstrap, topic, rng).await;
                    value.insert("leader".into(), json!(leader.map(|l| lab.nodes[l].name())));
                    leader
                }
                (None, _) => None,
            };
            let (cuts, groups) = nemesis::partition(kind, nodes, focus, rng);
            value.insert(
                "groups".into(),
                json!(groups.iter().map(|g| names(lab, g)).collect::<Vec<_>>()),
            );
            value.insert(
                "cuts".into(),
                json!(
                    cuts.iter()
                        .map(|(a, b)| [lab.nodes[*a].name(), lab.nodes[*b].name()])
                        .collect::<Vec<_>>()
                ),
            );
            let targets: Vec<usize> = (0..nodes).collect();
            (targets, lab.set_cuts(cuts))
        }
        _ => {
            let targets = chosen.unwrap_or_else(|| nemesis::targets(fault, nodes, rng));
            let mut outcome = Ok(());
            for &node in &targets {
                let result = match fault {
                    Fault::Kill => lab.kill(node),
                    Fault::Stop => {
                        lab.stop(node);
                        Ok(())
                    }
                    Fault::Pause => lab.pause(node),
                    Fault::PowerLoss => lab.power_loss(node).map(|loss| {
                        value.insert(
                            format!("lost-{}", lab.nodes[node].name()),
                            json!({"files": loss.files, "bytes": loss.bytes}),
                        );
                    }),
                    // A failed kill is recorded as a failed fault like any other, not an
                    // error that ends the run.
                    Fault::Corrupt => lab.kill(node).and_then(|()| {
                        lab.corrupt(node, rng).map(|done| {
                            value.insert("damage".into(), done);
                        })
                    }),
                    Fault::DiskFull => lab.set_disk_full(node, true),
                    Fault::Partition(_) | Fault::IsrShrink(_) => {
                        unreachable!("handled elsewhere")
                    }
                };
                if let Err(error) = result {
                    outcome = Err(error);
                    break;
                }
            }
            (targets, outcome)
        }
    };
    value.insert("targets".into(), json!(names(lab, &targets)));
    let active = Active { fault, targets };
    match outcome {
        Ok(()) => {
            recorder.record(
                Process::Nemesis,
                OpType::Info,
                Function::from_name(&fault.to_string()),
                OpValue::Json(serde_json::Value::Object(value)),
                None,
            )?;
            eprintln!("logjam: nemesis {}", active.describe(lab));
            Ok(Some(active))
        }
        Err(error) => {
            // Whatever was half done is put right now: the fault did not happen.
            eprintln!(
                "logjam: nemesis {fault} could not be injected: {}",
                crate::error_text::chain(&error)
            );
            recorder.record(
                Process::Nemesis,
                OpType::Fail,
                Function::from_name(&fault.to_string()),
                OpValue::Json(serde_json::Value::Object(value)),
                Some(json!(crate::error_text::chain(&error))),
            )?;
            restore(lab, &active, &down_before)?;
            Ok(None)
        }
    }
}

/// Nodes that faults in force keep down on purpose (killed, stopped, powered off, corrupted):
/// undoing some other fault must not bring them back early.
fn held_down(active: &[Active]) -> Vec<usize> {
    active
        .iter()
        .flat_map(|a| match a.fault {
            Fault::Kill | Fault::Stop | Fault::PowerLoss | Fault::Corrupt => a.targets.as_slice(),
            // The leader only; the followers were cut off or paused, not taken down.
            Fault::IsrShrink(_) => &a.targets[..a.targets.len().min(1)],
            _ => &[],
        })
        .copied()
        .collect()
}

/// Puts the lab back as it was before `active`: heals, resumes, frees the disk, and starts
/// every target that is not running, except the nodes in `held` (down under another fault
/// still in force). Returns the nodes it started.
fn restore(lab: &mut Lab, active: &Active, held: &[usize]) -> anyhow::Result<Vec<usize>> {
    match active.fault {
        Fault::Partition(_) => lab.heal()?,
        Fault::Pause => {
            for &node in &active.targets {
                lab.resume(node)?;
            }
        }
        Fault::DiskFull => {
            for &node in &active.targets {
                lab.set_disk_full(node, false)?;
            }
        }
        Fault::IsrShrink(_) => {
            if let Some((&leader, followers)) = active.targets.split_first() {
                let shrunk = isr_shrink::Shrunk {
                    leader,
                    followers: followers.to_vec(),
                };
                isr_shrink::release_followers(lab, &shrunk)?;
            }
        }
        _ => {}
    }
    let mut started = Vec::new();
    for &node in &active.targets {
        if !lab.nodes[node].is_running() && !held.contains(&node) {
            lab.start_node(node)?;
            started.push(node);
        }
    }
    Ok(started)
}

/// Undoes `active` and records the undo; nodes that faults `still` in force hold down stay
/// down. The op's `started` names the nodes the undo brought up: the targets of a kill's
/// restart, and, for a fault that does not kill, a target that died under it anyway (a full
/// disk can make a node give up).
fn undo(
    lab: &mut Lab,
    recorder: &Recorder,
    active: Active,
    still: &[Active],
) -> anyhow::Result<()> {
    let started = restore(lab, &active, &held_down(still))?;
    let mut value = serde_json::Map::new();
    value.insert("targets".into(), json!(names(lab, &active.targets)));
    if !started.is_empty() {
        value.insert("started".into(), json!(names(lab, &started)));
    }
    recorder.record(
        Process::Nemesis,
        OpType::Info,
        Function::from_name(active.fault.undo_name()),
        OpValue::Json(serde_json::Value::Object(value)),
        None,
    )?;
    eprintln!(
        "logjam: nemesis {} {}",
        active.fault.undo_name(),
        names(lab, &active.targets).join(",")
    );
    Ok(())
}
#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn undoing_one_fault_leaves_nodes_another_fault_holds_down() {
        // The unclean-election timeline: a cut over every node, then the leader (n4) killed;
        // healing the cut must not restart n4 while its kill is in force.
        let partition = Active {
            fault: Fault::Partition(crate::nemesis::PartitionKind::One),
            targets: (0..6).collect(),
        };
        let kill = Active {
            fault: Fault::Kill,
            targets: vec![3],
        };
        let pause = Active {
            fault: Fault::Pause,
            targets: vec![1],
        };
        assert_eq!(held_down(&[partition, kill, pause]), vec![3]);
        let stop = Active {
            fault: Fault::Stop,
            targets: vec![0, 2],
        };
        assert_eq!(held_down(&[stop]), vec![0, 2]);
        assert!(held_down(&[]).is_empty());
    }
}
