//! The per-partition linearizability analysis (`nonlinearizable-log`, an exact linear-time
//! schedule over observed contents) agrees with the general WGL search of
//! `logjam-linearizable` over the log model, on small random histories with arbitrary
//! real-time overlap. Whenever the queue checker decides a key, the two verdicts must match.

use logjam_checkers::{AnomalyKind, check_ops};
use logjam_history::builder::{poll_ops, send_ops};
use logjam_history::{Function, HistoryBuilder, MicroOp, OpType, OpValue};
use logjam_linearizable::models::log::{LogModel, LogOp, LogResult, Offset};
use logjam_linearizable::{
    Budget, CheckOptions, ClientId, Operation, Outcome, Timestamp, Verdict, check,
};
use proptest::prelude::*;

/// One client op of the generated history.
#[derive(Debug, Clone)]
enum Planned {
    /// Send of value `value`; `acked` ⇒ ok at its true offset, else info.
    Send { value: i64, acked: bool },
    /// Poll returning the true log's records `from..from + len`.
    Read { from: usize, len: usize },
}

/// A history: the true log (a permutation of the sent values), the ops, and the event order
/// (each op's invoke and completion, as positions in a shuffled sequence).
fn history() -> impl Strategy<Value = (Vec<i64>, Vec<Planned>, Vec<usize>)> {
    (2usize..6, 1usize..5).prop_flat_map(|(sends, reads)| {
        let order = Just((0..sends as i64).collect::<Vec<_>>()).prop_shuffle();
        let acked = proptest::collection::vec(any::<bool>(), sends);
        let read_specs = proptest::collection::vec((0..sends, 1..=sends), reads);
        let events = Just((0..2 * (sends + reads)).collect::<Vec<_>>()).prop_shuffle();
        (order, acked, read_specs, events).prop_map(move |(log, acked, read_specs, events)| {
            let mut ops: Vec<Planned> = (0..sends)
                .map(|value| Planned::Send {
                    value: value as i64,
                    acked: acked[value],
                })
                .collect();
            for (from, len) in read_specs {
                let len = len.min(sends - from);
                ops.push(Planned::Read { from, len });
            }
            (log, ops, events)
        })
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2000, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn realtime_check_agrees_with_the_wgl_search((log, ops, events) in history()) {
        // Event e belongs to op e / 2; the first of an op's two events in the shuffled order
        // is its invoke, the second its completion.
        let position = |event: usize| events.iter().position(|e| *e == event).unwrap();
        let mut timeline: Vec<(usize, usize, bool)> = Vec::new(); // (time, op, is_invoke)
        for op in 0..ops.len() {
            let (a, b) = (position(2 * op), position(2 * op + 1));
            timeline.push((a.min(b), op, true));
            timeline.push((a.max(b), op, false));
        }
        timeline.sort();
        let offset_of = |value: i64| log.iter().position(|v| *v == value).unwrap();

        let mut builder = HistoryBuilder::new("queue");
        let mut operations = Vec::new();
        let mut lines = vec![(0usize, 0usize); ops.len()];
        for (_, op, is_invoke) in &timeline {
            let (process, planned) = (*op as u64, &ops[*op]);
            let line = builder.ops().len();
            if *is_invoke { lines[*op].0 = line } else { lines[*op].1 = line }
            match (planned, is_invoke) {
                (Planned::Send { value, .. }, true) => {
                    builder.client(process, OpType::Invoke, Function::Send, send_ops(&[(0, *value, None)]));
                }
                (Planned::Send { value, acked: true }, false) => {
                    let offset = offset_of(*value) as i64;
                    builder.client(process, OpType::Ok, Function::Send, send_ops(&[(0, *value, Some(offset))]));
                }
                (Planned::Send { value, acked: false }, false) => {
                    builder.client(process, OpType::Info, Function::Send, send_ops(&[(0, *value, None)]));
                }
                (Planned::Read { .. }, true) => {
                    let invoke = OpValue::MicroOps(vec![MicroOp::Poll { reads: None }]);
                    builder.client(process, OpType::Invoke, Function::Poll, invoke);
                }
                (Planned::Read { from, len }, false) => {
                    let records: Vec<(i64, i64)> =
                        (*from..from + len).map(|offset| (offset as i64, log[offset])).collect();
                    builder.client(process, OpType::Ok, Function::Poll, poll_ops(&[(0, &records)]));
                }
            }
        }
        let time = |line: usize| builder.ops()[line].time_ns;
        for (op, planned) in ops.iter().enumerate() {
            let (call, returned) = (time(lines[op].0), time(lines[op].1));
            operations.push(match planned {
                Planned::Send { value, acked: true } => Operation {
                    client_id: ClientId(op as u64),
                    input: LogOp::Send { value: *value },
                    call: Timestamp(call),
                    output: Outcome::Returned(LogResult::Sent { offset: Offset(offset_of(*value) as u64) }),
                    return_at: Timestamp(returned),
                },
                Planned::Send { value, acked: false } => Operation {
                    client_id: ClientId(op as u64),
                    input: LogOp::Send { value: *value },
                    call: Timestamp(call),
                    output: Outcome::Unknown,
                    return_at: Timestamp::INFINITY,
                },
                Planned::Read { from, len } => Operation {
                    client_id: ClientId(op as u64),
                    input: LogOp::Read { from: Offset(*from as u64) },
                    call: Timestamp(call),
                    output: Outcome::Returned(LogResult::Read { values: log[*from..from + len].to_vec() }),
                    return_at: Timestamp(returned),
                },
            });
        }
        let (header, history) = builder.build();
        let report = check_ops(&header, history).expect("well-formed");
        prop_assume!(report.linearizability.keys_decided == 1);
        let ours = report.anomalies.contains_key(&AnomalyKind::NonlinearizableLog);
        let wgl = check(&LogModel::<i64>::new(), &operations, &CheckOptions::with_budget(Budget::UNLIMITED)).unwrap();
        prop_assert_eq!(ours, wgl.verdict == Verdict::Invalid, "{}", report.summary());
    }
}
