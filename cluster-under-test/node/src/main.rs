//! The `logjam-node` binary: load `server.properties`, serve until SIGINT or SIGTERM, then shut
//! down cleanly. A SIGKILL leaves the logs as a crash would, for recovery to deal with.

use std::path::PathBuf;

use anyhow::Context;
use clap::Parser;
use logjam_node::config::Config;
use tokio::signal::unix::{SignalKind, signal};

/// A Kafka-compatible node (broker role) for logjam's tests.
///
/// Started as Kafka's `kafka-server-start.sh server.properties`: the properties file is the
/// positional argument (`--config FILE` is still accepted, for scripts written against it).
#[derive(Debug, Parser)]
#[command(version, about)]
struct Args {
    /// The server.properties file (Kafka property names).
    #[arg(
        value_name = "SERVER_PROPERTIES",
        required_unless_present = "config_flag",
        conflicts_with = "config_flag"
    )]
    config: Option<PathBuf>,
    /// The same file, named by a flag (the form this binary accepted first).
    #[arg(long = "config", short = 'c', value_name = "SERVER_PROPERTIES")]
    config_flag: Option<PathBuf>,
    /// Override one property, `key=value`; may be repeated.
    #[arg(long = "override", value_name = "KEY=VALUE")]
    overrides: Vec<String>,
}

fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let config_path = args
        .config
        .or(args.config_flag)
        .expect("clap requires the properties file, positionally or with --config");
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "info".into()),
        )
        .with_writer(std::io::stderr)
        // Colour codes only for a terminal: the lab captures stderr into node.log.
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .init();
    let config = Config::load(&config_path, &args.overrides)
        .with_context(|| format!("invalid configuration in {}", config_path.display()))?;
    let open_files = logjam_node::network::server::raise_open_files_limit();
    tracing::debug!(open_files, "open files limit");
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    runtime.block_on(async {
        let node = logjam_node::network::server::start(config).await?;
        let mut terminate = signal(SignalKind::terminate())?;
        tokio::select! {
            _ = tokio::signal::ctrl_c() => {}
            _ = terminate.recv() => {}
        }
        tracing::info!("shutting down");
        node.shutdown().await.map_err(anyhow::Error::msg)
    })
}
