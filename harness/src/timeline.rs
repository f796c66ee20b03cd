//! Scripted fault timelines (`logjam run --nemesis-script FILE`): what the nemesis does and
//! when, instead of the seeded random schedule. Parsing is pure; `run.rs` carries it out.
//!
//! The format, one step a line (`#` starts a comment, blank lines are skipped):
//!
//! ```text
//! # seconds after the workload starts, action, targets
//! 5     partition-one   n2
//! 8     heal
//! 10    kill            leader
//! 14    restart
//! 16    power-loss      all
//! 18    restart
//! ```
//!
//! An action is a fault (`kill`, `stop`, `pause`, `partition-<kind>`, `power-loss`,
//! `corrupt`, `disk-full`), a cut between two groups (`cut A/B`, e.g.
//! `cut leader:0/followers:0`), a cut of the harness's own traffic to nodes (`cut-clients
//! leader:0`: every frame dropped, so requests on open connections wait in TCP's
//! retransmissions; `cut-clients-new leader:0`: only new connections, so a request a closed
//! connection still owes arrives late while the client cannot reconnect), or an undo (`restart`, `start`, `resume`, `heal`,
//! `disk-free`), which undoes every fault in force that it is the undo of. Targets (faults
//! only; default `one`): `all`, `majority`, `minority`, `one` (chosen with the run's seed),
//! `leader` (the leader of a random partition of the workload's topic), `leader:k` (the
//! leader of partition k), `followers:k` (the other replicas of partition k), `not-replica:k`
//! (the first node by name holding no replica of partition k), or node names
//! `n1,n3`; roles are resolved when the step runs. Steps run in time order; whatever is
//! still in force at the end is undone before the final reads.
//!
//! With a member pool (`logjam run --members N`), `coordinator` is the node coordinating the
//! pool's group and `not-coordinator` one other node, and member steps act on the pool:
//! `member-pause`, `member-kill`, `member-stop`, `member-restart` (targets `all`, `one`
//! (default) or names `m1,m2`; a restart of several is rolling, one after another), undone by
//! `member-resume` and `member-start`. `add-partitions N` grows the workload's topic by N
//! partitions (CreatePartitions), as an operator scaling a topic does.

use std::path::Path;
use std::time::Duration;

use anyhow::{Context, bail};

use crate::nemesis::{self, Fault};

/// Which nodes a scripted fault hits.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Targets {
    /// Every node.
    All,
    /// A random majority.
    Majority,
    /// A random minority (at least one node).
    Minority,
    /// One random node.
    One,
    /// The leader of the workload topic's partition `k` (`leader:k`), or of a random one
    /// (`leader`).
    Leader(Option<u32>),
    /// The replicas of partition `k` other than its leader (`followers:k`).
    Followers(u32),
    /// The first node (by name) that holds no replica of partition `k` (`not-replica:k`;
    /// needs more nodes than replicas). The same node each time while the replicas stay
    /// put, so a later step can name it again.
    NotReplica(u32),
    /// These nodes (0-based indexes).
    Nodes(Vec<usize>),
    /// The coordinator of the member pool's group (`coordinator`).
    Coordinator,
    /// One node other than that coordinator (`not-coordinator`).
    NotCoordinator,
}

/// What a member step does to the run's member pool (`--members`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MemberFault {
    /// SIGSTOP (`member-pause`): a GC pause; undone by `member-resume`.
    Pause,
    /// SIGKILL (`member-kill`): gone without leaving; undone by `member-start`.
    Kill,
    /// SIGTERM (`member-stop`): closes as an application does; undone by `member-start`.
    Stop,
    /// Stop and start again at once (`member-restart`), one member after another with a few
    /// seconds between: a rolling restart when it names several.
    Restart,
}

/// Which members a member step hits.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MemberTargets {
    /// Every member.
    All,
    /// One member chosen with the run's seed.
    One,
    /// These members (0-based indexes; `m1` is 0).
    Members(Vec<usize>),
}

/// What a step does.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    /// Inject a fault.
    Fault(Fault, Targets),
    /// Cut every node of one group off from every node of the other (both ways); undone by
    /// `heal`.
    Cut(Targets, Targets),
    /// Drop the harness's own frames to these nodes: all of them, or (`true`) only new
    /// connections; replaces an earlier client cut of the same nodes; undone by `heal`.
    CutClients(Targets, bool),
    /// Undo every fault in force whose undo has this name.
    Undo(&'static str),
    /// A fault on members of the member pool.
    Member(MemberFault, MemberTargets),
    /// `member-resume` (every paused member) or `member-start` (every member not running).
    MemberUndo(&'static str),
    /// Grow the workload's topic by this many partitions (`add-partitions 2`; CreatePartitions).
    AddPartitions(u32),
}

/// One step of a timeline.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Step {
    /// When, after the workload starts.
    pub at: Duration,
    /// What.
    pub action: Action,
    /// The line it came from (1-based), for messages.
    pub line: usize,
}

const UNDOS: [&str; 6] = [
    "restart",
    "start",
    "resume",
    "heal",
    "disk-free",
    "heal-restart",
];

/// Reads and parses a timeline file.
///
/// # Errors
/// The file cannot be read, or a line is malformed (the message names file and line).
pub fn load(path: &Path, nodes: usize) -> anyhow::Result<Vec<Step>> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("cannot read the nemesis script {}", path.display()))?;
    parse(&text, nodes).with_context(|| format!("in the nemesis script {}", path.display()))
}

/// Parses a timeline.
///
/// # Errors
/// A malformed line; the message names it.
pub fn parse(text: &str, nodes: usize) -> anyhow::Result<Vec<Step>> {
    let mut steps = Vec::new();
    for (index, raw) in text.lines().enumerate() {
        let line = index + 1;
        let content = raw.split('#').next().unwrap_or("").trim();
        if content.is_empty() {
            continue;
        }
        let step =
            parse_line(content, nodes).with_context(|| format!("line {line}: `{content}`"))?;
        steps.push(Step {
            at: step.0,
            action: step.1,
            line,
        });
    }
    if steps.is_empty() {
        bail!("the timeline has no steps");
    }
    steps.sort_by_key(|step| step.at);
    Ok(steps)
}

fn parse_line(content: &str, nodes: usize) -> anyhow::Result<(Duration, Action)> {
    let mut words = content.split_whitespace();
    let time = words.next().context("missing time")?;
    // Finite and non-negative is not enough: 1e300 s is no Duration (found by fuzzing).
    let at = time
        .trim_end_matches('s')
        .parse::<f64>()
        .ok()
        .and_then(|seconds| Duration::try_from_secs_f64(seconds).ok())
        .with_context(|| format!("`{time}` is not a time in seconds"))?;
    let action = words.next().context("missing action")?;
    let targets = words.next();
    if let Some(extra) = words.next() {
        bail!("unexpected `{extra}`");
    }
    if let Some(undo) = UNDOS.iter().find(|undo| **undo == action) {
        if let Some(targets) = targets {
            bail!(
                "`{action}` undoes every fault it applies to and takes no targets (got `{targets}`)"
            );
        }
        return Ok((at, Action::Undo(undo)));
    }
    if let Some(undo) = ["member-resume", "member-start"]
        .into_iter()
        .find(|undo| *undo == action)
    {
        if let Some(targets) = targets {
            bail!(
                "`{action}` undoes every member fault it applies to and takes no targets (got `{targets}`)"
            );
        }
        return Ok((at, Action::MemberUndo(undo)));
    }
    if let Some(member_fault) = action.strip_prefix("member-") {
        let fault = match member_fault {
            "pause" => MemberFault::Pause,
            "kill" => MemberFault::Kill,
            "stop" => MemberFault::Stop,
            "restart" => MemberFault::Restart,
            _ => bail!(
                "`{action}` is no member step: member-pause, member-kill, member-stop, \
                 member-restart, member-resume, member-start"
            ),
        };
        return Ok((
            at,
            Action::Member(fault, parse_members(targets.unwrap_or("one"))?),
        ));
    }
    if action == "add-partitions" {
        let count = targets.context("`add-partitions` needs how many, such as add-partitions 2")?;
        let count: u32 = count
            .parse()
            .ok()
            .filter(|n| *n >= 1)
            .with_context(|| format!("`{count}`: expected a number of partitions to add"))?;
        return Ok((at, Action::AddPartitions(count)));
    }
    if let Some(new_only) = match action {
        "cut-clients" => Some(false),
        "cut-clients-new" => Some(true),
        _ => None,
    } {
        let targets =
            targets.with_context(|| format!("`{action}` needs nodes, such as leader:0"))?;
        return Ok((
            at,
            Action::CutClients(parse_targets(targets, nodes)?, new_only),
        ));
    }
    if action == "cut" {
        let groups = targets.context("`cut` needs two groups, such as leader:0/followers:0")?;
        let (a, b) = groups
            .split_once('/')
            .with_context(|| format!("`{groups}`: expected two groups separated by /"))?;
        return Ok((
            at,
            Action::Cut(parse_targets(a, nodes)?, parse_targets(b, nodes)?),
        ));
    }
    let faults = nemesis::parse(action, nodes.max(5))?;
    let [fault] = faults.as_slice() else {
        bail!("`{action}` names several faults; name one kind, such as partition-one");
    };
    Ok((
        at,
        Action::Fault(*fault, parse_targets(targets.unwrap_or("one"), nodes)?),
    ))
}

fn parse_targets(text: &str, nodes: usize) -> anyhow::Result<Targets> {
    Ok(match text {
        "all" => Targets::All,
        "majority" => Targets::Majority,
        "minority" => Targets::Minority,
        "one" => Targets::One,
        "leader" => Targets::Leader(None),
        "coordinator" => Targets::Coordinator,
        "not-coordinator" => Targets::NotCoordinator,
        role if role.starts_with("not-replica:") => {
            let partition = &role["not-replica:".len()..];
            Targets::NotReplica(
                partition.parse().with_context(|| {
                    format!("`{role}`: expected not-replica:<partition number>")
                })?,
            )
        }
        role if role.starts_with("leader:") || role.starts_with("followers:") => {
            let (name, partition) = role.split_once(':').unwrap_or_default();
            let partition: u32 = partition
                .parse()
                .with_context(|| format!("`{role}`: expected {name}:<partition number>"))?;
            if name == "leader" {
                Targets::Leader(Some(partition))
            } else {
                Targets::Followers(partition)
            }
        }
        list => {
            let mut chosen = Vec::new();
            for name in list.split(',') {
                let id: usize = name
                    .strip_prefix('n')
                    .and_then(|id| id.parse().ok())
                    .filter(|id| (1..=nodes).contains(id))
                    .with_context(|| {
                        format!(
                            "`{name}` is not a target: all, majority, minority, one, leader, \
                             leader:<k>, followers:<k>, coordinator, not-coordinator or node \
                             names n1..n{nodes}"
                        )
                    })?;
                chosen.push(id - 1);
            }
            Targets::Nodes(chosen)
        }
    })
}

/// `all`, `one` or member names `m1,m3`.
fn parse_members(text: &str) -> anyhow::Result<MemberTargets> {
    Ok(match text {
        "all" => MemberTargets::All,
        "one" => MemberTargets::One,
        list => {
            let mut chosen = Vec::new();
            for name in list.split(',') {
                let id: usize = name
                    .strip_prefix('m')
                    .and_then(|id| id.parse().ok())
                    .filter(|id| *id >= 1)
                    .with_context(|| {
                        format!("`{name}` is not a member target: all, one or names m1, m2, ...")
                    })?;
                chosen.push(id - 1);
            }
            MemberTargets::Members(chosen)
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::nemesis::PartitionKind;

    #[test]
    fn a_timeline_parses_in_time_order() {
        let steps = parse(
            "# power loss\n16 power-loss all\n 5s partition-one n2 # isolate\n\n8 heal\n18 restart\n10 kill leader\n20 cut leader:0/followers:0\n",
            3,
        )
        .unwrap();
        let actions: Vec<&Action> = steps.iter().map(|step| &step.action).collect();
        assert_eq!(
            actions,
            [
                &Action::Fault(
                    Fault::Partition(PartitionKind::One),
                    Targets::Nodes(vec![1])
                ),
                &Action::Undo("heal"),
                &Action::Fault(Fault::Kill, Targets::Leader(None)),
                &Action::Fault(Fault::PowerLoss, Targets::All),
                &Action::Undo("restart"),
                &Action::Cut(Targets::Leader(Some(0)), Targets::Followers(0)),
            ]
        );
        assert_eq!(steps[0].at, Duration::from_secs(5));
        assert_eq!(steps[0].line, 3);
    }

    #[test]
    fn member_steps_and_coordinator_targets_parse() {
        let steps = parse(
            "4 member-pause m2\n9 member-resume\n10 member-restart all\n12 member-kill\n\
             13 member-start\n14 kill coordinator\n15 pause not-coordinator\n\
             16 add-partitions 2\n17 kill not-replica:1\n",
            3,
        )
        .unwrap();
        let actions: Vec<&Action> = steps.iter().map(|step| &step.action).collect();
        assert_eq!(
            actions,
            [
                &Action::Member(MemberFault::Pause, MemberTargets::Members(vec![1])),
                &Action::MemberUndo("member-resume"),
                &Action::Member(MemberFault::Restart, MemberTargets::All),
                &Action::Member(MemberFault::Kill, MemberTargets::One),
                &Action::MemberUndo("member-start"),
                &Action::Fault(Fault::Kill, Targets::Coordinator),
                &Action::Fault(Fault::Pause, Targets::NotCoordinator),
                &Action::AddPartitions(2),
                &Action::Fault(Fault::Kill, Targets::NotReplica(1)),
            ]
        );
    }

    #[test]
    fn bad_lines_are_named() {
        for (text, expected) in [
            ("5 explode", "line 1"),
            ("x kill", "not a time"),
            ("5 kill n4", "n1..n3"),
            ("1 kill\n5 heal n1", "line 2"),
            ("5 partition", "several faults"),
            ("# nothing", "no steps"),
            ("5 kill n1 n2", "unexpected"),
            ("5 cut n1", "two groups"),
            ("5 cut leader:x/n1", "leader:<partition number>"),
            ("5 kill not-replica:x", "not-replica:<partition number>"),
            // Regression (cargo-fuzz, timeline target): a time too large for a Duration
            // panicked instead of naming the line.
            ("1e300 kill", "not a time"),
            ("-1 kill", "not a time"),
            ("nan kill", "not a time"),
            ("5 member-dance m1", "no member step"),
            ("5 member-pause x1", "member target"),
            ("5 member-pause m0", "member target"),
            ("5 member-resume m1", "takes no targets"),
            ("5 add-partitions", "needs how many"),
            ("5 add-partitions 0", "number of partitions"),
        ] {
            let error = format!("{:#}", parse(text, 3).unwrap_err());
            assert!(error.contains(expected), "{text}: {error}");
        }
    }
}
