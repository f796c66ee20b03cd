//! Command-line arguments of `logjam` (clap derive), and the exit codes every subcommand uses.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

use crate::lab::NetworkMode;
use crate::lincheck::{LinFormat, LinModel};

/// Exit code when the harness itself failed (not a verdict about the cluster).
pub const EXIT_HARNESS_FAILED: u8 = 3;

/// A correctness harness for Kafka-style replicated logs.
///
/// Exit codes: 0 valid, 1 invalid, 2 unknown, 3 the harness failed.
#[derive(Debug, Parser)]
#[command(name = "logjam", version, about, long_about = None)]
pub struct Cli {
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// The subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run one test: start a cluster, drive the queue workload under faults, check, store.
    Run(RunArgs),
    /// The same test over the product of settings (`--set acks=1,all --set
    /// min.insync.replicas=1,2`), `--runs` per cell; prints and stores a table. Exit 0 when
    /// every run ended with a verdict (the table reports, it does not judge), 3 otherwise.
    Matrix(MatrixArgs),
    /// A scripted fault timeline with settings and an expected outcome: a shipped name
    /// (`logjam scenario --list`) or a file.
    Scenario(ScenarioArgs),
    /// A suite of tests run with fresh seeds within a time budget; JUnit XML and an index.
    /// Exit 0 when every run that ran was valid; else 3 (harness error) over 1 (invalid)
    /// over 2 (unknown). Runs that no longer fit the budget are skipped.
    Nightly(NightlyArgs),
    /// Re-check a stored run or a history file offline and write report.json beside it.
    Check(CheckArgs),
    /// Write the HTML pages: report.html of the runs given (matrix.html of matrices), or of
    /// every run and matrix under --results-dir when none is given; then results/index.html.
    Report(ReportArgs),
    /// The built-in cluster for manual use.
    #[command(subcommand)]
    Cluster(ClusterCommand),
    /// One consumer-group member as a process of its own (started by a run's member pool).
    #[command(hide = true)]
    Member(crate::member::MemberArgs),
}

/// `logjam cluster` subcommands.
#[derive(Debug, Subcommand)]
pub enum ClusterCommand {
    /// Start a cluster, print how to reach it, keep it until Ctrl-C.
    Up(ClusterUpArgs),
}

/// Arguments of `logjam cluster up`.
#[derive(Debug, Args)]
pub struct ClusterUpArgs {
    /// Number of nodes, each a combined broker and KRaft controller voter.
    #[arg(long, default_value_t = 3)]
    pub nodes: usize,
    /// A node property, `key=value`, repeatable.
    #[arg(long = "set", value_name = "KEY=VALUE")]
    pub set: Vec<String>,
    /// Where the nodes keep their configs, data and logs (default: results/cluster-<time>).
    #[arg(long)]
    pub dir: Option<PathBuf>,
    /// The logjam-node binary (default: beside this executable).
    #[arg(long)]
    pub node_binary: Option<PathBuf>,
    /// Where the nodes live: `loopback` (127.0.0.1, reachable from any shell on this machine)
    /// or `namespaces` (the lab of `logjam run`: reach it with the nsenter command printed).
    #[arg(long, value_enum, default_value = "loopback")]
    pub network: NetworkMode,
}

/// `logjam run`'s default faults.
pub const DEFAULT_NEMESIS: &str = "kill,pause,partition";
/// `logjam run`'s default seconds between a fault and its undo.
pub const DEFAULT_NEMESIS_INTERVAL: u64 = 5;

/// The workload a run drives.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum WorkloadName {
    /// Jepsen's queue: sends, polls, assigns, crashes, final reads.
    #[default]
    Queue,
    /// One batching producer per process, many sends in flight, each send's order of
    /// submission and outcome recorded: shows retries reordering and duplicating sends.
    Producer,
    /// Jepsen's queue in its transactional mode: transactions of sends and read_committed
    /// polls, committed or aborted on purpose.
    Txn,
    /// A consume-transform-produce pipeline with exactly-once: an idempotent producer fills
    /// `eos-in`, pipeline processes in one group write one `eos-out` record per input and
    /// commit their offsets in the same transaction (`--set logjam.eos=offsets-outside-transaction`
    /// commits them after it instead: the common mistake; `logjam.eos=zombie` pauses a few
    /// members mid-transaction past their session timeout).
    Eos,
    /// Jepsen's queue in subscribe mode: consumers are members of one consumer group, commit
    /// after every poll, and every rebalance they saw is recorded.
    Group,
}

impl WorkloadName {
    /// The name in run.json, the history header and the run directory.
    pub fn as_str(self) -> &'static str {
        match self {
            WorkloadName::Queue => "queue",
            WorkloadName::Producer => "producer",
            WorkloadName::Txn => "txn",
            WorkloadName::Eos => "eos",
            WorkloadName::Group => "group",
        }
    }
}

/// Arguments of `logjam run`.
#[derive(Debug, Clone, Args)]
pub struct RunArgs {
    /// The workload: `queue` (sends and polls, Jepsen's) or `producer` (batching producers
    /// with many sends in flight: reordered and duplicated sends, send latency).
    #[arg(long, value_enum, default_value = "queue")]
    pub workload: WorkloadName,
    /// Number of nodes, each a combined broker and KRaft controller voter unless
    /// --controllers is given.
    #[arg(long, default_value_t = 3)]
    pub nodes: usize,
    /// Dedicated KRaft controllers: the first N nodes are controller-only voters, the rest
    /// broker-only (0: every node is both).
    #[arg(long, default_value_t = 0)]
    pub controllers: usize,
    /// Seconds of workload under faults (then heal, recover and read back).
    #[arg(long, default_value_t = 60)]
    pub time_limit: u64,
    /// Target client operations per second, over all processes.
    #[arg(long, default_value_t = 100.0)]
    pub rate: f64,
    /// Client processes.
    #[arg(long, default_value_t = 5)]
    pub concurrency: u32,
    /// Keys, i.e. partitions of the workload's topic.
    #[arg(long, default_value_t = 4)]
    pub keys: u32,
    /// Faults, comma-separated, drawn at random one at a time: kill, stop, pause, partition
    /// (any kind) or partition-one, -minority, -majorities-ring, -bridge, -leader, -one-way,
    /// power-loss, corrupt, disk-full, and the Kafka-aware isr-shrink-kill and
    /// isr-shrink-power-loss (a partition's followers cut from its leader until the ISR is the
    /// leader alone, which takes up to 1.5 x replica.lag.time.max.ms, 45 s at Kafka's
    /// default; then the leader is killed or loses power); `none` for a fault-free run.
    #[arg(long, default_value = DEFAULT_NEMESIS)]
    pub nemesis: String,
    /// A scripted fault timeline to follow instead of the random schedule (format: see
    /// `logjam run --help` and harness/src/timeline.rs; examples in scenarios/).
    #[arg(long, value_name = "FILE")]
    pub nemesis_script: Option<PathBuf>,
    /// Seconds between a fault and its undo, and between an undo and the next fault.
    #[arg(long, default_value_t = DEFAULT_NEMESIS_INTERVAL)]
    pub nemesis_interval: u64,
    /// The seed of the workload and fault schedule (default: from the clock; printed).
    #[arg(long)]
    pub seed: Option<u64>,
    /// A setting, `key=value`, repeatable: node properties (min.insync.replicas,
    /// unclean.leader.election.enable, log.flush.interval.messages, ...), client properties
    /// (acks, enable.idempotence, linger.ms, ...; a group's consumers take
    /// session.timeout.ms and heartbeat.interval.ms), workload modes (logjam.eos=...,
    /// logjam.txn=...) or replication.factor (default: 3, or the number of nodes when fewer).
    #[arg(long = "set", value_name = "KEY=VALUE")]
    pub set: Vec<String>,
    /// Where runs are stored.
    #[arg(long, default_value = "results")]
    pub results_dir: PathBuf,
    /// Where the nodes live: `namespaces` (one network namespace per node on a bridge, inside
    /// the harness's own; needed for partitions) or `loopback` (127.0.0.1, no partitions).
    #[arg(long, value_enum, default_value = "namespaces")]
    pub network: NetworkMode,
    /// The logjam-node binary (default: beside this executable).
    #[arg(long)]
    pub node_binary: Option<PathBuf>,
    /// Consumer-group members as processes of their own, beside the workload.
    #[command(flatten)]
    pub members: MemberOptions,
}

/// The run's member pool: consumer-group members as OS processes (`logjam member`) in the
/// group `logjam-members`, subscribed to the workload's topic for the whole workload phase,
/// so the timeline can pause (SIGSTOP), kill and restart them (`member-pause m1`,
/// `member-restart all`, ...), and the run reports every rebalance their coordinator started,
/// with its cause (`rebalances.json`).
#[derive(Debug, Clone, Default, Args)]
pub struct MemberOptions {
    /// Members in the pool (0: none).
    #[arg(long, default_value_t = 0)]
    pub members: u32,
    /// A member consumer property, `key=value`, repeatable (session.timeout.ms,
    /// max.poll.interval.ms, max.poll.records, group.protocol, ...).
    #[arg(long = "member-set", value_name = "KEY=VALUE")]
    pub member_set: Vec<String>,
    /// Milliseconds each member spends processing each record it polled, before its next
    /// poll (what the poll clock, max.poll.interval.ms, measures).
    #[arg(long, default_value_t = 0)]
    pub member_process_ms: u64,
    /// Give every member a `group.instance.id` (static membership), kept across restarts.
    #[arg(long)]
    pub static_members: bool,
    /// Seconds after the workload starts during which rebalances are the group forming and
    /// are not counted as caused by what the run did.
    #[arg(long, default_value_t = 10)]
    pub members_settle: u64,
}

/// Arguments of `logjam matrix`.
#[derive(Debug, Clone, Args)]
pub struct MatrixArgs {
    /// Every option of `logjam run`; here `--set key=a,b,c` sweeps the values (one cell per
    /// combination) and the defaults are the sweep of acks, min.insync.replicas and
    /// unclean.leader.election.enable under kill and partition faults.
    #[command(flatten)]
    pub run: RunArgs,
    /// Runs per cell, each with its own seed.
    #[arg(long, default_value_t = 1)]
    pub runs: u32,
}

/// Arguments of `logjam scenario`.
#[derive(Debug, Args)]
pub struct ScenarioArgs {
    /// A shipped scenario's name or a scenario file.
    #[arg(required_unless_present = "list")]
    pub scenario: Option<String>,
    /// List the shipped scenarios and exit.
    #[arg(long)]
    pub list: bool,
    /// The seed (default: from the clock; printed).
    #[arg(long)]
    pub seed: Option<u64>,
    /// Where runs are stored.
    #[arg(long, default_value = "results")]
    pub results_dir: PathBuf,
    /// The logjam-node binary (default: beside this executable).
    #[arg(long)]
    pub node_binary: Option<PathBuf>,
    /// Extra settings, `key=value`, applied after the scenario's own.
    #[arg(long = "set", value_name = "KEY=VALUE")]
    pub set: Vec<String>,
}

/// Arguments of `logjam nightly`.
#[derive(Debug, Args)]
pub struct NightlyArgs {
    /// The suite file (TOML; see harness/suites/nightly.toml).
    pub suite: PathBuf,
    /// Total time budget in minutes (default: the suite's own).
    #[arg(long)]
    pub budget_minutes: Option<u64>,
    /// Where runs, the index and junit.xml are stored.
    #[arg(long, default_value = "results")]
    pub results_dir: PathBuf,
    /// The logjam-node binary (default: beside this executable).
    #[arg(long)]
    pub node_binary: Option<PathBuf>,
}

/// Arguments of `logjam check`.
#[derive(Debug, Args)]
pub struct CheckArgs {
    /// A run directory (holding history.jsonl) or a history.jsonl file; with --model, a
    /// history file from elsewhere in --format.
    pub path: PathBuf,
    /// Check FILE for linearizability against this model instead (a history from elsewhere;
    /// nothing is written).
    #[arg(long, value_enum, requires = "format")]
    pub model: Option<LinModel>,
    /// The format of FILE for --model.
    #[arg(long, value_enum, requires = "model")]
    pub format: Option<LinFormat>,
    /// With --model: seconds the whole search may take before the verdict is unknown.
    #[arg(long, requires = "model", value_name = "SECONDS")]
    pub time_limit: Option<u64>,
    /// With --model: bytes the search may hold (e.g. 512M, 2G; default a quarter of the
    /// machine's memory) before the verdict is unknown.
    #[arg(long, requires = "model", value_name = "BYTES")]
    pub memory_limit: Option<String>,
    /// Print the full report as JSON instead of the summary.
    #[arg(long)]
    pub json: bool,
    /// Do not write report.json.
    #[arg(long)]
    pub no_write: bool,
}

/// Arguments of `logjam report`.
#[derive(Debug, Args)]
pub struct ReportArgs {
    /// Run or matrix directories to render (default: every one under --results-dir).
    pub paths: Vec<PathBuf>,
    /// Where runs are stored; its index.html lists them all.
    #[arg(long, default_value = "results")]
    pub results_dir: PathBuf,
}
