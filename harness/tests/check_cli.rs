//! `logjam check` end to end, through the real binary: the exit code is the verdict (0 valid,
//! 1 invalid, 2 unknown) or 3 for a harness failure, report.json is written beside the
//! history, and a malformed history is named by file and line rather than judged.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

const HEADER: &str = r#"{"schema_version":1,"workload":"queue","seed":1,"start_time":"2026-11-29T00:00:00Z","nodes":["n1"],"config":{}}"#;

fn logjam(args: &[&Path]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_logjam"))
        .arg("check")
        .args(args)
        .output()
        .unwrap()
}

fn write_history(dir: &Path, lines: &[&str]) -> PathBuf {
    let path = dir.join("history.jsonl");
    let mut text = String::from(HEADER);
    text.push('\n');
    for line in lines {
        text.push_str(line);
        text.push('\n');
    }
    std::fs::write(&path, text).unwrap();
    path
}

/// Two acknowledged sends; the final read sees both.
const SENDS: [&str; 4] = [
    r#"{"index":0,"time":1,"process":0,"type":"invoke","f":"send","value":[["send",0,1]]}"#,
    r#"{"index":1,"time":2,"process":0,"type":"ok","f":"send","value":[["send",0,[0,1]]]}"#,
    r#"{"index":2,"time":3,"process":0,"type":"invoke","f":"send","value":[["send",0,2]]}"#,
    r#"{"index":3,"time":4,"process":0,"type":"ok","f":"send","value":[["send",0,[1,2]]]}"#,
];

#[test]
fn valid_history_exits_0_and_writes_the_report() {
    let dir = tempfile::tempdir().unwrap();
    let mut lines = SENDS.to_vec();
    lines.push(
        r#"{"index":4,"time":5,"process":1,"type":"invoke","f":"final-poll","value":[["poll"]]}"#,
    );
    lines.push(r#"{"index":5,"time":6,"process":1,"type":"ok","f":"final-poll","value":[["poll",{"0":[[0,1],[1,2]]}]]}"#);
    write_history(dir.path(), &lines);
    let output = logjam(&[dir.path()]);
    assert_eq!(
        output.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&output.stdout)
    );
    let report = std::fs::read_to_string(dir.path().join("report.json")).unwrap();
    assert!(report.contains("\"valid\""), "{report}");
}

#[test]
fn lost_acknowledged_write_exits_1_and_names_it() {
    let dir = tempfile::tempdir().unwrap();
    let mut lines = SENDS.to_vec();
    // The final read skips offset 0: the acknowledged value 1 is gone.
    lines.push(
        r#"{"index":4,"time":5,"process":1,"type":"invoke","f":"final-poll","value":[["poll"]]}"#,
    );
    lines.push(r#"{"index":5,"time":6,"process":1,"type":"ok","f":"final-poll","value":[["poll",{"0":[[1,2]]}]]}"#);
    let history = write_history(dir.path(), &lines);
    let output = logjam(&[&history]);
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert_eq!(output.status.code(), Some(1), "{stdout}");
    assert!(
        stdout.contains("lost"),
        "the summary names the lost write: {stdout}"
    );
}

#[test]
fn history_without_reads_is_unknown_not_valid() {
    let dir = tempfile::tempdir().unwrap();
    let history = write_history(dir.path(), &SENDS);
    let output = logjam(&[&history]);
    assert_eq!(
        output.status.code(),
        Some(2),
        "{}",
        String::from_utf8_lossy(&output.stdout)
    );
}

#[test]
fn malformed_history_is_a_harness_error_naming_the_line() {
    let dir = tempfile::tempdir().unwrap();
    let history = write_history(dir.path(), &[SENDS[0], "{\"index\":1,\"time\":", SENDS[2]]);
    let output = logjam(&[&history]);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(3), "{stderr}");
    assert!(
        stderr.contains("line 3"),
        "the error names the line: {stderr}"
    );
    for part in ["line 3", "malformed op", "EOF while parsing"] {
        assert_eq!(
            stderr.matches(part).count(),
            1,
            "each cause is printed once ({part}): {stderr}"
        );
    }
    assert!(
        !dir.path().join("report.json").exists(),
        "no report for an unreadable history"
    );
}

#[test]
fn missing_history_is_a_harness_error() {
    let dir = tempfile::tempdir().unwrap();
    let output = logjam(&[dir.path()]);
    assert_eq!(output.status.code(), Some(3));
    assert!(String::from_utf8_lossy(&output.stderr).contains("history.jsonl"));
}

/// A run whose harness was killed: run.json says `running`, the history ends in a torn line.
/// The prefix is judged, and the summary and report.json say the run did not finish.
#[test]
fn unfinished_run_is_judged_up_to_its_torn_tail_and_says_so() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("run.json"),
        r#"{"seed": 1, "state": "running", "harness": {"pid": 4294967}}"#,
    )
    .unwrap();
    let path = write_history(dir.path(), &SENDS);
    let mut text = std::fs::read_to_string(&path).unwrap();
    text.push_str(r#"{"index":4,"time":5,"process":1,"type":"inv"#);
    std::fs::write(&path, text).unwrap();
    let output = logjam(&[dir.path()]);
    let stdout = String::from_utf8_lossy(&output.stdout);
    // Acknowledged sends that no read covered: nothing proves a loss, nothing proves safety.
    assert_eq!(output.status.code(), Some(2), "{stdout}");
    assert!(
        stdout.contains("the run did not finish (run.json state: running)"),
        "{stdout}"
    );
    assert!(stdout.contains("torn"), "{stdout}");
    let report = std::fs::read_to_string(dir.path().join("report.json")).unwrap();
    assert!(report.contains("the run did not finish"), "{report}");

    // Killed before its workload wrote a history: an error that says why, not a verdict.
    std::fs::remove_file(&path).unwrap();
    let output = logjam(&[dir.path()]);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(3), "{stderr}");
    assert!(
        stderr.contains("the run did not finish") && stderr.contains("none to judge"),
        "{stderr}"
    );
}

/// Cut off before its final reads, a run's unread values may be late: `unseen` alone is
/// unknown there. Once the final reads ran (state `checking`), the same is invalid.
#[test]
fn unseen_values_of_a_run_cut_off_before_its_final_reads_are_unknown_not_invalid() {
    let mut lines = SENDS.to_vec();
    lines.push(r#"{"index":4,"time":5,"process":1,"type":"invoke","f":"poll","value":[["poll"]]}"#);
    lines.push(
        r#"{"index":5,"time":6,"process":1,"type":"ok","f":"poll","value":[["poll",{"0":[[0,1]]}]]}"#,
    );
    for (state, verdict) in [("running", 2), ("checking", 1)] {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join("run.json"),
            format!(r#"{{"seed": 1, "state": "{state}", "harness": {{"pid": 4294967}}}}"#),
        )
        .unwrap();
        write_history(dir.path(), &lines);
        let output = logjam(&[dir.path()]);
        let stdout = String::from_utf8_lossy(&output.stdout);
        assert_eq!(output.status.code(), Some(verdict), "{state}: {stdout}");
        assert!(stdout.contains("unseen"), "{stdout}");
    }
}
