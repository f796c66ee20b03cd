//! The `logjam` command line: one subcommand per job (see `cli.rs`), exit codes shared by all
//! of them: 0 valid, 1 invalid, 2 unknown, 3 the harness itself failed (bad input, a bug, a
//! missing tool), so a script can never mistake a broken harness for a verdict.

mod check;
mod cli;
mod cluster;
mod lab;
mod run;

use std::process::ExitCode;

use clap::Parser;

fn main() -> ExitCode {
    let cli = cli::Cli::parse();
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "warn".into()),
        )
        .with_writer(std::io::stderr)
        .init();
    let outcome = match cli.command {
        cli::Command::Check(args) => check::run(&args),
        cli::Command::Run(args) => run::run(&args),
        cli::Command::Cluster(cli::ClusterCommand::Up(args)) => cluster::up(&args),
    };
    match outcome {
        Ok(code) => ExitCode::from(code),
        Err(error) => {
            eprintln!("logjam: {error:#}");
            ExitCode::from(cli::EXIT_HARNESS_FAILED)
        }
    }
}
