//! `logjam check --model M --format F FILE`: the linearizability engine
//! (`logjam-linearizable`) over a history recorded elsewhere (Porcupine's
//! etcd Jepsen logs and key-value logs), under a time and a memory budget.
//! Prints the verdict, the budget figures and the counterexample; the exit
//! code is the verdict's, as for runs (0 valid, 1 invalid, 2 unknown).
//!
//! Only the shell lives here: parsing and checking are the crate's. The
//! file is only read, never written beside.

use std::fmt::Write as _;
use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use clap::ValueEnum;
use logjam_linearizable::models::cas::{CasOp, CasRegister, CasResult};
use logjam_linearizable::models::kv::KvModel;
use logjam_linearizable::models::register::{Register, RegisterOp, RegisterResult};
use logjam_linearizable::porcupine::{read_etcd_log, read_kv_log};
use logjam_linearizable::{
    Budget, CheckOptions, CheckResult, Model, Operation, Outcome, PartitionOutcome, Verdict, check,
};

use crate::cli::CheckArgs;

/// The sequential specification to check against.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum LinModel {
    /// A read/write register (an etcd log without compare-and-set).
    Register,
    /// A register with compare-and-set (etcd logs).
    Cas,
    /// A key-value store with get, put and append, one independent part per key.
    Kv,
}

/// The file format of a history from elsewhere.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum LinFormat {
    /// Jepsen's etcd log as in Porcupine's test data (`INFO jepsen.util - 3 :invoke :cas [1 2]`).
    PorcupineEtcd,
    /// Porcupine's key-value log (`{:process 0, :type :invoke, :f :get, :key "1", ...}`).
    PorcupineKv,
}

/// Checks `file` with the given model and format; returns the verdict's exit code.
///
/// # Errors
/// An unreadable or malformed file (the message names the file and line), a model that does
/// not fit the format, or a bad `--memory-limit`.
pub fn run(args: &CheckArgs, model: LinModel) -> anyhow::Result<u8> {
    let Some(format) = args.format else {
        bail!("--model needs --format (porcupine-etcd or porcupine-kv)");
    };
    let mut budget = Budget::time(Duration::from_secs(args.time_limit.unwrap_or(60)));
    budget.memory_max = Some(match &args.memory_limit {
        Some(text) => parse_bytes(text)
            .with_context(|| format!("--memory-limit {text:?}: expected bytes, e.g. 512M or 2G"))?,
        None => Budget::default_memory_max(),
    });
    let options = CheckOptions::with_budget(budget);
    let path = args.path.as_path();
    let started = Instant::now();
    let result = match (model, format) {
        (LinModel::Cas, LinFormat::PorcupineEtcd) => {
            run_model(&CasRegister::new(None), &read_etcd_log(path)?, &options)?
        }
        (LinModel::Register, LinFormat::PorcupineEtcd) => {
            let history = registers_only(path, read_etcd_log(path)?)?;
            run_model(&Register::new(None), &history, &options)?
        }
        (LinModel::Kv, LinFormat::PorcupineKv) => {
            run_model(&KvModel, &read_kv_log(path)?, &options)?
        }
        (model, format) => bail!(
            "--model {} does not read --format {} (use cas or register with porcupine-etcd, kv \
             with porcupine-kv)",
            name(model),
            name(format)
        ),
    };
    let elapsed = started.elapsed();
    if args.json {
        println!(
            "{}",
            serde_json::to_string_pretty(&result).context("cannot serialise the result")?
        );
    } else {
        print!("{}", summary(&result, &budget, elapsed));
    }
    Ok(match result.verdict {
        Verdict::Valid => 0,
        Verdict::Invalid => 1,
        Verdict::Unknown => 2,
    })
}

fn name(value: impl ValueEnum) -> String {
    value
        .to_possible_value()
        .map_or_else(String::new, |value| value.get_name().to_owned())
}

fn run_model<M>(
    model: &M,
    history: &[Operation<M::Input, M::Output>],
    options: &CheckOptions,
) -> anyhow::Result<CheckResult>
where
    M: Model,
{
    Ok(check(model, history, options)?)
}

/// An etcd log as plain register operations; a compare-and-set is an error naming its line
/// (the importer's timestamps are line numbers).
fn registers_only(
    path: &Path,
    history: Vec<Operation<CasOp<i64>, CasResult<i64>>>,
) -> anyhow::Result<Vec<Operation<RegisterOp<i64>, RegisterResult<i64>>>> {
    history
        .into_iter()
        .map(|operation| {
            let (input, output) = match (operation.input, operation.output) {
                (CasOp::Read, Outcome::Returned(CasResult::Read(value))) => (
                    RegisterOp::Read,
                    Outcome::Returned(RegisterResult::Read(value)),
                ),
                (CasOp::Read, Outcome::Unknown) => (RegisterOp::Read, Outcome::Unknown),
                (CasOp::Write(value), Outcome::Returned(_)) => (
                    RegisterOp::Write(value),
                    Outcome::Returned(RegisterResult::Written),
                ),
                (CasOp::Write(value), Outcome::Unknown) => {
                    (RegisterOp::Write(value), Outcome::Unknown)
                }
                (CasOp::Cas { .. }, _) | (CasOp::Read, Outcome::Returned(_)) => bail!(
                    "{}:{}: a compare-and-set is not a register operation (use --model cas)",
                    path.display(),
                    operation.call.0
                ),
            };
            Ok(Operation {
                client_id: operation.client_id,
                input,
                call: operation.call,
                output,
                return_at: operation.return_at,
            })
        })
        .collect()
}

/// `1073741824`, `512K`, `512M`, `2G` (powers of 1024; a trailing `B`/`iB` is allowed).
fn parse_bytes(text: &str) -> anyhow::Result<u64> {
    let trimmed = text.trim();
    let upper = trimmed.to_ascii_uppercase();
    let number = upper
        .trim_end_matches("IB")
        .trim_end_matches('B')
        .trim_end();
    let (digits, shift) = match number.chars().last() {
        Some('K') => (&number[..number.len() - 1], 10),
        Some('M') => (&number[..number.len() - 1], 20),
        Some('G') => (&number[..number.len() - 1], 30),
        Some('T') => (&number[..number.len() - 1], 40),
        _ => (number, 0),
    };
    let value: u64 = digits.trim().parse().context("not a number")?;
    let bytes = value.checked_mul(1 << shift).context("too large")?;
    if bytes == 0 {
        bail!("must be positive");
    }
    Ok(bytes)
}

/// The human summary: verdict, parts, budget use, and the counterexample.
fn summary(result: &CheckResult, budget: &Budget, elapsed: Duration) -> String {
    let mut text = String::new();
    let count = |verdict: Verdict| {
        result
            .partitions
            .iter()
            .filter(|part| part.outcome.verdict() == verdict)
            .count()
    };
    let effort = result.total_effort();
    let _ = writeln!(text, "verdict: {}", result.verdict);
    if let Some(reason) = &result.unknown_reason {
        let _ = writeln!(text, "reason: {reason}");
    }
    let _ = writeln!(
        text,
        "parts: {} ({} valid, {} invalid, {} unknown)",
        result.partitions.len(),
        count(Verdict::Valid),
        count(Verdict::Invalid),
        count(Verdict::Unknown)
    );
    for part in &result.partitions {
        if let PartitionOutcome::Unknown { reason } = &part.outcome {
            let _ = writeln!(
                text,
                "  part {}: unknown ({reason}) after {} steps; longest linearizable prefix {} of {} operations",
                part.partition,
                part.effort.steps,
                part.effort.deepest_prefix,
                part.operations.len()
            );
        }
    }
    let _ = writeln!(
        text,
        "search: {} steps, peak {:.1} MiB (largest part) of a {} budget, {:.3} s of {}",
        effort.steps,
        effort.memory_peak as f64 / f64::from(1 << 20),
        budget.memory_max.map_or_else(
            || "unlimited".to_owned(),
            |bytes| format!("{:.1} MiB", bytes as f64 / f64::from(1 << 20))
        ),
        elapsed.as_secs_f64(),
        budget.time_max.map_or_else(
            || "unlimited".to_owned(),
            |time| format!("{} s", time.as_secs())
        )
    );
    if effort.decided_by_scan {
        let _ = writeln!(text, "decided by the stale-read scan (no search needed)");
    }
    if let Some(counterexample) = result.counterexample() {
        let _ = write!(text, "{counterexample}");
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn byte_sizes_parse_with_binary_suffixes() {
        assert_eq!(parse_bytes("1024").expect("plain"), 1024);
        assert_eq!(parse_bytes("512M").expect("mega"), 512 << 20);
        assert_eq!(parse_bytes("2g").expect("giga"), 2 << 30);
        assert_eq!(parse_bytes("64KiB").expect("kibi"), 64 << 10);
        assert!(parse_bytes("lots").is_err());
        assert!(parse_bytes("0").is_err());
    }
}
