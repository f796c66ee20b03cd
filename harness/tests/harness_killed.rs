//! The harness killed (issue #20): `logjam run` SIGKILLed ten times at random moments across
//! its phases (starting the node, mid-workload, while a fault is in force, in the final reads
//! and the check). After each kill: no node process, network or mount namespace of the dead
//! harness is left, nothing under the results is mounted, run.json is whole and says the run
//! did not finish, the history reads up to its torn tail, `logjam check` judges that prefix
//! (or says there is none), and the next `logjam run` in the same results directory has
//! nothing to sweep and marks the dead run `killed`.

mod support;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use logjam_history::HistoryReader;
use serde_json::Value;

/// When a kill lands.
#[derive(Debug, Clone, Copy)]
enum Moment {
    /// While the node starts (before or around the history's creation).
    Starting,
    /// Mid-workload, faults or not.
    Workload,
    /// While a kill or pause fault is in force.
    Fault,
    /// Once the final reads began: final phase or check.
    Final,
}

const MOMENTS: [Moment; 10] = [
    Moment::Starting,
    Moment::Workload,
    Moment::Fault,
    Moment::Final,
    Moment::Starting,
    Moment::Fault,
    Moment::Workload,
    Moment::Final,
    Moment::Fault,
    Moment::Starting,
];

/// A small seeded generator (xorshift), so a failure names the seed that replays the moments.
struct Rng(u64);

impl Rng {
    fn below(&mut self, bound: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % bound.max(1)
    }
}

fn logjam() -> Command {
    Command::new(env!("CARGO_BIN_EXE_logjam"))
}

fn start_run(results: &Path, node: &Path, seed: u64) -> Child {
    logjam()
        .arg("run")
        .arg("--results-dir")
        .arg(results)
        .arg("--node-binary")
        .arg(node)
        .args(["--nodes", "1", "--set", "replication.factor=1"])
        .args([
            "--nemesis",
            "kill,pause,disk-full",
            "--nemesis-interval",
            "1",
        ])
        .args(["--time-limit", "5", "--rate", "200"])
        .args(["--seed", &seed.to_string()])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("logjam runs")
}

/// Run directories under `results`, oldest first (their names start with a timestamp).
fn run_dirs(results: &Path) -> Vec<PathBuf> {
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(results)
        .unwrap()
        .filter_map(Result::ok)
        .map(|entry| entry.path())
        .filter(|path| path.join("run.json").is_file())
        .collect();
    dirs.sort();
    dirs
}

fn complete_lines(path: &Path) -> Vec<Value> {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    text.split_inclusive('\n')
        .filter(|line| line.ends_with('\n'))
        .filter_map(|line| serde_json::from_str(line).ok())
        .collect()
}

fn fault_in_force(history: &[Value]) -> bool {
    let count = |names: &[&str]| {
        history
            .iter()
            .filter(|op| op["process"] == "nemesis" && op["type"] == "info")
            .filter(|op| names.iter().any(|name| op["f"] == *name))
            .count()
    };
    count(&["kill", "pause", "disk-full"]) > count(&["restart", "resume", "disk-free"])
}

fn is_final(history: &[Value]) -> bool {
    history.iter().any(|op| op["f"] == "final-poll")
}

/// Processes whose command line names `logjam-node` and a path under `dir`.
fn node_pids_under(dir: &Path) -> Vec<i32> {
    let needle = dir.to_string_lossy().to_string();
    std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(|entry| {
            let entry = entry.ok()?;
            let pid = entry.file_name().to_str()?.parse::<i32>().ok()?;
            let cmdline = std::fs::read(entry.path().join("cmdline")).ok()?;
            let cmdline = String::from_utf8_lossy(&cmdline).replace('\0', " ");
            (cmdline.contains("logjam-node") && cmdline.contains(&needle)).then_some(pid)
        })
        .collect()
}

/// The namespace links (`net:[4026...]`) of a process.
fn namespaces_of(pid: i32) -> Vec<String> {
    ["net", "mnt"]
        .iter()
        .filter_map(|kind| std::fs::read_link(format!("/proc/{pid}/ns/{kind}")).ok())
        .map(|link| link.to_string_lossy().into_owned())
        .collect()
}

/// Processes anywhere on the machine inside one of `namespaces`.
fn holders_of(namespaces: &[String]) -> Vec<i32> {
    std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(|entry| entry.ok()?.file_name().to_str()?.parse::<i32>().ok())
        .filter(|pid| {
            namespaces_of(*pid)
                .iter()
                .any(|namespace| namespaces.contains(namespace))
        })
        .collect()
}

fn wait_for(what: &str, within: Duration, mut condition: impl FnMut() -> bool) {
    let deadline = Instant::now() + within;
    while !condition() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Waits (polling every 2 ms, up to 90 s) until `ready` holds for the history of the run
/// that is not among `before`, or the harness exits; returns false when it exited first.
fn wait_for_history(
    child: &mut Child,
    results: &Path,
    before: &[PathBuf],
    ready: impl Fn(&[Value]) -> bool,
) -> bool {
    let deadline = Instant::now() + Duration::from_secs(90);
    let mut seen = 0;
    loop {
        if child.try_wait().unwrap().is_some() {
            eprintln!("the run ended after {seen} history lines were seen");
            return false;
        }
        // Two runs may start within the same second: tell this one by what was there before.
        let newest = run_dirs(results)
            .into_iter()
            .find(|dir| !before.contains(dir));
        if let Some(dir) = newest {
            let history = complete_lines(&dir.join("history.jsonl"));
            seen = history.len();
            if ready(&history) {
                return true;
            }
        }
        assert!(
            Instant::now() < deadline,
            "the run never reached its moment"
        );
        std::thread::sleep(Duration::from_millis(2));
    }
}

/// Runs until `moment` plus a random delay, then SIGKILLs the harness. Returns the dead run's
/// directory and the namespaces its harness and node lived in, or `None` when the run ended
/// before the kill landed.
fn kill_at(
    moment: Moment,
    rng: &mut Rng,
    results: &Path,
    node: &Path,
    before: &[PathBuf],
) -> Option<(PathBuf, Vec<String>)> {
    let mut child = start_run(results, node, rng.below(1 << 32) + 1);
    let reached = match moment {
        Moment::Starting => true,
        Moment::Workload => wait_for_history(&mut child, results, before, |h| h.len() > 20),
        Moment::Fault => wait_for_history(&mut child, results, before, fault_in_force),
        Moment::Final => wait_for_history(&mut child, results, before, is_final),
    };
    let delay = match moment {
        Moment::Starting => 100 + rng.below(1500),
        Moment::Workload => rng.below(2000),
        Moment::Fault => rng.below(200),
        // The final reads, the shutdown and the check of a 5 s run take under 100 ms on a
        // fast machine: a kill must land within a few milliseconds of the first final-poll.
        Moment::Final => rng.below(25),
    };
    let mut namespaces = Vec::new();
    let deadline = Instant::now() + Duration::from_millis(delay);
    // Note the harness's and the node's namespaces as they appear (the harness enters its
    // sandbox first thing; a fault may restart the node meanwhile).
    // At least once, even when the delay is shorter than one look.
    if reached {
        loop {
            let harness = child.id() as i32;
            for pid in node_pids_under(results).into_iter().chain([harness]) {
                for namespace in namespaces_of(pid) {
                    if !namespaces.contains(&namespace) {
                        namespaces.push(namespace);
                    }
                }
            }
            if Instant::now() >= deadline {
                break;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
    }
    let killed = reached
        && child.try_wait().unwrap().is_none()
        && nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(child.id() as i32),
            nix::sys::signal::Signal::SIGKILL,
        )
        .is_ok();
    let status = child.wait().unwrap();
    let run = run_dirs(results)
        .into_iter()
        .find(|dir| !before.contains(dir));
    if !killed || status.code().is_some() {
        eprintln!("{moment:?}: the run ended ({status}) before the kill; trying again");
        return None;
    }
    let Some(run) = run else {
        // Killed before it made its directory: nothing to judge, but nothing may be left.
        assert!(node_pids_under(results).is_empty());
        eprintln!("{moment:?}: killed before the run directory existed; trying again");
        return None;
    };
    // The signal can land after the run wrote `finished` (the harness was only exiting):
    // that run ended before the kill, and a kill of a finished run is not what this tests.
    let finished = std::fs::read_to_string(run.join("run.json"))
        .ok()
        .and_then(|text| serde_json::from_str::<Value>(&text).ok())
        .is_some_and(|run_json| run_json["state"] == "finished");
    if finished {
        eprintln!("{moment:?}: the run had finished when the kill landed; trying again");
        wait_for("the node processes to die", Duration::from_secs(10), || {
            node_pids_under(results).is_empty()
        });
        return None;
    }
    // The harness's own namespaces (the net namespace of the sandbox, its mount namespace)
    // are told apart from the test's by comparing with ours.
    let ours = namespaces_of(std::process::id() as i32);
    namespaces.retain(|namespace| !ours.contains(namespace));
    Some((run, namespaces))
}

/// What a killed run must leave: nothing running, a whole run.json saying it did not finish,
/// a history readable to its torn tail, and a check that judges the prefix.
fn assert_left_clean_and_judgeable(
    moment: Moment,
    results: &Path,
    run: &Path,
    namespaces: &[String],
) {
    wait_for("the node processes to die", Duration::from_secs(10), || {
        node_pids_under(results).is_empty()
    });
    // Past the start, the harness certainly ran in a sandbox of its own (network and mount
    // namespaces, the disks' FUSE mounts in the latter).
    assert!(
        matches!(moment, Moment::Starting) || namespaces.len() >= 2,
        "the sandbox's namespaces were seen: {namespaces:?}"
    );
    wait_for(
        "the dead harness's namespaces to go",
        Duration::from_secs(10),
        || holders_of(namespaces).is_empty(),
    );
    let mounts = std::fs::read_to_string("/proc/self/mountinfo").unwrap();
    assert!(
        !mounts.contains(&*results.to_string_lossy()),
        "nothing under the results is mounted: {mounts}"
    );

    let run_json: Value =
        serde_json::from_str(&std::fs::read_to_string(run.join("run.json")).unwrap())
            .expect("run.json is whole");
    let state = run_json["state"].as_str().unwrap_or_default().to_owned();
    assert!(
        state == "running" || state == "checking",
        "run.json says the run did not finish: {run_json}"
    );

    let history = run.join("history.jsonl");
    let has_header = !complete_lines(&history).is_empty();
    let ops = if has_header {
        let mut reader = HistoryReader::open(&history).expect("the history's header reads");
        let mut ops = 0;
        for op in reader.by_ref() {
            match op {
                Ok(_) => ops += 1,
                Err(error) => assert!(error.is_torn_tail(), "{}: {error}", history.display()),
            }
        }
        ops
    } else {
        0
    };

    let output = logjam().arg("check").arg(run).output().unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    let explain = format!("{}\n{stdout}\n{stderr}", run.display());
    if has_header {
        // kill, pause and a full disk on one node lose nothing acknowledged: a prefix of such a run is
        // valid, or unknown where the history cannot prove either way; never invalid.
        assert!(
            matches!(output.status.code(), Some(0 | 2)),
            "the prefix ({ops} ops) is judged: {explain}"
        );
        assert!(stdout.contains("the run did not finish"), "{explain}");
        let report = std::fs::read_to_string(run.join("report.json")).unwrap();
        assert!(report.contains("the run did not finish"), "{report}");
    } else {
        assert_eq!(output.status.code(), Some(3), "{explain}");
        assert!(stderr.contains("the run did not finish"), "{explain}");
    }
}

#[test]
fn sigkill_at_random_moments_leaves_a_judgeable_prefix_and_a_clean_machine() {
    let seed = std::env::var("LOGJAM_KILL_SEED")
        .ok()
        .and_then(|seed| seed.parse().ok())
        .unwrap_or_else(|| {
            SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .unwrap()
                .as_nanos() as u64
                | 1
        });
    eprintln!("moments from LOGJAM_KILL_SEED={seed}");
    let mut rng = Rng(seed);
    let node = support::node_binary();
    let results = tempfile::tempdir().unwrap();
    let mut killed: Vec<PathBuf> = Vec::new();
    for (i, moment) in MOMENTS.iter().enumerate() {
        let mut attempts = 0;
        let (run, namespaces) = loop {
            attempts += 1;
            assert!(attempts <= 5, "kill {i} ({moment:?}) never landed");
            let before = run_dirs(results.path());
            if let Some(found) = kill_at(*moment, &mut rng, results.path(), &node, &before) {
                break found;
            }
        };
        eprintln!("kill {i} ({moment:?}) in {}", run.display());
        assert_left_clean_and_judgeable(*moment, results.path(), &run, &namespaces);
        killed.push(run);
    }

    // The next run: nothing to sweep, every dead run marked, and it ends with a verdict.
    let output = logjam()
        .arg("run")
        .arg("--results-dir")
        .arg(results.path())
        .arg("--node-binary")
        .arg(&node)
        .args(["--nodes", "1", "--set", "replication.factor=1"])
        .args(["--nemesis", "none", "--time-limit", "2"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(0), "{stderr}");
    assert!(
        !stderr.contains("left behind by a harness that died"),
        "no node outlived its harness: {stderr}"
    );
    for run in &killed {
        let run_json = std::fs::read_to_string(run.join("run.json")).unwrap();
        assert!(
            run_json.contains("\"state\": \"killed\""),
            "{}: {run_json}",
            run.display()
        );
    }
}
