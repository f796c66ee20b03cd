//! Reader, writer and pairing tests against the v1 fixtures: line-numbered errors, torn tails,
//! unknown schema versions, malformed histories as pairing errors, and a write/read round trip.

use std::io::Cursor;
use std::path::PathBuf;

use logjam_history::{
    Function, Header, HistoryBuilder, HistoryReader, HistoryWriter, Key, MicroOp, Offset, Op,
    OpIndex, OpType, Outcome, Paired, Pairer, PairingError, Process, ProcessId, ReadError, Value,
    pair,
};

fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name)
}

fn read_all(name: &str) -> (Vec<Op>, Vec<ReadError>) {
    let reader = HistoryReader::open(fixture(name)).expect("header");
    let mut ops = Vec::new();
    let mut errors = Vec::new();
    for item in reader {
        match item {
            Ok(op) => ops.push(op),
            Err(e) => errors.push(e),
        }
    }
    (ops, errors)
}

#[test]
fn v1_fixture_reads_every_op_with_typed_values() {
    let reader = HistoryReader::open(fixture("v1-queue.jsonl")).unwrap();
    let header = reader.header().clone();
    assert_eq!(header.workload, "queue");
    assert_eq!(header.seed, 42);
    assert_eq!(header.nodes, ["n1", "n2", "n3"]);
    assert_eq!(header.topic_partition(Key(1)).unwrap().to_string(), "t0-1");
    let ops: Vec<Op> = reader.map(Result::unwrap).collect();
    assert_eq!(ops.len(), 13);
    assert_eq!(ops[6].process, Process::Nemesis);
    assert_eq!(ops[10].f, Function::FinalPoll);
    assert_eq!(
        ops[4].value.micro_ops()[0],
        MicroOp::Send {
            key: Key(0),
            value: Value(1),
            offset: Some(Offset(0))
        }
    );
    assert_eq!(ops[5].error, Some(serde_json::json!("timeout")));
}

#[test]
fn v1_fixture_pairs_into_completed_ops_and_nemesis_events() {
    let (ops, errors) = read_all("v1-queue.jsonl");
    assert!(errors.is_empty());
    let history = pair(ops).unwrap();
    assert_eq!(
        history.ops.len(),
        6,
        "assign, 2 sends, txn, final-poll, open send"
    );
    assert_eq!(history.nemesis.len(), 2);
    assert_eq!(history.nemesis[0].targets, ["n1"]);
    let open = history.ops.last().unwrap();
    assert_eq!(
        open.outcome,
        Outcome::Info,
        "an invoke never completed is info"
    );
    assert_eq!(open.complete_index, None);
    assert_eq!(open.invoke_index, OpIndex(12));
}

#[test]
fn torn_last_line_is_a_warning_after_every_intact_op() {
    let (ops, errors) = read_all("v1-torn-tail.jsonl");
    assert_eq!(ops.len(), 13);
    assert_eq!(errors.len(), 1);
    assert!(
        matches!(errors[0], ReadError::TornTail { line: 15 }),
        "{:?}",
        errors[0]
    );
    assert!(errors[0].is_torn_tail());
}

#[test]
fn malformed_line_error_names_the_line_and_the_problem() {
    let (_, errors) = read_all("v1-bad-value.jsonl");
    let message = errors[0].to_string();
    assert!(message.starts_with("line 4: malformed op:"), "{message}");
    assert!(message.contains("send"), "{message}");
    assert!(!errors[0].is_torn_tail());
}

#[test]
fn unknown_schema_version_is_rejected_with_a_clear_message() {
    let Err(error) = HistoryReader::open(fixture("v2-unknown-version.jsonl")) else {
        panic!("schema_version 2 must be rejected");
    };
    assert!(matches!(error, ReadError::UnsupportedSchemaVersion { .. }));
    let message = error.to_string();
    assert!(
        message.contains("unsupported schema_version 2"),
        "{message}"
    );
    assert!(message.contains("reads schema_version 1"), "{message}");
}

#[test]
fn empty_history_is_missing_its_header() {
    let error = HistoryReader::new(Cursor::new(Vec::new())).err().unwrap();
    assert!(matches!(error, ReadError::MissingHeader));
}

#[test]
fn completion_without_invoke_is_a_pairing_error() {
    let (ops, _) = read_all("v1-completion-without-invoke.jsonl");
    let error = pair(ops).unwrap_err();
    assert!(matches!(
        error,
        PairingError::CompletionWithoutInvoke {
            process: ProcessId(0),
            ..
        }
    ));
}

#[test]
fn two_open_ops_in_one_process_is_a_pairing_error() {
    let (ops, _) = read_all("v1-two-open-ops.jsonl");
    let error = pair(ops).unwrap_err();
    assert!(matches!(
        error,
        PairingError::ProcessAlreadyOpen {
            process: ProcessId(0),
            open_index: OpIndex(0),
            ..
        }
    ));
    assert!(error.to_string().contains("still open"));
}

#[test]
fn completion_with_another_function_is_a_pairing_error() {
    let mut b = HistoryBuilder::new("queue");
    b.invoke_send(0, 1, 1);
    b.client(0, OpType::Ok, Function::Poll, logjam_history::OpValue::Null);
    let (_, ops) = b.build();
    assert!(matches!(
        pair(ops).unwrap_err(),
        PairingError::FunctionMismatch { .. }
    ));
}

#[test]
fn non_increasing_index_is_an_error_naming_the_line() {
    let text = concat!(
        r#"{"schema_version":1,"workload":"queue","seed":1,"start_time":"x"}"#,
        "\n",
        r#"{"index":5,"time":0,"process":0,"type":"invoke","f":"poll","value":[["poll"]]}"#,
        "\n",
        r#"{"index":5,"time":0,"process":0,"type":"ok","f":"poll","value":[["poll",{}]]}"#,
        "\n",
    );
    let results: Vec<_> = HistoryReader::new(Cursor::new(text)).unwrap().collect();
    let error = results[1].as_ref().unwrap_err();
    assert!(
        matches!(error, ReadError::IndexNotIncreasing { line: 3, .. }),
        "{error}"
    );
}

#[test]
fn writer_output_reads_back_identically() {
    let mut b = HistoryBuilder::new("queue");
    b.header_mut().nodes = vec!["n1".into()];
    b.send_ok(0, 1, 10, 0);
    b.send_ok_no_offset(1, 1, 11);
    b.poll_ok(2, &[(1, &[(0, 10), (1, 11)])]);
    b.assign(2, Function::Assign, &[1, 2]);
    b.nemesis(Function::Kill, &["n1"]);
    b.invoke_send(3, 2, 5);
    let (header, ops) = b.build();
    let mut buffer = Vec::new();
    let mut writer = HistoryWriter::new(&mut buffer, &header).unwrap();
    for op in &ops {
        writer.write_op(op).unwrap();
    }
    assert_eq!(writer.next_index(), OpIndex(ops.len() as u64));
    assert!(writer.write_op(&ops[0]).is_err(), "indices must increase");
    let reader = HistoryReader::new(Cursor::new(buffer)).unwrap();
    assert_eq!(reader.header(), &header);
    let back: Vec<Op> = reader.map(Result::unwrap).collect();
    assert_eq!(back, ops);
}

#[test]
fn writer_rejects_unknown_schema_version() {
    let mut header = Header::new("queue", 1, "x");
    header.schema_version = 7;
    assert!(HistoryWriter::new(Vec::new(), &header).is_err());
}

#[test]
fn pairer_streams_nemesis_invoke_and_info_as_one_event() {
    let mut b = HistoryBuilder::new("queue");
    b.push(
        Process::Nemesis,
        OpType::Invoke,
        Function::Partition,
        logjam_history::OpValue::Json(serde_json::json!({"targets": ["n2"]})),
    );
    b.push(
        Process::Nemesis,
        OpType::Info,
        Function::Partition,
        logjam_history::OpValue::Null,
    );
    let (_, ops) = b.build();
    let mut pairer = Pairer::new();
    assert_eq!(pairer.push(ops[0].clone()).unwrap(), None);
    let Some(Paired::Nemesis(event)) = pairer.push(ops[1].clone()).unwrap() else {
        panic!("expected a nemesis event");
    };
    assert_eq!(event.invoke_index, Some(OpIndex(0)));
    assert_eq!(event.targets, ["n2"]);
}

#[test]
fn torn_tail_after_a_killed_writer_leaves_a_readable_prefix() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("history.jsonl");
    let mut b = HistoryBuilder::new("queue");
    b.send_ok(0, 1, 1, 0);
    let (header, ops) = b.build();
    {
        let file = std::fs::File::create(&path).unwrap();
        let mut writer = HistoryWriter::new(file, &header).unwrap();
        for op in &ops {
            writer.write_op(op).unwrap();
        }
    }
    // Simulate a crash mid-line.
    let mut text = std::fs::read_to_string(&path).unwrap();
    text.push_str(r#"{"index":2,"ti"#);
    std::fs::write(&path, text).unwrap();
    let mut reader = HistoryReader::open(&path).unwrap();
    let items: Vec<_> = reader.by_ref().collect();
    assert_eq!(items.len(), 3);
    assert!(items[2].as_ref().unwrap_err().is_torn_tail());
    assert_eq!(reader.torn_tail(), Some(4));
}

#[test]
fn writer_uses_jepsen_completion_form_for_sends() {
    let mut b = HistoryBuilder::new("queue");
    b.send_ok_no_offset(0, 1, 11);
    b.send_ok(0, 1, 12, 7);
    let (header, ops) = b.build();
    let mut buffer = Vec::new();
    let mut writer = HistoryWriter::new(&mut buffer, &header).unwrap();
    for op in &ops {
        writer.write_op(op).unwrap();
    }
    let text = String::from_utf8(buffer).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(
        lines[1],
        r#"{"index":0,"time":0,"process":0,"type":"invoke","f":"send","value":[["send",1,11]]}"#
    );
    assert!(
        lines[2].ends_with(r#""type":"ok","f":"send","value":[["send",1,[null,11]]]}"#),
        "{}",
        lines[2]
    );
    assert!(
        lines[4].ends_with(r#""value":[["send",1,[7,12]]]}"#),
        "{}",
        lines[4]
    );
}
