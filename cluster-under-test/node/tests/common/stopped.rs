//! SIGSTOP that returns once it has taken hold, for tests that pause a node and then expect
//! silence. kill(2) only queues the signal; until one of the process's threads takes it the
//! others run on, and on a loaded machine a worker woken by a request can answer it
//! milliseconds after `kill` returned (seen: an EndTxn answered 2 ms after SIGSTOP). The
//! harness's `lab::stopped` does the same for its faults.

use std::time::{Duration, Instant};

/// Sends SIGSTOP to `pid` and waits until every one of its threads is stopped.
pub fn stop(pid: u32) {
    signal(pid, "STOP");
    let deadline = Instant::now() + Duration::from_secs(10);
    while !all_threads_stopped(pid) {
        assert!(Instant::now() < deadline, "process {pid} did not stop");
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// Sends SIGCONT to `pid`.
pub fn resume(pid: u32) {
    signal(pid, "CONT");
}

/// `kill -<name> <pid>` (kill(1): the client's tests have no signal crate).
fn signal(pid: u32, name: &str) {
    let status = std::process::Command::new("kill")
        .arg(format!("-{name}"))
        .arg(pid.to_string())
        .status()
        .expect("kill(1) runs");
    assert!(status.success(), "kill -{name} {pid} failed");
}

/// Whether every thread of `pid` is stopped (state `T`) per `/proc/<pid>/task/*/stat`; the
/// command name may hold spaces and parentheses, so the state is read after its last `)`.
fn all_threads_stopped(pid: u32) -> bool {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return true;
    };
    tasks.flatten().all(|task| {
        std::fs::read_to_string(task.path().join("stat"))
            .ok()
            .and_then(|stat| {
                let rest = &stat[stat.rfind(')')? + 1..];
                rest.split_whitespace().next()?.chars().next()
            })
            .is_none_or(|state| matches!(state, 'T' | 't' | 'Z' | 'X'))
    })
}
