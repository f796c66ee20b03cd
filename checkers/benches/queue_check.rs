//! Benchmark: check a generated 1,000,000-op-line queue history (10 processes, 10 keys, mixed
//! sends and polls with info/fail outcomes, nemesis events, final polls) end to end, reading
//! the JSONL file included, on one core. Budget: ≤ 2 s and ≤ 1 GB peak RSS.
//!
//! The history is generated and written first; the check then runs in a fresh child process
//! so its peak RSS (`VmHWM` from `/proc/self/status`) measures the checker alone. Run with
//! `cargo bench -p logjam-checkers`; `LOGJAM_BENCH_OP_LINES` overrides the size,
//! `LOGJAM_BENCH_HISTORY=<path>` keeps the generated history there.

#[path = "../tests/support/model.rs"]
mod model;

use std::io::BufWriter;
use std::path::Path;
use std::process::{Command, ExitCode};
use std::time::Instant;

use logjam_history::HistoryWriter;

const CHILD_ENV: &str = "LOGJAM_BENCH_CHECK_PATH";
const TIME_BUDGET_S: f64 = 2.0;
const MEMORY_BUDGET_BYTES: u64 = 1 << 30;

fn vm_hwm_bytes() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .map_or(0, |kb| kb * 1024)
}

/// CPU time this process has used, in seconds: the single-core cost, unaffected by other
/// processes competing for the machine (wall time is printed too).
fn cpu_seconds() -> f64 {
    let schedstat = std::fs::read_to_string("/proc/self/schedstat").unwrap_or_default();
    schedstat
        .split_whitespace()
        .next()
        .and_then(|ns| ns.parse::<u64>().ok())
        .map_or(0.0, |ns| ns as f64 / 1e9)
}

fn child(path: &Path) -> ExitCode {
    let before = vm_hwm_bytes();
    let start = Instant::now();
    let cpu_start = cpu_seconds();
    let report = logjam_checkers::check_file(path).expect("bench history is well formed");
    let cpu = cpu_seconds() - cpu_start;
    let wall = start.elapsed().as_secs_f64();
    let elapsed = cpu;
    let peak = vm_hwm_bytes();
    println!(
        "check_file: {cpu:.3} s CPU on one core ({wall:.3} s wall), peak RSS {:.1} MiB (process start {:.1} MiB)",
        peak as f64 / (1 << 20) as f64,
        before as f64 / (1 << 20) as f64
    );
    println!(
        "  {} op lines, {} client ops, {} acknowledged sends, {} records read, graph {:?}",
        report.stats.op_lines,
        report.stats.client_ops,
        report.stats.ok_sends,
        report.stats.ok_records_read,
        report.stats.graph
    );
    println!("  verdict {}: {}", report.verdict.as_str(), report.reason);
    let within = elapsed <= TIME_BUDGET_S && peak <= MEMORY_BUDGET_BYTES;
    println!(
        "  budget (<= {TIME_BUDGET_S} s, <= 1 GiB): {}",
        if within { "met" } else { "EXCEEDED" }
    );
    if within && report.verdict == logjam_checkers::Verdict::Valid {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

fn main() -> ExitCode {
    if let Ok(path) = std::env::var(CHILD_ENV) {
        return child(Path::new(&path));
    }
    // `cargo bench -- --test` (CI smoke mode) and `cargo test --benches` pass --test/--bench flags;
    // a smaller history keeps that mode quick.
    let smoke = std::env::args().any(|a| a == "--test");
    let op_lines: u64 = std::env::var("LOGJAM_BENCH_OP_LINES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(if smoke { 20_000 } else { 1_000_000 });
    let dir = tempfile::tempdir().expect("temp dir");
    // LOGJAM_BENCH_HISTORY keeps the generated history at a path of your choice (for profiling).
    let path = std::env::var("LOGJAM_BENCH_HISTORY")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|_| dir.path().join("history.jsonl"));
    let config = model::ModelConfig::bench(op_lines);
    let start = Instant::now();
    {
        let file = std::fs::File::create(&path).expect("create history");
        let mut writer = HistoryWriter::new(
            BufWriter::with_capacity(1 << 20, file),
            &model::header(&config),
        )
        .expect("header");
        model::generate(&config, &mut |op| writer.write_op(&op).expect("write op"));
    }
    let size = std::fs::metadata(&path).map(|m| m.len()).unwrap_or(0);
    println!(
        "generated {op_lines} op lines ({:.1} MiB) in {:.2} s",
        size as f64 / (1 << 20) as f64,
        start.elapsed().as_secs_f64()
    );
    let status = Command::new(std::env::current_exe().expect("current exe"))
        .env(CHILD_ENV, &path)
        .status()
        .expect("run check child");
    if status.success() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}
