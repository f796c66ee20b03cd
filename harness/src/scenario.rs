//! `logjam scenario <name|file>`: a scripted fault timeline with its settings and the outcome
//! it is expected to show, run as one `logjam run`, then judged against the expectation.
//!
//! A scenario file is a timeline (see `timeline.rs`) with directives before or between its
//! steps, one per line:
//!
//! ```text
//! description  Followers cut off from the leader, then the leader dies ...
//! nodes        6            # cluster size (default 3)
//! controllers  3            # dedicated KRaft controllers (default 0: combined nodes)
//! keys         1            # partitions of the workload topic (default 1)
//! workload     producer     # queue (default), producer, txn, eos or group
//! time-limit   25           # seconds of workload (default 30)
//! rate         50           # client ops per second (default 50)
//! concurrency  4            # client processes (default 4)
//! set          min.insync.replicas=1      # any `logjam run --set`, repeatable
//! members      3            # a member pool (`logjam run --members`; default 0)
//! member-set   session.timeout.ms=6000    # a member consumer property, repeatable
//! member-process-ms 200     # members' processing time per record polled
//! members-settle 10         # seconds of the group forming, not counted (default 10)
//! static-members            # members get a group.instance.id
//! expect       lost                       # repeatable; all must hold
//! 3   cut leader:0/followers:0
//! 12  kill leader:0
//! ```
//!
//! Expectations: `lost` (an acknowledged write was lost), `no-loss` (none was),
//! `unclean-election` (a leader was elected from outside the ISR last seen), `unavailable`
//! (a partition had no leader for a while), `refused` (a write was refused with
//! NOT_ENOUGH_REPLICAS), `valid` / `invalid` (the checkers' verdict), `anomaly:<kind>` (the
//! checkers report that kind, e.g. `anomaly:duplicate`, or one of several kinds separated by
//! `|`), `retried` (producer workload: an
//! acknowledged send's batch took more than one produce request), `lso-stall:<s>` (a
//! read_committed reader was held at one last stable offset for at least s seconds, as the
//! read-committed checker measured it), `lso-stall-under:<s>` (polls were checked and none was
//! held that long), `zombies-fenced:<n>` (eos with `logjam.eos=zombie`: at least n zombies
//! were taken over and then refused, none committed), `zombies-committed:<n>` (at least n
//! were taken over and committed anyway), `resumed-commits:<n>` (at least n commits a dead
//! transaction coordinator had prepared were completed by the next one, as the nodes
//! logged), `stale-produce-refused:<n>` (at least n transactional produces of a finished
//! transaction were refused by their leader, as the nodes logged); with a member pool,
//! `cause:<cause>` (its coordinator started a rebalance with that cause after the group settled,
//! or for `coordinator-moved` a new coordinator loaded the group), `no-rebalance` (none after
//! the group settled), `rebalances:<n>` (at least n after it settled), and `offsets-survive` (members that took partitions over after a node
//! fault on the coordinator started from the offsets committed before it). A scenario with a
//! member pool, or of the eos or txn workload (which bring their own crashes and aborts), may
//! have no steps: its settings alone can be what it shows.
//!
//! The exit code says whether the scenario showed what it expects: 0 yes, 1 no, 3 the harness
//! failed. The run is stored like any other, with `scenario.json` beside its report.

use std::path::Path;

use anyhow::{Context, bail};

use crate::cli::{RunArgs, ScenarioArgs, WorkloadName};
use crate::lab::NetworkMode;
use crate::lab::sandbox::Privilege;
use crate::run::{self, Label};
use crate::timeline::{self, Step};

mod evidence;
mod judge;
mod shipped;

use judge::judge;
use shipped::SHIPPED;

/// What a scenario expects its run to show.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Expectation {
    /// The checkers report this anomaly kind (`anomaly:<kind>`, e.g. `anomaly:duplicate`), or
    /// any one of several (`anomaly:aborted-read|hanging-transaction`).
    Anomaly(Vec<logjam_checkers::AnomalyKind>),
    /// At least one acknowledged write lost.
    Lost,
    /// No acknowledged write lost.
    NoLoss,
    /// A leader elected from outside the last seen ISR.
    UncleanElection,
    /// A partition without a leader for a while.
    Unavailable,
    /// A write refused with NOT_ENOUGH_REPLICAS.
    Refused,
    /// The checkers' verdict is valid.
    Valid,
    /// The checkers' verdict is invalid.
    Invalid,
    /// At least one acknowledged send was retried (producer workload: its batch took more
    /// than one produce request), so a fault really hit sends in flight.
    Retried,
    /// The member pool's coordinator logged this cause after the group settled
    /// (`cause:session-timeout`): a rebalance it started, or for `coordinator-moved` also a
    /// load of the group by a new coordinator.
    Cause(String),
    /// The member pool's coordinator started no rebalance after the group settled.
    NoRebalance,
    /// It started at least this many after the group settled (`rebalances:3`).
    Rebalances(u64),
    /// Every offset the members committed before the node fault on the coordinator was still
    /// committed at the end.
    OffsetsSurvive,
    /// A read_committed reader was held at one last stable offset for at least this many
    /// seconds (`lso-stall:6`), as the read-committed checker measured it.
    LsoStallAtLeast(u64),
    /// Read_committed polls were checked and none was held that long (`lso-stall-under:6`).
    LsoStallUnder(u64),
    /// At least this many eos zombies were taken over and then refused
    /// (`zombies-fenced:1`), and none committed.
    ZombiesFenced(u64),
    /// At least this many eos zombies were taken over and committed anyway
    /// (`zombies-committed:1`).
    ZombiesCommitted(u64),
    /// At least this many commits that a dead transaction coordinator had prepared were
    /// completed by the next coordinator (`resumed-commits:1`), as the nodes logged.
    ResumedCommits(u64),
    /// At least this many transactional produces of a finished transaction were refused by
    /// their partition's leader (`stale-produce-refused:1`), as the nodes logged.
    StaleProduceRefused(u64),
}

impl Expectation {
    fn parse(word: &str) -> Option<Expectation> {
        if let Some(kind) = word.strip_prefix("anomaly:") {
            // Every alternative must be a kind some checker reports: a typo would never hold.
            return kind
                .split('|')
                .map(logjam_checkers::AnomalyKind::from_name)
                .collect::<Option<Vec<_>>>()
                .map(Expectation::Anomaly);
        }
        if let Some(cause) = word.strip_prefix("cause:") {
            return Some(Expectation::Cause(cause.to_owned()));
        }
        if let Some(count) = word.strip_prefix("rebalances:") {
            return count.parse().ok().map(Expectation::Rebalances);
        }
        if let Some(seconds) = word.strip_prefix("lso-stall-under:") {
            return seconds.parse().ok().map(Expectation::LsoStallUnder);
        }
        if let Some(seconds) = word.strip_prefix("lso-stall:") {
            return seconds.parse().ok().map(Expectation::LsoStallAtLeast);
        }
        if let Some(count) = word.strip_prefix("zombies-fenced:") {
            return count.parse().ok().map(Expectation::ZombiesFenced);
        }
        if let Some(count) = word.strip_prefix("stale-produce-refused:") {
            return count.parse().ok().map(Expectation::StaleProduceRefused);
        }
        if let Some(count) = word.strip_prefix("resumed-commits:") {
            return count.parse().ok().map(Expectation::ResumedCommits);
        }
        if let Some(count) = word.strip_prefix("zombies-committed:") {
            return count.parse().ok().map(Expectation::ZombiesCommitted);
        }
        Some(match word {
            "lost" => Expectation::Lost,
            "no-loss" => Expectation::NoLoss,
            "unclean-election" => Expectation::UncleanElection,
            "unavailable" => Expectation::Unavailable,
            "refused" => Expectation::Refused,
            "valid" => Expectation::Valid,
            "invalid" => Expectation::Invalid,
            "retried" => Expectation::Retried,
            "no-rebalance" => Expectation::NoRebalance,
            "offsets-survive" => Expectation::OffsetsSurvive,
            _ => return None,
        })
    }

    fn name(&self) -> String {
        let name = match self {
            Expectation::Anomaly(kinds) => {
                let kinds: Vec<&str> = kinds.iter().map(|kind| kind.as_str()).collect();
                return format!("anomaly:{}", kinds.join("|"));
            }
            Expectation::Cause(cause) => return format!("cause:{cause}"),
            Expectation::Rebalances(count) => return format!("rebalances:{count}"),
            Expectation::LsoStallAtLeast(seconds) => return format!("lso-stall:{seconds}"),
            Expectation::LsoStallUnder(seconds) => return format!("lso-stall-under:{seconds}"),
            Expectation::ZombiesFenced(count) => return format!("zombies-fenced:{count}"),
            Expectation::ZombiesCommitted(count) => return format!("zombies-committed:{count}"),
            Expectation::ResumedCommits(count) => return format!("resumed-commits:{count}"),
            Expectation::StaleProduceRefused(count) => {
                return format!("stale-produce-refused:{count}");
            }
            Expectation::NoRebalance => "no-rebalance",
            Expectation::OffsetsSurvive => "offsets-survive",
            Expectation::Lost => "lost",
            Expectation::NoLoss => "no-loss",
            Expectation::UncleanElection => "unclean-election",
            Expectation::Unavailable => "unavailable",
            Expectation::Refused => "refused",
            Expectation::Valid => "valid",
            Expectation::Invalid => "invalid",
            Expectation::Retried => "retried",
        };
        name.to_owned()
    }
}

/// A parsed scenario.
#[derive(Debug, Clone)]
pub struct Scenario {
    /// Its name (the shipped name or the file's stem).
    pub name: String,
    /// One paragraph saying what it shows.
    pub description: String,
    nodes: usize,
    controllers: usize,
    keys: u32,
    workload: WorkloadName,
    time_limit: u64,
    rate: f64,
    concurrency: u32,
    settings: Vec<String>,
    members: crate::cli::MemberOptions,
    /// What the run must show.
    pub expect: Vec<Expectation>,
    steps: Vec<Step>,
}

/// Parses a scenario's text; `name` is used in messages.
///
/// # Errors
/// A malformed directive or step; the message names the line.
pub fn parse(name: &str, text: &str) -> anyhow::Result<Scenario> {
    let mut scenario = Scenario {
        name: name.to_owned(),
        description: String::new(),
        nodes: 3,
        controllers: 0,
        keys: 1,
        workload: WorkloadName::Queue,
        time_limit: 30,
        rate: 50.0,
        concurrency: 4,
        settings: Vec::new(),
        members: crate::cli::MemberOptions {
            members_settle: 10,
            ..Default::default()
        },
        expect: Vec::new(),
        steps: Vec::new(),
    };
    // Steps keep their line numbers: directive lines are blanked in the timeline text.
    let mut timeline_text = String::new();
    for (index, raw) in text.lines().enumerate() {
        let line = index + 1;
        let content = raw.split('#').next().unwrap_or("").trim();
        let is_step = content.starts_with(|c: char| c.is_ascii_digit());
        if content.is_empty() || is_step {
            timeline_text.push_str(content);
            timeline_text.push('\n');
            continue;
        }
        timeline_text.push('\n');
        let (directive, value) = content
            .split_once(char::is_whitespace)
            .map_or((content, ""), |(d, v)| (d, v.trim()));
        let number = |what: &str| -> anyhow::Result<u64> {
            value.parse().with_context(|| {
                format!("{name} line {line}: `{directive}` needs {what}, got `{value}`")
            })
        };
        match directive {
            "description" => scenario.description = value.to_owned(),
            "nodes" => scenario.nodes = number("a node count")? as usize,
            "controllers" => scenario.controllers = number("a controller count")? as usize,
            "keys" => scenario.keys = number("a partition count")? as u32,
            "workload" => {
                scenario.workload = match value {
                    "queue" => WorkloadName::Queue,
                    "producer" => WorkloadName::Producer,
                    "txn" => WorkloadName::Txn,
                    "eos" => WorkloadName::Eos,
                    "group" => WorkloadName::Group,
                    _ => bail!(
                        "{name} line {line}: unknown workload `{value}` (queue, producer, txn, eos, group)"
                    ),
                }
            }
            "time-limit" => scenario.time_limit = number("seconds")?,
            "rate" => scenario.rate = number("operations per second")? as f64,
            "concurrency" => scenario.concurrency = number("a client count")? as u32,
            "set" | "member-set" => {
                if !value.contains('=') {
                    bail!("{name} line {line}: `{directive}` needs key=value, got `{value}`");
                }
                if directive == "set" {
                    scenario.settings.push(value.to_owned());
                } else {
                    scenario.members.member_set.push(value.to_owned());
                }
            }
            "members" => scenario.members.members = number("a member count")? as u32,
            "member-process-ms" => {
                scenario.members.member_process_ms = number("milliseconds per record")?;
            }
            "members-settle" => scenario.members.members_settle = number("seconds")?,
            "static-members" => scenario.members.static_members = true,
            "expect" => scenario
                .expect
                .push(Expectation::parse(value).with_context(|| {
                    format!(
                        "{name} line {line}: unknown expectation `{value}` (lost, no-loss, \
                     unclean-election, unavailable, refused, valid, invalid, retried, \
                     anomaly:<kind>, cause:<rebalance cause>, no-rebalance, rebalances:<n>, \
                     offsets-survive, lso-stall:<s>, lso-stall-under:<s>)"
                    )
                })?),
            other => bail!(
                "{name} line {line}: unknown directive `{other}` (description, nodes, \
                 controllers, keys, workload, time-limit, rate, concurrency, set, members, \
                 member-set, member-process-ms, members-settle, static-members, expect, or a \
                 step starting with its time)"
            ),
        }
    }
    if scenario.expect.is_empty() {
        bail!("{name}: a scenario needs at least one `expect` line");
    }
    let has_steps = timeline_text.lines().any(|l| !l.trim().is_empty());
    if has_steps || !scenario.may_run_without_steps() {
        scenario.steps = timeline::parse(&timeline_text, scenario.nodes)
            .with_context(|| format!("in scenario {name}"))?;
    }
    Ok(scenario)
}

impl Scenario {
    /// Whether its settings alone can be what it shows: a member pool's (the poll clock), or
    /// a workload that brings its own faults (eos pipeline processes crash as their commits
    /// return; txn transactions are deliberately aborted), as a canary or a common mistake
    /// needs no nemesis to show.
    fn may_run_without_steps(&self) -> bool {
        self.members.members > 0 || matches!(self.workload, WorkloadName::Eos | WorkloadName::Txn)
    }
}

/// Finds a shipped scenario by name, or reads a file.
///
/// # Errors
/// Neither a shipped name nor a readable, valid file.
pub fn load(name_or_path: &str) -> anyhow::Result<Scenario> {
    if let Some((name, text)) = SHIPPED.iter().find(|(name, _)| *name == name_or_path) {
        return parse(name, text);
    }
    let path = Path::new(name_or_path);
    if !path.is_file() {
        bail!(
            "`{name_or_path}` is neither a shipped scenario ({}) nor a file",
            SHIPPED
                .iter()
                .map(|(name, _)| *name)
                .collect::<Vec<_>>()
                .join(", ")
        );
    }
    let text =
        std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))?;
    let name = path.file_stem().map_or_else(
        || "scenario".to_owned(),
        |stem| stem.to_string_lossy().into_owned(),
    );
    parse(&name, &text)
}

/// Runs `logjam scenario`.
///
/// # Errors
/// The scenario cannot be loaded or the run fails as a harness.
pub fn run(args: &ScenarioArgs, privilege: Option<Privilege>) -> anyhow::Result<u8> {
    if args.list {
        for (name, text) in SHIPPED {
            let scenario = parse(name, text)?;
            println!("{name}\n    {}\n", scenario.description);
        }
        return Ok(0);
    }
    let Some(which) = args.scenario.as_deref() else {
        bail!("name a scenario or give --list");
    };
    let scenario = load(which)?;
    let mut settings = scenario.settings.clone();
    settings.extend(args.set.iter().cloned());
    let run_args = RunArgs {
        workload: scenario.workload,
        nodes: scenario.nodes,
        controllers: scenario.controllers,
        time_limit: scenario.time_limit,
        rate: scenario.rate,
        concurrency: scenario.concurrency,
        keys: scenario.keys,
        nemesis: "none".to_owned(),
        nemesis_script: None,
        nemesis_interval: 5,
        seed: args.seed,
        set: settings,
        results_dir: args.results_dir.clone(),
        network: NetworkMode::Namespaces,
        node_binary: args.node_binary.clone(),
        members: scenario.members.clone(),
    };
    let mut replay = format!("logjam scenario {which} --seed {{seed}}");
    for setting in &args.set {
        replay.push_str(&format!(" --set {setting}"));
    }
    eprintln!(
        "logjam: scenario {}: {}",
        scenario.name, scenario.description
    );
    let label = Label {
        name: format!("scenario-{}", scenario.name),
        replay,
    };
    let (_, run_dir) = run::execute(
        &run_args,
        privilege,
        Some(scenario.steps.clone()),
        Some(label),
    )?;
    let judged = judge(&scenario, &run_dir)?;
    std::fs::write(
        run_dir.join("scenario.json"),
        serde_json::to_string_pretty(&judged)?,
    )?;
    let shown = judged["shown"].as_bool().unwrap_or(false);
    println!(
        "scenario {}: expected {}: {}",
        scenario.name,
        scenario
            .expect
            .iter()
            .map(Expectation::name)
            .collect::<Vec<_>>()
            .join(" + "),
        if shown { "SHOWN" } else { "NOT SHOWN" }
    );
    for check in judged["checks"].as_array().into_iter().flatten() {
        println!(
            "  {} {}: {}",
            if check["holds"].as_bool().unwrap_or(false) {
                "yes"
            } else {
                "NO "
            },
            check["expect"].as_str().unwrap_or("?"),
            check["evidence"].as_str().unwrap_or("")
        );
    }
    Ok(if shown { 0 } else { 1 })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lso_stall_expectations_parse_and_name_themselves() {
        for (word, expected) in [
            ("lso-stall:6", Expectation::LsoStallAtLeast(6)),
            ("lso-stall-under:5", Expectation::LsoStallUnder(5)),
            ("zombies-fenced:1", Expectation::ZombiesFenced(1)),
            ("zombies-committed:2", Expectation::ZombiesCommitted(2)),
            ("resumed-commits:1", Expectation::ResumedCommits(1)),
            (
                "stale-produce-refused:2",
                Expectation::StaleProduceRefused(2),
            ),
        ] {
            let parsed = Expectation::parse(word).unwrap();
            assert_eq!(parsed, expected);
            assert_eq!(parsed.name(), word);
        }
        assert_eq!(Expectation::parse("lso-stall:"), None);
    }

    #[test]
    fn anomaly_expectations_name_known_kinds_one_or_several() {
        for word in [
            "anomaly:duplicate",
            "anomaly:aborted-read|hanging-transaction",
        ] {
            assert_eq!(Expectation::parse(word).unwrap().name(), word);
        }
        for word in ["anomaly:aborted-reed", "anomaly:aborted-read|", "anomaly:"] {
            assert_eq!(Expectation::parse(word), None, "{word}");
        }
    }

    #[test]
    fn every_shipped_scenario_parses() {
        for (name, text) in SHIPPED {
            let scenario = parse(name, text).unwrap();
            assert!(!scenario.description.is_empty(), "{name} has a description");
            assert!(
                !scenario.steps.is_empty() || scenario.may_run_without_steps(),
                "{name} has steps"
            );
            assert!(
                scenario.time_limit <= 40,
                "{name} fits in a minute with start and reads"
            );
        }
    }

    #[test]
    fn bad_scenarios_name_the_line() {
        for (text, expected) in [
            ("expect lost\nnodes x\n1 kill", "line 2"),
            ("expect lost\nfly away\n1 kill", "unknown directive `fly`"),
            ("expect maybe\n1 kill", "unknown expectation"),
            ("expect lso-stall:soon\n1 kill", "unknown expectation"),
            ("nodes 3\n1 kill", "at least one `expect`"),
            ("expect lost\nset acks\n1 kill", "key=value"),
            ("expect lost\n\n1 explode", "line 3"),
        ] {
            let error = format!("{:#}", parse("t", text).unwrap_err());
            assert!(error.contains(expected), "{text}: {error}");
        }
    }
}
