//! `logjam check`: run the checkers over a stored history, print the summary, write
//! report.json, and turn the verdict into the exit code.
//!
//! All analysis lives in `logjam-checkers` (pure, no tokio); this is only the shell around it.

use anyhow::Context;
use logjam_checkers::{check_file, report_path};

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
    let unfinished = crate::run::state::unfinished(&run_dir).map(|state| {
        format!(
            "the run did not finish (run.json state: {state}); judging the history it left, up              to its last complete line"
        )
    });
    let mut report = match check_file(&args.path) {
        Ok(report) => report,
        Err(error) => {
            let error = anyhow::Error::from(error);
            return Err(match &unfinished {
                Some(note) => error.context(format!("{note}, but there is none to judge")),
                None => error,
            });
        }
    };
    if let Some(note) = unfinished {
        report.warnings.insert(0, note);
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
