//! The entry point: validate a history, split it with the model's partition
//! (P-compositionality), search each part (`search.rs`), and combine the
//! parts into one [`CheckResult`] with a counterexample for each failing
//! part.
//!
//! Each part first gets the cheap stale-read scan (`witness.rs`), then, if
//! that proves nothing, the search. Parts are spread over scoped threads
//! (`CheckOptions::threads`, default: the machine's cores); each part's
//! answer depends only on the part and its limits, so the result is the
//! same whatever thread ran it. Every part is decided (or runs out of
//! budget) even after another part has failed, so reports are complete.

use crate::budget::Budget;
use crate::counterexample::{Candidate, Counterexample, LinearizedStep, ReportedOperation};
use crate::error::HistoryError;
use crate::model::Model;
use crate::operation::{OpIndex, Operation};
use crate::search::{Limits, SearchOutcome, StuckPoint, search};
use crate::verdict::{
    CheckResult, PartitionOutcome, PartitionReport, SearchEffort, UnknownReason, Verdict,
};
use crate::witness::{self, stale_read_scan};
use crate::zones::zone_order;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, OnceLock};
use std::thread;
use std::time::{Duration, Instant};

/// Largest partition the search accepts (its ids are 32-bit, and each
/// operation has two list entries).
const PARTITION_OPERATIONS_MAX: usize = (u32::MAX / 4) as usize;

/// Histories shorter than this are checked on the calling thread: starting
/// threads would cost more than the parts take.
const PARALLEL_OPERATIONS_MIN: usize = 1_000;

/// The machine's available parallelism, asked once (std reads cgroup files
/// for it, which costs more than checking a small history).
fn machine_threads() -> usize {
    static THREADS: OnceLock<usize> = OnceLock::new();
    *THREADS.get_or_init(|| thread::available_parallelism().map_or(1, usize::from))
}

/// Options for [`check`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CheckOptions {
    /// Search limits (see [`Budget`] for how each applies).
    pub budget: Budget,
    /// Threads searching parts at once; 0 = the machine's available
    /// parallelism. Each gets `budget.memory_max / threads` (threads
    /// capped at the number of parts; histories under 1,000 operations use
    /// one), so set it for results that must not depend on the machine.
    pub threads: usize,
}

impl CheckOptions {
    /// Options with the given budget.
    pub fn with_budget(budget: Budget) -> Self {
        CheckOptions { budget, threads: 0 }
    }

    /// These options with a fixed number of threads.
    pub fn with_threads(self, threads: usize) -> Self {
        CheckOptions { threads, ..self }
    }
}

/// Checks whether `history` is linearizable with respect to `model`.
///
/// An empty history is `Unknown` ([`UnknownReason::EmptyHistory`]): nothing
/// was observed, so nothing is vouched for.
///
/// # Errors
///
/// [`HistoryError`] if an operation returns before its call, or if the
/// model's partition does not name every operation exactly once.
///
/// # Example
///
/// ```
/// use logjam_linearizable::models::register::{Register, RegisterOp, RegisterResult};
/// use logjam_linearizable::{check, CheckOptions, ClientId, Operation, Verdict};
///
/// let history = vec![
///     Operation::completed(ClientId(0), RegisterOp::Write(1), 0, RegisterResult::Written, 10),
///     Operation::completed(ClientId(1), RegisterOp::Read, 5, RegisterResult::Read(Some(1)), 15),
///     // Starts after the write returned, yet reads the initial value.
///     Operation::completed(ClientId(2), RegisterOp::Read, 20, RegisterResult::Read(None), 30),
/// ];
/// let result = check(&Register::new(None), &history, &CheckOptions::default())?;
/// assert_eq!(result.verdict, Verdict::Invalid);
/// println!("{}", result.counterexample().expect("invalid has a counterexample"));
/// # Ok::<(), logjam_linearizable::HistoryError>(())
/// ```
pub fn check<M>(
    model: &M,
    history: &[Operation<M::Input, M::Output>],
    options: &CheckOptions,
) -> Result<CheckResult, HistoryError>
where
    M: Model,
{
    let started = Instant::now();
    for (index, operation) in history.iter().enumerate() {
        if operation.return_at < operation.call {
            return Err(HistoryError::ReturnBeforeCall {
                op: OpIndex(index),
                call: operation.call,
                return_at: operation.return_at,
            });
        }
    }
    if history.is_empty() {
        return Ok(CheckResult {
            verdict: Verdict::Unknown,
            unknown_reason: Some(UnknownReason::EmptyHistory),
            partitions: Vec::new(),
        });
    }
    let parts = validated_partition(model, history)?;
    let partitions = check_parts(model, history, parts, options, started);
    let verdict = if partitions
        .iter()
        .any(|report| report.outcome.verdict() == Verdict::Invalid)
    {
        Verdict::Invalid
    } else if partitions
        .iter()
        .any(|report| report.outcome.verdict() == Verdict::Unknown)
    {
        Verdict::Unknown
    } else {
        Verdict::Valid
    };
    let unknown_reason = partitions.iter().find_map(|report| match &report.outcome {
        PartitionOutcome::Unknown { reason } => Some(reason.clone()),
        _ => None,
    });
    Ok(CheckResult {
        verdict,
        unknown_reason: (verdict == Verdict::Unknown)
            .then_some(unknown_reason)
            .flatten(),
        partitions,
    })
}

/// The model's partition, checked to name every operation exactly once,
/// each part sorted by history index.
fn validated_partition<M: Model>(
    model: &M,
    history: &[Operation<M::Input, M::Output>],
) -> Result<Vec<Vec<OpIndex>>, HistoryError> {
    let mut parts = model.partition(history);
    let mut owner: Vec<Option<usize>> = vec![None; history.len()];
    for (partition, part) in parts.iter_mut().enumerate() {
        if part.len() > PARTITION_OPERATIONS_MAX {
            return Err(HistoryError::PartitionTooLarge {
                partition,
                count: part.len(),
                max: PARTITION_OPERATIONS_MAX,
            });
        }
        part.sort_unstable();
        for &op in part.iter() {
            let slot = owner
                .get_mut(op.0)
                .ok_or(HistoryError::PartitionIndexOutOfRange {
                    partition,
                    op,
                    len: history.len(),
                })?;
            if let Some(first) = *slot {
                return Err(HistoryError::OperationInTwoPartitions {
                    op,
                    first,
                    second: partition,
                });
            }
            *slot = Some(partition);
        }
    }
    if let Some(missing) = owner.iter().position(Option::is_none) {
        return Err(HistoryError::OperationInNoPartition {
            op: OpIndex(missing),
        });
    }
    Ok(parts)
}

/// Checks every part on up to `options.threads` scoped threads; the
/// reports come back in part order.
fn check_parts<M>(
    model: &M,
    history: &[Operation<M::Input, M::Output>],
    parts: Vec<Vec<OpIndex>>,
    options: &CheckOptions,
    started: Instant,
) -> Vec<PartitionReport>
where
    M: Model,
{
    let threads = if history.len() < PARALLEL_OPERATIONS_MIN {
        1
    } else {
        match options.threads {
            0 => machine_threads(),
            threads => threads,
        }
        .min(parts.len())
        .max(1)
    };
    let budget = &options.budget;
    let limits = Limits {
        steps_max: budget.steps_max,
        deadline: budget.time_max.map(|time_max| {
            let deadline = started
                .checked_add(time_max)
                .unwrap_or_else(|| started + Duration::from_secs(u32::MAX.into()));
            (deadline, time_max)
        }),
        memory_max: budget.memory_max.map(|bytes| bytes / threads as u64),
    };
    let parts: Vec<Mutex<Option<Vec<OpIndex>>>> = parts
        .into_iter()
        .map(|part| Mutex::new(Some(part)))
        .collect();
    let reports: Vec<Mutex<Option<PartitionReport>>> =
        parts.iter().map(|_| Mutex::new(None)).collect();
    let next = AtomicUsize::new(0);
    let work = || {
        loop {
            let partition = next.fetch_add(1, Ordering::Relaxed);
            let Some(slot) = parts.get(partition) else {
                return;
            };
            let operations = slot
                .lock()
                .expect("no thread panics while holding a part")
                .take()
                .expect("each part is taken once");
            let report = check_part(model, history, partition, operations, &limits);
            *reports[partition]
                .lock()
                .expect("no thread panics while holding a report") = Some(report);
        }
    };
    if threads == 1 {
        work();
    } else {
        thread::scope(|scope| {
            for _ in 0..threads {
                let _worker = scope.spawn(work);
            }
        });
    }
    reports
        .into_iter()
        .map(|report| {
            report
                .into_inner()
                .expect("no thread panicked")
                .expect("every part was checked")
        })
        .collect()
}

fn check_part<M: Model>(
    model: &M,
    history: &[Operation<M::Input, M::Output>],
    partition: usize,
    operations: Vec<OpIndex>,
    limits: &Limits,
) -> PartitionReport {
    let ops: Vec<&Operation<M::Input, M::Output>> =
        operations.iter().map(|op| &history[op.0]).collect();
    let started = Instant::now();
    if let Some(found) = stale_read_scan(model, &ops) {
        let counterexample =
            witness::counterexample(model, history, partition, &operations, &found);
        return PartitionReport {
            partition,
            operations,
            outcome: PartitionOutcome::NotLinearizable {
                counterexample: Box::new(counterexample),
            },
            effort: SearchEffort {
                decided_by_scan: true,
                elapsed: started.elapsed(),
                ..SearchEffort::default()
            },
        };
    }
    if let Some(order) = zone_order(model, &ops) {
        let linearization = order.into_iter().map(|local| operations[local]).collect();
        return PartitionReport {
            partition,
            operations,
            outcome: PartitionOutcome::Linearizable { linearization },
            effort: SearchEffort {
                decided_by_scan: true,
                elapsed: started.elapsed(),
                ..SearchEffort::default()
            },
        };
    }
    let (outcome, stats) = search(model, &ops, limits);
    let elapsed = started.elapsed();
    let outcome = match outcome {
        SearchOutcome::Linearizable { order } => PartitionOutcome::Linearizable {
            linearization: order.into_iter().map(|local| operations[local]).collect(),
        },
        SearchOutcome::NotLinearizable { stuck } => PartitionOutcome::NotLinearizable {
            counterexample: Box::new(counterexample(
                model,
                history,
                partition,
                &operations,
                &stuck,
            )),
        },
        SearchOutcome::StepBudgetExhausted { steps_max } => PartitionOutcome::Unknown {
            reason: UnknownReason::StepBudgetExhausted { steps_max },
        },
        SearchOutcome::TimeBudgetExhausted { time_max } => PartitionOutcome::Unknown {
            reason: UnknownReason::TimeBudgetExhausted { time_max },
        },
        SearchOutcome::MemoryBudgetExhausted { memory_max } => PartitionOutcome::Unknown {
            reason: UnknownReason::MemoryBudgetExhausted { memory_max },
        },
    };
    PartitionReport {
        partition,
        operations,
        outcome,
        effort: SearchEffort {
            steps: stats.steps,
            configurations: stats.configurations,
            states: stats.states,
            dropped_operations: stats.dropped,
            cache_bytes: stats.cache_bytes,
            memory_peak: stats.memory_peak,
            deepest_prefix: stats.deepest_prefix,
            cache_resets: stats.cache_resets,
            decided_by_scan: false,
            elapsed,
        },
    }
}

/// Replays the stuck point through the model to render states.
fn counterexample<M: Model>(
    model: &M,
    history: &[Operation<M::Input, M::Output>],
    partition: usize,
    operations: &[OpIndex],
    stuck: &StuckPoint,
) -> Counterexample {
    let report = |local: usize| {
        let op = operations[local];
        let operation = &history[op.0];
        ReportedOperation {
            op,
            client_id: operation.client_id,
            call: operation.call,
            return_at: operation.return_at,
            description: model.describe_operation(&operation.input, &operation.output),
        }
    };
    let mut state = model.init();
    let mut prefix = Vec::with_capacity(stuck.prefix.len());
    for &local in &stuck.prefix {
        let operation = &history[operations[local].0];
        state = model
            .step(&state, &operation.input, &operation.output)
            .expect("the search only records steps the model allowed");
        prefix.push(LinearizedStep {
            operation: report(local),
            state_after: model.describe_state(&state),
        });
    }
    let candidates = stuck
        .candidates
        .iter()
        .filter(|&&local| Some(local) != stuck.blocking)
        .map(|&local| {
            let operation = &history[operations[local].0];
            Candidate {
                operation: report(local),
                allowed_by_model: model
                    .step(&state, &operation.input, &operation.output)
                    .is_some(),
            }
        })
        .collect();
    Counterexample {
        partition,
        partition_operations: operations.len(),
        prefix,
        state: model.describe_state(&state),
        blocking: stuck.blocking.map(report),
        reason: stuck.reason,
        candidates,
    }
}
