//! `logjam nightly <suite.toml>`: a suite of tests, each run with fresh seeds as `logjam run`
//! children within a time budget, reported as JUnit XML (`junit.xml`) and an index
//! (`index.json`, `index.md`, also printed) under `<results-dir>/<timestamp>-nightly/`, one
//! `<name>-run<j>/` per run. `<results-dir>/latest-nightly` points at it.
//!
//! # Suite file
//!
//! ```toml
//! budget_minutes = 60          # default 60; --budget-minutes overrides it
//!
//! [[test]]
//! name = "kill-partition"      # required, unique; letters, digits, '.', '_', '-'
//! workload = "txn"             # default queue: queue, producer, txn, eos, group
//! nemesis = "kill,partition"   # default "kill,partition"
//! time_limit = 60              # seconds under faults, default 60
//! nodes = 3                    # default 3
//! rate = 100.0                 # optional, like the other options of `logjam run`
//! concurrency = 5              # optional
//! keys = 4                     # optional
//! nemesis_interval = 5         # optional
//! network = "namespaces"       # optional: namespaces or loopback
//! set = ["acks=all", "min.insync.replicas=2"]
//! nemesis_script = "pl.txt"    # optional, relative to the suite file
//! runs = 1                     # default 1
//! ```
//!
//! Unknown keys are errors naming the key; parse errors name the line.
//!
//! # Budget
//!
//! Runs go in suite order. Before each, the budget left is compared with the run's expected
//! duration (`time_limit` + 30 s for start, recovery, final reads and the check); once it does
//! not fit, no further run starts and every remaining run is reported as skipped.
//!
//! # Exit code
//!
//! The suite reports verdicts, it does not judge expectations: 0 when every run that ran was
//! valid (skipped runs do not count), 1 when any was invalid, 2 when any was unknown and none
//! invalid, 3 when any run failed as a harness error (whatever the others found) or the suite
//! file is bad.

use std::collections::BTreeSet;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime};

use anyhow::{Context, bail};
use serde::{Deserialize, Serialize};

use crate::cli::{EXIT_HARNESS_FAILED, NightlyArgs};
use crate::matrix::{ChildRun, ChildSpec, clock_seed, point_link};
use crate::run::timestamp;

/// Seconds a run needs beyond its time limit: start, recovery, final reads, check.
const RUN_OVERHEAD_SECONDS: u64 = 30;
/// Lines of a run's summary quoted in a JUnit failure.
const FAILURE_SUMMARY_LINES: usize = 8;

/// Runs the suite; returns the exit code described in the module doc.
///
/// # Errors
/// A bad suite file, or an output directory that cannot be written.
pub fn run(args: &NightlyArgs) -> anyhow::Result<u8> {
    let suite = Suite::load(&args.suite)?;
    let budget_minutes = args.budget_minutes.unwrap_or(suite.budget_minutes);
    let budget = Duration::from_secs(budget_minutes.saturating_mul(60));
    let started = SystemTime::now();
    let dir = args
        .results_dir
        .join(format!("{}-nightly", timestamp(started, true)));
    std::fs::create_dir_all(&dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let planned: Vec<Planned> = suite.plan(&args.suite, args.node_binary.as_deref(), &dir);
    eprintln!(
        "logjam nightly: {} run(s) of {} test(s) from {}, budget {budget_minutes} min; stored in {}",
        planned.len(),
        suite.tests.len(),
        args.suite.display(),
        dir.display()
    );

    let clock = Instant::now();
    let mut entries = Vec::with_capacity(planned.len());
    let mut out_of_budget = false;
    for (number, plan) in planned.into_iter().enumerate() {
        let left = budget.saturating_sub(clock.elapsed());
        out_of_budget = out_of_budget || left < plan.expected;
        let run = if out_of_budget {
            None
        } else {
            Some(plan.child.run())
        };
        let entry = Entry::new(plan, run);
        eprintln!("logjam nightly: [{}] {}", number + 1, entry.one_line());
        entries.push(entry);
    }

    let index = Index {
        suite: args.suite.clone(),
        started: timestamp(started, false),
        budget_minutes,
        seconds: clock.elapsed().as_secs_f64(),
        dir: dir.clone(),
        runs: entries,
    };
    std::fs::write(dir.join("junit.xml"), index.junit())?;
    std::fs::write(
        dir.join("index.json"),
        serde_json::to_string_pretty(&index)?,
    )?;
    let markdown = index.markdown();
    std::fs::write(dir.join("index.md"), &markdown)?;
    point_link(&args.results_dir.join("latest-nightly"), &dir);
    crate::report::refresh_index(&args.results_dir);
    print!("{markdown}");
    println!("nightly stored in {}", dir.display());
    Ok(index.exit_code())
}

/// A suite file.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Suite {
    #[serde(default = "default_budget_minutes")]
    budget_minutes: u64,
    #[serde(default, rename = "test")]
    tests: Vec<TestSpec>,
}

/// One `[[test]]` table.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct TestSpec {
    name: String,
    workload: Option<String>,
    #[serde(default = "default_nemesis")]
    nemesis: String,
    #[serde(default = "default_time_limit")]
    time_limit: u64,
    #[serde(default = "default_nodes")]
    nodes: usize,
    rate: Option<f64>,
    concurrency: Option<u32>,
    keys: Option<u32>,
    nemesis_interval: Option<u64>,
    network: Option<String>,
    #[serde(default)]
    set: Vec<String>,
    nemesis_script: Option<PathBuf>,
    #[serde(default = "default_runs")]
    runs: u32,
}

fn default_budget_minutes() -> u64 {
    60
}
fn default_nemesis() -> String {
    "kill,partition".to_owned()
}
fn default_time_limit() -> u64 {
    60
}
fn default_nodes() -> usize {
    3
}
fn default_runs() -> u32 {
    1
}

/// Parses and validates a suite's text, as `logjam nightly` does before it runs anything;
/// `base` is where its nemesis scripts are looked up. Returns the number of runs it plans.
///
/// # Errors
/// Bad TOML (the message names the line), an unknown key, or a test that cannot run.
pub fn parse_suite(text: &str, base: &Path) -> anyhow::Result<u64> {
    let suite: Suite = toml::from_str(text)?;
    suite.validate(base)?;
    Ok(suite.tests.iter().map(|test| u64::from(test.runs)).sum())
}

impl Suite {
    /// Reads, parses and validates a suite file.
    fn load(path: &Path) -> anyhow::Result<Suite> {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("cannot read suite {}", path.display()))?;
        let suite: Suite =
            toml::from_str(&text).with_context(|| format!("suite {}", path.display()))?;
        suite
            .validate(&suite_dir(path))
            .with_context(|| format!("suite {}", path.display()))?;
        Ok(suite)
    }

    fn validate(&self, base: &Path) -> anyhow::Result<()> {
        if self.tests.is_empty() {
            bail!("no [[test]] table");
        }
        let mut names = BTreeSet::new();
        for test in &self.tests {
            let name = &test.name;
            let fine = |c: char| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-');
            if name.is_empty() || !name.chars().all(fine) {
                bail!("test name {name:?}: use letters, digits, '.', '_' and '-' only");
            }
            if !names.insert(name.as_str()) {
                bail!("test name {name:?} is used twice");
            }
            if test.runs == 0 {
                bail!("test {name}: runs must be at least 1");
            }
            if let Some(workload) = &test.workload
                && <crate::cli::WorkloadName as clap::ValueEnum>::from_str(workload, false).is_err()
            {
                bail!(
                    "test {name}: workload {workload:?} is none of queue, producer, txn, eos, group"
                );
            }
            // A misspelt fault would otherwise fail every run of the test, one by one.
            crate::nemesis::parse(&test.nemesis, test.nodes)
                .with_context(|| format!("test {name}"))?;
            if let Some(bad) = test.set.iter().find(|s| !s.contains('=')) {
                bail!("test {name}: set entry {bad:?} is not key=value");
            }
            if let Some(network) = &test.network
                && !matches!(network.as_str(), "namespaces" | "loopback")
            {
                bail!("test {name}: network {network:?} is neither namespaces nor loopback");
            }
            if let Some(script) = &test.nemesis_script
                && !base.join(script).is_file()
            {
                bail!(
                    "test {name}: nemesis_script {} not found",
                    base.join(script).display()
                );
            }
        }
        Ok(())
    }

    /// Every run of every test in order, with its seed and directory.
    fn plan(&self, suite: &Path, node_binary: Option<&Path>, dir: &Path) -> Vec<Planned> {
        let base = suite_dir(suite);
        let first_seed = clock_seed();
        let mut planned = Vec::new();
        for test in &self.tests {
            let options = test.run_options(&base, node_binary);
            for j in 1..=test.runs {
                let label = format!("{}-run{j}", test.name);
                planned.push(Planned {
                    test: test.name.clone(),
                    run: j,
                    expected: Duration::from_secs(test.time_limit + RUN_OVERHEAD_SECONDS),
                    child: ChildSpec {
                        options: options.clone(),
                        seed: first_seed.wrapping_add(planned.len() as u64),
                        results_dir: dir.join(&label),
                        label,
                    },
                });
            }
        }
        planned
    }
}

/// The directory a suite's relative paths start from.
fn suite_dir(suite: &Path) -> PathBuf {
    match suite.parent() {
        Some(parent) if !parent.as_os_str().is_empty() => parent.to_owned(),
        _ => PathBuf::from("."),
    }
}

impl TestSpec {
    /// The `logjam run` options of this test (all but the seed and results dir).
    fn run_options(&self, base: &Path, node_binary: Option<&Path>) -> Vec<OsString> {
        let mut options: Vec<OsString> = vec![
            "--nodes".into(),
            self.nodes.to_string().into(),
            "--time-limit".into(),
            self.time_limit.to_string().into(),
            "--nemesis".into(),
            self.nemesis.clone().into(),
        ];
        let optional = [
            ("--workload", self.workload.clone()),
            ("--rate", self.rate.map(|v| v.to_string())),
            ("--concurrency", self.concurrency.map(|v| v.to_string())),
            ("--keys", self.keys.map(|v| v.to_string())),
            (
                "--nemesis-interval",
                self.nemesis_interval.map(|v| v.to_string()),
            ),
            ("--network", self.network.clone()),
        ];
        for (flag, value) in optional {
            if let Some(value) = value {
                options.extend([flag.into(), value.into()]);
            }
        }
        if let Some(script) = &self.nemesis_script {
            options.extend(["--nemesis-script".into(), base.join(script).into()]);
        }
        if let Some(binary) = node_binary {
            options.extend(["--node-binary".into(), binary.into()]);
        }
        for setting in &self.set {
            options.extend(["--set".into(), setting.into()]);
        }
        options
    }
}

/// A run the suite means to start.
#[derive(Debug)]
struct Planned {
    test: String,
    run: u32,
    expected: Duration,
    child: ChildSpec,
}

/// One run's line in the index and its JUnit testcase.
#[derive(Debug, Serialize)]
struct Entry {
    test: String,
    run: u32,
    seed: u64,
    /// `valid`, `invalid`, `unknown`, `error` or `skipped`.
    status: String,
    lost: Option<u64>,
    refused_max_seconds: Option<f64>,
    /// Achieved client ops/s over the workload phase, and while faults were in force.
    ops_per_second: Option<f64>,
    in_faults_ops_per_second: Option<f64>,
    /// Set when faults were in force but no client op completed during them.
    #[serde(skip_serializing_if = "Option::is_none")]
    rate_warning: Option<String>,
    seconds: f64,
    /// The run directory, else the run's results directory.
    path: PathBuf,
    /// The first lines of the run's `summary.txt`, or why it failed.
    message: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    child: Option<ChildRun>,
}

impl Entry {
    fn new(plan: Planned, run: Option<ChildRun>) -> Entry {
        let mut entry = Entry {
            test: plan.test,
            run: plan.run,
            seed: plan.child.seed,
            status: "skipped".to_owned(),
            lost: None,
            refused_max_seconds: None,
            ops_per_second: None,
            in_faults_ops_per_second: None,
            rate_warning: None,
            seconds: 0.0,
            path: plan.child.results_dir.clone(),
            message: format!(
                "skipped: the budget left was less than the {} s this run needs",
                plan.expected.as_secs()
            ),
            child: None,
        };
        let Some(run) = run else {
            return entry;
        };
        entry.status = run.status.clone();
        entry.seconds = run.seconds;
        if let Some(dir) = &run.run_dir {
            entry.path = dir.clone();
        }
        match &run.outcome {
            Some(outcome) => {
                entry.lost = Some(outcome.lost);
                entry.refused_max_seconds = Some(outcome.refused.max_seconds);
                if let Some(rates) = &outcome.rates {
                    entry.ops_per_second = Some(rates.overall.ops_per_second);
                    entry.in_faults_ops_per_second =
                        (rates.in_faults.seconds > 0.0).then_some(rates.in_faults.ops_per_second);
                    entry.rate_warning = rates.warning.clone();
                }
                entry.message = summary_head(&outcome.run_dir);
            }
            None => entry.message = run.error.clone().unwrap_or_default(),
        }
        entry.child = Some(run);
        entry
    }

    fn one_line(&self) -> String {
        match self.status.as_str() {
            "skipped" => format!("{} run {}: skipped (budget)", self.test, self.run),
            "error" => format!(
                "{} run {} seed {}: error: {} ({:.1} s)",
                self.test, self.run, self.seed, self.message, self.seconds
            ),
            status => format!(
                "{} run {} seed {}: {status}, {} lost, refused up to {:.1} s, {} ops/s ({} in \
                 faults) ({:.1} s){}",
                self.test,
                self.run,
                self.seed,
                self.lost.unwrap_or(0),
                self.refused_max_seconds.unwrap_or(0.0),
                rate(self.ops_per_second),
                rate(self.in_faults_ops_per_second),
                self.seconds,
                self.rate_warning
                    .as_ref()
                    .map(|warning| format!("; WARNING: {warning}"))
                    .unwrap_or_default()
            ),
        }
    }

    /// A Markdown link to the run's report.html, relative to the suite's directory `dir`
    /// (the page every run writes); `-` for a run without one.
    fn page(&self, dir: &Path) -> String {
        let page = self.path.join("report.html");
        match page.strip_prefix(dir) {
            Ok(relative) if self.child.as_ref().is_some_and(|c| c.outcome.is_some()) => {
                format!("[report.html]({})", relative.display())
            }
            _ => "-".to_owned(),
        }
    }

    /// The run as a JUnit `<testcase>`.
    fn testcase(&self) -> String {
        let open = format!(
            "    <testcase classname=\"{}\" name=\"seed {}\" time=\"{:.3}\"",
            xml_escape(&self.test),
            self.seed,
            self.seconds
        );
        let message = xml_escape(&self.message);
        let first_line = xml_escape(self.message.lines().next().unwrap_or(""));
        let path = xml_escape(&self.path.display().to_string());
        let body = match self.status.as_str() {
            "valid" => String::new(),
            "skipped" => format!("      <skipped message=\"{first_line}\"/>\n"),
            "invalid" => format!(
                "      <failure message=\"{first_line}\" type=\"invalid\">{message}</failure>\n"
            ),
            kind => format!(
                "      <error message=\"{first_line}\" type=\"{}\">{message}</error>\n",
                xml_escape(kind)
            ),
        };
        let out = if self.status == "skipped" {
            String::new()
        } else {
            format!("      <system-out>{path}</system-out>\n")
        };
        if body.is_empty() && out.is_empty() {
            return format!("{open}/>\n");
        }
        format!("{open}>\n{body}{out}    </testcase>\n")
    }
}

/// An optional rate as `12.3`, or `-`.
fn rate(value: Option<f64>) -> String {
    value.map_or_else(|| "-".to_owned(), |value| format!("{value:.1}"))
}

/// The first lines of a run's `summary.txt`.
fn summary_head(run_dir: &Path) -> String {
    std::fs::read_to_string(run_dir.join("summary.txt"))
        .map(|summary| {
            summary
                .lines()
                .take(FAILURE_SUMMARY_LINES)
                .collect::<Vec<_>>()
                .join("\n")
        })
        .unwrap_or_default()
}

/// Everything `index.json` holds.
#[derive(Debug, Serialize)]
struct Index {
    suite: PathBuf,
    started: String,
    budget_minutes: u64,
    seconds: f64,
    dir: PathBuf,
    runs: Vec<Entry>,
}

impl Index {
    fn count(&self, status: &str) -> usize {
        self.runs.iter().filter(|r| r.status == status).count()
    }

    fn exit_code(&self) -> u8 {
        if self.count("error") > 0 {
            EXIT_HARNESS_FAILED
        } else if self.count("invalid") > 0 {
            1
        } else if self.count("unknown") > 0 {
            2
        } else {
            0
        }
    }

    /// JUnit XML: one testsuite, one testcase per run (classname the test, name its seed).
    fn junit(&self) -> String {
        let (failures, errors, skipped) = (
            self.count("invalid"),
            self.count("unknown") + self.count("error"),
            self.count("skipped"),
        );
        let mut xml = String::from("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
        xml.push_str(&format!(
            "<testsuites name=\"logjam-nightly\" tests=\"{}\" failures=\"{failures}\" errors=\"{errors}\" skipped=\"{skipped}\" time=\"{:.3}\">\n",
            self.runs.len(),
            self.seconds
        ));
        xml.push_str(&format!(
            "  <testsuite name=\"logjam-nightly\" tests=\"{}\" failures=\"{failures}\" errors=\"{errors}\" skipped=\"{skipped}\" time=\"{:.3}\" timestamp=\"{}\">\n",
            self.runs.len(),
            self.seconds,
            xml_escape(self.started.trim_end_matches('Z'))
        ));
        for entry in &self.runs {
            xml.push_str(&entry.testcase());
        }
        xml.push_str("  </testsuite>\n</testsuites>\n");
        xml
    }

    /// The index as a Markdown table.
    fn markdown(&self) -> String {
        let mut md = format!(
            "# logjam nightly {} ({}; budget {} min, {:.0} s used)\n\n",
            self.started,
            self.suite.display(),
            self.budget_minutes,
            self.seconds
        );
        md.push_str(
            "| run | seed | verdict | lost | refused s (max) | ops/s | ops/s in faults | seconds | path | page |\n",
        );
        md.push_str("|---|---|---|---|---|---|---|---|---|---|\n");
        for entry in &self.runs {
            let number = |value: Option<String>| value.unwrap_or_else(|| "-".to_owned());
            let row = [
                format!("{}-run{}", entry.test, entry.run),
                entry.seed.to_string(),
                entry.status.clone(),
                number(entry.lost.map(|n| n.to_string())),
                number(entry.refused_max_seconds.map(|s| format!("{s:.1}"))),
                rate(entry.ops_per_second),
                match &entry.rate_warning {
                    Some(_) => format!(
                        "{} (no op in faults!)",
                        rate(entry.in_faults_ops_per_second)
                    ),
                    None => rate(entry.in_faults_ops_per_second),
                },
                format!("{:.0}", entry.seconds),
                entry.path.display().to_string(),
                entry.page(&self.dir),
            ];
            let row: Vec<String> = row.iter().map(|c| c.replace('|', "\\|")).collect();
            md.push_str(&format!("| {} |\n", row.join(" | ")));
        }
        md
    }
}

/// Escapes text for XML attributes and content; drops characters XML 1.0 cannot hold.
fn xml_escape(text: &str) -> String {
    let mut escaped = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => escaped.push_str("&amp;"),
            '<' => escaped.push_str("&lt;"),
            '>' => escaped.push_str("&gt;"),
            '"' => escaped.push_str("&quot;"),
            '\'' => escaped.push_str("&apos;"),
            '\n' => escaped.push_str("&#10;"),
            '\t' | '\r' => escaped.push_str(&format!("&#{};", c as u32)),
            c if (c as u32) < 0x20 || c == '\u{fffe}' || c == '\u{ffff}' => {}
            c => escaped.push(c),
        }
    }
    escaped
}

#[cfg(test)]
mod tests;
