//! Command-line arguments of `logjam` (clap derive), and the exit codes every subcommand uses.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

/// Exit code when the harness itself failed (not a verdict about the cluster).
pub const EXIT_HARNESS_FAILED: u8 = 3;

/// A correctness harness for Kafka-style replicated logs.
///
/// Exit codes: 0 valid, 1 invalid, 2 unknown, 3 the harness failed.
#[derive(Debug, Parser)]
#[command(name = "logjam", version, about, long_about = None)]
pub struct Cli {
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// The subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Re-check a stored run or a history file offline and write report.json beside it.
    Check(CheckArgs),
}

/// Arguments of `logjam check`.
#[derive(Debug, Args)]
pub struct CheckArgs {
    /// A run directory (holding history.jsonl) or a history.jsonl file.
    pub path: PathBuf,
    /// Print the full report as JSON instead of the summary.
    #[arg(long)]
    pub json: bool,
    /// Do not write report.json.
    #[arg(long)]
    pub no_write: bool,
}
