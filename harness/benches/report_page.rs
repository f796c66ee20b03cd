//! Benchmark: render the page of a 1,000,000-op-line run. The checkers' model generator
//! writes the history (its times stretched to 5 ms per line, so the run spans about 5,000 s,
//! as a 100 ops/s run would), `logjam check` writes report.json, then `logjam report` renders
//! report.html alone, timed. Budget: < 10 s and a page < 5 MB.
//!
//! Run with `cargo bench -p logjam --bench report_page`; `LOGJAM_BENCH_OP_LINES` overrides
//! the size (`--test`, as CI's smoke mode passes, uses 20,000); `LOGJAM_BENCH_DIR=<dir>` keeps
//! the run (and its page) there.

#[path = "../../checkers/tests/support/model.rs"]
mod model;

use std::io::BufWriter;
use std::process::{Command, ExitCode};
use std::time::Instant;

use logjam_history::HistoryWriter;

const TIME_BUDGET_S: f64 = 10.0;
const SIZE_BUDGET_BYTES: u64 = 5_000_000;
/// Nanoseconds per op line in the written history.
const STRETCH: u64 = 5_000;

fn logjam(args: &[&std::ffi::OsStr]) -> (bool, f64) {
    let start = Instant::now();
    let output = Command::new(env!("CARGO_BIN_EXE_logjam"))
        .args(args)
        .output()
        .expect("logjam runs");
    let seconds = start.elapsed().as_secs_f64();
    if !output.status.success() && output.status.code() != Some(1) {
        eprintln!("{}", String::from_utf8_lossy(&output.stderr));
        return (false, seconds);
    }
    (true, seconds)
}

fn main() -> ExitCode {
    let smoke = std::env::args().any(|a| a == "--test");
    let op_lines: u64 = std::env::var("LOGJAM_BENCH_OP_LINES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(if smoke { 20_000 } else { 1_000_000 });
    let temporary = tempfile::tempdir().expect("temp dir");
    let results = std::env::var_os("LOGJAM_BENCH_DIR")
        .map_or_else(|| temporary.path().to_owned(), std::path::PathBuf::from);
    let run = results.join("20260101T000000Z-queue-seed42");
    std::fs::create_dir_all(&run).expect("run dir");
    let config = model::ModelConfig::bench(op_lines);
    {
        let file = std::fs::File::create(run.join("history.jsonl")).expect("create history");
        let mut writer = HistoryWriter::new(
            BufWriter::with_capacity(1 << 20, file),
            &model::header(&config),
        )
        .expect("header");
        model::generate(&config, &mut |mut op| {
            op.time_ns *= STRETCH;
            writer.write_op(&op).expect("write op");
        });
    }
    let (checked, check_s) = logjam(&["check".as_ref(), run.as_os_str()]);
    println!("generated {op_lines} op lines; logjam check (report.json and page): {check_s:.2} s");
    if !checked {
        return ExitCode::FAILURE;
    }
    let (rendered, seconds) = logjam(&[
        "report".as_ref(),
        "--results-dir".as_ref(),
        results.as_os_str(),
        run.as_os_str(),
    ]);
    let size = std::fs::metadata(run.join("report.html")).map_or(0, |m| m.len());
    let within = rendered && seconds < TIME_BUDGET_S && size < SIZE_BUDGET_BYTES;
    println!(
        "logjam report: {seconds:.2} s wall, report.html {:.2} MB; budget (< {TIME_BUDGET_S} s, < 5 MB): {}",
        size as f64 / 1e6,
        if within { "met" } else { "EXCEEDED" }
    );
    if within {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}
