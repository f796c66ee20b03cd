//! `logjam matrix` and `logjam nightly` end to end through the real binaries: a two-cell sweep
//! stores its table and every run's verdict; the smoke suite yields JUnit XML and an index; a
//! bad suite file is a harness failure naming the bad key; an exhausted budget skips runs.
//! The runs are tiny single-node clusters, so the whole file stays well under 90 s.

mod support;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::Value;

fn logjam(args: &[&str], results: &Path) -> Output {
    Command::new(env!("CARGO_BIN_EXE_logjam"))
        .args(args)
        .arg("--results-dir")
        .arg(results)
        .arg("--node-binary")
        .arg(support::node_binary())
        .output()
        .expect("logjam runs")
}

fn explain(output: &Output) -> String {
    format!(
        "exit {:?}\n--- stdout\n{}\n--- stderr\n{}",
        output.status.code(),
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    )
}

fn read_json(path: &Path) -> Value {
    let text =
        std::fs::read_to_string(path).unwrap_or_else(|error| panic!("{}: {error}", path.display()));
    serde_json::from_str(&text).unwrap()
}

fn smoke_suite() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("suites/smoke.toml")
}

/// Two cells (acks=0 and acks=1) of one fault-free run each: the table names both cells and
/// every run ended with a verdict, so the matrix exits 0.
#[test]
fn a_two_cell_matrix_stores_its_table() {
    let _turn = support::one_cluster_at_a_time();
    let results = tempfile::tempdir().unwrap();
    let output = logjam(
        &[
            "matrix",
            "--nodes",
            "1",
            "--set",
            "replication.factor=1",
            "--set",
            "acks=0,1",
            "--time-limit",
            "3",
            "--nemesis",
            "none",
            "--network",
            "loopback",
            "--seed",
            "11",
        ],
        results.path(),
    );
    assert_eq!(output.status.code(), Some(0), "{}", explain(&output));

    let dir = results.path().join("latest-matrix");
    let matrix = read_json(&dir.join("matrix.json"));
    let cells = matrix["cells"].as_array().unwrap();
    assert_eq!(cells.len(), 2, "{matrix:#}");
    for (cell, acks) in cells.iter().zip(["acks=0", "acks=1"]) {
        assert_eq!(cell["name"], acks);
        let runs = cell["runs"].as_array().unwrap();
        assert_eq!(runs.len(), 1);
        let status = runs[0]["status"].as_str().unwrap();
        assert!(
            ["valid", "invalid", "unknown"].contains(&status),
            "a verdict, not {status}: {cell:#}"
        );
        assert!(runs[0]["outcome"]["acknowledged"].is_u64());
    }
    // Seeds follow --seed: seed + run index.
    assert_eq!(cells[0]["runs"][0]["seed"], 11);
    assert_eq!(cells[1]["runs"][0]["seed"], 12);
    let table = std::fs::read_to_string(dir.join("matrix.md")).unwrap();
    assert!(table.contains("| 1 | acks=0 | 1 |"), "{table}");
    assert!(table.contains("| 2 | acks=1 | 1 |"), "{table}");
    assert!(String::from_utf8_lossy(&output.stdout).contains("| 2 | acks=1 | 1 |"));
}

/// The smoke suite's two tests run once each: JUnit XML with two testcases, an index of two
/// runs with their verdicts, exit 0 because both runs are valid.
#[test]
fn the_smoke_suite_writes_junit_and_an_index() {
    let _turn = support::one_cluster_at_a_time();
    let results = tempfile::tempdir().unwrap();
    let suite = smoke_suite();
    let output = logjam(&["nightly", suite.to_str().unwrap()], results.path());
    assert_eq!(output.status.code(), Some(0), "{}", explain(&output));

    let dir = results.path().join("latest-nightly");
    let junit = std::fs::read_to_string(dir.join("junit.xml")).unwrap();
    assert!(junit.starts_with("<?xml version=\"1.0\""), "{junit}");
    assert!(
        junit.contains("<testsuite name=\"logjam-nightly\" tests=\"2\" failures=\"0\" errors=\"0\" skipped=\"0\""),
        "{junit}"
    );
    assert_eq!(junit.matches("<testcase ").count(), 2, "{junit}");
    assert!(
        junit.contains("classname=\"smoke-kill\" name=\"seed "),
        "{junit}"
    );
    assert!(
        junit.contains("classname=\"smoke-pause\" name=\"seed "),
        "{junit}"
    );
    assert!(junit.trim_end().ends_with("</testsuites>"), "{junit}");

    let index = read_json(&dir.join("index.json"));
    let runs = index["runs"].as_array().unwrap();
    assert_eq!(runs.len(), 2, "{index:#}");
    for run in runs {
        assert_eq!(run["status"], "valid", "{run:#}");
        assert!(
            run["ops_per_second"]
                .as_f64()
                .is_some_and(|rate| rate > 0.0),
            "the index reports the achieved rate: {run:#}"
        );
        assert!(
            Path::new(run["path"].as_str().unwrap())
                .join("history.jsonl")
                .is_file()
        );
    }
    let markdown = std::fs::read_to_string(dir.join("index.md")).unwrap();
    assert!(markdown.contains("| smoke-kill-run1 |"), "{markdown}");
    // The index links each run's page, and the results' index.html lists both runs.
    let pages: Vec<&str> = markdown
        .split("[report.html](")
        .skip(1)
        .map(|link| &link[..link.find(')').unwrap()])
        .collect();
    assert_eq!(pages.len(), 2, "{markdown}");
    for page in pages {
        assert!(dir.join(page).is_file(), "{page} missing");
    }
    let html = std::fs::read_to_string(results.path().join("index.html")).unwrap();
    assert_eq!(html.matches("/report.html\"").count(), 2, "{html}");
}

/// A misspelt key makes the suite file bad: exit 3 before anything runs, and the message
/// names the key.
#[test]
fn a_suite_with_an_unknown_key_is_refused() {
    let results = tempfile::tempdir().unwrap();
    let suite = results.path().join("bad.toml");
    std::fs::write(&suite, "[[test]]\nname = \"a\"\nnemsis = \"kill\"\n").unwrap();
    let output = logjam(&["nightly", suite.to_str().unwrap()], results.path());
    assert_eq!(output.status.code(), Some(3), "{}", explain(&output));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("nemsis"), "{stderr}");
    assert!(!results.path().join("latest-nightly").exists());
}

/// With no budget no run fits: both are reported as skipped, in JUnit too, and nothing ran.
#[test]
fn runs_beyond_the_budget_are_skipped() {
    let results = tempfile::tempdir().unwrap();
    let suite = smoke_suite();
    let output = logjam(
        &["nightly", suite.to_str().unwrap(), "--budget-minutes", "0"],
        results.path(),
    );
    assert_eq!(output.status.code(), Some(0), "{}", explain(&output));
    let dir = results.path().join("latest-nightly");
    let junit = std::fs::read_to_string(dir.join("junit.xml")).unwrap();
    assert!(
        junit.contains("tests=\"2\" failures=\"0\" errors=\"0\" skipped=\"2\""),
        "{junit}"
    );
    assert_eq!(junit.matches("<skipped ").count(), 2, "{junit}");
    let index = read_json(&dir.join("index.json"));
    for run in index["runs"].as_array().unwrap() {
        assert_eq!(run["status"], "skipped", "{run:#}");
    }
    assert!(
        !dir.join("smoke-kill-run1").exists(),
        "a skipped run starts nothing"
    );
}
