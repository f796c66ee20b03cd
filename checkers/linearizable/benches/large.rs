//! Large generated register histories, beyond the Porcupine corpus: 50
//! clients / 10,000 operations with one provably stale read, and 200
//! clients / 100,000 operations (valid by construction, some writes
//! indeterminate). Prints time, the search's counted peak memory, steps and
//! verdict for each, under the default-sized budgets (60 s, 1 GiB here).
//!
//! `harness = false`: a plain program; `cargo bench -p logjam-linearizable
//! --bench large` (add `-- --test` for one quick pass, as CI does).
//! `LOGJAM_BENCH_MEMORY_MB` and `LOGJAM_BENCH_SECONDS` change the budgets.

#[path = "../tests/support/register_histories.rs"]
mod register_histories;

use logjam_linearizable::models::register::Register;
use logjam_linearizable::{Budget, CheckOptions, check};
use register_histories::{Shape, generate};
use std::time::{Duration, Instant};

fn env_u64(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|value| value.parse().ok())
        .unwrap_or(default)
}

fn main() {
    let smoke = std::env::args().any(|argument| argument == "--test");
    let memory_mb = env_u64("LOGJAM_BENCH_MEMORY_MB", 1024);
    let seconds = env_u64("LOGJAM_BENCH_SECONDS", if smoke { 5 } else { 60 });
    let budget = Budget::time(Duration::from_secs(seconds)).with_memory(memory_mb << 20);
    let cases = [
        (
            "50c/10k stale read",
            Shape {
                clients: 50,
                operations: 10_000,
                indeterminate_per_mille: 0,
                stale_read: true,
                seed: 1,
            },
        ),
        (
            "50c/10k valid",
            Shape {
                clients: 50,
                operations: 10_000,
                indeterminate_per_mille: 5,
                stale_read: false,
                seed: 1,
            },
        ),
        (
            "200c/100k valid",
            Shape {
                clients: 200,
                operations: 100_000,
                indeterminate_per_mille: 5,
                stale_read: false,
                seed: 2,
            },
        ),
        (
            "200c/100k stale read",
            Shape {
                clients: 200,
                operations: 100_000,
                indeterminate_per_mille: 5,
                stale_read: true,
                seed: 2,
            },
        ),
    ];
    println!("budget: {seconds} s, {memory_mb} MiB, threads: machine");
    println!(
        "{:<22} {:>8} {:>9} {:>10} {:>10} {:>12} {:>11} {:>7} {:>8} {:>6}  reason",
        "history",
        "ops",
        "verdict",
        "time_ms",
        "peak_MiB",
        "steps",
        "configs",
        "resets",
        "deepest",
        "scan"
    );
    for (name, shape) in cases {
        let generated = generate(&shape);
        let started = Instant::now();
        let result = check(
            &Register::new(None),
            &generated.history,
            &CheckOptions::with_budget(budget),
        )
        .expect("generated histories are well formed");
        let elapsed = started.elapsed();
        let effort = result.total_effort();
        println!(
            "{:<22} {:>8} {:>9} {:>10.1} {:>10.1} {:>12} {:>11} {:>7} {:>8} {:>6}  {}",
            name,
            generated.history.len(),
            result.verdict.to_string(),
            elapsed.as_secs_f64() * 1e3,
            effort.memory_peak as f64 / f64::from(1 << 20),
            effort.steps,
            effort.configurations,
            effort.cache_resets,
            effort.deepest_prefix,
            effort.decided_by_scan,
            result
                .unknown_reason
                .as_ref()
                .map_or_else(String::new, |reason| reason.to_string()),
        );
        if let Some(counterexample) = result.counterexample() {
            println!("{counterexample}");
        }
    }
}
