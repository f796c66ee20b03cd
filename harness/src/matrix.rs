//! `logjam matrix`: one `logjam run` per cell of a settings sweep, `--runs` times each, then a
//! table of what each combination of settings actually delivered. Also owns the child-run
//! machinery `logjam nightly` shares: every run is a `logjam run` child process (its own
//! sandbox, its own exit code), whose stored run is read back with [`metrics::outcome`].
//!
//! # The sweep
//!
//! `--set key=v1,v2,...` (repeatable): the cells are the Cartesian product of every
//! multi-valued key, in the order given (the last key varies fastest); single-valued settings
//! apply to every cell. Without any `--set` the sweep is `acks=1,all` ×
//! `min.insync.replicas=1,2` × `unclean.leader.election.enable=false,true` (8 cells, the
//! replication factor left at its default of 3). The faults default to the Kafka-aware
//! `isr-shrink-kill,isr-shrink-power-loss` (a `--nemesis` left at `logjam run`'s default,
//! `kill,pause,partition`, is replaced): random kills and partitions never shrank an ISR, and
//! every acks=all cell came out valid whatever min.insync.replicas said. With those default
//! faults the runs of a cell take them in turn (run 1 `isr-shrink-kill`, run 2
//! `isr-shrink-power-loss`, ...), since one ISR shrink fills a 60 s run: drawn at random, a
//! cell's two runs missed power loss half the time and reported its losses as absent.
//!
//! # Output and exit code
//!
//! Under `<results-dir>/<timestamp>-matrix/`: `cell<i>-run<j>/` (each the `--results-dir` of
//! one child: its run directory, `latest`, `logjam.log` with the child's stderr and
//! `stdout.txt`), `matrix.json` (every run's outcome) and `matrix.md` (the table, also
//! printed); `<results-dir>/latest-matrix` points at it. The matrix reports, it does not
//! judge: the exit code is 0 when every run ended with a verdict, even `invalid`, and 3 when
//! any run failed as a harness error (recorded as `error` in its cell; the sweep goes on).

use std::collections::{BTreeMap, VecDeque};
use std::ffi::OsString;
use std::fs::File;
use std::io::{BufRead, BufReader, Write as _};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use anyhow::{Context, bail};
use serde::Serialize;

use crate::cli::{
    DEFAULT_NEMESIS, DEFAULT_NEMESIS_INTERVAL, EXIT_HARNESS_FAILED, MatrixArgs, RunArgs,
};
use crate::metrics::{self, RunOutcome};
use crate::run::timestamp;

/// The sweep when no `--set` is given.
const DEFAULT_SWEEP: &[&str] = &[
    "acks=1,all",
    "min.insync.replicas=1,2",
    "unclean.leader.election.enable=false,true",
];

/// The matrix's default faults, in place of `logjam run`'s: the Kafka-aware ones, which aim at
/// what the swept settings decide. Random kills and 15 s partitions never shrank an ISR
/// (`replica.lag.time.max.ms` is 30 s) and every acks=all cell came out valid whatever
/// min.insync.replicas said (issue 17).
const MATRIX_NEMESIS: &str = "isr-shrink-kill,isr-shrink-power-loss";
/// With the default faults, 5 s between a fault's end and its undo, and between faults: the
/// first ISR shrink begins 5 s in, and at Kafka's `replica.lag.time.max.ms` (30 s) the shrink
/// shows within 45 s, so it completes within the default 60 s run; a shrink that could not
/// complete before the run ends is not begun.
const MATRIX_INTERVAL: u64 = 5;

/// Anomaly kinds the "lost" column already counts (the durability report's proven losses),
/// left out of "other anomalies". `unseen` (lost or merely late) stays in.
const DURABILITY_KINDS: &[&str] = &["lost-write", "unseen-lost"];

/// Runs the sweep; returns 0 when every run ended with a verdict, 3 when any failed.
///
/// # Errors
/// Bad `--set` values, or a matrix directory that cannot be written.
pub fn run(args: &MatrixArgs) -> anyhow::Result<u8> {
    let (args, rotate) = with_matrix_faults(args);
    let args = &args;
    if args.runs == 0 {
        bail!("--runs must be at least 1");
    }
    let defaulted = args.run.set.is_empty();
    let sets: Vec<String> = if defaulted {
        DEFAULT_SWEEP.iter().map(|s| (*s).to_owned()).collect()
    } else {
        args.run.set.clone()
    };
    let sweep = Sweep::parse(&sets)?;
    let cells = sweep.cells();
    let started = SystemTime::now();
    let dir = args
        .run
        .results_dir
        .join(format!("{}-matrix", timestamp(started, true)));
    std::fs::create_dir_all(&dir).with_context(|| format!("cannot create {}", dir.display()))?;
    print_plan(args, &sweep, defaulted, cells.len(), &dir);

    let base_seed = args.run.seed.unwrap_or_else(clock_seed);
    let total = cells.len() * args.runs as usize;
    let mut results = Vec::with_capacity(cells.len());
    for (i, cell) in cells.iter().enumerate() {
        let mut runs = Vec::new();
        let mut run_faults = Vec::new();
        for j in 0..args.runs as usize {
            let index = i * args.runs as usize + j;
            let mut run = args.run.clone();
            if rotate {
                run.nemesis = rotated_fault(&args.run.nemesis, j);
                run_faults.push(run.nemesis.clone());
            }
            let child = ChildSpec {
                label: format!("cell{} run{}", i + 1, j + 1),
                options: run_options(&run, &cell.settings),
                seed: base_seed.wrapping_add(index as u64),
                results_dir: dir.join(format!("cell{}-run{}", i + 1, j + 1)),
            };
            let finished = child.run();
            eprintln!(
                "logjam matrix: [{}/{total}] cell {} ({}) run {}: {}",
                index + 1,
                i + 1,
                cell.name,
                j + 1,
                finished.one_line()
            );
            runs.push(finished);
        }
        results.push(CellResult::new(i + 1, cell, runs, run_faults));
    }

    let report = MatrixReport {
        started: timestamp(started, false),
        dir: dir.clone(),
        nemesis: args.run.nemesis.clone(),
        faults_in_turn: rotate,
        common_settings: sweep.fixed_settings(),
        swept: sweep.swept_keys(),
        runs_per_cell: args.runs,
        cells: results,
    };
    let table = report.markdown(&args.run);
    std::fs::write(
        dir.join("matrix.json"),
        serde_json::to_string_pretty(&report)?,
    )?;
    std::fs::write(dir.join("matrix.md"), &table)?;
    point_link(&args.run.results_dir.join("latest-matrix"), &dir);
    crate::report::after_run(&args.run.results_dir, &dir);
    print!("{table}");
    println!("matrix stored in {}", dir.display());
    let failed = report.cells.iter().any(|c| c.summary.errors > 0);
    Ok(if failed { EXIT_HARNESS_FAILED } else { 0 })
}

/// `args` with `logjam run`'s default faults replaced by the matrix's, and, with them, its
/// default fault duration; says so. The flag says whether the runs of a cell take the
/// matrix's faults in turn ([`rotated_fault`]): only for the matrix's own default, since a
/// list the user gives is a mix they asked for.
fn with_matrix_faults(args: &MatrixArgs) -> (MatrixArgs, bool) {
    let mut args = args.clone();
    let isr_shrink = args.run.nemesis == DEFAULT_NEMESIS || args.run.nemesis.contains("isr-shrink");
    if isr_shrink && args.run.nodes == 3 && args.run.controllers == 0 {
        // Cutting a leader from its followers must leave the replication path broken and the
        // controller path whole, as in production: with three combined nodes the cut leader
        // also loses the quorum and is fenced before its ISR can shrink.
        args.run.nodes = 6;
        args.run.controllers = 3;
        eprintln!(
            "logjam matrix: 6 nodes, 3 of them dedicated controllers, for the ISR-shrink faults \
             (--nodes and --controllers to choose)"
        );
    }
    let rotate = args.run.nemesis == DEFAULT_NEMESIS && args.run.nemesis_script.is_none();
    if args.run.nemesis == DEFAULT_NEMESIS {
        args.run.nemesis = MATRIX_NEMESIS.to_owned();
        eprintln!(
            "logjam matrix: faults {MATRIX_NEMESIS} (the matrix's default; --nemesis to choose), \
             taken in turn by the runs of each cell"
        );
        if args.run.nemesis_interval == DEFAULT_NEMESIS_INTERVAL {
            args.run.nemesis_interval = MATRIX_INTERVAL;
            eprintln!(
                "logjam matrix: each fault lasts {MATRIX_INTERVAL} s (the matrix's default; \
                 --nemesis-interval to choose)"
            );
        }
    }
    (args, rotate)
}

/// The fault run `j` (from 0) of a cell gets when the cell's runs take the listed faults in
/// turn: one ISR shrink fills a 60 s run, so a random draw per run could leave a cell
/// without the fault that decides it.
fn rotated_fault(nemesis: &str, j: usize) -> String {
    let faults: Vec<&str> = nemesis.split(',').map(str::trim).collect();
    faults[j % faults.len()].to_owned()
}

fn print_plan(args: &MatrixArgs, sweep: &Sweep, defaulted: bool, cells: usize, dir: &Path) {
    if defaulted {
        eprintln!(
            "logjam matrix: no --set given: sweeping the default {} (replication factor 3)",
            DEFAULT_SWEEP.join(" x ")
        );
    }
    let fixed = sweep.fixed_settings();
    eprintln!(
        "logjam matrix: {cells} cell(s) x {} run(s), {} s each, faults {}{}; stored in {}",
        args.runs,
        args.run.time_limit,
        args.run.nemesis,
        if fixed.is_empty() {
            String::new()
        } else {
            format!(", every cell with {}", fixed.join(" "))
        },
        dir.display()
    );
}

/// The `logjam run` options every run of a cell gets (all but the seed and results dir).
fn run_options(run: &RunArgs, settings: &[String]) -> Vec<OsString> {
    let mut options: Vec<OsString> = vec![
        "--nodes".into(),
        run.nodes.to_string().into(),
        "--controllers".into(),
        run.controllers.to_string().into(),
        "--time-limit".into(),
        run.time_limit.to_string().into(),
        "--rate".into(),
        run.rate.to_string().into(),
        "--concurrency".into(),
        run.concurrency.to_string().into(),
        "--keys".into(),
        run.keys.to_string().into(),
        "--nemesis".into(),
        run.nemesis.clone().into(),
        "--nemesis-interval".into(),
        run.nemesis_interval.to_string().into(),
    ];
    if let Some(network) = clap::ValueEnum::to_possible_value(&run.network) {
        options.extend(["--network".into(), network.get_name().into()]);
    }
    if let Some(script) = &run.nemesis_script {
        options.extend(["--nemesis-script".into(), script.into()]);
    }
    if let Some(binary) = &run.node_binary {
        options.extend(["--node-binary".into(), binary.into()]);
    }
    for setting in settings {
        options.extend(["--set".into(), setting.into()]);
    }
    options
}

/// The parsed `--set` list: each key with its values, in the order given.
#[derive(Debug, Clone, PartialEq)]
struct Sweep {
    keys: Vec<(String, Vec<String>)>,
}

impl Sweep {
    fn parse(sets: &[String]) -> anyhow::Result<Sweep> {
        let mut keys: Vec<(String, Vec<String>)> = Vec::new();
        for set in sets {
            let (key, values) = crate::lab::parse_setting(set)?;
            if key.is_empty() {
                bail!("--set {set}: the key is empty");
            }
            if keys.iter().any(|(k, _)| *k == key) {
                bail!("--set {key} given twice: list every value once, comma-separated");
            }
            let values: Vec<String> = values.split(',').map(|v| v.trim().to_owned()).collect();
            if values.iter().any(String::is_empty) {
                bail!("--set {set}: an empty value in the list");
            }
            keys.push((key, values));
        }
        Ok(Sweep { keys })
    }

    /// Every combination of the multi-valued keys, the last key varying fastest.
    fn cells(&self) -> Vec<Cell> {
        let mut choices: Vec<Vec<usize>> = vec![Vec::new()];
        for (_, values) in &self.keys {
            choices = choices
                .into_iter()
                .flat_map(|prefix| {
                    (0..values.len()).map(move |v| {
                        let mut next = prefix.clone();
                        next.push(v);
                        next
                    })
                })
                .collect();
        }
        choices.iter().map(|choice| self.cell(choice)).collect()
    }

    fn cell(&self, choice: &[usize]) -> Cell {
        let mut settings = Vec::new();
        let mut swept = Vec::new();
        for ((key, values), &v) in self.keys.iter().zip(choice) {
            let setting = format!("{key}={}", values[v]);
            if values.len() > 1 {
                swept.push(setting.clone());
            }
            settings.push(setting);
        }
        let name = if swept.is_empty() {
            "(no sweep)".to_owned()
        } else {
            swept.join(" ")
        };
        Cell {
            name,
            swept,
            settings,
        }
    }

    fn fixed_settings(&self) -> Vec<String> {
        self.keys
            .iter()
            .filter(|(_, values)| values.len() == 1)
            .map(|(key, values)| format!("{key}={}", values[0]))
            .collect()
    }

    fn swept_keys(&self) -> BTreeMap<String, Vec<String>> {
        self.keys
            .iter()
            .filter(|(_, values)| values.len() > 1)
            .cloned()
            .collect()
    }
}

/// One combination of settings.
#[derive(Debug, Clone, PartialEq)]
struct Cell {
    /// The swept settings, space-separated (what tells cells apart).
    name: String,
    /// The swept settings, `key=value`.
    swept: Vec<String>,
    /// Every setting of the cell, `key=value`, as `--set` arguments.
    settings: Vec<String>,
}

/// Everything `matrix.json` holds.
#[derive(Debug, Serialize)]
struct MatrixReport {
    started: String,
    dir: PathBuf,
    nemesis: String,
    /// The runs of each cell took the faults in turn instead of drawing from all of them.
    faults_in_turn: bool,
    common_settings: Vec<String>,
    swept: BTreeMap<String, Vec<String>>,
    runs_per_cell: u32,
    cells: Vec<CellResult>,
}

/// One cell's runs and their totals.
#[derive(Debug, Serialize)]
struct CellResult {
    cell: usize,
    name: String,
    swept: Vec<String>,
    settings: Vec<String>,
    summary: CellSummary,
    /// The fault each run had, when the runs took the matrix's faults in turn (else empty).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    run_faults: Vec<String>,
    runs: Vec<ChildRun>,
}

/// The totals a table row shows.
#[derive(Debug, Default, Serialize)]
struct CellSummary {
    /// Runs per status (`valid`, `invalid`, `unknown`, `error`).
    statuses: BTreeMap<String, usize>,
    /// Harness failures.
    errors: usize,
    /// Acknowledged writes lost, over every run with a verdict.
    lost_total: u64,
    /// The same per run (`None` for a run that failed).
    lost_per_run: Vec<Option<u64>>,
    /// Acknowledged writes, over every run with a verdict.
    acknowledged_total: u64,
    /// Acknowledged writes neither read back nor proven lost, over every run.
    unconfirmed_total: u64,
    /// Lost writes per mechanism, over every run.
    lost_by_mechanism: BTreeMap<String, u64>,
    /// Bad anomaly kinds other than the durability ones, with summed counts.
    other_bad_anomalies: BTreeMap<String, u64>,
    /// Mean over runs with a verdict of each run's largest per-key refused time.
    refused_seconds_mean_of_max: Option<f64>,
    /// Unclean elections over every run.
    unclean_elections: usize,
    /// Leader changes over every run.
    leader_changes: u64,
    /// What tells each run apart in the table (the fault it had), when runs differ.
    #[serde(skip)]
    run_labels: Vec<String>,
}

impl CellResult {
    fn new(number: usize, cell: &Cell, runs: Vec<ChildRun>, run_faults: Vec<String>) -> CellResult {
        let mut summary = CellSummary::of(&runs);
        summary.run_labels = run_faults
            .iter()
            .map(|fault| fault.trim_start_matches("isr-shrink-").to_owned())
            .collect();
        CellResult {
            cell: number,
            name: cell.name.clone(),
            swept: cell.swept.clone(),
            settings: cell.settings.clone(),
            summary,
            run_faults,
            runs,
        }
    }
}

impl CellSummary {
    fn of(runs: &[ChildRun]) -> CellSummary {
        let mut summary = CellSummary::default();
        let mut refused = Vec::new();
        for run in runs {
            *summary.statuses.entry(run.status.clone()).or_default() += 1;
            let Some(outcome) = &run.outcome else {
                summary.errors += 1;
                summary.lost_per_run.push(None);
                continue;
            };
            summary.lost_total += outcome.lost;
            summary.lost_per_run.push(Some(outcome.lost));
            summary.acknowledged_total += outcome.acknowledged;
            summary.unconfirmed_total += outcome.unconfirmed;
            for (mechanism, count) in &outcome.lost_by_mechanism {
                *summary
                    .lost_by_mechanism
                    .entry(mechanism.clone())
                    .or_default() += count;
            }
            for (kind, count) in &outcome.anomalies {
                if count.bad && !DURABILITY_KINDS.contains(&kind.as_str()) {
                    *summary.other_bad_anomalies.entry(kind.clone()).or_default() += count.count;
                }
            }
            refused.push(outcome.refused.max_seconds);
            summary.unclean_elections += outcome.unclean_elections.len();
            summary.leader_changes += outcome.leader_changes;
        }
        if !refused.is_empty() {
            summary.refused_seconds_mean_of_max =
                Some(refused.iter().sum::<f64>() / refused.len() as f64);
        }
        summary
    }

    /// "valid 2/3, invalid 1/3".
    fn verdicts(&self, runs: usize) -> String {
        ["valid", "invalid", "unknown", "error"]
            .iter()
            .filter_map(|status| {
                self.statuses
                    .get(*status)
                    .map(|n| format!("{status} {n}/{runs}"))
            })
            .collect::<Vec<_>>()
            .join(", ")
    }

    /// "3 (0, 3, 0) of 1200, 5 unconfirmed" ("(0 kill, 3 power-loss)" when the runs took
    /// the faults in turn); "-" when no run ended with a verdict.
    fn lost(&self) -> String {
        if self.lost_per_run.iter().all(Option::is_none) {
            return "-".to_owned();
        }
        let per_run: Vec<String> = self
            .lost_per_run
            .iter()
            .enumerate()
            .map(|(j, lost)| {
                let lost = lost.map_or_else(|| "-".to_owned(), |n| n.to_string());
                match self.run_labels.get(j) {
                    Some(label) => format!("{lost} {label}"),
                    None => lost,
                }
            })
            .collect();
        let mut text = self.lost_total.to_string();
        if per_run.len() > 1 {
            text.push_str(&format!(" ({})", per_run.join(", ")));
        }
        text.push_str(&format!(" of {}", self.acknowledged_total));
        if !self.lost_by_mechanism.is_empty() {
            text.push_str(&format!(
                ": {}",
                logjam_checkers::report::mechanism_list(&self.lost_by_mechanism)
            ));
        }
        if self.unconfirmed_total > 0 {
            text.push_str(&format!(", {} unconfirmed", self.unconfirmed_total));
        }
        text
    }

    fn other_anomalies(&self) -> String {
        if self.other_bad_anomalies.is_empty() {
            return "none".to_owned();
        }
        self.other_bad_anomalies
            .iter()
            .map(|(kind, count)| format!("{kind} x{count}"))
            .collect::<Vec<_>>()
            .join(", ")
    }
}

impl MatrixReport {
    /// The Markdown table, with a line above it saying what every cell shared.
    fn markdown(&self, run: &RunArgs) -> String {
        let mut md = format!("# logjam matrix {}\n\n", self.started);
        md.push_str(&format!(
            "Every cell: {} node(s), {} s under faults `{}`{} (every {} s), {} ops/s over {} \
             client(s), {} key(s){}; {} run(s) per cell.\n\n",
            run.nodes,
            run.time_limit,
            self.nemesis,
            if self.faults_in_turn {
                ", taken in turn by each cell's runs"
            } else {
                ""
            },
            run.nemesis_interval,
            run.rate,
            run.concurrency,
            run.keys,
            if self.common_settings.is_empty() {
                String::new()
            } else {
                format!(", `{}`", self.common_settings.join(" "))
            },
            self.runs_per_cell,
        ));
        md.push_str(
            "| cell | settings | runs | verdicts | acknowledged writes lost | other bad anomalies \
             | refused s (mean of max) | unclean elections |\n",
        );
        md.push_str("|---|---|---|---|---|---|---|---|\n");
        for cell in &self.cells {
            let s = &cell.summary;
            let row = [
                cell.cell.to_string(),
                cell.name.clone(),
                cell.runs.len().to_string(),
                s.verdicts(cell.runs.len()),
                s.lost(),
                s.other_anomalies(),
                s.refused_seconds_mean_of_max
                    .map_or_else(|| "-".to_owned(), |r| format!("{r:.1}")),
                format!(
                    "{} of {} leader changes",
                    s.unclean_elections, s.leader_changes
                ),
            ];
            let row: Vec<String> = row.iter().map(|c| c.replace('|', "\\|")).collect();
            md.push_str(&format!("| {} |\n", row.join(" | ")));
        }
        md.push_str(
            "\nLost: the durability report's acknowledged writes lost (sum, per run in \
             parentheses; then per mechanism: acks-1, isr-of-one, unclean-election, \
             last-replica-truncated, unflushed-tail, divergent-truncation, unattributed; \
             unconfirmed: neither read back nor proven lost). Other bad \
             anomalies: kinds the policy forbids, proven lost writes excepted. Refused: per run, the longest time one partition refused writes; \
             averaged over the cell's runs.\n",
        );
        md
    }
}

// ---------------------------------------------------------------------------------------------
// Child runs, shared with `nightly`.

mod child;
#[cfg(test)]
use child::failure_line;
pub(crate) use child::{ChildRun, ChildSpec, clock_seed, point_link};

#[cfg(test)]
mod tests;
