//! `check_file` end to end: run directories and history files, the torn-tail warning,
//! malformed histories as harness errors (never anomalies), report paths, summary and JSON.

use std::path::Path;

use logjam_checkers::{HarnessError, Verdict, check_file, history_path, report_path};
use logjam_history::{Function, HistoryBuilder, HistoryWriter, Op};

fn write_history(dir: &Path, b: HistoryBuilder, torn_tail: Option<&str>) {
    let (header, ops) = b.build();
    let file = std::fs::File::create(dir.join("history.jsonl")).unwrap();
    let mut writer = HistoryWriter::new(file, &header).unwrap();
    for op in &ops {
        writer.write_op(op).unwrap();
    }
    drop(writer);
    if let Some(tail) = torn_tail {
        let mut text = std::fs::read_to_string(dir.join("history.jsonl")).unwrap();
        text.push_str(tail);
        std::fs::write(dir.join("history.jsonl"), text).unwrap();
    }
}

fn valid_history() -> HistoryBuilder {
    let mut b = HistoryBuilder::new("queue");
    b.header_mut().config = serde_json::json!({
        "key_topic_partitions": {"1": {"topic": "orders", "partition": 3}}
    });
    b.send_ok(0, 1, 10, 0);
    b.send_ok(1, 1, 11, 1);
    b.nemesis(Function::Heal, &["n1", "n2"]);
    b.final_poll_ok(2, &[(1, &[(0, 10), (1, 11)])]);
    b
}

#[test]
fn run_directory_and_history_file_give_the_same_valid_report() {
    let dir = tempfile::tempdir().unwrap();
    write_history(dir.path(), valid_history(), None);
    let from_dir = check_file(dir.path()).unwrap();
    let from_file = check_file(dir.path().join("history.jsonl")).unwrap();
    assert_eq!(from_dir.verdict, Verdict::Valid, "{}", from_dir.summary());
    assert_eq!(from_file.verdict, Verdict::Valid);
    assert_eq!(from_dir.verdict.exit_code(), 0);
    assert_eq!(history_path(dir.path()), dir.path().join("history.jsonl"));
    assert_eq!(report_path(dir.path()), dir.path().join("report.json"));
    assert_eq!(
        report_path(&dir.path().join("history.jsonl")),
        dir.path().join("report.json")
    );
}

#[test]
fn torn_tail_becomes_a_warning_and_the_prefix_is_checked() {
    let dir = tempfile::tempdir().unwrap();
    write_history(
        dir.path(),
        valid_history(),
        Some(r#"{"index":99,"time":1,"proc"#),
    );
    let report = check_file(dir.path()).unwrap();
    assert_eq!(report.verdict, Verdict::Valid);
    assert_eq!(report.warnings.len(), 1);
    assert!(
        report.warnings[0].contains("torn last line"),
        "{:?}",
        report.warnings
    );
    assert!(
        report.summary().contains("warning: line 9: torn last line"),
        "{}",
        report.summary()
    );
}

#[test]
fn run_directory_without_history_is_a_harness_error() {
    let dir = tempfile::tempdir().unwrap();
    assert!(matches!(
        check_file(dir.path()),
        Err(HarnessError::NoHistory { .. })
    ));
}

#[test]
fn completion_without_invoke_is_a_harness_error_not_an_anomaly() {
    let dir = tempfile::tempdir().unwrap();
    let mut b = HistoryBuilder::new("queue");
    b.complete_send(0, logjam_history::OpType::Ok, 1, 10, Some(0));
    write_history(dir.path(), b, None);
    let error = check_file(dir.path()).unwrap_err();
    assert!(matches!(error, HarnessError::Pairing { .. }), "{error}");
    assert!(
        error.to_string().contains("without an open invoke"),
        "{error}"
    );
}

#[test]
fn two_open_ops_in_one_process_is_a_harness_error() {
    let dir = tempfile::tempdir().unwrap();
    let mut b = HistoryBuilder::new("queue");
    b.invoke_send(0, 1, 10);
    b.invoke_send(0, 1, 11);
    write_history(dir.path(), b, None);
    assert!(matches!(
        check_file(dir.path()),
        Err(HarnessError::Pairing { .. })
    ));
}

#[test]
fn malformed_line_is_a_harness_error_naming_the_line() {
    let dir = tempfile::tempdir().unwrap();
    write_history(dir.path(), valid_history(), None);
    let path = dir.path().join("history.jsonl");
    let mut lines: Vec<String> = std::fs::read_to_string(&path)
        .unwrap()
        .lines()
        .map(String::from)
        .collect();
    lines[2] = r#"{"index":1,"time":5,"process":0,"type":"ok","f":"send"}garbage"#.to_owned();
    std::fs::write(&path, lines.join("\n") + "\n").unwrap();
    let error = check_file(&path).unwrap_err();
    assert!(
        error.to_string().contains("line 3: malformed op"),
        "{error}"
    );
}

#[test]
fn unknown_workload_is_a_harness_error() {
    let dir = tempfile::tempdir().unwrap();
    write_history(dir.path(), HistoryBuilder::new("bank"), None);
    assert!(matches!(
        check_file(dir.path()),
        Err(HarnessError::UnsupportedWorkload { .. })
    ));
}

#[test]
fn report_json_names_kinds_verdict_and_durability() {
    let mut b = valid_history();
    b.send_ok(0, 1, 12, 2);
    b.send_ok(0, 1, 13, 3);
    b.final_poll_ok(2, &[(1, &[(0, 10), (1, 11), (3, 13)])]);
    let (header, ops): (_, Vec<Op>) = b.build();
    let report = logjam_checkers::check_ops(&header, ops).unwrap();
    let json: serde_json::Value = serde_json::from_str(&report.to_json().unwrap()).unwrap();
    assert_eq!(json["verdict"], "invalid");
    assert_eq!(json["bad_kinds"][0], "lost-write");
    assert_eq!(json["anomalies"]["lost-write"]["count"], 1);
    assert_eq!(
        json["durability"]["partitions"][0]["topic_partition"]["topic"],
        "orders"
    );
    assert_eq!(report.verdict.exit_code(), 1);
}

const HEADER: &str = r#"{"schema_version":1,"workload":"queue","seed":1,"start_time":"2026-01-01T00:00:00Z","nodes":["n1"],"config":{}}"#;

fn check_text(lines: &[&str]) -> Result<logjam_checkers::Report, HarnessError> {
    let text = std::iter::once(HEADER)
        .chain(lines.iter().copied())
        .collect::<Vec<_>>()
        .join("\n")
        + "\n";
    logjam_checkers::check_reader(text.as_bytes())
}

#[test]
fn a_client_op_with_an_unknown_f_is_warned_about_with_its_line() {
    let report = check_text(&[
        r#"{"index":0,"time":1,"process":0,"type":"invoke","f":"send","value":[["send",1,10]]}"#,
        r#"{"index":1,"time":2,"process":0,"type":"ok","f":"send","value":[["send",1,[0,10]]]}"#,
        r#"{"index":2,"time":3,"process":1,"type":"invoke","f":"frobnicate","value":null}"#,
        r#"{"index":3,"time":4,"process":1,"type":"ok","f":"frobnicate","value":null}"#,
        r#"{"index":4,"time":5,"process":"nemesis","type":"info","f":"power-loss","value":null}"#,
        r#"{"index":5,"time":6,"process":2,"type":"invoke","f":"poll","value":[["poll"]]}"#,
        r#"{"index":6,"time":7,"process":2,"type":"ok","f":"poll","value":[["poll",{"1":[[0,10]]}]]}"#,
    ])
    .unwrap();
    let unknown: Vec<&String> = report
        .warnings
        .iter()
        .filter(|w| w.contains("unknown f"))
        .collect();
    assert_eq!(
        unknown.len(),
        1,
        "one warning per unknown f: {:?}",
        report.warnings
    );
    assert!(unknown[0].starts_with("line 4:"), "{}", unknown[0]);
    assert!(
        unknown[0].contains("\"frobnicate\" (2 op line(s)"),
        "{}",
        unknown[0]
    );
    // Nemesis ops are free-form: no warning for power-loss.
    assert!(!report.warnings.iter().any(|w| w.contains("power-loss")));
    assert!(
        report.summary().contains("frobnicate"),
        "{}",
        report.summary()
    );
}

#[test]
fn a_negative_offset_is_malformed_and_names_its_line() {
    for (line, bad) in [
        (
            3,
            r#"{"index":1,"time":2,"process":0,"type":"ok","f":"send","value":[["send",1,[-1,10]]]}"#,
        ),
        (
            3,
            r#"{"index":1,"time":2,"process":0,"type":"ok","f":"poll","value":[["poll",{"1":[[-5,10]]}]]}"#,
        ),
    ] {
        let invoke = if bad.contains("\"send\"") {
            r#"{"index":0,"time":1,"process":0,"type":"invoke","f":"send","value":[["send",1,10]]}"#
        } else {
            r#"{"index":0,"time":1,"process":0,"type":"invoke","f":"poll","value":[["poll"]]}"#
        };
        let error = check_text(&[invoke, bad]).unwrap_err().to_string();
        assert!(
            error.contains(&format!("line {line}: malformed op")),
            "{error}"
        );
        assert!(error.contains("is negative"), "{error}");
    }
}
