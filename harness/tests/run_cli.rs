//! `logjam run` end to end through the real binaries: a short run with kill and pause faults
//! against a real node process stores a complete, well-formed run whose every fault has its
//! undo, and gets a verdict; Ctrl-C leaves no node process behind.

mod support;

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use logjam_history::{Function, HistoryReader, Op, Process};

fn logjam_run(results: &Path, extra: &[&str]) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_logjam"));
    command
        .arg("run")
        .arg("--results-dir")
        .arg(results)
        .arg("--node-binary")
        .arg(support::node_binary())
        .args([
            "--nodes",
            "1",
            "--set",
            "replication.factor=1",
            "--seed",
            "7",
        ])
        .args(extra);
    command
}

fn read_history(path: &Path) -> Vec<Op> {
    let reader = HistoryReader::open(path).expect("history opens");
    assert_eq!(reader.header().workload, "queue");
    reader
        .map(|op| op.expect("every line is well formed"))
        .collect()
}

#[test]
fn short_run_with_kill_and_pause_stores_a_checked_run() {
    let results = tempfile::tempdir().unwrap();
    let output = logjam_run(
        results.path(),
        &[
            "--time-limit",
            "8",
            "--nemesis",
            "kill,pause",
            "--nemesis-interval",
            "1",
            "--rate",
            "200",
        ],
    )
    .output()
    .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(
        output.status.code(),
        Some(0),
        "kill -9 and pause lose nothing (the page cache survives a process crash)\n{stdout}\n{stderr}"
    );

    let run = results.path().join("latest");
    for file in [
        "run.json",
        "history.jsonl",
        "report.json",
        "summary.txt",
        "n1/node.log",
        "n1/server.properties",
    ] {
        assert!(
            run.join(file).is_file(),
            "{file} missing from the stored run"
        );
    }
    let run_json = std::fs::read_to_string(run.join("run.json")).unwrap();
    assert!(
        run_json.contains("logjam run --seed 7"),
        "run.json has the replay command: {run_json}"
    );

    let ops = read_history(&run.join("history.jsonl"));
    assert!(
        ops.windows(2)
            .all(|pair| pair[0].index < pair[1].index && pair[0].time_ns <= pair[1].time_ns)
    );
    let faults: Vec<&Op> = ops
        .iter()
        .filter(|op| op.process == Process::Nemesis && op.f.as_str() != "leader-change")
        .collect();
    assert!(
        faults.len() >= 4,
        "at least two faults with their undos: {}",
        faults.len()
    );
    // Every fault is followed by its undo on the same target before the next fault.
    for pair in faults.chunks(2) {
        let [fault, undo] = pair else {
            panic!("a fault without its undo: {:?}", pair[0])
        };
        let expected = match fault.f {
            Function::Kill => Function::Restart,
            Function::Pause => Function::Resume,
            ref other => panic!("unexpected fault {other:?}"),
        };
        assert_eq!(undo.f, expected);
        let (fault, undo) = (support::value(fault), support::value(undo));
        assert_eq!(
            fault["targets"], undo["targets"],
            "the undo targets the faulted node"
        );
        if expected == Function::Restart {
            assert_eq!(undo["started"], fault["targets"], "the restart started it");
        }
    }
    let final_polls = ops.iter().filter(|op| op.f == Function::FinalPoll).count();
    assert!(final_polls > 0, "the final phase read the partitions back");
    let report = std::fs::read_to_string(run.join("report.json")).unwrap();
    assert!(report.contains("\"verdict\": \"valid\""), "{report}");
}

fn node_processes_under(dir: &Path) -> Vec<String> {
    let needle = dir.to_string_lossy().to_string();
    std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(|entry| {
            let cmdline = std::fs::read(entry.ok()?.path().join("cmdline")).ok()?;
            let cmdline = String::from_utf8_lossy(&cmdline).replace('\0', " ");
            (cmdline.contains("logjam-node") && cmdline.contains(&needle)).then_some(cmdline)
        })
        .collect()
}

fn wait_for(what: &str, mut condition: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while !condition() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn sigint_leaves_no_node_process_behind() {
    let results = tempfile::tempdir().unwrap();
    // power-loss mounts the FUSE disks, so Ctrl-C must take mounts down too.
    let mut child: Child = logjam_run(
        results.path(),
        &[
            "--time-limit",
            "120",
            "--nemesis",
            "power-loss",
            "--nemesis-interval",
            "100",
        ],
    )
    .stdout(Stdio::null())
    .stderr(Stdio::null())
    .spawn()
    .unwrap();
    wait_for("the node to start and the workload to run", || {
        let history = std::fs::read_dir(results.path())
            .unwrap()
            .filter_map(Result::ok)
            .map(|entry| entry.path().join("history.jsonl"))
            .find(|path| path.is_file());
        history.is_some_and(|path| {
            std::fs::read_to_string(path)
                .unwrap_or_default()
                .lines()
                .count()
                > 20
        })
    });
    assert!(
        !node_processes_under(results.path()).is_empty(),
        "the node runs during the test"
    );
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(child.id() as i32),
        nix::sys::signal::Signal::SIGINT,
    )
    .unwrap();
    let status = child.wait().unwrap();
    assert_eq!(
        status.code(),
        Some(3),
        "an interrupted run is a harness failure, not a verdict"
    );
    wait_for("node processes to go away", || {
        node_processes_under(results.path()).is_empty()
    });
    // The data directories were FUSE mountpoints inside the harness's mount namespace; from
    // here they are plain directories that can be read (a dead FUSE mount would fail with
    // ENOTCONN), and nothing under the results is mounted.
    let run = std::fs::read_dir(results.path())
        .unwrap()
        .filter_map(Result::ok)
        .find(|entry| entry.path().join("n1").is_dir())
        .expect("the run directory")
        .path();
    assert!(std::fs::read_dir(run.join("n1/data")).is_ok());
    assert!(
        run.join("n1/disk/meta.properties").is_file(),
        "the node's bytes are in its backing directory"
    );
    let mounts = std::fs::read_to_string("/proc/self/mountinfo").unwrap();
    assert!(
        !mounts.contains(&*results.path().to_string_lossy()),
        "nothing under the results is mounted: {mounts}"
    );
}

#[test]
fn nodes_left_by_a_killed_harness_are_removed_at_the_next_start() {
    let results = tempfile::tempdir().unwrap();
    // A node whose harness is gone: started through a shell that exits at once, so its
    // parent is no longer a logjam process.
    let orphan_dir = results.path().join("old-run/n1");
    std::fs::create_dir_all(orphan_dir.join("data")).unwrap();
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    std::fs::write(
        orphan_dir.join("server.properties"),
        format!(
            "node.id=1\nprocess.roles=broker,controller\nlisteners=PLAINTEXT://127.0.0.1:{port}\nlog.dirs={}\n",
            orphan_dir.join("data").display()
        ),
    )
    .unwrap();
    let status = Command::new("sh")
        .arg("-c")
        .arg(format!(
            "setsid {} --config {} >/dev/null 2>&1 &",
            support::node_binary().display(),
            orphan_dir.join("server.properties").display()
        ))
        .status()
        .unwrap();
    assert!(status.success());
    wait_for("the orphan node to run", || {
        !node_processes_under(&orphan_dir).is_empty()
    });
    let output = logjam_run(
        results.path(),
        &[
            "--time-limit",
            "1",
            "--nemesis",
            "none",
            "--network",
            "loopback",
        ],
    )
    .output()
    .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("left behind by a harness that died"),
        "{stderr}"
    );
    wait_for("the orphan to be gone", || {
        node_processes_under(&orphan_dir).is_empty()
    });
}

#[test]
fn cluster_up_serves_real_clients_until_ctrl_c() {
    use std::io::{BufRead, BufReader};
    let dir = tempfile::tempdir().unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_logjam"))
        .args(["cluster", "up", "--dir"])
        .arg(dir.path())
        .arg("--node-binary")
        .arg(support::node_binary())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let bootstrap = loop {
        let line = lines
            .next()
            .expect("cluster up printed its bootstrap line")
            .unwrap();
        if let Some(servers) = line.strip_prefix("bootstrap.servers=") {
            break servers.to_owned();
        }
    };
    assert_eq!(
        bootstrap.split(',').count(),
        3,
        "three nodes by default: {bootstrap}"
    );
    // A real client creates a replicated topic and sees a leader with a full ISR.
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let admin =
            logjam_client::Admin::from_properties([("bootstrap.servers", bootstrap.as_str())])
                .unwrap();
        let created = admin
            .create_topics(&[logjam_client::NewTopic::new("manual", 2, 3)])
            .await
            .unwrap();
        assert!(created[0].1.is_ok(), "{created:?}");
        let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
        loop {
            let topics = admin.describe_topics(&["manual"]).await.unwrap();
            if topics[0]
                .partitions
                .iter()
                .all(|p| p.leader.is_some() && p.isr.len() == 3)
            {
                break;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "no full ISR: {topics:?}"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    });
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(child.id() as i32),
        nix::sys::signal::Signal::SIGINT,
    )
    .unwrap();
    assert_eq!(
        child.wait().unwrap().code(),
        Some(0),
        "Ctrl-C is a clean stop"
    );
    wait_for("node processes to go away", || {
        node_processes_under(dir.path()).is_empty()
    });
}

/// An ordinary user (uid 65534 here, when the tests run as root) gets the same lab: the
/// harness maps itself to root in a user namespace, builds the per-node network namespaces
/// and nftables cuts there, and a partitioned run ends VALID. A fault that needs what the
/// user lacks (FUSE for power loss, when /dev/fuse is root's alone) stops before any node
/// starts, with a message that names it, exit 3.
#[test]
fn an_ordinary_user_gets_the_namespace_lab() {
    use std::os::unix::fs::{PermissionsExt, chown};
    use std::os::unix::process::CommandExt;

    const NOBODY: u32 = 65_534;
    let as_root = nix::unistd::geteuid().is_root();
    // Copies of both binaries the user can run, and a results directory it owns.
    let dir = tempfile::tempdir().unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let logjam = dir.path().join("logjam");
    let node = dir.path().join("logjam-node");
    std::fs::copy(env!("CARGO_BIN_EXE_logjam"), &logjam).unwrap();
    std::fs::copy(support::node_binary(), &node).unwrap();
    let results = dir.path().join("results");
    std::fs::create_dir(&results).unwrap();
    if as_root {
        chown(&results, Some(NOBODY), Some(NOBODY)).unwrap();
    }
    let run = |extra: &[&str]| {
        let _guard = support::one_cluster_at_a_time();
        let mut command = Command::new(&logjam);
        command
            .arg("run")
            .arg("--results-dir")
            .arg(&results)
            .arg("--node-binary")
            .arg(&node)
            .args(["--nodes", "3", "--seed", "5", "--rate", "100"])
            .args(extra);
        if as_root {
            // std drops the supplementary groups too when root sets a uid.
            command.uid(NOBODY).gid(NOBODY);
        }
        command.output().unwrap()
    };

    let output = run(&[
        "--time-limit",
        "10",
        "--nemesis",
        "partition",
        "--nemesis-interval",
        "2",
    ]);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(
        output.status.code(),
        Some(0),
        "a partitioned run as an ordinary user is VALID\n{stderr}"
    );
    let run_json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(results.join("latest/run.json")).unwrap())
            .unwrap();
    assert_eq!(run_json["sandbox"], "user-namespace", "{run_json:#}");
    assert_eq!(run_json["network"], "namespaces", "{run_json:#}");
    let ops = read_history(&results.join("latest/history.jsonl"));
    let partitions = ops
        .iter()
        .filter(|op| op.process == Process::Nemesis && op.f.as_str().starts_with("partition"))
        .count();
    assert!(partitions > 0, "the run partitioned the cluster\n{stderr}");
    let heals = ops
        .iter()
        .filter(|op| op.process == Process::Nemesis && op.f.as_str() == "heal")
        .count();
    assert_eq!(heals, partitions, "every partition was healed");

    let fuse_is_open_to_all =
        std::fs::metadata("/dev/fuse").is_ok_and(|meta| meta.permissions().mode() & 0o006 == 0o006);
    if as_root && !fuse_is_open_to_all {
        let output = run(&["--time-limit", "5", "--nemesis", "power-loss"]);
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(3), "{stderr}");
        assert!(
            stderr.contains("/dev/fuse"),
            "the message names /dev/fuse: {stderr}"
        );
    }
}
