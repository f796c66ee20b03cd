//! The record phase of a run: what is stored and printed. The run directory's name and
//! timestamps, the replay command, run.json's workload figures (harness cost, what the
//! schedule did, the achieved rate overall and per fault window) and the rate lines of the
//! summary.

use std::path::Path;
use std::time::{SystemTime, UNIX_EPOCH};

use anyhow::Context;
use logjam_history::HistoryReader;

use super::workload::Phase;
use crate::cli::RunArgs;
use crate::lab::NetworkMode;
use crate::rates::{self, Rates};

/// The achieved rate of the workload phase, read back from the run's history.
///
/// # Errors
/// A history that cannot be read.
pub(super) fn rates(run_dir: &Path, phase: &Phase, target: f64) -> anyhow::Result<Rates> {
    let path = run_dir.join("history.jsonl");
    let reader =
        HistoryReader::open(&path).with_context(|| format!("cannot read {}", path.display()))?;
    // A torn last line cannot happen here (the recorder flushed every op); stop at any error.
    let ops = reader.map_while(Result::ok);
    Ok(rates::measure(ops, phase.start_ns, phase.end_ns, target))
}

/// The lines about processes the summary prints.
pub(super) fn schedule_summary(phase: &Phase) -> String {
    let schedule = &phase.schedule;
    format!(
        "processes: {} in all, {} retired after info and replaced, {} started while every \
         other was busy, {} closed after {} s idle; at most {} ops open at once (bound {}, \
         reached {} time(s))\n",
        schedule.processes,
        schedule.retired,
        schedule.started_when_busy,
        schedule.closed_idle,
        super::schedule::IDLE_CLOSE.as_secs(),
        schedule.peak_open,
        schedule.open_bound,
        schedule.waits_at_bound
    )
}

pub(super) fn replay_command(args: &RunArgs, seed: u64) -> String {
    let mut command = format!(
        "logjam run --seed {seed} --nodes {} --time-limit {} --rate {} --concurrency {} --keys {} \
         --nemesis {} --nemesis-interval {}",
        args.nodes,
        args.time_limit,
        args.rate,
        args.concurrency,
        args.keys,
        if args.nemesis.is_empty() {
            "none"
        } else {
            &args.nemesis
        },
        args.nemesis_interval
    );
    for setting in &args.set {
        command.push_str(&format!(" --set {setting}"));
    }
    if args.workload != crate::cli::WorkloadName::Queue {
        command.push_str(&format!(" --workload {}", args.workload.as_str()));
    }
    if args.network == NetworkMode::Loopback {
        command.push_str(" --network loopback");
    }
    if args.controllers > 0 {
        command.push_str(&format!(" --controllers {}", args.controllers));
    }
    if let Some(script) = &args.nemesis_script {
        command.push_str(&format!(" --nemesis-script {}", script.display()));
    }
    command
}

/// UTC time as `2026-11-29T10:03:46Z`, or `20261129T100346Z` for directory names.
pub(crate) fn timestamp(time: SystemTime, compact: bool) -> String {
    let secs = time
        .duration_since(UNIX_EPOCH)
        .map_or(0, |elapsed| elapsed.as_secs()) as i64;
    let (days, rem) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    // Civil date from days since 1970-01-01 (Howard Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    let (hour, minute, second) = (rem / 3600, rem % 3600 / 60, rem % 60);
    if compact {
        format!("{year:04}{month:02}{day:02}T{hour:02}{minute:02}{second:02}Z")
    } else {
        format!("{year:04}-{month:02}-{day:02}T{hour:02}:{minute:02}:{second:02}Z")
    }
}
#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[test]
    fn timestamps_are_utc_civil_dates() {
        let time = UNIX_EPOCH + Duration::from_secs(1_795_946_626); // 2026-11-29T10:03:46Z
        assert_eq!(timestamp(time, false), "2026-11-29T10:03:46Z");
        assert_eq!(timestamp(time, true), "20261129T100346Z");
        assert_eq!(timestamp(UNIX_EPOCH, false), "1970-01-01T00:00:00Z");
    }
}
