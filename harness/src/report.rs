//! HTML reports people look at: `report.html` in each run directory (verdict, settings, plots
//! with the faults shaded, leadership, anomalies with their witness ops, durability),
//! `matrix.html` beside each matrix.json, and `results/index.html` listing every stored run.
//! This module is the file-reading shell and `logjam report`; what the pages say is worked
//! out in `data`, `history` and `sample` (pure), drawn in `plot` (plotters' SVG backend) and
//! laid out in `page` and `index` (maud templates).

mod data;
mod history;
mod index;
mod page;
pub mod plot;
mod sample;

use std::collections::HashSet;
use std::path::{Path, PathBuf};

use anyhow::Context;
use logjam_history::HistoryReader;
use serde_json::Value;

use crate::cli::ReportArgs;

/// Time buckets of the latency plot's downsampling.
const LATENCY_BUCKETS: usize = 1_000;
/// Ok points kept per bucket.
const OK_PER_BUCKET: usize = 4;
/// Throughput buckets over the run (at least one second each).
const THROUGHPUT_BUCKETS: f64 = 300.0;
/// How deep below the results directory runs are looked for: `<matrix>/<cell>/<run>`.
const SEARCH_DEPTH: usize = 3;

/// `logjam report`: regenerates the pages of the runs and matrices given (every one under
/// `--results-dir` when none is), then `results/index.html`. Exit 0, or 3 when a page could
/// not be written (each failure is printed; the others are still written).
///
/// # Errors
/// A results directory that cannot be read or an index that cannot be written.
pub fn run(args: &ReportArgs) -> anyhow::Result<u8> {
    let targets: Vec<PathBuf> = if args.paths.is_empty() {
        let found = find(&args.results_dir)?;
        found.runs.into_iter().chain(found.matrices).collect()
    } else {
        args.paths.clone()
    };
    let mut failed = 0;
    for target in &targets {
        let written = if target.join("matrix.json").is_file() {
            write_matrix_page(target)
        } else {
            write_run_page(target)
        };
        match written {
            Ok(path) => println!("{}", path.display()),
            Err(error) => {
                failed += 1;
                eprintln!(
                    "logjam report: {}: {}",
                    target.display(),
                    crate::error_text::chain(&error)
                );
            }
        }
    }
    let index = write_index(&args.results_dir)?;
    println!("{}", index.display());
    Ok(if failed > 0 {
        crate::cli::EXIT_HARNESS_FAILED
    } else {
        0
    })
}

/// After a suite: the results index lists its runs (their pages were written by each run).
pub fn refresh_index(results_dir: &Path) {
    match write_index(results_dir) {
        Ok(index) => eprintln!("logjam: all runs: {}", index.display()),
        Err(error) => eprintln!(
            "logjam: warning: no results index: {}",
            crate::error_text::chain(&error)
        ),
    }
}

/// After a run or a matrix stored something: its page, then the results index. A
/// report that cannot be written is a warning, never a failed run.
pub fn after_run(results_dir: &Path, dir: &Path) {
    let page = if dir.join("matrix.json").is_file() {
        write_matrix_page(dir)
    } else {
        write_run_page(dir)
    };
    let written = page.and_then(|page| {
        let index = write_index(results_dir)?;
        Ok((page, index))
    });
    match written {
        Ok((page, index)) => eprintln!(
            "logjam: report {} (all runs: {})",
            page.display(),
            index.display()
        ),
        Err(error) => eprintln!(
            "logjam: warning: no HTML report: {}",
            crate::error_text::chain(&error)
        ),
    }
}

fn read_json(path: &Path) -> anyhow::Result<Value> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))?;
    serde_json::from_str(&text).with_context(|| format!("malformed {}", path.display()))
}

/// Writes `<run_dir>/report.html` from its run.json (optional), report.json and history.jsonl.
///
/// # Errors
/// A missing report.json or history, a malformed one (the message names the file and line),
/// or a page that cannot be written.
pub fn write_run_page(run_dir: &Path) -> anyhow::Result<PathBuf> {
    let run = match run_dir.join("run.json") {
        path if path.is_file() => read_json(&path)?,
        _ => Value::Null,
    };
    let report = read_json(&run_dir.join("report.json"))
        .context("no report to render (run `logjam check` on the run first)")?;
    let summary = data::RunSummary::from_json(&run, &report);
    let wanted = summary.named_ops();
    let history_path = run_dir.join("history.jsonl");
    let mut reader = HistoryReader::open(&history_path)
        .with_context(|| format!("cannot read {}", history_path.display()))?;
    let mut scanner = history::Scanner::new(wanted.clone());
    while let Some(op) = reader.next() {
        match op {
            Ok(op) => scanner.push(&op, reader.lines_read()),
            // A run that died mid-line still gets its page; the checker says the same.
            Err(error) if error.is_torn_tail() => break,
            Err(error) => {
                return Err(error).with_context(|| format!("in {}", history_path.display()));
            }
        }
    }
    let view = scanner.finish();
    let drawn = sample::latency_points(
        &view.points,
        view.end_s,
        LATENCY_BUCKETS,
        OK_PER_BUCKET,
        &wanted,
    );
    let width = (view.end_s / THROUGHPUT_BUCKETS).max(1.0);
    let series = sample::throughput(&view.points, &view.functions, view.end_s, width);
    let named: HashSet<u64> = wanted.iter().copied().collect();
    let plots = [
        plot::latency(&drawn, &named, &view.faults, view.end_s),
        plot::throughput(&series, &view.faults, view.end_s),
        plot::leadership(&view.leadership, &view.faults, view.end_s),
    ];
    let name = run_dir
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let markup = page::run_page(&page::RunPage {
        name: &name,
        summary: &summary,
        history: &view,
        plots,
        sampled: (drawn.len(), view.points.len()),
        index_href: index_href(run_dir),
        files: ["run.json", "history.jsonl", "report.json", "summary.txt"]
            .into_iter()
            .filter(|file| run_dir.join(file).is_file())
            .collect(),
    });
    let path = run_dir.join("report.html");
    std::fs::write(&path, markup.into_string())
        .with_context(|| format!("cannot write {}", path.display()))?;
    Ok(path)
}

/// Where the results index sits, relative to `run_dir`: the highest of its first three
/// ancestors that holds a `latest*` link or an index.html (the results directory).
fn index_href(run_dir: &Path) -> String {
    let mut href = "../index.html".to_owned();
    let mut up = String::new();
    for ancestor in run_dir.ancestors().skip(1).take(SEARCH_DEPTH) {
        up.push_str("../");
        let marked = ancestor.join("index.html").is_file()
            || ["latest", "latest-matrix", "latest-nightly"]
                .iter()
                .any(|link| ancestor.join(link).symlink_metadata().is_ok());
        if marked {
            href = format!("{up}index.html");
        }
    }
    href
}

/// Writes `<matrix_dir>/matrix.html` from its matrix.json.
///
/// # Errors
/// A missing or malformed matrix.json, or a page that cannot be written.
pub fn write_matrix_page(matrix_dir: &Path) -> anyhow::Result<PathBuf> {
    let matrix = read_json(&matrix_dir.join("matrix.json"))?;
    let name = matrix_dir
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let rows = index::matrix_rows(&matrix, &name);
    let path = matrix_dir.join("matrix.html");
    std::fs::write(&path, index::matrix_page(&matrix, &rows).into_string())
        .with_context(|| format!("cannot write {}", path.display()))?;
    Ok(path)
}

/// What is stored under a results directory.
#[derive(Debug, Default)]
struct Found {
    runs: Vec<PathBuf>,
    matrices: Vec<PathBuf>,
    nightlies: Vec<PathBuf>,
}

/// Every run (a directory with run.json), matrix and nightly under `results_dir`, links not
/// followed (`latest` would list a run twice).
fn find(results_dir: &Path) -> anyhow::Result<Found> {
    let mut found = Found::default();
    let mut stack = vec![(results_dir.to_owned(), 0)];
    while let Some((dir, depth)) = stack.pop() {
        let entries =
            std::fs::read_dir(&dir).with_context(|| format!("cannot read {}", dir.display()))?;
        for entry in entries.flatten() {
            let path = entry.path();
            if !entry.file_type().is_ok_and(|t| t.is_dir()) {
                continue;
            }
            if path.join("run.json").is_file() {
                found.runs.push(path);
            } else if path.join("matrix.json").is_file() {
                found.matrices.push(path.clone());
                stack.push((path, depth + 1));
            } else if path.join("junit.xml").is_file() {
                found.nightlies.push(path.clone());
                stack.push((path, depth + 1));
            } else if depth + 1 < SEARCH_DEPTH {
                stack.push((path, depth + 1));
            }
        }
    }
    Ok(found)
}

/// Writes `<results_dir>/index.html`.
///
/// # Errors
/// A results directory that cannot be read, or an index that cannot be written.
pub fn write_index(results_dir: &Path) -> anyhow::Result<PathBuf> {
    let found = find(results_dir)?;
    let relative = |path: &Path| {
        path.strip_prefix(results_dir)
            .unwrap_or(path)
            .to_string_lossy()
            .into_owned()
    };
    let mut entries: Vec<index::IndexEntry> = found
        .runs
        .iter()
        .map(|dir| {
            // A run.json that cannot be read still lists the run, without details.
            let run = read_json(&dir.join("run.json")).unwrap_or_default();
            let report = read_json(&dir.join("report.json")).ok();
            index::IndexEntry::from_json(
                relative(dir),
                &run,
                report.as_ref(),
                dir.join("report.html").is_file(),
            )
        })
        .collect();
    entries.sort_by(|a, b| b.started.cmp(&a.started).then(a.path.cmp(&b.path)));
    let mut groups: Vec<index::Group> = found
        .matrices
        .iter()
        .map(|dir| index::Group {
            kind: "matrix",
            path: relative(dir),
            page: format!("{}/matrix.html", relative(dir)),
        })
        .chain(found.nightlies.iter().map(|dir| index::Group {
            kind: "nightly",
            path: relative(dir),
            page: format!("{}/index.md", relative(dir)),
        }))
        .collect();
    groups.sort_by(|a, b| b.path.cmp(&a.path));
    let path = results_dir.join("index.html");
    std::fs::write(&path, index::index_page(&entries, &groups).into_string())
        .with_context(|| format!("cannot write {}", path.display()))?;
    Ok(path)
}
