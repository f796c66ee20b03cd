//! Property tests for the engine.
//!
//! 1. On small random histories (≤ 8 operations, ≤ 3 clients, with ties,
//!    timed-out reads and indeterminate operations) the engine agrees with
//!    the brute-force oracle, for the register, CAS register and log
//!    models; when it says valid, its witness is checked independently.
//! 2. Histories produced by running a correct model (random overlapping
//!    intervals, each operation taking effect at a random instant inside
//!    its interval) are valid.
//! 3. Changing one read's output in such a history to a value that was
//!    never written makes it invalid.
//!
//! Randomness comes from a proptest-generated vector of choices, so
//! shrinking makes histories shorter and simpler.

use logjam_linearizable::models::cas::{CasOp, CasRegister, CasResult};
use logjam_linearizable::models::kv::{KvModel, KvOp, KvResult};
use logjam_linearizable::models::kv_map::KvMapModel;
use logjam_linearizable::models::log::{LogModel, LogOp, LogResult, Offset};
use logjam_linearizable::models::register::{Register, RegisterOp, RegisterResult};
use logjam_linearizable::oracle::is_linearizable_exhaustive;
use logjam_linearizable::{
    Budget, CheckOptions, ClientId, Model, Operation, Outcome, PartitionOutcome, Timestamp,
    Verdict, check,
};
use proptest::prelude::*;

/// A stream of random choices; returns 0 once exhausted so shrinking to a
/// shorter vector yields a simpler history.
struct Choices {
    values: Vec<u32>,
    position: usize,
}

impl Choices {
    fn new(values: Vec<u32>) -> Self {
        Choices {
            values,
            position: 0,
        }
    }

    /// A number in `0..bound`.
    fn below(&mut self, bound: u32) -> u32 {
        let value = self.values.get(self.position).copied().unwrap_or(0);
        self.position += 1;
        value % bound.max(1)
    }

    /// True with probability `1 / one_in` (false once exhausted, so
    /// shrunk cases have no rare events).
    fn one_in(&mut self, one_in: u32) -> bool {
        self.below(one_in) == one_in - 1
    }
}

fn options() -> CheckOptions {
    // Deterministic and far beyond what these histories need.
    CheckOptions::with_budget(Budget::steps(10_000_000))
}

/// Lays out per-client sequential intervals with small random gaps so that
/// clients overlap and timestamps tie. `random_op` draws an operation
/// (input, output) for a completed call.
fn random_history<I, O>(
    choices: &mut Choices,
    mut random_op: impl FnMut(&mut Choices) -> (I, Outcome<O>),
    read_only_unknown: impl Fn(&I) -> bool,
) -> Vec<Operation<I, O>> {
    let clients = 1 + choices.below(3);
    let total = 1 + choices.below(8);
    let mut clock = vec![0u64; clients as usize];
    let mut crashed = vec![false; clients as usize];
    let mut history = Vec::new();
    for _ in 0..total {
        let client = choices.below(clients) as usize;
        if crashed[client] {
            continue;
        }
        let call = clock[client] + u64::from(choices.below(3));
        let return_at = call + u64::from(choices.below(5));
        clock[client] = return_at + 1;
        let (input, output) = random_op(choices);
        let mut operation = Operation {
            client_id: ClientId(client as u64),
            input,
            call: Timestamp(call),
            output,
            return_at: Timestamp(return_at),
        };
        if choices.one_in(7) {
            // Indeterminate: the client crashes and never learns the result.
            operation.output = Outcome::Unknown;
            operation.return_at = Timestamp::INFINITY;
            crashed[client] = true;
        } else if read_only_unknown(&operation.input) && choices.one_in(8) {
            // A timed-out read: unknown output, finite return.
            operation.output = Outcome::Unknown;
        }
        history.push(operation);
    }
    history
}

/// Replays a witness: every returned operation appears once, real-time
/// order holds, and the model accepts each step.
fn witness_is_valid<M: Model>(
    model: &M,
    history: &[Operation<M::Input, M::Output>],
    partition: &[logjam_linearizable::OpIndex],
    order: &[logjam_linearizable::OpIndex],
) -> bool {
    let mut seen = std::collections::HashSet::new();
    let mut state = model.init();
    for (position, op) in order.iter().enumerate() {
        if !partition.contains(op) || !seen.insert(*op) {
            return false;
        }
        let operation = &history[op.0];
        // Nothing placed later may have returned before this one was called.
        if order[position + 1..]
            .iter()
            .any(|later| history[later.0].return_at < operation.call)
        {
            return false;
        }
        match model.step(&state, &operation.input, &operation.output) {
            Some(next) => state = next,
            None => return false,
        }
    }
    partition
        .iter()
        .all(|op| history[op.0].is_optional() || seen.contains(op))
}

/// Engine vs oracle, plus witness replay.
fn assert_agrees_with_oracle<M: Model>(
    model: &M,
    history: &[Operation<M::Input, M::Output>],
) -> Result<(), TestCaseError> {
    let result = check(model, history, &options()).expect("generated histories are well formed");
    let oracle = is_linearizable_exhaustive(model, history);
    let expected = if oracle {
        Verdict::Valid
    } else {
        Verdict::Invalid
    };
    prop_assert_eq!(result.verdict, expected, "history: {:#?}", history);
    for report in &result.partitions {
        if let PartitionOutcome::Linearizable { linearization } = &report.outcome {
            prop_assert!(
                witness_is_valid(model, history, &report.operations, linearization),
                "bad witness {:?} for {:#?}",
                linearization,
                history
            );
        }
    }
    if result.verdict == Verdict::Invalid {
        prop_assert!(result.counterexample().is_some());
    }
    Ok(())
}

fn random_register_op(choices: &mut Choices) -> (RegisterOp<u8>, Outcome<RegisterResult<u8>>) {
    if choices.one_in(2) {
        let value = choices.below(3) as u8;
        (
            RegisterOp::Write(value),
            Outcome::Returned(RegisterResult::Written),
        )
    } else {
        let read = match choices.below(4) {
            3 => None,
            value => Some(value as u8),
        };
        (
            RegisterOp::Read,
            Outcome::Returned(RegisterResult::Read(read)),
        )
    }
}

fn random_cas_op(choices: &mut Choices) -> (CasOp<u8>, Outcome<CasResult<u8>>) {
    match choices.below(3) {
        0 => {
            let value = choices.below(3) as u8;
            (CasOp::Write(value), Outcome::Returned(CasResult::Written))
        }
        1 => {
            let read = match choices.below(4) {
                3 => None,
                value => Some(value as u8),
            };
            (CasOp::Read, Outcome::Returned(CasResult::Read(read)))
        }
        _ => {
            let from = choices.below(3) as u8;
            let to = choices.below(3) as u8;
            let succeeded = choices.one_in(2);
            (
                CasOp::Cas { from, to },
                Outcome::Returned(CasResult::Cas { succeeded }),
            )
        }
    }
}

fn random_log_op(choices: &mut Choices) -> (LogOp<u8>, Outcome<LogResult<u8>>) {
    if choices.one_in(2) {
        let value = choices.below(3) as u8;
        let offset = Offset(u64::from(choices.below(3)));
        (
            LogOp::Send { value },
            Outcome::Returned(LogResult::Sent { offset }),
        )
    } else {
        let from = Offset(u64::from(choices.below(3)));
        let output = if choices.one_in(6) {
            LogResult::OffsetOutOfRange
        } else {
            let length = choices.below(3);
            let values = (0..length).map(|_| choices.below(3) as u8).collect();
            LogResult::Read { values }
        };
        (LogOp::Read { from }, Outcome::Returned(output))
    }
}

fn random_kv_op(choices: &mut Choices) -> (KvOp, Outcome<KvResult>) {
    let key = choices.below(2).to_string();
    let value = ["a", "b", "ab"][choices.below(3) as usize].to_owned();
    match choices.below(3) {
        0 => (KvOp::Put { key, value }, Outcome::Returned(KvResult::Done)),
        1 => (
            KvOp::Append { key, value },
            Outcome::Returned(KvResult::Done),
        ),
        _ => {
            let read = ["", "a", "b", "ab", "aab", "ba"][choices.below(6) as usize].to_owned();
            (KvOp::Get { key }, Outcome::Returned(KvResult::Value(read)))
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(1500))]

    /// Goal: the register search is exact on tiny histories.
    #[test]
    fn register_engine_agrees_with_brute_force(values in prop::collection::vec(any::<u32>(), 0..64)) {
        let mut choices = Choices::new(values);
        let history = random_history(&mut choices, random_register_op, |input| matches!(input, RegisterOp::Read));
        prop_assume!(!history.is_empty());
        assert_agrees_with_oracle(&Register::new(None), &history)?;
    }

    /// Goal: registers whose writes set distinct values, which the zone fast
    /// path decides without a search, are decided exactly (reads may return
    /// any value written so far, one not written yet, or the initial one).
    #[test]
    fn register_with_distinct_writes_agrees_with_brute_force(values in prop::collection::vec(any::<u32>(), 0..64)) {
        let mut choices = Choices::new(values);
        let mut written = 0u8;
        let history = random_history(
            &mut choices,
            |choices| {
                if choices.one_in(2) {
                    written += 1;
                    (RegisterOp::Write(written), Outcome::Returned(RegisterResult::Written))
                } else {
                    let read = match choices.below(u32::from(written) + 2) {
                        0 => None,
                        value => Some(value as u8),
                    };
                    (RegisterOp::Read, Outcome::Returned(RegisterResult::Read(read)))
                }
            },
            |input| matches!(input, RegisterOp::Read),
        );
        prop_assume!(!history.is_empty());
        assert_agrees_with_oracle(&Register::new(None), &history)?;
    }

    /// Goal: the CAS search (with failed CASes as read-only steps and
    /// unknown CASes) is exact on tiny histories.
    #[test]
    fn cas_engine_agrees_with_brute_force(values in prop::collection::vec(any::<u32>(), 0..64)) {
        let mut choices = Choices::new(values);
        let history = random_history(&mut choices, random_cas_op, |input| matches!(input, CasOp::Read));
        prop_assume!(!history.is_empty());
        assert_agrees_with_oracle(&CasRegister::new(None), &history)?;
    }

    /// Goal: the log search is exact on tiny histories.
    #[test]
    fn log_engine_agrees_with_brute_force(values in prop::collection::vec(any::<u32>(), 0..64)) {
        let mut choices = Choices::new(values);
        let history = random_history(&mut choices, random_log_op, |input| matches!(input, LogOp::Read { .. }));
        prop_assume!(!history.is_empty());
        assert_agrees_with_oracle(&LogModel::new(), &history)?;
    }

    /// Goal: the per-key search (with its put/append pruning) agrees with
    /// brute force over the unpartitioned map model, and with itself
    /// unpartitioned.
    #[test]
    fn kv_engine_agrees_with_brute_force_over_the_map_model(values in prop::collection::vec(any::<u32>(), 0..64)) {
        let mut choices = Choices::new(values);
        let history = random_history(&mut choices, random_kv_op, |input| matches!(input, KvOp::Get { .. }));
        prop_assume!(!history.is_empty());
        assert_agrees_with_oracle(&KvModel, &history)?;
        let oracle = is_linearizable_exhaustive(&KvMapModel, &history);
        let verdict = check(&KvModel, &history, &options()).unwrap().verdict;
        prop_assert_eq!(verdict == Verdict::Valid, oracle, "history: {:#?}", history);
        let unpartitioned = check(&KvMapModel, &history, &options()).unwrap().verdict;
        prop_assert_eq!(unpartitioned, verdict);
    }
}

/// Runs a correct object: clients invoke, the operation takes effect at a
/// random later tick (computing the true output), then returns at a random
/// later tick. Some operations never return (indeterminate), with or
/// without having taken effect.
fn execute<M: Model>(
    choices: &mut Choices,
    model: &M,
    clients: usize,
    operations: usize,
    mut random_input: impl FnMut(&mut Choices, &M::State) -> M::Input,
    mut true_output: impl FnMut(&M::State, &M::Input) -> M::Output,
) -> Vec<Operation<M::Input, M::Output>> {
    #[derive(Clone, Copy, PartialEq)]
    enum Phase {
        Idle,
        Invoked,
        Applied,
        Crashed,
    }
    let mut state = model.init();
    let mut phase = vec![Phase::Idle; clients];
    let mut open: Vec<Option<usize>> = vec![None; clients];
    let mut history: Vec<Operation<M::Input, M::Output>> = Vec::new();
    let mut started = 0;
    let mut tick = 0u64;
    while started < operations
        || phase
            .iter()
            .any(|p| matches!(p, Phase::Invoked | Phase::Applied))
    {
        tick += 1;
        assert!(tick < 100_000, "execution did not finish");
        let active: Vec<usize> = (0..clients)
            .filter(|&client| match phase[client] {
                Phase::Idle => started < operations,
                Phase::Invoked | Phase::Applied => true,
                Phase::Crashed => false,
            })
            .collect();
        if active.is_empty() {
            break;
        }
        let client = active[choices.below(active.len() as u32) as usize];
        match phase[client] {
            Phase::Idle if started < operations => {
                let input = random_input(choices, &state);
                open[client] = Some(history.len());
                history.push(Operation::indeterminate(
                    ClientId(client as u64),
                    input,
                    tick,
                ));
                phase[client] = Phase::Invoked;
                started += 1;
            }
            Phase::Invoked => {
                let index = open[client].expect("invoked has an op");
                let output = true_output(&state, &history[index].input);
                let outcome = Outcome::Returned(output);
                state = model
                    .step(&state, &history[index].input, &outcome)
                    .expect("the true output is allowed");
                history[index].output = outcome;
                phase[client] = Phase::Applied;
            }
            Phase::Applied => {
                let index = open[client].take().expect("applied has an op");
                if choices.one_in(12) {
                    // Took effect, but the client never hears back.
                    history[index].output = Outcome::Unknown;
                    phase[client] = Phase::Crashed;
                } else {
                    history[index].return_at = Timestamp(tick);
                    phase[client] = Phase::Idle;
                }
            }
            _ => {}
        }
        // Occasionally a client crashes before its operation takes effect.
        if phase[client] == Phase::Invoked && choices.one_in(25) {
            let index = open[client].take().expect("invoked has an op");
            history[index].output = Outcome::Unknown;
            phase[client] = Phase::Crashed;
        }
    }
    history
}

fn cas_execution(choices: &mut Choices) -> Vec<Operation<CasOp<u8>, CasResult<u8>>> {
    let model = CasRegister::new(None);
    execute(
        choices,
        &model,
        3,
        24,
        |choices, _| match choices.below(3) {
            0 => CasOp::Read,
            1 => CasOp::Write(choices.below(4) as u8),
            _ => CasOp::Cas {
                from: choices.below(4) as u8,
                to: choices.below(4) as u8,
            },
        },
        |state, input| match input {
            CasOp::Read => CasResult::Read(*state),
            CasOp::Write(_) => CasResult::Written,
            CasOp::Cas { from, .. } => CasResult::Cas {
                succeeded: *state == Some(*from),
            },
        },
    )
}

fn register_execution(choices: &mut Choices) -> Vec<Operation<RegisterOp<u8>, RegisterResult<u8>>> {
    execute(
        choices,
        &Register::new(None),
        3,
        24,
        |choices, _| {
            if choices.one_in(2) {
                RegisterOp::Read
            } else {
                RegisterOp::Write(choices.below(4) as u8)
            }
        },
        |state, input| match input {
            RegisterOp::Read => RegisterResult::Read(*state),
            RegisterOp::Write(_) => RegisterResult::Written,
        },
    )
}

fn log_execution(choices: &mut Choices) -> Vec<Operation<LogOp<u8>, LogResult<u8>>> {
    let mut next_value = 0u8;
    execute(
        choices,
        &LogModel::new(),
        3,
        24,
        |choices, state: &Vec<u8>| {
            if choices.one_in(2) {
                next_value = next_value.wrapping_add(1) % 100;
                LogOp::Send { value: next_value }
            } else {
                let from = choices.below(state.len() as u32 + 2);
                LogOp::Read {
                    from: Offset(u64::from(from)),
                }
            }
        },
        |state, input| match input {
            LogOp::Send { .. } => LogResult::Sent {
                offset: Offset(state.len() as u64),
            },
            LogOp::Read { from } => {
                let start = from.0 as usize;
                if start > state.len() {
                    LogResult::OffsetOutOfRange
                } else {
                    // A fetch may return fewer records than exist.
                    let wanted = (state.len() - start).min(2 + start % 2);
                    LogResult::Read {
                        values: state[start..start + wanted].to_vec(),
                    }
                }
            }
        },
    )
}

fn kv_execution(choices: &mut Choices) -> Vec<Operation<KvOp, KvResult>> {
    let mut counter = 0u32;
    execute(
        choices,
        &KvMapModel,
        4,
        30,
        |choices, _| {
            let key = choices.below(2).to_string();
            counter += 1;
            match choices.below(4) {
                0 | 1 => KvOp::Get { key },
                2 => KvOp::Append {
                    key,
                    value: format!("x{counter}y"),
                },
                _ => KvOp::Put {
                    key,
                    value: format!("p{counter}q"),
                },
            }
        },
        |state, input| match input {
            KvOp::Get { key } => KvResult::Value(state.get(key).cloned().unwrap_or_default()),
            _ => KvResult::Done,
        },
    )
}

/// Changes the output of the `pick`-th completed read (mod the count) with
/// `corrupt`; `None` if there is no completed read.
fn corrupt_one_read<I, O>(
    history: &mut [Operation<I, O>],
    pick: usize,
    is_read: impl Fn(&I) -> bool,
    corrupt: impl FnOnce(&mut O),
) -> Option<usize> {
    let reads: Vec<usize> = history
        .iter()
        .enumerate()
        .filter(|(_, op)| is_read(&op.input) && !op.is_optional() && !op.output.is_unknown())
        .map(|(index, _)| index)
        .collect();
    if reads.is_empty() {
        return None;
    }
    let index = reads[pick % reads.len()];
    if let Outcome::Returned(output) = &mut history[index].output {
        corrupt(output);
    }
    Some(index)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(400))]

    /// Goal: histories of a correct register are valid, and one read of a
    /// never-written value makes them invalid.
    #[test]
    fn register_executions_valid_and_single_corruption_invalid(
        values in prop::collection::vec(any::<u32>(), 0..400), pick in any::<usize>()
    ) {
        let model = Register::new(None);
        let mut history = register_execution(&mut Choices::new(values));
        prop_assert_eq!(check(&model, &history, &options()).unwrap().verdict, Verdict::Valid);
        let corrupted = corrupt_one_read(&mut history, pick, |input| matches!(input, RegisterOp::Read), |output| {
            *output = RegisterResult::Read(Some(200));
        });
        prop_assume!(corrupted.is_some());
        prop_assert_eq!(check(&model, &history, &options()).unwrap().verdict, Verdict::Invalid);
    }

    /// Goal: the same for the CAS register (etcd's model).
    #[test]
    fn cas_executions_valid_and_single_corruption_invalid(
        values in prop::collection::vec(any::<u32>(), 0..400), pick in any::<usize>()
    ) {
        let model = CasRegister::new(None);
        let mut history = cas_execution(&mut Choices::new(values));
        prop_assert_eq!(check(&model, &history, &options()).unwrap().verdict, Verdict::Valid);
        let corrupted = corrupt_one_read(&mut history, pick, |input| matches!(input, CasOp::Read), |output| {
            *output = CasResult::Read(Some(200));
        });
        prop_assume!(corrupted.is_some());
        prop_assert_eq!(check(&model, &history, &options()).unwrap().verdict, Verdict::Invalid);
    }

    /// Goal: the same for one Kafka partition's log; the corrupted read
    /// returns a value that was never sent.
    #[test]
    fn log_executions_valid_and_single_corruption_invalid(
        values in prop::collection::vec(any::<u32>(), 0..400), pick in any::<usize>()
    ) {
        let model = LogModel::new();
        let mut history = log_execution(&mut Choices::new(values));
        prop_assert_eq!(check(&model, &history, &options()).unwrap().verdict, Verdict::Valid);
        let corrupted = corrupt_one_read(&mut history, pick, |input| matches!(input, LogOp::Read { .. }), |output| {
            *output = LogResult::Read { values: vec![200] };
        });
        prop_assume!(corrupted.is_some());
        prop_assert_eq!(check(&model, &history, &options()).unwrap().verdict, Verdict::Invalid);
    }

    /// Goal: key-value executions are valid under both the partitioned and
    /// the map model, and one get of a never-written string breaks both.
    #[test]
    fn kv_executions_valid_and_single_corruption_invalid_in_both_models(
        values in prop::collection::vec(any::<u32>(), 0..500), pick in any::<usize>()
    ) {
        let mut history = kv_execution(&mut Choices::new(values));
        prop_assert_eq!(check(&KvModel, &history, &options()).unwrap().verdict, Verdict::Valid);
        prop_assert_eq!(check(&KvMapModel, &history, &options()).unwrap().verdict, Verdict::Valid);
        let corrupted = corrupt_one_read(&mut history, pick, |input| matches!(input, KvOp::Get { .. }), |output| {
            *output = KvResult::Value("never written".to_owned());
        });
        prop_assume!(corrupted.is_some());
        prop_assert_eq!(check(&KvModel, &history, &options()).unwrap().verdict, Verdict::Invalid);
        prop_assert_eq!(check(&KvMapModel, &history, &options()).unwrap().verdict, Verdict::Invalid);
    }
}
