//! `logjam check --model M --format F FILE` end to end, through the real binary, on
//! Porcupine's corpus and small hand-written logs: the exit code is the verdict (0 valid,
//! 1 invalid, 2 unknown, 3 bad input), a budget that runs out gives unknown with its reason,
//! and a malformed line is named.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use logjam_linearizable::porcupine::corpus_dir;

fn logjam(args: &[&str], file: &Path) -> Output {
    Command::new(env!("CARGO_BIN_EXE_logjam"))
        .arg("check")
        .args(args)
        .arg(file)
        .output()
        .unwrap()
}

fn corpus(file: &str) -> PathBuf {
    corpus_dir().join(file)
}

fn stdout(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

const ETCD: [&str; 4] = ["--model", "cas", "--format", "porcupine-etcd"];

#[test]
fn linearizable_etcd_log_exits_0() {
    let output = logjam(&ETCD, &corpus("jepsen/etcd_002.log"));
    assert_eq!(output.status.code(), Some(0), "{output:?}");
    assert!(stdout(&output).contains("verdict: valid"));
}

#[test]
fn non_linearizable_etcd_log_exits_1_with_a_counterexample() {
    let output = logjam(&ETCD, &corpus("jepsen/etcd_000.log"));
    assert_eq!(output.status.code(), Some(1), "{output:?}");
    let text = stdout(&output);
    assert!(text.contains("verdict: invalid"));
    assert!(text.contains("not linearizable: partition 0"), "{text}");
}

/// Write 1, write 2, then a read of 1 that began after both returned: the scan's witness.
#[test]
fn stale_read_is_found_by_the_scan() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("stale.log");
    let lines = [
        "0\t:invoke\t:write\t1",
        "0\t:ok\t:write\t1",
        "0\t:invoke\t:write\t2",
        "0\t:ok\t:write\t2",
        "1\t:invoke\t:read\tnil",
        "1\t:ok\t:read\t1",
    ];
    let text: String = lines
        .iter()
        .map(|line| format!("INFO  jepsen.util - {line}\n"))
        .collect();
    std::fs::write(&path, text).unwrap();
    let output = logjam(
        &["--model", "register", "--format", "porcupine-etcd"],
        &path,
    );
    assert_eq!(output.status.code(), Some(1), "{output:?}");
    let text = stdout(&output);
    assert!(text.contains("stale-read scan"), "{text}");
    assert!(text.contains("read -> 1"), "{text}");
}

/// 64 KiB cannot hold the search over a 50-client key: unknown, exit 2, with the reason.
#[test]
fn memory_limit_gives_unknown_with_the_reason() {
    let output = logjam(
        &[
            "--model",
            "kv",
            "--format",
            "porcupine-kv",
            "--memory-limit",
            "64K",
        ],
        &corpus("kv/c50-ok.txt"),
    );
    assert_eq!(output.status.code(), Some(2), "{output:?}");
    let text = stdout(&output);
    assert!(text.contains("verdict: unknown"), "{text}");
    assert!(text.contains("memory budget of"), "{text}");
}

#[test]
fn time_limit_of_zero_gives_unknown() {
    let output = logjam(
        &[
            "--model",
            "kv",
            "--format",
            "porcupine-kv",
            "--time-limit",
            "0",
        ],
        &corpus("kv/c50-ok.txt"),
    );
    assert_eq!(output.status.code(), Some(2), "{output:?}");
    assert!(stdout(&output).contains("search budget of 0ns exhausted"));
}

#[test]
fn malformed_line_is_named_and_exits_3() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("bad.log");
    std::fs::write(
        &path,
        "INFO  jepsen.util - 1\t:invoke\t:read\tnil\nINFO  jepsen.util - 1\t:ok\t:read\tnil\ngarbage\n",
    )
    .unwrap();
    let output = logjam(&ETCD, &path);
    assert_eq!(output.status.code(), Some(3), "{output:?}");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("bad.log:3:"), "{stderr}");
}

#[test]
fn model_that_does_not_fit_the_format_exits_3() {
    let output = logjam(
        &["--model", "kv", "--format", "porcupine-etcd"],
        &corpus("jepsen/etcd_000.log"),
    );
    assert_eq!(output.status.code(), Some(3), "{output:?}");
    // A compare-and-set cannot be read as a register operation; the line is named.
    let output = logjam(
        &["--model", "register", "--format", "porcupine-etcd"],
        &corpus("jepsen/etcd_000.log"),
    );
    assert_eq!(output.status.code(), Some(3), "{output:?}");
    assert!(String::from_utf8_lossy(&output.stderr).contains("etcd_000.log:"));
}
