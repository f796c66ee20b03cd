//! The results index (`results/index.html`: every stored run, newest first, with its time,
//! workload, verdict, seed, settings and a link to its page; every matrix and nightly) and the
//! matrix page (`matrix.html`: one row per cell, lost writes and refused time coloured by how
//! bad they are, links to each run's page). Data is read from the stored JSON (pure
//! functions), pages are maud templates.

use std::collections::BTreeMap;

use maud::{DOCTYPE, Markup, html};
use serde_json::Value;

use super::data::compact;
use super::page::{head, verdict_badge};

/// One stored run as the index lists it.
#[derive(Debug, Clone, PartialEq)]
pub struct IndexEntry {
    /// The run directory, relative to the results directory.
    pub path: String,
    /// When it started (run.json).
    pub started: String,
    /// The workload, or `scenario-<name>` taken from the directory name.
    pub workload: String,
    /// `valid`, `invalid`, `unknown`, or empty when it has no report.json.
    pub verdict: String,
    /// Its seed.
    pub seed: String,
    /// Faults asked for.
    pub nemesis: String,
    /// `key=value` settings given to it.
    pub settings: Vec<String>,
    /// True when its report.html exists (else the link goes to the directory).
    pub has_page: bool,
}

impl IndexEntry {
    /// Reads one run's entry from its run.json and (if any) report.json.
    pub fn from_json(path: String, run: &Value, report: Option<&Value>, has_page: bool) -> Self {
        let mut settings = Vec::new();
        for group in ["node_settings", "client_settings"] {
            if let Some(map) = run.get(group).and_then(Value::as_object) {
                settings.extend(map.iter().map(|(k, v)| format!("{k}={}", compact(v))));
            }
        }
        let name = path.rsplit('/').next().unwrap_or_default();
        let workload = match name.split('-').nth(1) {
            Some("scenario") => name
                .split_once("-scenario-")
                .and_then(|(_, rest)| rest.rsplit_once("-seed"))
                .map_or_else(|| "scenario".to_owned(), |(n, _)| format!("scenario {n}")),
            _ => run.get("workload").map(compact).unwrap_or_default(),
        };
        IndexEntry {
            started: run.get("started").map(compact).unwrap_or_default(),
            workload,
            verdict: report
                .and_then(|r| r.get("verdict"))
                .map(compact)
                .unwrap_or_default(),
            seed: run.get("seed").map(compact).unwrap_or_default(),
            nemesis: run
                .get("nemesis")
                .and_then(Value::as_array)
                .map(|list| list.iter().map(compact).collect::<Vec<_>>().join(","))
                .unwrap_or_default(),
            settings,
            has_page,
            path,
        }
    }

    fn href(&self) -> String {
        if self.has_page {
            format!("{}/report.html", self.path)
        } else {
            format!("{}/", self.path)
        }
    }
}

/// A matrix or nightly directory, relative to the results directory, and its page.
#[derive(Debug, Clone, PartialEq)]
pub struct Group {
    /// `matrix` or `nightly`.
    pub kind: &'static str,
    /// The directory.
    pub path: String,
    /// Its page (matrix.html, index.md).
    pub page: String,
}

/// `results/index.html`.
pub fn index_page(entries: &[IndexEntry], groups: &[Group]) -> Markup {
    let count = |verdict: &str| entries.iter().filter(|e| e.verdict == verdict).count();
    html! {
        (DOCTYPE)
        html lang="en" {
            (head("logjam results"))
            body {
                h1 { "logjam results" }
                p {
                    (entries.len()) " stored run(s): " (count("valid")) " valid, " (count("invalid"))
                    " invalid, " (count("unknown")) " unknown, " (count("")) " without a verdict."
                }
                @if !groups.is_empty() {
                    h2 { "Matrices and nightlies" }
                    ul class="groups" { @for g in groups { li { (g.kind) " " a href=(g.page) { (g.path) } } } }
                }
                h2 { "Runs, newest first" }
                table class="runs" {
                    thead { tr { th { "started" } th { "workload" } th { "verdict" } th { "seed" } th { "faults" } th { "settings" } th { "run" } } }
                    tbody { @for e in entries {
                        tr data-verdict=(e.verdict) {
                            td { (e.started) } td { (e.workload) } td { (verdict_badge(&e.verdict)) }
                            td { code { (e.seed) } } td { (e.nemesis) } td { (e.settings.join(" ")) }
                            td { a href=(e.href()) { (e.path) } }
                        }
                    } }
                }
            }
        }
    }
}

/// One row of the matrix page.
#[derive(Debug, Clone, PartialEq)]
pub struct MatrixRow {
    /// Cell number.
    pub cell: u64,
    /// Value of each swept key.
    pub swept: BTreeMap<String, String>,
    /// `valid 1/1` and so on.
    pub verdicts: Vec<(String, u64)>,
    /// Lost over every run.
    pub lost: u64,
    /// Acknowledged over every run.
    pub acknowledged: u64,
    /// Mean of each run's longest refused time, seconds.
    pub refused_s: Option<f64>,
    /// Unclean elections.
    pub unclean: u64,
    /// Other forbidden anomalies, `kind ×n`.
    pub other: Vec<String>,
    /// Each run: link (relative to the matrix directory) and status.
    pub runs: Vec<(Option<String>, String)>,
}

/// The matrix page's data, from matrix.json; `dir_name` is the matrix directory's name (to
/// make run links relative to it).
pub fn matrix_rows(matrix: &Value, dir_name: &str) -> Vec<MatrixRow> {
    let cells = matrix.get("cells").and_then(Value::as_array);
    cells
        .into_iter()
        .flatten()
        .map(|cell| {
            let summary = cell.get("summary").cloned().unwrap_or_default();
            let number = |v: &Value, k: &str| v.get(k).and_then(Value::as_u64).unwrap_or(0);
            let swept = cell
                .get("swept")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .filter_map(|s| s.as_str()?.split_once('='))
                .map(|(k, v)| (k.to_owned(), v.to_owned()))
                .collect();
            let runs = cell
                .get("runs")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .map(|run| {
                    let link = run.get("run_dir").and_then(Value::as_str).and_then(|dir| {
                        let (_, inside) = dir.split_once(&format!("{dir_name}/"))?;
                        Some(format!("{inside}/report.html"))
                    });
                    (link, run.get("status").map(compact).unwrap_or_default())
                })
                .collect();
            MatrixRow {
                cell: number(cell, "cell"),
                swept,
                verdicts: summary
                    .get("statuses")
                    .and_then(Value::as_object)
                    .into_iter()
                    .flatten()
                    .map(|(k, v)| (k.clone(), v.as_u64().unwrap_or(0)))
                    .collect(),
                lost: number(&summary, "lost_total"),
                acknowledged: number(&summary, "acknowledged_total"),
                refused_s: summary
                    .get("refused_seconds_mean_of_max")
                    .and_then(Value::as_f64),
                unclean: number(&summary, "unclean_elections"),
                other: summary
                    .get("other_bad_anomalies")
                    .and_then(Value::as_object)
                    .into_iter()
                    .flatten()
                    .map(|(k, v)| format!("{k} ×{}", compact(v)))
                    .collect(),
                runs,
            }
        })
        .collect()
}

/// A background from white to `rgb` as `share` goes from 0 to 1 (0 is no colour at all).
fn shade((r, g, b): (u8, u8, u8), share: f64) -> String {
    if share <= 0.0 {
        return String::new();
    }
    let alpha = 0.2 + 0.8 * share.clamp(0.0, 1.0);
    format!("background: rgba({r}, {g}, {b}, {alpha:.2})")
}

/// `matrix.html`.
pub fn matrix_page(matrix: &Value, rows: &[MatrixRow]) -> Markup {
    let keys: Vec<String> = rows
        .iter()
        .flat_map(|r| r.swept.keys().cloned())
        .collect::<std::collections::BTreeSet<_>>()
        .into_iter()
        .collect();
    let max_lost = rows.iter().map(|r| r.lost).max().unwrap_or(0).max(1) as f64;
    let max_refused = rows
        .iter()
        .filter_map(|r| r.refused_s)
        .fold(0.0, f64::max)
        .max(1e-9);
    let started = matrix.get("started").map(compact).unwrap_or_default();
    let common = matrix
        .get("common_settings")
        .and_then(Value::as_array)
        .map(|l| l.iter().map(compact).collect::<Vec<_>>().join(" "))
        .unwrap_or_default();
    html! {
        (DOCTYPE)
        html lang="en" {
            (head(&format!("logjam matrix {started}")))
            body {
                p class="nav" { a href="../index.html" { "all runs" } }
                h1 { "Matrix " (started) }
                p {
                    "Faults " code { (matrix.get("nemesis").map(compact).unwrap_or_default()) } "; "
                    (matrix.get("runs_per_cell").map(compact).unwrap_or_default()) " run(s) per cell"
                    @if !common.is_empty() { "; every cell: " code { (common) } } "."
                    " Red: acknowledged writes lost (darker: more). Amber: longest time a partition refused writes (mean over runs)."
                }
                table class="matrix" {
                    thead { tr {
                        th { "cell" } @for k in &keys { th { code { (k) } } }
                        th { "verdicts" } th { "lost / acknowledged" } th { "refused s" } th { "unclean elections" } th { "other forbidden anomalies" } th { "runs" }
                    } }
                    tbody { @for row in rows {
                        tr data-cell=(row.cell) {
                            td { (row.cell) }
                            @for k in &keys { td { (row.swept.get(k).map_or("", String::as_str)) } }
                            td { @for (status, n) in &row.verdicts { (verdict_badge(status)) " " (n) " " } }
                            td class="cell lost" style=(shade((0xc6, 0x28, 0x28), row.lost as f64 / max_lost)) { (row.lost) " / " (row.acknowledged) }
                            td class="cell refused" style=(shade((0xef, 0x9a, 0x00), row.refused_s.unwrap_or(0.0) / max_refused)) {
                                @match row.refused_s { Some(s) => (format!("{s:.1}")), None => "-" }
                            }
                            td { (row.unclean) }
                            td { (if row.other.is_empty() { "none".to_owned() } else { row.other.join(", ") }) }
                            td { @for (i, (link, status)) in row.runs.iter().enumerate() {
                                @match link { Some(href) => a href=(href) { "run " (i + 1) " (" (status) ")" }, None => span { "run " (i + 1) " (" (status) ")" } } " "
                            } }
                        }
                    } }
                }
                p class="files" { "Files: " a href="matrix.json" { "matrix.json" } " · " a href="matrix.md" { "matrix.md" } }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn index_entries_read_run_and_report() {
        let run = json!({"started": "2026-12-01T00:00:00Z", "workload": "queue", "seed": 7,
            "nemesis": ["kill", "pause"], "node_settings": {"min.insync.replicas": "2"},
            "client_settings": {"acks": "1"}});
        let entry = IndexEntry::from_json(
            "20261201T000000Z-queue-seed7".into(),
            &run,
            Some(&json!({"verdict": "invalid"})),
            true,
        );
        assert_eq!(entry.verdict, "invalid");
        assert_eq!(entry.nemesis, "kill,pause");
        assert_eq!(entry.settings, vec!["min.insync.replicas=2", "acks=1"]);
        assert_eq!(entry.href(), "20261201T000000Z-queue-seed7/report.html");
        let scenario = IndexEntry::from_json(
            "20261201T000000Z-scenario-unclean-election-seed7".into(),
            &run,
            None,
            false,
        );
        assert_eq!(scenario.workload, "scenario unclean-election");
        assert_eq!(scenario.verdict, "");
        assert_eq!(
            scenario.href(),
            "20261201T000000Z-scenario-unclean-election-seed7/"
        );
    }

    #[test]
    fn matrix_rows_link_runs_inside_the_matrix_directory() {
        let matrix = json!({"cells": [{"cell": 1, "swept": ["acks=1", "min.insync.replicas=2"],
            "summary": {"statuses": {"invalid": 1}, "lost_total": 4, "acknowledged_total": 90,
                "refused_seconds_mean_of_max": 2.5, "unclean_elections": 1,
                "other_bad_anomalies": {"duplicate": 2}},
            "runs": [{"status": "invalid",
                "run_dir": "results/20261201T000000Z-matrix/cell1-run1/20261201T000001Z-queue-seed5"},
                {"status": "error"}]}]});
        let rows = matrix_rows(&matrix, "20261201T000000Z-matrix");
        assert_eq!(rows.len(), 1);
        let row = &rows[0];
        assert_eq!(row.swept["acks"], "1");
        assert_eq!((row.lost, row.acknowledged, row.unclean), (4, 90, 1));
        assert_eq!(row.other, vec!["duplicate ×2"]);
        assert_eq!(
            row.runs[0].0.as_deref(),
            Some("cell1-run1/20261201T000001Z-queue-seed5/report.html")
        );
        assert_eq!(row.runs[1], (None, "error".to_owned()));
        assert_eq!(shade((1, 2, 3), 0.0), "");
        assert!(shade((1, 2, 3), 1.0).ends_with("1.00)"));
    }
}
