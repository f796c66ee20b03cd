//! The HTML reports as a person sees them: a real two-cell matrix of short runs under kill and
//! pause faults is stored, then every run's report.html, the matrix.html and the results'
//! index.html are loaded in headless Chromium (Debian's `chromium`, installed by `.ci/run`).
//! Each page must load without a console message, each plot must shade exactly one band per
//! fault the history records, every anomaly of report.json must be on the page with its ops,
//! and every link between the pages must lead to a file. A copy of one run with one record's
//! value changed gives the checkers anomalies to report, so that last check has something
//! to find. Screenshots go to `$LOGJAM_SCREENSHOTS` when set (else the temporary directory).
//!
//! Without Chromium the test fails under CI (CI=true) and says it skipped otherwise.

mod support;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::Value;

/// Every fault band, and nothing else, is drawn with this opacity (report/plot.rs).
const BAND: &str = "opacity=\"0.18\"";
/// Undo names and the watcher's op: nemesis ops that open no band.
const NOT_FAULTS: &[&str] = &[
    "restart",
    "start",
    "resume",
    "heal",
    "disk-free",
    "leader-change",
];

struct Browser {
    binary: PathBuf,
    profile: tempfile::TempDir,
    shots: PathBuf,
}

impl Browser {
    /// Chromium, or `None` (after saying so) outside CI; under CI a missing browser fails.
    fn find(shots: PathBuf) -> Option<Browser> {
        let candidates = std::env::var_os("CHROMIUM")
            .map(PathBuf::from)
            .into_iter()
            .chain(["chromium", "chromium-browser"].map(PathBuf::from));
        for binary in candidates {
            let found = Command::new(&binary)
                .arg("--version")
                .output()
                .is_ok_and(|o| o.status.success());
            if found {
                return Some(Browser {
                    binary,
                    profile: tempfile::tempdir().unwrap(),
                    shots,
                });
            }
        }
        let message = "no chromium on PATH (Debian's `chromium` package; .ci/run installs it)";
        assert!(std::env::var("CI").as_deref() != Ok("true"), "{message}");
        eprintln!("SKIPPED report_browser: {message}");
        None
    }

    fn chromium(&self, args: &[String], page: &Path) -> Output {
        let output = Command::new(&self.binary)
            .args([
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--disable-quic",
                "--no-first-run",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
                "--enable-logging=stderr",
                "--v=0",
            ])
            .arg(format!("--user-data-dir={}", self.profile.path().display()))
            .args(args)
            .arg(format!("file://{}", page.display()))
            .output()
            .expect("chromium runs");
        assert!(
            output.status.success(),
            "chromium failed on {}: {}",
            page.display(),
            String::from_utf8_lossy(&output.stderr)
        );
        output
    }

    /// The page's DOM after load, and every console message it logged.
    fn load(&self, page: &Path) -> (String, Vec<String>) {
        let output = self.chromium(&["--dump-dom".to_owned()], page);
        let console = String::from_utf8_lossy(&output.stderr)
            .lines()
            .filter(|line| line.contains("CONSOLE"))
            .map(str::to_owned)
            .collect();
        (
            String::from_utf8_lossy(&output.stdout).into_owned(),
            console,
        )
    }

    /// Loads `page`, requires a clean console, takes its screenshot as `<name>.png`.
    fn look_at(&self, page: &Path, name: &str) -> String {
        let (dom, console) = self.load(page);
        assert!(
            console.is_empty(),
            "{} logged to the console: {console:#?}",
            page.display()
        );
        assert!(dom.contains("</html>"), "{} did not load", page.display());
        std::fs::create_dir_all(&self.shots).unwrap();
        let shot = self.shots.join(format!("{name}.png"));
        self.chromium(
            &[
                format!("--screenshot={}", shot.display()),
                "--window-size=1280,2400".to_owned(),
                "--hide-scrollbars".to_owned(),
            ],
            page,
        );
        let size = std::fs::metadata(&shot).map_or(0, |m| m.len());
        assert!(size > 10_000, "{} is a blank screenshot", shot.display());
        dom
    }
}

fn read_json(path: &Path) -> Value {
    let text =
        std::fs::read_to_string(path).unwrap_or_else(|error| panic!("{}: {error}", path.display()));
    serde_json::from_str(&text).unwrap()
}

/// Text as a DOM dump serialises it.
fn escaped(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('\u{a0}', "&nbsp;")
}

/// Faults the history records as injected (each must be one band per plot).
fn faults_in(history: &Path) -> usize {
    std::fs::read_to_string(history)
        .unwrap()
        .lines()
        .skip(1)
        .map(|line| serde_json::from_str::<Value>(line).unwrap())
        .filter(|op| {
            op["process"] == "nemesis"
                && op["type"] == "info"
                && !NOT_FAULTS.contains(&op["f"].as_str().unwrap_or(""))
        })
        .count()
}

/// Every `href` of the page that points at a file of ours exists.
fn links_resolve(dom: &str, page: &Path) {
    let base = page.parent().unwrap();
    for piece in dom.split("href=\"").skip(1) {
        let href = &piece[..piece.find('"').unwrap()];
        let file = href.split('#').next().unwrap();
        if file.is_empty() || file.contains(':') {
            continue;
        }
        let target = base.join(file);
        assert!(
            target.exists(),
            "{} links to {href}, which does not exist",
            page.display()
        );
    }
}

/// The run page: one band per fault in each plot, every anomaly witness with its ops.
fn check_run_page(browser: &Browser, run: &Path, name: &str) -> usize {
    let page = run.join("report.html");
    let dom = browser.look_at(&page, name);
    links_resolve(&dom, &page);
    let faults = faults_in(&run.join("history.jsonl"));
    assert!(faults > 0, "{name}: the run had faults to shade");
    let plots: Vec<&str> = dom.split("<figure class=\"plot").skip(1).collect();
    assert!(plots.len() >= 2, "latency and throughput plots on {name}");
    for plot in plots {
        let plot = &plot[..plot.find("</figure>").unwrap()];
        assert!(plot.contains("<svg"), "a plot is an inline SVG");
        assert_eq!(
            plot.matches(BAND).count(),
            faults,
            "{name}: one shaded band per fault of the history"
        );
    }
    let report = read_json(&run.join("report.json"));
    let mut witnesses = 0;
    for (kind, group) in report["anomalies"].as_object().unwrap() {
        assert!(
            dom.contains(&format!("data-kind=\"{kind}\"")),
            "{name}: anomaly kind {kind} is on the page"
        );
        for witness in group["witnesses"].as_array().unwrap() {
            witnesses += 1;
            let explanation = witness["explanation"].as_str().unwrap();
            assert!(
                dom.contains(&escaped(explanation)),
                "{name}: {kind} witness missing: {explanation}"
            );
            for op in witness["ops"].as_array().into_iter().flatten() {
                let row = format!("data-op=\"{}\"", op["index"]);
                assert!(
                    dom.contains(&row),
                    "{name}: {kind} op {} has no row",
                    op["index"]
                );
            }
        }
    }
    assert!(
        dom.contains(&format!(
            "{} acknowledged writes",
            report["durability"]["acknowledged"]
        )),
        "{name}: the durability totals"
    );
    witnesses
}

/// Changes the value of the first record an ok poll read to one no send wrote: the checkers
/// must then report what they see.
fn doctor(history: &Path) {
    let text = std::fs::read_to_string(history).unwrap();
    let mut done = false;
    let lines: Vec<String> = text
        .lines()
        .map(|line| {
            let mut op: Value = serde_json::from_str(line).unwrap();
            if done || op["type"] != "ok" || op["f"] != "poll" {
                return line.to_owned();
            }
            for micro in op["value"].as_array_mut().into_iter().flatten() {
                let reads = micro.get_mut(1).and_then(Value::as_object_mut);
                for records in reads.into_iter().flat_map(|r| r.values_mut()) {
                    if let Some(record) = records.get_mut(0).and_then(|r| r.get_mut(1)) {
                        *record = Value::from(987_654_321);
                        done = true;
                        break;
                    }
                }
            }
            op.to_string()
        })
        .collect();
    assert!(done, "an ok poll that read a record");
    std::fs::write(history, lines.join("\n") + "\n").unwrap();
}

#[test]
fn reports_render_in_a_real_browser() {
    let shots = std::env::var_os("LOGJAM_SCREENSHOTS").map(PathBuf::from);
    let results = tempfile::tempdir().unwrap();
    let Some(browser) = Browser::find(shots.unwrap_or_else(|| results.path().join("screens")))
    else {
        return;
    };
    // A console message must be seen when there is one, or the clean-console check means
    // nothing.
    let noisy = results.path().join("noisy.html");
    std::fs::write(
        &noisy,
        "<html><body><script>console.error('boom')</script></body></html>",
    )
    .unwrap();
    assert!(
        browser
            .load(&noisy)
            .1
            .iter()
            .any(|line| line.contains("boom")),
        "console messages are captured"
    );

    let _turn = support::one_cluster_at_a_time();
    let output = Command::new(env!("CARGO_BIN_EXE_logjam"))
        .args(["matrix", "--nodes", "1", "--set", "replication.factor=1"])
        .args(["--set", "acks=1,all", "--time-limit", "6", "--rate", "100"])
        .args([
            "--nemesis",
            "kill,pause",
            "--nemesis-interval",
            "1",
            "--seed",
            "5",
        ])
        .arg("--results-dir")
        .arg(results.path())
        .arg("--node-binary")
        .arg(support::node_binary())
        .output()
        .unwrap();
    assert_eq!(
        output.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let matrix = results.path().join("latest-matrix").canonicalize().unwrap();
    let runs: Vec<PathBuf> = (1..=2)
        .map(|cell| {
            matrix
                .join(format!("cell{cell}-run1/latest"))
                .canonicalize()
                .unwrap()
        })
        .collect();

    for (i, run) in runs.iter().enumerate() {
        check_run_page(&browser, run, &format!("run-cell{}", i + 1));
    }

    let page = matrix.join("matrix.html");
    let dom = browser.look_at(&page, "matrix");
    links_resolve(&dom, &page);
    for cell in 1..=2 {
        assert!(
            dom.contains(&format!("data-cell=\"{cell}\"")),
            "cell {cell} row"
        );
    }
    assert_eq!(
        dom.matches("/report.html\"").count(),
        2,
        "a link to each run"
    );

    // One run again with a value no send wrote: anomalies, checked and rendered by
    // `logjam check`, each on the page.
    let doctored = results.path().join("20990101T000000Z-queue-seed5-doctored");
    std::fs::create_dir(&doctored).unwrap();
    for file in ["run.json", "history.jsonl"] {
        std::fs::copy(runs[0].join(file), doctored.join(file)).unwrap();
    }
    doctor(&doctored.join("history.jsonl"));
    let checked = Command::new(env!("CARGO_BIN_EXE_logjam"))
        .arg("check")
        .arg(&doctored)
        .output()
        .unwrap();
    assert_eq!(
        checked.status.code(),
        Some(1),
        "the doctored run is invalid"
    );
    let witnesses = check_run_page(&browser, &doctored, "run-with-anomalies");
    assert!(witnesses > 0, "the doctored run has anomalies to show");

    // `logjam report` lists all three runs (and the matrix) in the index.
    let report = Command::new(env!("CARGO_BIN_EXE_logjam"))
        .arg("report")
        .arg("--results-dir")
        .arg(results.path())
        .output()
        .unwrap();
    assert_eq!(report.status.code(), Some(0), "{report:?}");
    let page = results.path().join("index.html");
    let dom = browser.look_at(&page, "index");
    links_resolve(&dom, &page);
    for run in runs.iter().chain([&doctored]) {
        let relative = run
            .strip_prefix(results.path().canonicalize().unwrap())
            .unwrap_or(run);
        let relative = relative.strip_prefix(results.path()).unwrap_or(relative);
        assert!(
            dom.contains(&format!("{}/report.html", relative.display())),
            "the index links {}",
            relative.display()
        );
    }
    assert!(dom.contains("matrix.html"), "the index links the matrix");
}
