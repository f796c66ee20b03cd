//! The `logjam` command line: one subcommand per job (see `cli.rs`), exit codes shared by all
//! of them: 0 valid, 1 invalid, 2 unknown, 3 the harness itself failed (bad input, a bug, a
//! missing tool), so a script can never mistake a broken harness for a verdict.

use logjam::{
    check, cli, cluster, error_text, lab, matrix, member, nightly, report, run, scenario,
};

use std::process::ExitCode;

use clap::Parser;

fn main() -> ExitCode {
    let cli = cli::Cli::parse();
    // The sandbox comes first, while the process is still single-threaded: every thread,
    // node, link and mount made after this lives inside it.
    let sandbox = match &cli.command {
        cli::Command::Run(args) => Some(args.network == lab::NetworkMode::Namespaces),
        cli::Command::Cluster(cli::ClusterCommand::Up(args)) => {
            Some(args.network == lab::NetworkMode::Namespaces)
        }
        cli::Command::Scenario(_) => Some(true),
        // Each run of a matrix or a suite is a `logjam run` child with a sandbox of its own.
        cli::Command::Check(_)
        | cli::Command::Report(_)
        | cli::Command::Matrix(_)
        | cli::Command::Nightly(_)
        // A member is a child of a run, inside that run's sandbox already.
        | cli::Command::Member(_) => None,
    };
    let privilege = match sandbox.map(lab::sandbox::enter) {
        None => None,
        Some(Ok(privilege)) => Some(privilege),
        Some(Err(error)) => {
            eprintln!("logjam: {}", error_text::chain(&error));
            return ExitCode::from(cli::EXIT_HARNESS_FAILED);
        }
    };
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| "warn,fuser=error".into()),
        )
        .with_writer(std::io::stderr)
        .init();
    let outcome = match cli.command {
        cli::Command::Check(args) => check::run(&args),
        cli::Command::Report(args) => report::run(&args),
        cli::Command::Run(args) => run::run(&args, privilege),
        cli::Command::Matrix(args) => matrix::run(&args),
        cli::Command::Scenario(args) => scenario::run(&args, privilege),
        cli::Command::Nightly(args) => nightly::run(&args),
        cli::Command::Cluster(cli::ClusterCommand::Up(args)) => cluster::up(&args),
        cli::Command::Member(args) => member::run(&args),
    };
    match outcome {
        Ok(code) => ExitCode::from(code),
        Err(error) => {
            eprintln!("logjam: {}", error_text::chain(&error));
            ExitCode::from(cli::EXIT_HARNESS_FAILED)
        }
    }
}
