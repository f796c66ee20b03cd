//! One child `logjam run` of a matrix: its options, its process, and what its run directory
//! and exit say about it.

use super::*;

/// One `logjam run` to start as a child process.
#[derive(Debug, Clone)]
pub(crate) struct ChildSpec {
    /// How its progress lines are prefixed, e.g. `cell3 run1`.
    pub label: String,
    /// Every `logjam run` option but `--seed` and `--results-dir`.
    pub options: Vec<OsString>,
    /// Its seed.
    pub seed: u64,
    /// Its `--results-dir`: it stores its run (and `latest`) there, we add its logs.
    pub results_dir: PathBuf,
}

/// How a child run ended.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct ChildRun {
    /// The seed it ran with.
    pub seed: u64,
    /// Its `--results-dir`.
    pub results_dir: PathBuf,
    /// Its run directory, when it got as far as creating one.
    pub run_dir: Option<PathBuf>,
    /// Wall-clock seconds, start to exit.
    pub seconds: f64,
    /// Its exit code (`None`: killed by a signal).
    pub exit_code: Option<i32>,
    /// `valid`, `invalid`, `unknown`, or `error` when the harness failed.
    pub status: String,
    /// Why it failed, when it did: its last `logjam:` line.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// What it found, when it ended with a verdict.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub outcome: Option<RunOutcome>,
}

/// Stderr lines kept from a child to explain a failure.
const STDERR_TAIL: usize = 20;

impl ChildSpec {
    /// Runs the child to its end, streaming its stderr prefixed with the label. Never fails:
    /// whatever goes wrong becomes an `error` run.
    pub fn run(&self) -> ChildRun {
        let start = Instant::now();
        let (exit_code, tail) = match self.spawn_and_wait() {
            Ok(ended) => ended,
            Err(error) => (
                None,
                VecDeque::from([format!("logjam: {}", crate::error_text::chain(&error))]),
            ),
        };
        let run_dir = find_run_dir(&self.results_dir, self.seed);
        let mut run = ChildRun {
            seed: self.seed,
            results_dir: self.results_dir.clone(),
            run_dir: run_dir.clone(),
            seconds: start.elapsed().as_secs_f64(),
            exit_code,
            status: "error".to_owned(),
            error: None,
            outcome: None,
        };
        let verdict_code = matches!(exit_code, Some(0..=2));
        match (verdict_code, run_dir) {
            (true, Some(dir)) => match metrics::outcome(&dir) {
                Ok(outcome) => {
                    run.status = outcome.verdict.clone();
                    run.outcome = Some(outcome);
                }
                Err(error) => run.error = Some(crate::error_text::chain(&error)),
            },
            (true, None) => run.error = Some("the run stored no run directory".to_owned()),
            (false, _) => run.error = Some(failure_line(exit_code, &tail)),
        }
        run
    }

    fn spawn_and_wait(&self) -> anyhow::Result<(Option<i32>, VecDeque<String>)> {
        std::fs::create_dir_all(&self.results_dir)
            .with_context(|| format!("cannot create {}", self.results_dir.display()))?;
        let stdout = File::create(self.results_dir.join("stdout.txt"))?;
        let mut log = File::create(self.results_dir.join("logjam.log"))?;
        let exe = std::env::current_exe().context("cannot find the logjam executable")?;
        let mut child = Command::new(exe)
            .arg("run")
            .args(&self.options)
            .arg("--seed")
            .arg(self.seed.to_string())
            .arg("--results-dir")
            .arg(&self.results_dir)
            .stdin(Stdio::null())
            .stdout(stdout)
            .stderr(Stdio::piped())
            .spawn()
            .context("cannot start logjam run")?;
        let mut tail = VecDeque::with_capacity(STDERR_TAIL);
        if let Some(stderr) = child.stderr.take() {
            for line in BufReader::new(stderr).split(b'\n') {
                let Ok(line) = line else { break };
                let line = String::from_utf8_lossy(&line).into_owned();
                eprintln!("  [{}] {line}", self.label);
                let _ = writeln!(log, "{line}");
                if tail.len() == STDERR_TAIL {
                    tail.pop_front();
                }
                tail.push_back(line);
            }
        }
        let status = child.wait().context("waiting for logjam run")?;
        Ok((status.code(), tail))
    }
}

impl ChildRun {
    /// `seed 12: valid, 0 of 400 lost, 38.2 s` or `seed 12: error (...)`.
    pub fn one_line(&self) -> String {
        match &self.outcome {
            Some(outcome) => format!(
                "seed {}: {}, {} of {} acknowledged writes lost, {:.1} s",
                self.seed, self.status, outcome.lost, outcome.acknowledged, self.seconds
            ),
            None => format!(
                "seed {}: error ({}), {:.1} s",
                self.seed,
                self.error.as_deref().unwrap_or("unknown failure"),
                self.seconds
            ),
        }
    }
}

/// The run directory a child stored: `latest` when it got that far, else the directory named
/// after its seed (a run that failed mid-way).
fn find_run_dir(results_dir: &Path, seed: u64) -> Option<PathBuf> {
    if let Ok(target) = std::fs::read_link(results_dir.join("latest")) {
        return Some(results_dir.join(target));
    }
    let suffix = format!("-seed{seed}");
    std::fs::read_dir(results_dir)
        .ok()?
        .filter_map(Result::ok)
        .map(|entry| entry.path())
        .find(|path| {
            path.is_dir()
                && path
                    .file_name()
                    .is_some_and(|name| name.to_string_lossy().ends_with(&suffix))
        })
}

/// The line that explains a failed child: its last `logjam:` line, else its last line.
pub(super) fn failure_line(exit_code: Option<i32>, tail: &VecDeque<String>) -> String {
    let line = tail
        .iter()
        .rev()
        .find(|line| line.starts_with("logjam:"))
        .or_else(|| tail.back())
        .map_or("no output", String::as_str);
    match exit_code {
        Some(code) => format!("exit {code}: {line}"),
        None => format!("killed by a signal: {line}"),
    }
}

/// Points the symlink `link` at `target` (relative, as `results/latest` is).
pub(crate) fn point_link(link: &Path, target: &Path) {
    let _ = std::fs::remove_file(link);
    if let Some(name) = target.file_name() {
        let _ = std::os::unix::fs::symlink(name, link);
    }
}

/// A seed from the clock.
pub(crate) fn clock_seed() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(1, |elapsed| elapsed.as_nanos() as u64)
}
