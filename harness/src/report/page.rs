//! The run page (`report.html`) as a maud template: verdict and replay command, the settings
//! that differ from Kafka's defaults, the plots, each anomaly with its witness ops (linked to
//! their history line) and the faults in force around them, and the durability table. One
//! self-contained file: inline CSS and SVG, no script, no network.

use std::collections::BTreeMap;

use maud::{DOCTYPE, Markup, PreEscaped, html};

use super::data::{RunSummary, Witness};
use super::history::{FailedFault, FaultInterval, HistoryView, OpRow};

/// The shared stylesheet of every page.
pub const STYLE: &str = include_str!("style.css");

/// Seconds either side of a witness's ops within which a fault counts as "around" it.
const AROUND_S: f64 = 5.0;

/// Everything the run page shows.
pub struct RunPage<'a> {
    /// The run directory's name.
    pub name: &'a str,
    /// run.json and report.json.
    pub summary: &'a RunSummary,
    /// The history scan.
    pub history: &'a HistoryView,
    /// Inline SVGs: latency, throughput, leadership (empty: not drawn).
    pub plots: [String; 3],
    /// Points drawn out of points in the history.
    pub sampled: (usize, usize),
    /// The relative link to the results' index page.
    pub index_href: String,
    /// The run's files that exist, to link.
    pub files: Vec<&'static str>,
}

/// The page's head: title and style.
pub fn head(title: &str) -> Markup {
    html! {
        head {
            meta charset="utf-8";
            meta name="viewport" content="width=device-width, initial-scale=1";
            title { (title) }
            style { (PreEscaped(STYLE)) }
        }
    }
}

/// A verdict as a coloured badge.
pub fn verdict_badge(verdict: &str) -> Markup {
    let class = match verdict {
        "valid" => "verdict valid",
        "invalid" => "verdict invalid",
        _ => "verdict unknown",
    };
    html! { span class=(class) { (if verdict.is_empty() { "no verdict" } else { verdict }) } }
}

/// A link to an op's line of history.jsonl (a text fragment on its opening).
fn history_link(row: &OpRow) -> Markup {
    let href = format!(
        "history.jsonl#:~:text=%7B%22index%22%3A{}%2C%22time%22",
        row.index
    );
    html! { a href=(href) { "line " (row.line) } }
}

fn op_rows(ops: &[u64], named: &BTreeMap<u64, OpRow>) -> Markup {
    html! {
        table class="ops" {
            thead { tr { th { "index" } th { "time (s)" } th { "process" } th { "type" } th { "f" } th { "value" } th { "error" } th { "history" } } }
            tbody {
                @for index in ops {
                    @match named.get(index) {
                        Some(row) => tr class={ "op " (row.op_type) } data-op=(index) {
                            td { (row.index) } td { (format!("{:.3}", row.time_s)) } td { (row.process) }
                            td { (row.op_type) } td { (row.f) } td class="value" { code { (row.value) } }
                            td { (row.error) } td { (history_link(row)) }
                        },
                        None => tr data-op=(index) { td { (index) } td colspan="7" { "not in history.jsonl" } },
                    }
                }
            }
        }
    }
}

fn faults_around(witness: &Witness, history: &HistoryView) -> Vec<String> {
    let times: Vec<f64> = witness
        .ops
        .iter()
        .filter_map(|index| history.named.get(index).map(|row| row.time_s))
        .collect();
    let (Some(first), Some(last)) = (
        times.iter().copied().reduce(f64::min),
        times.iter().copied().reduce(f64::max),
    ) else {
        return Vec::new();
    };
    history
        .faults
        .iter()
        .filter(|f| f.start_s <= last + AROUND_S && f.end_or(history.end_s) >= first - AROUND_S)
        .map(fault_span)
        .collect()
}

fn fault_span(fault: &FaultInterval) -> String {
    match fault.end_s {
        Some(end) => format!("{} ({:.1}–{:.1} s)", fault.label(), fault.start_s, end),
        None => format!(
            "{} (from {:.1} s, never undone)",
            fault.label(),
            fault.start_s
        ),
    }
}

fn failed(fault: &FailedFault) -> String {
    format!(
        "op {} at {:.1} s: {} failed: {}",
        fault.index, fault.time_s, fault.name, fault.error
    )
}

/// The whole run page.
pub fn run_page(page: &RunPage<'_>) -> Markup {
    let summary = page.summary;
    let history = page.history;
    html! {
        (DOCTYPE)
        html lang="en" {
            (head(&format!("logjam run {}", page.name)))
            body {
                p class="nav" { a href=(page.index_href) { "all runs" } }
                h1 { "Run " (page.name) " " (verdict_badge(&summary.verdict)) }
                p class="reason" { (summary.reason) }
                table class="facts" {
                    @for (name, value) in [("workload", &summary.workload), ("seed", &summary.seed), ("started", &summary.started)] {
                        @if !value.is_empty() { tr { th { (name) } td { (value) } } }
                    }
                    @if !summary.nemesis.is_empty() { tr { th { "faults" } td { (summary.nemesis.join(", ")) } } }
                    @for (name, value) in &summary.shape { tr { th { (name) } td { (value) } } }
                    @if summary.replay.is_empty() {
                        tr { th { "replay" } td { "no run.json: settings and replay command unknown" } }
                    } @else {
                        tr { th { "replay" } td { code class="replay" { (summary.replay) } } }
                    }
                }
                h2 { "Settings that differ from Kafka's defaults" }
                @if summary.settings.is_empty() {
                    p { "None: every setting is Kafka's default." }
                } @else {
                    table class="settings" {
                        thead { tr { th { "setting" } th { "this run" } th { "Kafka's default" } } }
                        tbody { @for s in &summary.settings {
                            tr { td { code { (s.key) } } td { (s.value) } td { (s.default.as_deref().unwrap_or("(not known to logjam)")) } }
                        } }
                    }
                }
                h2 { "Latency and throughput" }
                p class="note" {
                    (history.op_lines) " op lines; " (page.sampled.1) " client ops, " (page.sampled.0)
                    " drawn (every fail, info and anomaly op; the fastest, slowest and a few more ok ops per time bucket). "
                    (history.faults.len()) " fault(s), each shaded from injection to undo."
                }
                figure class="plot latency" { (PreEscaped(&page.plots[0])) }
                figure class="plot throughput" { (PreEscaped(&page.plots[1])) }
                h2 { "Leadership" }
                @if history.leadership.is_empty() {
                    p { "The leader watcher recorded no change of leader, epoch or ISR." }
                } @else {
                    figure class="plot leadership" { (PreEscaped(&page.plots[2])) }
                }
                h2 { "Faults" }
                @if history.faults.is_empty() && history.failed_faults.is_empty() {
                    p { "No fault was injected." }
                } @else {
                    ol class="faults" {
                        @for fault in &history.faults { li data-op=(fault.index) { (fault_span(fault)) } }
                    }
                    @for fault in &history.failed_faults { p class="failed-fault" { (failed(fault)) } }
                }
                h2 { "Anomalies" }
                @if summary.anomalies.is_empty() {
                    p { "None found." }
                }
                @for kind in &summary.anomalies {
                    section class={ "anomaly-kind" @if kind.bad { " bad" } } data-kind=(kind.kind) {
                        h3 { (kind.kind) " × " (kind.count) " " @if kind.bad { span class="verdict invalid" { "forbidden" } } @else { span class="verdict allowed" { "allowed" } } }
                        @if (kind.witnesses.len() as u64) < kind.count {
                            p class="note" { "report.json keeps the first " (kind.witnesses.len()) " of " (kind.count) " cases." }
                        }
                        @for (i, witness) in kind.witnesses.iter().enumerate() {
                            div class="witness" data-kind=(kind.kind) data-witness=(i) {
                                p class="explanation" {
                                    @if let Some(key) = &witness.key { "key " (key) ": " }
                                    (witness.explanation)
                                }
                                @for (name, value) in &witness.details { p class="detail" { (name) ": " code { (value) } } }
                                @let around = faults_around(witness, history);
                                p class="around" { "Faults in force around it: " @if around.is_empty() { "none" } @else { (around.join("; ")) } }
                                (op_rows(&witness.ops, &history.named))
                            }
                        }
                    }
                }
                h2 { "Durability" }
                p {
                    (summary.durability_totals.0) " acknowledged writes, " (summary.durability_totals.1)
                    " lost, " (summary.durability_totals.2) " unconfirmed (neither read back nor proven lost)."
                }
                @if !summary.durability.is_empty() {
                    table class="durability" {
                        thead { tr { th { "key" } th { "acknowledged" } th { "lost" } th { "unconfirmed" } th { "lost offsets" } th { "attribution and more" } } }
                        tbody { @for row in &summary.durability {
                            tr class=@if row.lost > 0 { "lost" } @else { "" } {
                                td { (row.key) } td { (row.acknowledged) } td { (row.lost) } td { (row.unconfirmed) }
                                td { (row.offsets.join(", ")) }
                                td { @for (name, value) in &row.details { div { (name) ": " code { (value) } } } }
                            }
                        } }
                    }
                }
                @if !summary.warnings.is_empty() {
                    h2 { "Checker warnings" }
                    ul { @for warning in &summary.warnings { li { (warning) } } }
                }
                p class="files" {
                    "Files:" @for file in &page.files { " " a href=(file) { (file) } }
                }
            }
        }
    }
}
