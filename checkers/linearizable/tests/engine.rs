//! Scenario tests for the checker's contract, in positive/negative pairs:
//! closed intervals, indeterminate operations, unknown verdicts (empty
//! history, exhausted budget), partition validation, and the minimal
//! counterexample.

use logjam_linearizable::models::kv::{KvModel, KvOp, KvResult};
use logjam_linearizable::models::log::{LogModel, LogOp, LogResult, Offset};
use logjam_linearizable::models::register::{Register, RegisterOp, RegisterResult};
use logjam_linearizable::{
    Budget, CheckOptions, ClientId, HistoryError, OpIndex, Operation, Timestamp, UnknownReason,
    Verdict, check,
};

type RegisterOperation = Operation<RegisterOp<i64>, RegisterResult<i64>>;

fn write(client: u64, value: i64, call: u64, return_at: u64) -> RegisterOperation {
    Operation::completed(
        ClientId(client),
        RegisterOp::Write(value),
        call,
        RegisterResult::Written,
        return_at,
    )
}

fn read(client: u64, value: Option<i64>, call: u64, return_at: u64) -> RegisterOperation {
    Operation::completed(
        ClientId(client),
        RegisterOp::Read,
        call,
        RegisterResult::Read(value),
        return_at,
    )
}

fn verdict(history: &[RegisterOperation]) -> Verdict {
    check(&Register::new(None), history, &CheckOptions::default())
        .expect("well formed")
        .verdict
}

/// Intervals are closed: a read called at the very instant a write returns
/// is concurrent with it and may still see the old value.
#[test]
fn read_touching_write_return_may_see_old_value() {
    assert_eq!(
        verdict(&[write(0, 1, 0, 5), read(1, None, 5, 6)]),
        Verdict::Valid
    );
}

/// One tick later the write has definitely happened first.
#[test]
fn read_after_write_return_must_see_new_value() {
    assert_eq!(
        verdict(&[write(0, 1, 0, 5), read(1, None, 6, 7)]),
        Verdict::Invalid
    );
}

/// An indeterminate write may have taken effect ...
#[test]
fn indeterminate_write_may_have_happened() {
    let history = vec![
        Operation::indeterminate(ClientId(0), RegisterOp::Write(7), 0),
        read(1, Some(7), 10, 11),
    ];
    assert_eq!(verdict(&history), Verdict::Valid);
}

/// ... or not ...
#[test]
fn indeterminate_write_may_never_have_happened() {
    let history = vec![
        Operation::indeterminate(ClientId(0), RegisterOp::Write(7), 0),
        read(1, None, 10, 11),
    ];
    assert_eq!(verdict(&history), Verdict::Valid);
}

/// ... but not before it was called, and not undone once observed.
#[test]
fn indeterminate_write_cannot_precede_its_call_or_be_unobserved() {
    let early = vec![
        read(1, Some(7), 0, 1),
        Operation::indeterminate(ClientId(0), RegisterOp::Write(7), 5),
    ];
    assert_eq!(verdict(&early), Verdict::Invalid);
    let flicker = vec![
        Operation::indeterminate(ClientId(0), RegisterOp::Write(7), 0),
        read(1, Some(7), 10, 11),
        read(1, None, 12, 13),
    ];
    assert_eq!(verdict(&flicker), Verdict::Invalid);
}

/// Nothing observed means nothing vouched for.
#[test]
fn empty_history_is_unknown_not_valid() {
    let result = check(&Register::<i64>::new(None), &[], &CheckOptions::default()).expect("ok");
    assert_eq!(result.verdict, Verdict::Unknown);
    assert_eq!(result.unknown_reason, Some(UnknownReason::EmptyHistory));
}

/// A search cut short is unknown, with the reason, never valid; the same
/// history with enough budget is decided.
#[test]
fn exhausted_budget_is_unknown_and_enough_budget_decides() {
    // Many concurrent writes and one late read: needs several steps. Value 0 is written
    // twice, so the read does not name its writer and the zone fast path leaves the part
    // to the search.
    let mut history: Vec<RegisterOperation> = (0..6)
        .map(|client| write(client, client as i64, 0, 100))
        .collect();
    history.push(write(6, 0, 0, 100));
    history.push(read(9, Some(3), 101, 102));
    let tight = check(
        &Register::new(None),
        &history,
        &CheckOptions::with_budget(Budget::steps(2)),
    )
    .expect("ok");
    assert_eq!(tight.verdict, Verdict::Unknown);
    assert_eq!(
        tight.unknown_reason,
        Some(UnknownReason::StepBudgetExhausted { steps_max: 2 })
    );
    let ample = check(
        &Register::new(None),
        &history,
        &CheckOptions::with_budget(Budget::steps(10_000)),
    )
    .expect("ok");
    assert_eq!(ample.verdict, Verdict::Valid);
}

/// A return before the call is rejected with the operation named.
#[test]
fn return_before_call_is_an_error() {
    let error = check(
        &Register::new(None),
        &[write(0, 1, 5, 4)],
        &CheckOptions::default(),
    )
    .expect_err("bad");
    assert_eq!(
        error,
        HistoryError::ReturnBeforeCall {
            op: OpIndex(0),
            call: Timestamp(5),
            return_at: Timestamp(4)
        }
    );
}

fn kv(
    client: u64,
    key: &str,
    op: &str,
    value: &str,
    call: u64,
    return_at: u64,
) -> Operation<KvOp, KvResult> {
    let key = key.to_owned();
    let (input, output) = match op {
        "get" => (KvOp::Get { key }, KvResult::Value(value.to_owned())),
        "put" => (
            KvOp::Put {
                key,
                value: value.to_owned(),
            },
            KvResult::Done,
        ),
        _ => (
            KvOp::Append {
                key,
                value: value.to_owned(),
            },
            KvResult::Done,
        ),
    };
    Operation::completed(ClientId(client), input, call, output, return_at)
}

/// Every key is decided; the counterexample comes from the smallest failing
/// key and names the operation that got stuck.
#[test]
fn counterexample_is_from_the_smallest_failing_partition() {
    let history = vec![
        // Key "big": three operations, stale read.
        kv(0, "big", "append", "a", 0, 1),
        kv(0, "big", "append", "b", 2, 3),
        kv(1, "big", "get", "a", 4, 5),
        // Key "small": two operations, read of a value never written.
        kv(2, "small", "put", "x", 0, 1),
        kv(3, "small", "get", "y", 2, 3),
        // Key "fine": valid.
        kv(4, "fine", "append", "z", 0, 1),
        kv(4, "fine", "get", "z", 2, 3),
    ];
    let result = check(&KvModel, &history, &CheckOptions::default()).expect("ok");
    assert_eq!(result.verdict, Verdict::Invalid);
    let verdicts: Vec<Verdict> = result
        .partitions
        .iter()
        .map(|part| part.outcome.verdict())
        .collect();
    assert_eq!(
        verdicts,
        vec![Verdict::Invalid, Verdict::Invalid, Verdict::Valid]
    );
    let counterexample = result.counterexample().expect("invalid");
    assert_eq!(counterexample.partition_operations, 2);
    // The get of "y" is hopeless from the start: no put of "y" exists.
    assert!(counterexample.prefix.len() <= 1);
    assert_eq!(
        counterexample.blocking.as_ref().map(|op| op.op),
        Some(OpIndex(4))
    );
    let text = counterexample.to_string();
    assert!(text.contains("get \"small\" -> \"y\""), "{text}");
    let json = serde_json::to_string(counterexample).expect("serializable");
    assert!(json.contains("\"partition_operations\":2"));
}

fn send(
    client: u64,
    value: u32,
    offset: u64,
    call: u64,
    return_at: u64,
) -> Operation<LogOp<u32>, LogResult<u32>> {
    Operation::completed(
        ClientId(client),
        LogOp::Send { value },
        call,
        LogResult::Sent {
            offset: Offset(offset),
        },
        return_at,
    )
}

fn poll(
    client: u64,
    from: u64,
    values: &[u32],
    call: u64,
    return_at: u64,
) -> Operation<LogOp<u32>, LogResult<u32>> {
    Operation::completed(
        ClientId(client),
        LogOp::Read { from: Offset(from) },
        call,
        LogResult::Read {
            values: values.to_vec(),
        },
        return_at,
    )
}

/// Concurrent sends may land in either order, and a read may return a
/// short prefix of what is there.
#[test]
fn log_concurrent_sends_and_short_read_are_linearizable() {
    let history = vec![
        send(0, 10, 1, 0, 5),
        send(1, 11, 0, 0, 5),
        poll(2, 0, &[11], 6, 7),
    ];
    let result = check(&LogModel::new(), &history, &CheckOptions::default()).expect("ok");
    assert_eq!(result.verdict, Verdict::Valid);
}

/// A read that skips an acknowledged record is not.
#[test]
fn log_read_with_gap_is_not_linearizable() {
    let history = vec![
        send(0, 10, 0, 0, 1),
        send(0, 11, 1, 2, 3),
        poll(2, 0, &[11], 4, 5),
    ];
    let result = check(&LogModel::new(), &history, &CheckOptions::default()).expect("ok");
    assert_eq!(result.verdict, Verdict::Invalid);
}
