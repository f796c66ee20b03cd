//! Whether a stored run finished: run.json's `state` (`running`, `checking`, `finished`,
//! `failed`, `killed`) and the harness that owns it, written atomically (a temporary file
//! renamed over run.json) so a harness killed mid-write never leaves a torn run.json. A run
//! whose harness died without a word stays `running` or `checking`; the next `logjam run` in
//! the same results directory marks it `killed` (see [`mark_killed_runs`]).

use std::path::{Path, PathBuf};

use anyhow::Context;
use serde_json::Value;

/// run.json's `state` for a run still in its workload (or one whose harness was killed then).
pub const RUNNING: &str = "running";
/// The workload ended and the checkers are judging the history.
pub const CHECKING: &str = "checking";
/// Checked and stored: report.json and summary.txt are complete.
pub const FINISHED: &str = "finished";
/// The harness stopped on an error (or Ctrl-C); run.json's `error` says which.
pub const FAILED: &str = "failed";
/// The harness died without a word (SIGKILL, OOM): found by a later run.
pub const KILLED: &str = "killed";

/// Writes `value` as run.json in `run_dir`, atomically.
///
/// # Errors
/// The directory cannot be written.
pub fn write_run_json(run_dir: &Path, value: &Value) -> anyhow::Result<()> {
    let path = run_dir.join("run.json");
    let temporary = run_dir.join(".run.json.tmp");
    std::fs::write(&temporary, serde_json::to_string_pretty(value)?)
        .with_context(|| format!("cannot write {}", temporary.display()))?;
    std::fs::rename(&temporary, &path)
        .with_context(|| format!("cannot write {}", path.display()))?;
    Ok(())
}

/// The harness's identity in run.json: its process id and the kernel's start time of that
/// process (clock ticks since boot), so a reused process id is not mistaken for it.
pub fn harness_identity() -> Value {
    let pid = std::process::id();
    serde_json::json!({ "pid": pid, "start_ticks": start_ticks(pid) })
}

fn start_ticks(pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // Field 22 of stat(5); fields after the parenthesised command name start at field 3.
    stat.rsplit_once(')')?
        .1
        .split_whitespace()
        .nth(19)?
        .parse()
        .ok()
}

/// Sets run.json's `state` (and `error`, when given) in `run_dir`.
///
/// # Errors
/// run.json is missing, malformed or cannot be written.
pub fn mark(run_dir: &Path, state: &str, error: Option<&str>) -> anyhow::Result<()> {
    let path = run_dir.join("run.json");
    let text = std::fs::read_to_string(&path)
        .with_context(|| format!("cannot read {}", path.display()))?;
    let mut run: Value =
        serde_json::from_str(&text).with_context(|| format!("malformed {}", path.display()))?;
    if matches!(state, FAILED | KILLED)
        && let Some(previous) = run.get("state").cloned()
    {
        // How far it got: a run stopped while `checking` had its final reads.
        run["stopped_while"] = previous;
    }
    run["state"] = state.into();
    if let Some(error) = error {
        run["error"] = error.into();
    }
    write_run_json(run_dir, &run)
}

/// A stored run that did not finish.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unfinished {
    /// run.json's `state`.
    pub state: String,
    /// Whether the workload, final reads included, had ended (`final_reads_done` was written,
    /// or the run got to `checking`).
    pub workload_ended: bool,
}

/// What a stored run's run.json says about how it ended: `None` when it finished (or has
/// no run.json, or one from before states were recorded).
pub fn unfinished(run_dir: &Path) -> Option<Unfinished> {
    let text = std::fs::read_to_string(run_dir.join("run.json")).ok()?;
    let run: Value = serde_json::from_str(&text).ok()?;
    let state = run.get("state")?.as_str()?;
    if state == FINISHED {
        return None;
    }
    let stopped_while = run.get("stopped_while").and_then(Value::as_str);
    Some(Unfinished {
        state: state.to_owned(),
        workload_ended: state == CHECKING
            || stopped_while == Some(CHECKING)
            || run.get("final_reads_done").and_then(Value::as_bool) == Some(true),
    })
}

/// Marks `killed` every run under `results_dir` (and one level of matrix or nightly
/// directories below it) whose run.json says `running` or `checking` while its harness
/// process is gone. Returns the directories marked.
pub fn mark_killed_runs(results_dir: &Path) -> Vec<PathBuf> {
    let mut marked = Vec::new();
    for dir in subdirectories(results_dir) {
        if !dir.join("run.json").is_file() {
            // A matrix or nightly directory: its runs are one level down.
            for run in subdirectories(&dir) {
                if mark_if_killed(&run) {
                    marked.push(run);
                }
            }
        } else if mark_if_killed(&dir) {
            marked.push(dir);
        }
    }
    marked
}

fn subdirectories(dir: &Path) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter(|entry| entry.file_type().is_ok_and(|kind| kind.is_dir()))
        .map(|entry| entry.path())
        .collect()
}

fn mark_if_killed(run_dir: &Path) -> bool {
    let Ok(text) = std::fs::read_to_string(run_dir.join("run.json")) else {
        return false;
    };
    let Ok(run) = serde_json::from_str::<Value>(&text) else {
        return false;
    };
    let state = run.get("state").and_then(Value::as_str);
    if !matches!(state, Some(RUNNING | CHECKING)) || harness_alive(&run) {
        return false;
    }
    let note = format!(
        "the harness died while the run was {} (killed by a signal or the kernel); found by a \
         later run",
        state.unwrap_or_default()
    );
    mark(run_dir, KILLED, Some(&note)).is_ok()
}

fn harness_alive(run: &Value) -> bool {
    let Some(harness) = run.get("harness") else {
        return false;
    };
    let Some(pid) = harness
        .get("pid")
        .and_then(Value::as_u64)
        .and_then(|pid| u32::try_from(pid).ok())
    else {
        return false;
    };
    match (
        harness.get("start_ticks").and_then(Value::as_u64),
        start_ticks(pid),
    ) {
        (_, None) => false,
        (Some(recorded), Some(now)) => recorded == now,
        // No start time recorded: trust the process id.
        (None, Some(_)) => true,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run_with(dir: &Path, state: &str, harness: Value) {
        std::fs::create_dir_all(dir).unwrap();
        write_run_json(
            dir,
            &serde_json::json!({ "seed": 1, "state": state, "harness": harness }),
        )
        .unwrap();
    }

    #[test]
    fn runs_of_dead_harnesses_are_marked_killed_and_live_ones_are_left() {
        let results = tempfile::tempdir().unwrap();
        let dead = results.path().join("dead");
        // A process id past the kernel's maximum is never alive.
        run_with(
            &dead,
            RUNNING,
            serde_json::json!({ "pid": 4_294_967, "start_ticks": 1 }),
        );
        let alive = results.path().join("alive");
        run_with(&alive, CHECKING, harness_identity());
        let reused = results.path().join("reused");
        let mut other = harness_identity();
        other["start_ticks"] = (start_ticks(std::process::id()).unwrap() + 1).into();
        run_with(&reused, RUNNING, other);
        let done = results.path().join("done");
        run_with(&done, FINISHED, serde_json::json!({ "pid": 4_294_967 }));
        let nested = results.path().join("20260101-nightly/safe-run1");
        run_with(&nested, RUNNING, serde_json::json!({ "pid": 4_294_967 }));

        let mut marked = mark_killed_runs(results.path());
        marked.sort();
        let mut expected = vec![dead.clone(), reused.clone(), nested.clone()];
        expected.sort();
        assert_eq!(marked, expected);
        let state = |dir: &Path| unfinished(dir).map(|u| (u.state, u.workload_ended));
        assert_eq!(state(&dead), Some((KILLED.to_owned(), false)));
        assert_eq!(state(&alive), Some((CHECKING.to_owned(), true)));
        mark(&alive, KILLED, None).unwrap();
        assert_eq!(state(&alive), Some((KILLED.to_owned(), true)));
        assert_eq!(state(&done), None);
        // Killed while the nodes shut down, after the final reads: its losses stay evidence.
        let after_reads = results.path().join("after-reads");
        std::fs::create_dir_all(&after_reads).unwrap();
        write_run_json(
            &after_reads,
            &serde_json::json!({ "seed": 1, "state": RUNNING, "final_reads_done": true }),
        )
        .unwrap();
        mark(&after_reads, KILLED, None).unwrap();
        assert_eq!(state(&after_reads), Some((KILLED.to_owned(), true)));
        let text = std::fs::read_to_string(dead.join("run.json")).unwrap();
        assert!(
            text.contains("the harness died while the run was running"),
            "{text}"
        );
        assert!(!dead.join(".run.json.tmp").exists());
    }
}
