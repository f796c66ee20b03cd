//! Waiting until a SIGSTOP has taken hold. kill(2) only queues the signal: the group stop
//! begins when one of the process's threads takes it, and until then the others run on. On
//! a loaded machine a worker woken by a request can answer it milliseconds after `kill`
//! returned, so a pause that a fault's timeline (or a test) relies on waits for every thread
//! of every process to be stopped, as `/proc/<pid>/task/<tid>/stat` says.

use std::path::Path;
use std::time::{Duration, Instant};

/// How long a stop may take before it is an error (a process that ignores SIGSTOP cannot
/// exist; one that takes this long is a machine in trouble).
const PATIENCE: Duration = Duration::from_secs(10);

/// Waits until every process of process group `group` is stopped (or gone).
///
/// # Errors
/// Some thread still runs after ten seconds.
pub fn wait_group_stopped(group: i32) -> anyhow::Result<()> {
    wait(|| {
        let mut all = true;
        for pid in group_members(group) {
            all &= process_stopped(pid);
        }
        all
    })
    .map_err(|()| anyhow::anyhow!("process group {group} did not stop within {PATIENCE:?}"))
}

/// Waits until every thread of process `pid` is stopped (or the process is gone).
///
/// # Errors
/// Some thread still runs after ten seconds.
pub fn wait_stopped(pid: i32) -> anyhow::Result<()> {
    wait(|| process_stopped(pid))
        .map_err(|()| anyhow::anyhow!("process {pid} did not stop within {PATIENCE:?}"))
}

fn wait(mut done: impl FnMut() -> bool) -> Result<(), ()> {
    let deadline = Instant::now() + PATIENCE;
    loop {
        if done() {
            return Ok(());
        }
        if Instant::now() >= deadline {
            return Err(());
        }
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// Whether every thread of `pid` is stopped; a process that is gone (or a zombie) counts.
fn process_stopped(pid: i32) -> bool {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return true;
    };
    tasks.flatten().all(|task| match stat_fields(&task.path()) {
        Some((state, _)) => matches!(state, 'T' | 't' | 'Z' | 'X'),
        None => true,
    })
}

/// The processes whose process group is `group`.
fn group_members(group: i32) -> Vec<i32> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter_map(|entry| entry.file_name().to_str()?.parse::<i32>().ok())
        .filter(|pid| {
            stat_fields(Path::new(&format!("/proc/{pid}"))).is_some_and(|(_, pgrp)| pgrp == group)
        })
        .collect()
}

/// (state, process group) from `<dir>/stat`. The command name may hold spaces and
/// parentheses, so the fields are read after its last `)`.
fn stat_fields(dir: &Path) -> Option<(char, i32)> {
    let stat = std::fs::read_to_string(dir.join("stat")).ok()?;
    let rest = &stat[stat.rfind(')')? + 1..];
    let mut fields = rest.split_whitespace();
    let state = fields.next()?.chars().next()?;
    let _ppid = fields.next()?;
    let pgrp = fields.next()?.parse().ok()?;
    Some((state, pgrp))
}

#[cfg(test)]
mod tests {
    use super::*;
    use nix::sys::signal::{Signal, kill};
    use nix::unistd::Pid;

    #[test]
    fn a_stopped_process_is_seen_stopped_and_a_running_one_is_not() {
        let mut child = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .unwrap();
        let pid = child.id() as i32;
        assert!(!process_stopped(pid), "a sleeping process is not stopped");
        kill(Pid::from_raw(pid), Signal::SIGSTOP).unwrap();
        wait_stopped(pid).unwrap();
        assert!(process_stopped(pid));
        kill(Pid::from_raw(pid), Signal::SIGCONT).unwrap();
        child.kill().unwrap();
        child.wait().unwrap();
        assert!(process_stopped(pid), "a reaped process counts as stopped");
    }

    #[test]
    fn the_fields_are_read_after_a_command_name_with_parentheses() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("stat"), "42 (a) b (c) T 1 77 77 0 -1\n").unwrap();
        assert_eq!(stat_fields(dir.path()), Some(('T', 77)));
    }
}
