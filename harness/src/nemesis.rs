//! The nemesis's decisions, pure and seeded: the faults `--nemesis` names, what undoes each,
//! which nodes a fault hits, and the directed cuts of each kind of partition (Jepsen's
//! grudges). `run/faults.rs` carries the decisions out on the lab and records them.

use std::collections::BTreeSet;
use std::fmt;

use anyhow::bail;
use rand::RngExt;
use rand::rngs::StdRng;
use rand::seq::SliceRandom;

/// How a partition splits the nodes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PartitionKind {
    /// One node cut off from all others.
    One,
    /// A random minority cut off from the majority.
    Minority,
    /// Every node sees a majority, no two the same one (five nodes or more).
    MajoritiesRing,
    /// Two halves that only one node, the bridge, sees both of.
    Bridge,
    /// The leader of one of the workload's partitions cut off from all others.
    Leader,
    /// One node hears nobody, but everyone hears it.
    OneWay,
    /// Groups a script names (`cut A/B`); never drawn at random.
    Groups,
    /// The harness's own traffic to nodes a script names (`cut-clients`); never drawn at
    /// random.
    Clients,
}

/// A fault the nemesis can inject; each has an undo.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Fault {
    /// SIGKILL; undone by a restart.
    Kill,
    /// Clean stop (SIGTERM); undone by a start.
    Stop,
    /// SIGSTOP of the process group; undone by SIGCONT.
    Pause,
    /// Packet drops between nodes; undone by healing.
    Partition(PartitionKind),
    /// Crash losing every write not fsynced; undone by a restart.
    PowerLoss,
    /// Flip bytes in or truncate a segment file of a stopped node; undone by a restart.
    Corrupt,
    /// Writes fail with ENOSPC; undone by freeing the disk.
    DiskFull,
    /// Kafka-aware: a partition's followers are cut from its leader (paused on a loopback
    /// network) until the metadata shows the ISR shrunk to the leader, while writes go on;
    /// then the leader is killed (`isr-shrink-kill`) or loses power
    /// (`isr-shrink-power-loss`). Undone by healing (resuming) and restarting the leader.
    IsrShrink(Ending),
}

/// How an ISR-shrink fault ends the leader.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Ending {
    /// SIGKILL: the page cache survives, nothing acknowledged is lost by the crash itself.
    Kill,
    /// Power loss: whatever the leader had not fsynced is gone.
    PowerLoss,
}

const PARTITION_KINDS: [(&str, PartitionKind); 6] = [
    ("one", PartitionKind::One),
    ("minority", PartitionKind::Minority),
    ("majorities-ring", PartitionKind::MajoritiesRing),
    ("bridge", PartitionKind::Bridge),
    ("leader", PartitionKind::Leader),
    ("one-way", PartitionKind::OneWay),
];

/// Every name `--nemesis` accepts.
pub const NAMES: &str = "kill, stop, pause, partition (any kind below), partition-one, \
    partition-minority, partition-majorities-ring, partition-bridge, partition-leader, \
    partition-one-way, power-loss, corrupt, disk-full, isr-shrink-kill, isr-shrink-power-loss";

impl fmt::Display for Fault {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Fault::Kill => f.write_str("kill"),
            Fault::Stop => f.write_str("stop"),
            Fault::Pause => f.write_str("pause"),
            Fault::Partition(PartitionKind::Groups) => f.write_str("partition"),
            Fault::Partition(PartitionKind::Clients) => f.write_str("partition-clients"),
            Fault::Partition(kind) => {
                let name = PARTITION_KINDS
                    .iter()
                    .find(|(_, k)| k == kind)
                    .map_or("?", |(name, _)| name);
                write!(f, "partition-{name}")
            }
            Fault::PowerLoss => f.write_str("power-loss"),
            Fault::Corrupt => f.write_str("corrupt"),
            Fault::DiskFull => f.write_str("disk-full"),
            Fault::IsrShrink(Ending::Kill) => f.write_str("isr-shrink-kill"),
            Fault::IsrShrink(Ending::PowerLoss) => f.write_str("isr-shrink-power-loss"),
        }
    }
}

impl Fault {
    /// The history's name for the undo.
    pub fn undo_name(self) -> &'static str {
        match self {
            Fault::Kill | Fault::PowerLoss | Fault::Corrupt => "restart",
            Fault::IsrShrink(_) => "heal-restart",
            Fault::Stop => "start",
            Fault::Pause => "resume",
            Fault::Partition(_) => "heal",
            Fault::DiskFull => "disk-free",
        }
    }

    /// Needs one network namespace per node.
    pub fn needs_namespaces(self) -> bool {
        matches!(self, Fault::Partition(_))
    }

    /// Needs the power-loss filesystem under the data directories.
    pub fn needs_lazy_disk(self) -> bool {
        matches!(
            self,
            Fault::PowerLoss | Fault::DiskFull | Fault::IsrShrink(Ending::PowerLoss)
        )
    }
}

/// Parses `--nemesis` (comma-separated; `none` or empty for no faults). `partition` stands for
/// every kind of partition that makes sense with `nodes` nodes.
///
/// # Errors
/// An unknown name; the message lists the known ones.
pub fn parse(list: &str, nodes: usize) -> anyhow::Result<Vec<Fault>> {
    let mut faults = Vec::new();
    for name in list
        .split(',')
        .map(str::trim)
        .filter(|name| !name.is_empty() && *name != "none")
    {
        let parsed: Vec<Fault> = match name {
            "kill" => vec![Fault::Kill],
            "stop" => vec![Fault::Stop],
            "pause" => vec![Fault::Pause],
            "power-loss" => vec![Fault::PowerLoss],
            "corrupt" => vec![Fault::Corrupt],
            "disk-full" => vec![Fault::DiskFull],
            "isr-shrink-kill" => vec![Fault::IsrShrink(Ending::Kill)],
            "isr-shrink-power-loss" => vec![Fault::IsrShrink(Ending::PowerLoss)],
            "partition" => PARTITION_KINDS
                .iter()
                .map(|(_, kind)| Fault::Partition(*kind))
                .filter(|fault| {
                    nodes >= 5 || *fault != Fault::Partition(PartitionKind::MajoritiesRing)
                })
                .collect(),
            other => match other
                .strip_prefix("partition-")
                .and_then(|kind| PARTITION_KINDS.iter().find(|(name, _)| *name == kind))
            {
                Some((_, kind)) => vec![Fault::Partition(*kind)],
                None => bail!("--nemesis: unknown fault `{other}`; available: {NAMES}"),
            },
        };
        for fault in parsed {
            if !faults.contains(&fault) {
                faults.push(fault);
            }
        }
    }
    Ok(faults)
}

/// The nodes a process or disk fault hits: one node for kill, stop, pause, corrupt and disk
/// full; one node, a majority or all of them for a power loss (the last is what loses
/// acknowledged writes that were on every replica).
pub fn targets(fault: Fault, nodes: usize, rng: &mut StdRng) -> Vec<usize> {
    let mut all: Vec<usize> = (0..nodes).collect();
    all.shuffle(rng);
    let count = match fault {
        Fault::PowerLoss => [1, nodes / 2 + 1, nodes][rng.random_range(0..3)],
        _ => 1,
    };
    let mut chosen: Vec<usize> = all.into_iter().take(count.max(1)).collect();
    chosen.sort_unstable();
    chosen
}

/// Directed cuts `(from, to)` that separate every pair of nodes in different groups.
pub fn separate(groups: &[Vec<usize>]) -> BTreeSet<(usize, usize)> {
    let mut cuts = BTreeSet::new();
    for (i, a) in groups.iter().enumerate() {
        for (j, b) in groups.iter().enumerate() {
            if i != j {
                for &from in a {
                    for &to in b {
                        cuts.insert((from, to));
                    }
                }
            }
        }
    }
    cuts
}

/// The cuts of a partition of `kind` over `nodes` nodes, and the groups it makes (for the
/// history). `focus`, when given, is the node that `one`, `leader` and `one-way` single out
/// (for `leader`, the leader the caller looked up); otherwise it is chosen at random.
pub fn partition(
    kind: PartitionKind,
    nodes: usize,
    focus: Option<usize>,
    rng: &mut StdRng,
) -> (BTreeSet<(usize, usize)>, Vec<Vec<usize>>) {
    let mut shuffled: Vec<usize> = (0..nodes).collect();
    shuffled.shuffle(rng);
    if let Some(focus) = focus
        && let Some(at) = shuffled.iter().position(|node| *node == focus)
    {
        shuffled.swap(0, at);
    }
    let rest = |isolated: usize| -> Vec<usize> { (0..nodes).filter(|n| *n != isolated).collect() };
    match kind {
        PartitionKind::One | PartitionKind::Leader => {
            let isolated = shuffled[0];
            let groups = vec![vec![isolated], rest(isolated)];
            (separate(&groups), groups)
        }
        PartitionKind::Minority => {
            let size = rng.random_range(1..=((nodes - 1) / 2).max(1));
            let mut minority = shuffled[..size].to_vec();
            let mut majority = shuffled[size..].to_vec();
            minority.sort_unstable();
            majority.sort_unstable();
            let groups = vec![minority, majority];
            (separate(&groups), groups)
        }
        PartitionKind::Bridge => {
            // shuffled[0] is the bridge; the others split in two halves.
            let half = (nodes - 1) / 2;
            let mut left = shuffled[1..=half].to_vec();
            let mut right = shuffled[half + 1..].to_vec();
            left.sort_unstable();
            right.sort_unstable();
            let cuts = separate(&[left.clone(), right.clone()]);
            (cuts, vec![left, vec![shuffled[0]], right])
        }
        PartitionKind::MajoritiesRing => {
            // Around a shuffled ring, each node keeps its neighbours within `reach`, enough
            // for a majority counting itself; the groups are what each node sees.
            let majority = nodes / 2 + 1;
            let reach = majority / 2;
            let position = |node: usize| shuffled.iter().position(|n| *n == node).unwrap_or(0);
            let mut cuts = BTreeSet::new();
            let mut groups = Vec::new();
            for a in 0..nodes {
                let mut sees = Vec::new();
                for b in 0..nodes {
                    let d = position(a).abs_diff(position(b));
                    let d = d.min(nodes - d);
                    if d <= reach {
                        sees.push(b);
                    } else {
                        cuts.insert((a, b));
                    }
                }
                groups.push(sees);
            }
            (cuts, groups)
        }
        PartitionKind::Groups | PartitionKind::Clients => (BTreeSet::new(), Vec::new()),
        PartitionKind::OneWay => {
            let deaf = shuffled[0];
            let cuts = rest(deaf).into_iter().map(|from| (from, deaf)).collect();
            (cuts, vec![vec![deaf], rest(deaf)])
        }
    }
}

#[cfg(test)]
mod tests {
    use rand::SeedableRng;

    use super::*;

    fn reachable(cuts: &BTreeSet<(usize, usize)>, from: usize, to: usize) -> bool {
        !cuts.contains(&(from, to))
    }

    #[test]
    fn names_round_trip_and_unknown_names_are_refused() {
        let faults = parse(
            "kill,pause,partition-leader,power-loss,corrupt,disk-full,stop,isr-shrink-kill,\
             isr-shrink-power-loss",
            3,
        )
        .unwrap();
        let names: Vec<String> = faults.iter().map(ToString::to_string).collect();
        assert_eq!(
            names,
            [
                "kill",
                "pause",
                "partition-leader",
                "power-loss",
                "corrupt",
                "disk-full",
                "stop",
                "isr-shrink-kill",
                "isr-shrink-power-loss"
            ]
        );
        assert_eq!(faults[7].undo_name(), "heal-restart");
        assert!(faults[8].needs_lazy_disk() && !faults[7].needs_lazy_disk());
        assert_eq!(
            parse("partition", 3).unwrap().len(),
            5,
            "no majorities-ring on 3 nodes"
        );
        assert_eq!(parse("partition", 5).unwrap().len(), 6);
        assert!(parse("none", 3).unwrap().is_empty());
        let error = parse("kill,explode", 3).unwrap_err().to_string();
        assert!(
            error.contains("explode") && error.contains("partition-one-way"),
            "{error}"
        );
    }

    #[test]
    fn partitions_cut_exactly_what_they_claim() {
        for seed in 0..50 {
            let mut rng = StdRng::seed_from_u64(seed);
            for nodes in [3, 5, 7] {
                let (cuts, groups) = partition(PartitionKind::One, nodes, None, &mut rng);
                let isolated = groups[0][0];
                assert_eq!(cuts.len(), 2 * (nodes - 1));
                assert!((0..nodes).all(|n| n == isolated || !reachable(&cuts, n, isolated)));

                let (cuts, groups) = partition(PartitionKind::Leader, nodes, Some(1), &mut rng);
                assert_eq!(groups[0], vec![1]);
                assert!(!reachable(&cuts, 0, 1) && !reachable(&cuts, 1, 0));

                let (cuts, groups) = partition(PartitionKind::Minority, nodes, None, &mut rng);
                assert!(groups[0].len() < groups[1].len());
                assert_eq!(cuts.len(), 2 * groups[0].len() * groups[1].len());

                let (cuts, groups) = partition(PartitionKind::Bridge, nodes, None, &mut rng);
                let bridge = groups[1][0];
                assert!(
                    (0..nodes).all(|n| reachable(&cuts, n, bridge) && reachable(&cuts, bridge, n))
                );
                assert!(
                    groups[0]
                        .iter()
                        .all(|a| groups[2].iter().all(|b| !reachable(&cuts, *a, *b)))
                );

                let (cuts, groups) = partition(PartitionKind::OneWay, nodes, None, &mut rng);
                let deaf = groups[0][0];
                assert!(
                    (0..nodes)
                        .filter(|n| *n != deaf)
                        .all(|n| !reachable(&cuts, n, deaf) && reachable(&cuts, deaf, n))
                );
            }
            for nodes in [5, 7] {
                let (cuts, groups) =
                    partition(PartitionKind::MajoritiesRing, nodes, None, &mut rng);
                let majority = nodes / 2 + 1;
                assert!(
                    groups.iter().all(|sees| sees.len() >= majority),
                    "{groups:?}"
                );
                let distinct: BTreeSet<&Vec<usize>> = groups.iter().collect();
                assert_eq!(
                    distinct.len(),
                    nodes,
                    "every node sees a different majority"
                );
                assert!(
                    cuts.iter().all(|(a, b)| cuts.contains(&(*b, *a))),
                    "symmetric"
                );
            }
        }
    }

    #[test]
    fn power_loss_may_hit_every_node_and_others_hit_one() {
        let mut rng = StdRng::seed_from_u64(7);
        let mut sizes = BTreeSet::new();
        for _ in 0..100 {
            sizes.insert(targets(Fault::PowerLoss, 3, &mut rng).len());
            assert_eq!(targets(Fault::Kill, 3, &mut rng).len(), 1);
        }
        assert_eq!(sizes, BTreeSet::from([1, 2, 3]));
    }
}
