//! `logjam check`: run the checkers over a stored history, print the summary, write
//! report.json, and turn the verdict into the exit code.
//!
//! All analysis lives in `logjam-checkers` (pure, no tokio); this is only the shell around it.

use anyhow::Context;
use logjam_checkers::{AnomalyKind, Verdict, check_file, report_path};

use crate::cli::CheckArgs;

/// Checks `args.path`; returns the verdict's exit code.
///
/// # Errors
/// A malformed or missing history (the message names the file and line), or a report that
/// cannot be written.
pub fn run(args: &CheckArgs) -> anyhow::Result<u8> {
    if let Some(model) = args.model {
        return crate::lincheck::run(args, model);
    }
    // A run whose harness died (or failed) left a history without its end: judge what is
    // there and say so, in the summary and in report.json's warnings.
    let run_dir = if args.path.is_dir() {
        args.path.clone()
    } else {
        args.path.parent().map_or_else(
            || std::path::PathBuf::from("."),
            std::path::Path::to_path_buf,
        )
    };
    let unfinished = crate::run::state::unfinished(&run_dir);
    let note = unfinished.as_ref().map(|unfinished| {
        format!(
            "the run did not finish (run.json state: {}); judging the history it left, up \
             to its last complete line",
            unfinished.state
        )
    });
    let mut report = match check_file(&args.path) {
        Ok(report) => report,
        Err(error) => {
            let error = anyhow::Error::from(error);
            return Err(match &note {
                Some(note) => error.context(format!("{note}, but there is none to judge")),
                None => error,
            });
        }
    };
    if let Some(note) = note {
        report.warnings.insert(0, note);
    }
    // Cut off before its final reads, a run never tried to read everything: values nobody
    // has read yet (`unseen`) may be late as well as lost. Anything else stays evidence.
    if unfinished.is_some_and(|unfinished| !unfinished.workload_ended)
        && report.verdict == Verdict::Invalid
        && report
            .bad_kinds
            .iter()
            .all(|kind| *kind == AnomalyKind::Unseen)
    {
        report.verdict = Verdict::Unknown;
        report.reason = "only unseen values, and the run was cut off before its final reads: \
                         late cannot be told from lost"
            .to_owned();
    }
    let json = report.to_json().context("cannot serialise the report")?;
    if args.json {
        println!("{json}");
    } else {
        print!("{}", report.summary());
    }
    if !args.no_write {
        let path = report_path(&args.path);
        std::fs::write(&path, json.as_bytes())
            .with_context(|| format!("cannot write {}", path.display()))?;
        if !args.json {
            println!("report: {}", path.display());
        }
        // The page beside it, so an old run can be re-rendered; a page that cannot be drawn
        // is a warning, the verdict stands.
        let dir = path.parent().unwrap_or(std::path::Path::new("."));
        match crate::report::write_run_page(dir) {
            Ok(page) if !args.json => println!("page: {}", page.display()),
            Ok(_) => {}
            Err(error) => eprintln!("logjam: warning: no HTML report: {error:#}"),
        }
    }
    Ok(u8::try_from(report.verdict.exit_code()).unwrap_or(2))
}
