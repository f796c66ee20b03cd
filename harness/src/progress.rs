//! A run's progress while the workload runs: on a terminal, a live indicatif bar (elapsed of
//! the time limit, ops ok/fail/info, the faults in force), redrawn as often as the run asks;
//! otherwise the plain `logjam: 12/60 s, ...` line every five seconds, as logs want it.

use std::io::IsTerminal;
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

/// Seconds between two plain progress lines.
const PLAIN_EVERY: Duration = Duration::from_secs(5);

/// The progress display of one run.
pub struct Progress {
    limit_s: u64,
    bar: Option<ProgressBar>,
    next_line: Instant,
}

impl Progress {
    /// A bar when stderr is a terminal, else plain lines; `limit_s` is the time limit.
    pub fn new(limit_s: u64) -> Progress {
        let bar = std::io::stderr().is_terminal().then(|| {
            let bar =
                ProgressBar::with_draw_target(Some(limit_s), ProgressDrawTarget::stderr_with_hz(4));
            let style = ProgressStyle::with_template("{spinner} [{bar:30}] {pos}/{len} s  {msg}")
                .unwrap_or_else(|_| ProgressStyle::default_bar())
                .progress_chars("=> ");
            bar.set_style(style);
            bar
        });
        Progress {
            limit_s,
            bar,
            next_line: Instant::now() + PLAIN_EVERY,
        }
    }

    /// Shows `elapsed_s` seconds done, the ops completed so far, the ops open now and the
    /// faults in force (`faults` is only called when something will be shown).
    pub fn update(
        &mut self,
        elapsed_s: u64,
        (ok, fail, info): (u64, u64, u64),
        open: usize,
        faults: impl FnOnce() -> Vec<String>,
    ) {
        let describe = |faults: Vec<String>| {
            if faults.is_empty() {
                "none".to_owned()
            } else {
                faults.join("; ")
            }
        };
        match &self.bar {
            Some(bar) => {
                bar.set_position(elapsed_s.min(self.limit_s));
                bar.tick();
                bar.set_message(format!(
                    "{ok} ok, {fail} fail, {info} info, {open} open | faults: {}",
                    describe(faults())
                ));
            }
            None if Instant::now() >= self.next_line => {
                self.next_line += PLAIN_EVERY;
                eprintln!(
                    "logjam: {elapsed_s}/{} s, {ok} ok, {fail} fail, {info} info, {open} open, faults: {}",
                    self.limit_s,
                    describe(faults())
                );
            }
            None => {}
        }
    }

    /// Clears the bar (the workload is over).
    pub fn finish(&self) {
        if let Some(bar) = &self.bar {
            bar.finish_and_clear();
        }
    }
}

impl Drop for Progress {
    fn drop(&mut self) {
        self.finish();
    }
}
