//! Times the whole Porcupine corpus and prints a table against Porcupine's
//! (Go) own times from `expected.tsv`, plus per-key results for c50-bad.
//!
//! `harness = false`: a plain program. Each file is parsed once, then
//! checked repeatedly (at least 3 runs, until 0.3 s is spent or 50 runs);
//! the table shows the best run, comparable to the Go column "single run,
//! best of 5". `cargo bench -p logjam-linearizable -- --test` runs every
//! file once (a smoke test for CI). `LOGJAM_BENCH_FILTER=substring` limits
//! the files.

use logjam_linearizable::models::cas::CasRegister;
use logjam_linearizable::models::kv::KvModel;
use logjam_linearizable::porcupine;
use logjam_linearizable::{Budget, CheckOptions, CheckResult, PartitionOutcome, Verdict, check};
use std::time::{Duration, Instant};

/// Per-partition budget: far above anything the corpus needs, so a budget
/// hit is visible as an `unknown` verdict rather than a hang.
const BUDGET: Duration = Duration::from_secs(60);

struct Timing {
    best: Duration,
    runs: u32,
    result: CheckResult,
}

fn time_runs(smoke: bool, mut run: impl FnMut() -> CheckResult) -> Timing {
    let mut best = Duration::MAX;
    let mut spent = Duration::ZERO;
    let mut runs = 0;
    loop {
        let started = Instant::now();
        let result = run();
        let elapsed = started.elapsed();
        best = best.min(elapsed);
        spent += elapsed;
        runs += 1;
        let enough = smoke || (runs >= 3 && spent >= Duration::from_millis(300)) || runs >= 50;
        if enough {
            return Timing { best, runs, result };
        }
    }
}

fn ms(duration: Duration) -> f64 {
    duration.as_secs_f64() * 1e3
}

fn main() {
    let smoke = std::env::args().any(|argument| argument == "--test");
    let filter = std::env::var("LOGJAM_BENCH_FILTER").unwrap_or_default();
    let dir = porcupine::corpus_dir();
    let rows = porcupine::read_expected(&dir.join("expected.tsv")).expect("expected.tsv parses");
    let options = CheckOptions::with_budget(Budget::time(BUDGET));
    let etcd_model = CasRegister::new(None);

    println!(
        "{:<22} {:>6} {:>9} {:>8} {:>11} {:>11} {:>8} {:>5}",
        "file", "ops", "verdict", "expected", "ours_ms", "go_ms", "speedup", "runs"
    );
    let mut totals: Vec<(&str, Duration, f64, usize)> = vec![
        ("etcd (103 files)", Duration::ZERO, 0.0, 0),
        ("kv c01+c10", Duration::ZERO, 0.0, 0),
        ("kv c50-ok", Duration::ZERO, 0.0, 0),
        ("kv c50-bad", Duration::ZERO, 0.0, 0),
    ];
    let mut mismatches = 0;
    let mut c50_bad: Option<CheckResult> = None;
    for row in rows.iter().filter(|row| row.file.contains(&filter)) {
        let path = dir.join(&row.file);
        let (ops, timing) = if row.file.starts_with("jepsen/") {
            let history = porcupine::read_etcd_log(&path).expect("etcd log parses");
            let timing = time_runs(smoke, || {
                check(&etcd_model, &history, &options).expect("well formed")
            });
            (history.len(), timing)
        } else {
            let history = porcupine::read_kv_log(&path).expect("kv history parses");
            let timing = time_runs(smoke, || {
                check(&KvModel, &history, &options).expect("well formed")
            });
            (history.len(), timing)
        };
        let expected = match row.linearizable {
            Some(true) => Verdict::Valid,
            Some(false) => Verdict::Invalid,
            None => Verdict::Unknown,
        };
        if timing.result.verdict != expected {
            mismatches += 1;
        }
        let go = row.go_single_run_us.map(|us| us as f64 / 1e3);
        let speedup = go.map(|go| go / ms(timing.best));
        println!(
            "{:<22} {:>6} {:>9} {:>8} {:>11.3} {:>11} {:>8} {:>5}",
            row.file,
            ops,
            timing.result.verdict.to_string(),
            expected.to_string(),
            ms(timing.best),
            go.map_or("-".to_owned(), |go| format!("{go:.3}")),
            speedup.map_or("-".to_owned(), |speedup| format!("{speedup:.1}x")),
            timing.runs
        );
        let bucket = if row.file.starts_with("jepsen/") {
            0
        } else if row.file.contains("c50-ok") {
            2
        } else if row.file.contains("c50-bad") {
            3
        } else {
            1
        };
        totals[bucket].1 += timing.best;
        totals[bucket].2 += go.unwrap_or(0.0);
        totals[bucket].3 += 1;
        if row.file.contains("c50-bad") {
            c50_bad = Some(timing.result);
        }
    }

    println!();
    println!(
        "{:<22} {:>6} {:>11} {:>11} {:>8}",
        "total", "files", "ours_ms", "go_ms", "speedup"
    );
    let mut ours_all = Duration::ZERO;
    let mut go_all = 0.0;
    for (name, ours, go, files) in &totals {
        if *files == 0 {
            continue;
        }
        ours_all += *ours;
        go_all += go;
        println!(
            "{:<22} {:>6} {:>11.3} {:>11.3} {:>7.1}x",
            name,
            files,
            ms(*ours),
            go,
            go / ms(*ours)
        );
    }
    println!(
        "{:<22} {:>6} {:>11.3} {:>11.3} {:>7.1}x",
        "whole corpus",
        totals.iter().map(|total| total.3).sum::<usize>(),
        ms(ours_all),
        go_all,
        go_all / ms(ours_all)
    );
    println!(
        "(go_ms: Porcupine single run, best of 5; Porcupine stops c50-bad at the first failing key)"
    );

    if let Some(result) = c50_bad {
        println!();
        println!(
            "c50-bad per key (every key decided; Porcupine leaves 2 undecided after 20 s each):"
        );
        println!(
            "{:>4} {:>5} {:>9} {:>10} {:>12} {:>10}",
            "part", "ops", "verdict", "time_ms", "steps", "configs"
        );
        for part in &result.partitions {
            println!(
                "{:>4} {:>5} {:>9} {:>10.3} {:>12} {:>10}",
                part.partition,
                part.operations.len(),
                part.outcome.verdict().to_string(),
                ms(part.effort.elapsed),
                part.effort.steps,
                part.effort.configurations
            );
        }
        if let Some(counterexample) = result.counterexample() {
            println!();
            println!("minimal counterexample:\n{counterexample}");
        }
        let undecided = result
            .partitions
            .iter()
            .filter(|part| matches!(part.outcome, PartitionOutcome::Unknown { .. }))
            .count();
        println!("undecided keys: {undecided}");
    }
    println!("verdict mismatches: {mismatches}");
    assert_eq!(mismatches, 0, "some verdicts differ from expected.tsv");
}
