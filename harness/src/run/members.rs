//! The run's member pool: consumer-group members as OS processes (`logjam member`, see
//! `member.rs`) in the group [`GROUP`], subscribed to the workload's topic for the whole
//! workload phase. The nemesis pauses (SIGSTOP: a GC pause), kills, stops and restarts them;
//! each member's stdout events and every member fault go to `members.jsonl` in the run
//! directory, stamped with the wall clock, so they line up with the nodes' logs.
//!
//! After the run, [`report`] reads what the coordinators logged about the group
//! (`rebalances.rs`) and writes `rebalances.json`: every rebalance with its cause, the counts
//! of those that started after the group had settled, the offsets the members committed and
//! the group's committed offsets at the end.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use anyhow::Context;
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};

use crate::cli::MemberOptions;
use crate::rebalances::{self, EventKind, GroupEvent};

/// The pool's consumer group.
pub(crate) const GROUP: &str = "logjam-members";

/// How long a stopped member may take to close (LeaveGroup) before it is killed.
const STOP_GRACE: Duration = Duration::from_secs(8);

/// Between two members of a rolling restart: long enough for the restarted one to rejoin.
pub(crate) const ROLLING_GAP: Duration = Duration::from_secs(4);

/// Milliseconds since the Unix epoch.
pub(crate) fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

/// One member process.
struct Member {
    name: String,
    child: Option<Child>,
    paused: bool,
}

/// The pool.
pub(crate) struct MemberPool {
    command: Vec<String>,
    options: MemberOptions,
    members: Vec<Member>,
    log: Arc<Mutex<std::fs::File>>,
    /// When the workload phase (and the pool) started, ms since the Unix epoch.
    pub(crate) started_ms: i64,
}

impl MemberPool {
    /// Starts `options.members` members against `bootstrap`, subscribed to `topic`, logging
    /// to `run_dir/members.jsonl`.
    ///
    /// # Errors
    /// The log cannot be created or a member cannot be spawned.
    pub(crate) fn start(
        options: &MemberOptions,
        bootstrap: &str,
        topic: &str,
        run_dir: &Path,
    ) -> anyhow::Result<MemberPool> {
        let exe = std::env::current_exe().context("cannot find the logjam executable")?;
        let mut command = vec![
            exe.to_string_lossy().into_owned(),
            "member".to_owned(),
            "--bootstrap".to_owned(),
            bootstrap.to_owned(),
            "--group".to_owned(),
            GROUP.to_owned(),
            "--topic".to_owned(),
            topic.to_owned(),
            "--process-ms".to_owned(),
            options.member_process_ms.to_string(),
        ];
        for setting in &options.member_set {
            command.extend(["--set".to_owned(), setting.clone()]);
        }
        let path = run_dir.join("members.jsonl");
        let log = std::fs::File::create(&path)
            .with_context(|| format!("cannot create {}", path.display()))?;
        let mut pool = MemberPool {
            command,
            options: options.clone(),
            members: (1..=options.members)
                .map(|i| Member {
                    name: format!("m{i}"),
                    child: None,
                    paused: false,
                })
                .collect(),
            log: Arc::new(Mutex::new(log)),
            started_ms: now_ms(),
        };
        for index in 0..pool.members.len() {
            pool.spawn(index)?;
        }
        Ok(pool)
    }

    /// The members' names (`m1`, ...).
    pub(crate) fn names(&self) -> Vec<String> {
        self.members.iter().map(|m| m.name.clone()).collect()
    }

    fn spawn(&mut self, index: usize) -> anyhow::Result<()> {
        let name = self.members[index].name.clone();
        let mut command = Command::new(&self.command[0]);
        command.args(&self.command[1..]);
        if self.options.static_members {
            command.args(["--set", &format!("group.instance.id=logjam-{name}")]);
        }
        command
            .args(["--set", &format!("client.id=logjam-{name}")])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .kill_on_drop(true);
        // A member exits when its harness is gone (it watches its parent); one left paused
        // by a killed harness is swept by the next run (`lab::sweep_leftovers`).
        let mut child = command
            .spawn()
            .with_context(|| format!("cannot start member {name}"))?;
        let stdout = child.stdout.take().context("member stdout")?;
        let log = self.log.clone();
        let member = name.clone();
        tokio::spawn(async move {
            let mut lines = BufReader::new(stdout).lines();
            while let Ok(Some(line)) = lines.next_line().await {
                let Ok(mut event) = serde_json::from_str::<Value>(&line) else {
                    continue;
                };
                event["member"] = json!(member);
                event["at_ms"] = json!(now_ms());
                write_line(&log, &event);
            }
        });
        self.note(json!({"event": "started", "member": name}));
        self.members[index].child = Some(child);
        self.members[index].paused = false;
        Ok(())
    }

    /// Writes a lab event (a member or node fault) into `members.jsonl`.
    pub(crate) fn note(&self, mut event: Value) {
        event["at_ms"] = json!(now_ms());
        write_line(&self.log, &event);
    }

    fn pid(&self, index: usize) -> Option<Pid> {
        self.members[index]
            .child
            .as_ref()
            .and_then(Child::id)
            .map(|id| Pid::from_raw(id as i32))
    }

    /// SIGSTOP: the member says nothing until resumed, its connections open.
    pub(crate) fn pause(&mut self, index: usize) -> anyhow::Result<()> {
        let pid = self.pid(index).context("member is not running")?;
        kill(pid, Signal::SIGSTOP)?;
        self.members[index].paused = true;
        crate::lab::stopped::wait_stopped(pid.as_raw())?;
        self.note(json!({"event": "paused", "member": self.members[index].name}));
        Ok(())
    }

    /// SIGCONT of every paused member; returns their names.
    pub(crate) fn resume_all(&mut self) -> Vec<String> {
        let mut resumed = Vec::new();
        for index in 0..self.members.len() {
            if self.members[index].paused
                && let Some(pid) = self.pid(index)
            {
                let _ = kill(pid, Signal::SIGCONT);
                self.members[index].paused = false;
                resumed.push(self.members[index].name.clone());
            }
        }
        for name in &resumed {
            self.note(json!({"event": "resumed", "member": name}));
        }
        resumed
    }

    /// SIGKILL: gone without a word (no LeaveGroup).
    pub(crate) async fn kill(&mut self, index: usize) -> anyhow::Result<()> {
        let mut child = self.members[index]
            .child
            .take()
            .context("member is not running")?;
        let _ = child.start_kill();
        let _ = child.wait().await;
        self.note(json!({"event": "killed", "member": self.members[index].name}));
        Ok(())
    }

    /// SIGTERM and wait: the member closes as an application would (a dynamic member leaves
    /// the group, a static one does not), killed if it takes longer than [`STOP_GRACE`].
    pub(crate) async fn stop(&mut self, index: usize) -> anyhow::Result<()> {
        if self.members[index].paused {
            self.resume_all();
        }
        let pid = self.pid(index).context("member is not running")?;
        let mut child = self.members[index].child.take().context("not running")?;
        let _ = kill(pid, Signal::SIGTERM);
        if tokio::time::timeout(STOP_GRACE, child.wait())
            .await
            .is_err()
        {
            let _ = child.start_kill();
            let _ = child.wait().await;
        }
        self.note(json!({"event": "stopped", "member": self.members[index].name}));
        Ok(())
    }

    /// Starts every member that is not running; returns their names.
    pub(crate) fn start_stopped(&mut self) -> anyhow::Result<Vec<String>> {
        let mut started = Vec::new();
        for index in 0..self.members.len() {
            if self.members[index].child.is_none() {
                self.spawn(index)?;
                started.push(self.members[index].name.clone());
            }
        }
        Ok(started)
    }

    /// Stops and starts `index` again at once (a deploy's restart of one instance).
    pub(crate) async fn restart(&mut self, index: usize) -> anyhow::Result<()> {
        self.stop(index).await?;
        self.spawn(index)
    }

    /// Ends the pool: resumes, stops (LeaveGroup) and reaps every member.
    pub(crate) async fn shutdown(&mut self) {
        self.resume_all();
        for index in 0..self.members.len() {
            if self.members[index].child.is_some() {
                let _ = self.stop(index).await;
            }
        }
    }

    /// The options it runs with.
    pub(crate) fn options(&self) -> &MemberOptions {
        &self.options
    }
}

fn write_line(log: &Mutex<std::fs::File>, event: &Value) {
    if let Ok(mut file) = log.lock() {
        let _ = writeln!(file, "{event}");
    }
}

/// What `rebalances.json` holds and the summary says.
#[derive(Debug, Clone, serde::Serialize)]
pub(crate) struct RebalanceReport {
    /// The group.
    pub(crate) group: String,
    /// Rebalances before this (ms since the Unix epoch) are the group forming.
    pub(crate) settled_at_ms: i64,
    /// Every event the coordinators logged about the group.
    pub(crate) events: Vec<GroupEvent>,
    /// Rebalances that started after the group settled, per cause.
    pub(crate) causes_after_settle: BTreeMap<String, usize>,
    /// Loads of the group by a new coordinator after it settled.
    pub(crate) loads_after_settle: usize,
    /// The members' lab events (pauses, kills, restarts), in order.
    pub(crate) member_faults: Vec<Value>,
    /// Per partition, the highest offset a member's commit was acknowledged for before the
    /// first node fault aimed at the group's coordinator (none without such a fault).
    pub(crate) committed_before_coordinator_fault: BTreeMap<i32, i64>,
    /// After that fault, each partition a member was assigned anew and the first offset it
    /// then read there: (member, partition, offset).
    pub(crate) resumed_after_coordinator_fault: Vec<(String, i32, i64)>,
    /// The group's committed offsets after the run (OffsetFetch).
    pub(crate) committed_at_end: BTreeMap<i32, i64>,
    /// Whether every member that took a partition over after the coordinator fault started at
    /// or past the offset committed before it, and the end's offsets are no lower; none when
    /// no member took a partition over after such a fault (nothing proven either way).
    pub(crate) offsets_survive: Option<bool>,
}

/// Reads the nodes' logs under `run_dir` (`<node>/node.log`) and `members.jsonl`, writes
/// `rebalances.json`, and returns the report.
///
/// # Errors
/// `rebalances.json` cannot be written.
pub(crate) fn report(
    run_dir: &Path,
    node_dirs: &[(String, PathBuf)],
    window: (i64, i64),
    settle: Duration,
    committed_at_end: BTreeMap<i32, i64>,
) -> anyhow::Result<RebalanceReport> {
    let (started_ms, ended_ms) = window;
    let mut events: Vec<GroupEvent> = Vec::new();
    for (name, dir) in node_dirs {
        let text = std::fs::read_to_string(dir.join("node.log")).unwrap_or_default();
        events.extend(rebalances::parse_log(name, &text, GROUP));
    }
    events.sort_by_key(|e| e.at_ms);
    let settled_at_ms = started_ms + i64::try_from(settle.as_millis()).unwrap_or(i64::MAX);
    // Members leaving when the pool shuts down are not what the run did.
    let after: Vec<GroupEvent> = events
        .iter()
        .filter(|e| e.at_ms >= settled_at_ms && e.at_ms < ended_ms)
        .cloned()
        .collect();
    let lines: Vec<Value> = std::fs::read_to_string(run_dir.join("members.jsonl"))
        .unwrap_or_default()
        .lines()
        .filter_map(|line| serde_json::from_str::<Value>(line).ok())
        .collect();
    let committed_before_coordinator_fault = committed_before_coordinator_fault(&lines);
    let resumed = resumed_after_coordinator_fault(&lines);
    // Proven only by a member that took a partition over after the fault: its first record
    // there is where the group's committed offset sent it.
    let offsets_survive = (!resumed.is_empty()).then(|| {
        resumed.iter().all(|(_, partition, first)| {
            committed_before_coordinator_fault
                .get(partition)
                .is_none_or(|committed| first >= committed)
        }) && committed_before_coordinator_fault
            .iter()
            .all(|(partition, offset)| committed_at_end.get(partition) >= Some(offset))
    });
    let member_faults = lines
        .into_iter()
        .filter(|e| {
            matches!(
                e["event"].as_str(),
                Some(
                    "paused"
                        | "resumed"
                        | "killed"
                        | "stopped"
                        | "started"
                        | "node-fault"
                        | "partitions-added"
                )
            )
        })
        .collect();
    let report = RebalanceReport {
        group: GROUP.to_owned(),
        settled_at_ms,
        causes_after_settle: rebalances::causes(&after),
        loads_after_settle: after.iter().filter(|e| e.kind == EventKind::Loaded).count(),
        events,
        member_faults,
        committed_before_coordinator_fault,
        resumed_after_coordinator_fault: resumed,
        committed_at_end,
        offsets_survive,
    };
    std::fs::write(
        run_dir.join("rebalances.json"),
        serde_json::to_string_pretty(&report)?,
    )?;
    Ok(report)
}

/// Per partition, the highest acknowledged commit before the first node fault on the
/// coordinator, from `members.jsonl`'s lines in order.
fn committed_before_coordinator_fault(lines: &[Value]) -> BTreeMap<i32, i64> {
    let mut committed = BTreeMap::new();
    for line in lines {
        if line["event"] == "node-fault" && line["coordinator"] == true {
            return committed;
        }
        if line["event"] == "committed"
            && let Some(offsets) = line["offsets"].as_object()
        {
            for (partition, offset) in offsets {
                if let (Ok(partition), Some(offset)) = (partition.parse::<i32>(), offset.as_i64()) {
                    let best = committed.entry(partition).or_insert(offset);
                    *best = (*best).max(offset);
                }
            }
        }
    }
    BTreeMap::new()
}

/// After the first node fault on the coordinator: each partition a member's rebalance
/// assigned it, with the first offset its next poll of that partition read.
fn resumed_after_coordinator_fault(lines: &[Value]) -> Vec<(String, i32, i64)> {
    let mut after = false;
    let mut pending: BTreeMap<String, Vec<i32>> = BTreeMap::new();
    let mut resumed = Vec::new();
    for line in lines {
        if line["event"] == "node-fault" && line["coordinator"] == true {
            after = true;
        }
        let member = line["member"].as_str().unwrap_or_default().to_owned();
        if !after {
            continue;
        }
        match line["event"].as_str() {
            Some("rebalance") => {
                let assigned = line["assigned"].as_array().into_iter().flatten();
                pending.entry(member).or_default().extend(
                    assigned.filter_map(|p| p.as_i64().and_then(|p| i32::try_from(p).ok())),
                );
            }
            Some("polled") => {
                let Some(ranges) = line["partitions"].as_object() else {
                    continue;
                };
                let waiting = pending.entry(member.clone()).or_default();
                for (partition, range) in ranges {
                    let (Ok(partition), Some(first)) =
                        (partition.parse::<i32>(), range[0].as_i64())
                    else {
                        continue;
                    };
                    if let Some(at) = waiting.iter().position(|p| *p == partition) {
                        waiting.remove(at);
                        resumed.push((member.clone(), partition, first));
                    }
                }
            }
            _ => {}
        }
    }
    resumed
}

impl RebalanceReport {
    /// The summary's lines.
    pub(crate) fn summary(&self) -> String {
        let causes = if self.causes_after_settle.is_empty() {
            "none".to_owned()
        } else {
            self.causes_after_settle
                .iter()
                .map(|(cause, n)| format!("{n} {cause}"))
                .collect::<Vec<_>>()
                .join(", ")
        };
        let offsets = match self.offsets_survive {
            None => String::new(),
            Some(true) => format!(
                "; offsets committed before the coordinator fault survived ({} partition(s) \
                 taken over after it, each from its committed offset or later)",
                self.resumed_after_coordinator_fault.len()
            ),
            Some(false) => format!(
                "; OFFSETS LOST: committed before the coordinator fault {:?}, at the end {:?}",
                self.committed_before_coordinator_fault, self.committed_at_end
            ),
        };
        format!(
            "group {}: rebalances after the group settled: {causes}; loads by a new \
             coordinator: {}; {} rebalance(s) in all{offsets}\n",
            self.group,
            self.loads_after_settle,
            self.events
                .iter()
                .filter(|e| e.kind == EventKind::Rebalance)
                .count()
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lines(text: &str) -> Vec<Value> {
        text.lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    }

    #[test]
    fn takeovers_after_the_coordinator_fault_are_judged_against_earlier_commits() {
        let log = lines(concat!(
            r#"{"event":"committed","member":"m1","offsets":{"0":40,"1":7}}"#,
            "\n",
            r#"{"event":"committed","member":"m2","offsets":{"1":9}}"#,
            "\n",
            r#"{"event":"polled","member":"m1","partitions":{"0":[40,41]}}"#,
            "\n",
            r#"{"event":"node-fault","fault":"kill","nodes":["n2"],"coordinator":true}"#,
            "\n",
            r#"{"event":"committed","member":"m1","offsets":{"0":99}}"#,
            "\n",
            r#"{"event":"rebalance","member":"m2","assigned":[0,1],"revoked":[]}"#,
            "\n",
            r#"{"event":"polled","member":"m2","partitions":{"0":[0,5],"1":[9,12]}}"#,
            "\n",
            r#"{"event":"polled","member":"m2","partitions":{"0":[6,8]}}"#,
        ));
        assert_eq!(
            committed_before_coordinator_fault(&log),
            BTreeMap::from([(0, 40), (1, 9)]),
            "the highest acknowledged commit per partition, before the fault only"
        );
        assert_eq!(
            resumed_after_coordinator_fault(&log),
            [("m2".to_owned(), 0, 0), ("m2".to_owned(), 1, 9)],
            "the first poll after each new assignment only"
        );
    }

    #[test]
    fn without_a_coordinator_fault_nothing_counts_as_committed_before_it() {
        let log = lines(r#"{"event":"committed","member":"m1","offsets":{"0":40}}"#);
        assert!(committed_before_coordinator_fault(&log).is_empty());
        assert!(resumed_after_coordinator_fault(&log).is_empty());
    }
}
