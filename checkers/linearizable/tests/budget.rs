//! Large histories stay inside the budgets: the search stops before its
//! own counted memory would cross the limit and answers `unknown` with the
//! reason and how far it got; the deadline stops it; the stale-read scan
//! decides a 10,000-operation history with one stale read at once; parts
//! come out the same on one thread or two.
//!
//! Budgets are small so the tests are quick, and every limit is checked on
//! the engine's deterministic counters (bytes it counted, steps), never on
//! the machine's speed.

mod support;

use logjam_linearizable::models::kv::{KvModel, KvOp, KvResult};
use logjam_linearizable::models::register::{Register, RegisterOp, RegisterResult};
use logjam_linearizable::{
    Budget, CheckOptions, ClientId, Operation, Outcome, PartitionOutcome, UnknownReason, Verdict,
    check,
};
use std::time::Duration;
use support::register_histories::{RegisterOperation, Shape, generate};

const MIB: u64 = 1 << 20;

fn shape(clients: u64, operations: usize, stale_read: bool, seed: u64) -> Shape {
    Shape {
        clients,
        operations,
        indeterminate_per_mille: 5,
        stale_read,
        seed,
    }
}

fn check_register(
    history: &[RegisterOperation],
    budget: Budget,
) -> logjam_linearizable::CheckResult {
    check(
        &Register::new(None),
        history,
        &CheckOptions::with_budget(budget).with_threads(1),
    )
    .expect("generated histories are well formed")
}

/// The history with one unread write made to repeat the first write's value. It stays valid
/// (nobody observed that write), but reads no longer name their writer, so the zone fast path
/// declines and the search itself runs: the tests of the search's budgets use it.
fn searched(mut history: Vec<RegisterOperation>) -> Vec<RegisterOperation> {
    let read: std::collections::HashSet<u64> = history
        .iter()
        .filter_map(|op| match &op.output {
            Outcome::Returned(RegisterResult::Read(Some(value))) => Some(*value),
            _ => None,
        })
        .collect();
    let first = history
        .iter()
        .find_map(|op| match op.input {
            RegisterOp::Write(value) => Some(value),
            RegisterOp::Read => None,
        })
        .expect("a write");
    let unread = history
        .iter()
        .position(|op| {
            !op.is_optional()
                && matches!(op.input, RegisterOp::Write(value) if value != first && !read.contains(&value))
        })
        .expect("an unread write");
    history[unread].input = RegisterOp::Write(first);
    history
}

/// The 50-client, 10,000-operation history with one provably stale read is
/// invalid, decided by the scan without a single search step, and the
/// counterexample is the three operations that prove it.
#[test]
fn stale_read_in_ten_thousand_operations_is_invalid_with_a_three_operation_witness() {
    let generated = generate(&shape(50, 10_000, true, 1));
    let stale = generated
        .stale_read
        .expect("the generator planted a stale read");
    // A step budget far too small for a search over 10,000 operations.
    let result = check_register(&generated.history, Budget::steps(1_000).with_memory(MIB));
    assert_eq!(result.verdict, Verdict::Invalid);
    let effort = result.total_effort();
    assert!(effort.decided_by_scan);
    assert_eq!(effort.steps, 0);
    let counterexample = result
        .counterexample()
        .expect("invalid has a counterexample");
    let blocking = counterexample.blocking.as_ref().expect("the stale read");
    assert_eq!(blocking.op.0, stale);
    assert_eq!(counterexample.prefix.len(), 2, "{counterexample}");
    let [setter, overwrite] = [&counterexample.prefix[0], &counterexample.prefix[1]];
    // The witness's claims hold in the history: setter before overwrite
    // before the read, and the read returned the setter's value.
    assert!(setter.operation.return_at < overwrite.operation.call);
    assert!(overwrite.operation.return_at < blocking.call);
    let RegisterOp::Write(written) = generated.history[setter.operation.op.0].input else {
        panic!("the setter is a write")
    };
    assert_eq!(
        generated.history[stale].output,
        Outcome::Returned(RegisterResult::Read(Some(written)))
    );
}

/// The same history without the stale read is not invalid: the scan does
/// not invent witnesses (the search then decides within the budget or says
/// unknown).
#[test]
fn same_history_without_the_stale_read_is_not_invalid() {
    let generated = generate(&shape(50, 10_000, false, 1));
    assert_eq!(generated.stale_read, None);
    let result = check_register(
        &searched(generated.history.clone()),
        Budget::steps(20_000).with_memory(64 * MIB),
    );
    assert_ne!(result.verdict, Verdict::Invalid);
    assert!(!result.total_effort().decided_by_scan);
}

/// A 200-client history needs far more than 8 MiB of visited
/// configurations: the search forgets its visited cache whenever growing it
/// would pass 8 MiB and goes on in the room it has. Were the budget
/// ignored, the counted peak would pass 8 MiB and nothing would be
/// forgotten.
#[test]
fn memory_budget_bounds_the_search_which_forgets_rather_than_grows() {
    let generated = generate(&shape(200, 20_000, false, 2));
    let memory_max = 8 * MIB;
    let steps_max = 1_000_000;
    let result = check_register(
        &searched(generated.history.clone()),
        Budget::steps(steps_max).with_memory(memory_max),
    );
    let effort = result.total_effort();
    assert_ne!(result.verdict, Verdict::Invalid);
    if result.verdict == Verdict::Unknown {
        assert_eq!(
            result.unknown_reason,
            Some(UnknownReason::StepBudgetExhausted { steps_max }),
            "{effort:?}"
        );
    }
    assert!(
        effort.memory_peak <= memory_max,
        "peak {} > budget {memory_max}",
        effort.memory_peak
    );
    assert!(effort.cache_resets > 0, "the budget bound the search");
    assert!(effort.steps <= steps_max);
    assert!(
        effort.deepest_prefix > 0,
        "the partial result says how far it got"
    );
}

/// A budget too small for the search's fixed structures stops it before
/// it starts: unknown for memory, nothing counted past the limit.
#[test]
fn memory_budget_below_the_fixed_structures_gives_unknown_for_memory() {
    let generated = generate(&shape(50, 10_000, false, 2));
    let memory_max = 256 << 10;
    let result = check_register(
        &searched(generated.history.clone()),
        Budget::UNLIMITED.with_memory(memory_max),
    );
    assert_eq!(result.verdict, Verdict::Unknown);
    assert_eq!(
        result.unknown_reason,
        Some(UnknownReason::MemoryBudgetExhausted { memory_max })
    );
    assert!(result.total_effort().memory_peak <= memory_max);
}

/// A read that returns a value whose only write was called after the read
/// returned is invalid, decided by the scan (the search alone would have to
/// exhaust every order before the read).
#[test]
fn read_from_the_future_is_found_by_the_scan() {
    let mut history = generate(&shape(50, 10_000, false, 5)).history;
    let read = (5_000..history.len())
        .find(|&index| {
            matches!(history[index].input, RegisterOp::Read) && !history[index].is_optional()
        })
        .expect("a completed read");
    let (value, writer) = (read..history.len())
        .find_map(|index| match history[index].input {
            RegisterOp::Write(value)
                if history[index].call > history[read].return_at
                    && !history[index].is_optional() =>
            {
                Some((value, index))
            }
            _ => None,
        })
        .expect("a later write");
    history[read].output = Outcome::Returned(RegisterResult::Read(Some(value)));
    let result = check_register(&history, Budget::steps(1_000).with_memory(MIB));
    assert_eq!(result.verdict, Verdict::Invalid);
    assert!(result.total_effort().decided_by_scan);
    let counterexample = result
        .counterexample()
        .expect("invalid has a counterexample");
    assert_eq!(
        counterexample.blocking.as_ref().map(|op| op.op.0),
        Some(read)
    );
    assert_eq!(counterexample.prefix.len(), 1);
    assert_eq!(counterexample.prefix[0].operation.op.0, writer);
}

/// The counted peak stays under the limit for every limit, not just one
/// (growth is announced before it happens).
#[test]
fn counted_peak_never_exceeds_any_memory_budget() {
    let generated = generate(&shape(50, 10_000, false, 3));
    for memory_max in [MIB, 3 * MIB, 5 * MIB, 17 * MIB] {
        let result = check_register(
            &searched(generated.history.clone()),
            Budget::steps(2_000_000).with_memory(memory_max),
        );
        let peak = result.total_effort().memory_peak;
        assert!(peak <= memory_max, "peak {peak} > budget {memory_max}");
        if result.verdict == Verdict::Unknown {
            assert!(matches!(
                result.unknown_reason,
                Some(
                    UnknownReason::MemoryBudgetExhausted { .. }
                        | UnknownReason::StepBudgetExhausted { .. }
                )
            ));
        } else {
            assert_eq!(result.verdict, Verdict::Valid);
        }
    }
}

/// A deadline already passed stops every part before its first clock
/// check: unknown, for time, within one check interval of steps.
#[test]
fn passed_deadline_gives_unknown_for_time_within_one_check_interval() {
    let generated = generate(&shape(50, 10_000, false, 4));
    let result = check_register(
        &searched(generated.history.clone()),
        Budget::time(Duration::ZERO),
    );
    assert_eq!(result.verdict, Verdict::Unknown);
    assert_eq!(
        result.unknown_reason,
        Some(UnknownReason::TimeBudgetExhausted {
            time_max: Duration::ZERO
        })
    );
    assert!(result.total_effort().steps <= 4_096);
}

/// Several keys as one key-value history: one part per key.
fn kv_history(
    keys: u64,
    operations_per_key: usize,
    stale_key: Option<u64>,
) -> Vec<Operation<KvOp, KvResult>> {
    let mut history = Vec::new();
    for key in 0..keys {
        let generated = generate(&Shape {
            clients: 10,
            operations: operations_per_key,
            indeterminate_per_mille: 5,
            stale_read: stale_key == Some(key),
            seed: 100 + key,
        });
        let name = format!("k{key}");
        for operation in generated.history {
            let (input, output) = match (operation.input, operation.output) {
                (RegisterOp::Write(value), output) => (
                    KvOp::Put {
                        key: name.clone(),
                        value: value.to_string(),
                    },
                    match output {
                        Outcome::Returned(_) => Outcome::Returned(KvResult::Done),
                        Outcome::Unknown => Outcome::Unknown,
                    },
                ),
                (RegisterOp::Read, Outcome::Returned(RegisterResult::Read(value))) => (
                    KvOp::Get { key: name.clone() },
                    Outcome::Returned(KvResult::Value(
                        value.map_or_else(String::new, |value| value.to_string()),
                    )),
                ),
                (RegisterOp::Read, _) => (KvOp::Get { key: name.clone() }, Outcome::Unknown),
            };
            history.push(Operation {
                client_id: ClientId(key * 1_000 + operation.client_id.0),
                input,
                call: operation.call,
                output,
                return_at: operation.return_at,
            });
        }
    }
    history
}

/// Keys searched on two threads give exactly the reports of one thread
/// (verdicts, steps, peaks), with the stale key found by the scan.
#[test]
fn two_threads_give_the_same_reports_as_one() {
    let history = kv_history(4, 400, Some(2));
    let budget = Budget::steps(1_000_000).with_memory(64 * MIB);
    let run = |threads| {
        check(
            &KvModel,
            &history,
            &CheckOptions::with_budget(budget).with_threads(threads),
        )
        .expect("well formed")
    };
    let (one, two) = (run(1), run(2));
    assert_eq!(one.verdict, Verdict::Invalid);
    assert_eq!(one.partitions.len(), 4);
    for (a, b) in one.partitions.iter().zip(&two.partitions) {
        assert_eq!(a.outcome, b.outcome);
        assert_eq!(a.effort.steps, b.effort.steps);
        assert_eq!(a.effort.configurations, b.effort.configurations);
    }
    assert!(matches!(
        one.partitions[2].outcome,
        PartitionOutcome::NotLinearizable { .. }
    ));
    assert!(one.partitions[2].effort.decided_by_scan);
    for part in [0, 1, 3] {
        assert_eq!(one.partitions[part].outcome.verdict(), Verdict::Valid);
    }
}

/// The 10,000-operation history without the stale read is decided valid
/// when the budget allows (the chunked cache keys of large parts lose no
/// linearization), with the witness covering every completed operation.
#[test]
fn ten_thousand_operation_valid_history_is_decided_valid() {
    let generated = generate(&shape(50, 10_000, false, 1));
    let result = check_register(
        &searched(generated.history.clone()),
        Budget::steps(5_000_000).with_memory(1 << 30),
    );
    assert_eq!(result.verdict, Verdict::Valid);
    let PartitionOutcome::Linearizable { linearization } = &result.partitions[0].outcome else {
        panic!("valid has a witness")
    };
    assert!(linearization.len() >= completed(&generated.history));
}

/// Operations that returned: every linearization holds at least these.
fn completed(history: &[RegisterOperation]) -> usize {
    history
        .iter()
        .filter(|operation| !operation.is_optional())
        .count()
}

/// Whether `order` is a linearization of `history` for a register starting empty: each read
/// returns the last value written before it in `order`, and no operation returned before an
/// earlier one in `order` was called (checked here, independently of the engine).
fn is_register_linearization(history: &[RegisterOperation], order: &[usize]) -> bool {
    let mut value = None;
    let mut latest_call = None;
    order.iter().all(|&index| {
        let op = &history[index];
        let in_time = latest_call.is_none_or(|latest| op.return_at >= latest);
        latest_call = latest_call.max(Some(op.call));
        let allowed = match (&op.input, &op.output) {
            (RegisterOp::Write(written), _) => {
                value = Some(*written);
                true
            }
            (RegisterOp::Read, Outcome::Returned(RegisterResult::Read(read))) => *read == value,
            (RegisterOp::Read, _) => true,
        };
        in_time && allowed
    })
}

/// The 200-client, 100,000-operation valid history (the one that ran the search past its
/// 60 s budget) is decided valid by the zone order, without a search step, under a budget of
/// one step: every write sets a fresh value, so each read names its writer.
#[test]
fn a_hundred_thousand_operation_valid_history_is_decided_by_its_zones() {
    let generated = generate(&shape(200, 100_000, false, 2));
    let result = check_register(&generated.history, Budget::steps(1).with_memory(64 * MIB));
    assert_eq!(result.verdict, Verdict::Valid);
    let effort = result.total_effort();
    assert!(effort.decided_by_scan);
    assert_eq!(effort.steps, 0);
    let PartitionOutcome::Linearizable { linearization } = &result.partitions[0].outcome else {
        panic!("valid has a witness")
    };
    let order: Vec<usize> = linearization.iter().map(|op| op.0).collect();
    assert!(is_register_linearization(&generated.history, &order));
    assert!(order.len() >= completed(&generated.history));
}

/// With the stale read planted, the zone order does not check, and the stale-read scan (which
/// runs first) names it: the fast path never turns an invalid history valid.
#[test]
fn the_zone_order_never_hides_a_stale_read() {
    let generated = generate(&shape(200, 100_000, true, 2));
    let result = check_register(&generated.history, Budget::steps(1).with_memory(64 * MIB));
    assert_eq!(result.verdict, Verdict::Invalid);
}
