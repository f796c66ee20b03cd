//! `logjam cluster up`: start the built-in cluster for manual use, print how to reach it, keep
//! it until Ctrl-C, then stop every node cleanly. The same lab as `logjam run`, without a
//! workload or faults.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::bail;

use crate::cli::ClusterUpArgs;
use crate::lab::{self, Lab, LabSpec, NetworkMode};

/// Starts the cluster and blocks until Ctrl-C.
///
/// # Errors
/// The nodes cannot be started or do not start serving within 60 s.
pub fn up(args: &ClusterUpArgs) -> anyhow::Result<u8> {
    let dir = args.dir.clone().unwrap_or_else(|| {
        let stamp = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |elapsed| elapsed.as_secs());
        PathBuf::from("results").join(format!("cluster-{stamp}"))
    });
    std::fs::create_dir_all(&dir)?;
    let binary = lab::node_binary(args.node_binary.as_deref())?;
    let settings: Vec<(String, String)> = args
        .set
        .iter()
        .map(|setting| lab::parse_setting(setting))
        .collect::<anyhow::Result<_>>()?;
    let spec = LabSpec {
        nodes: args.nodes,
        settings,
        network: args.network,
        lazy_disks: false,
        controllers: 0,
    };
    let mut lab = Lab::start(&binary, &dir, &spec)?;
    // A broker opens its client listener once the quorum has registered and unfenced it.
    let deadline = Instant::now() + Duration::from_secs(60);
    for node in lab.nodes.iter().filter(|node| node.broker) {
        while std::net::TcpStream::connect(&node.client_address).is_err() {
            if Instant::now() > deadline {
                bail!(
                    "{} did not start serving within 60 s; see {}",
                    node.name(),
                    node.dir.join("node.log").display()
                );
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }
    let bootstrap = lab.bootstrap();
    println!(
        "cluster of {} node(s) up; data and logs in {}",
        args.nodes,
        dir.display()
    );
    println!("bootstrap.servers={bootstrap}");
    let enter = if args.network == NetworkMode::Namespaces {
        // The nodes exist only inside the harness's network namespace.
        let pid = std::process::id();
        if nix::unistd::geteuid().is_root() {
            format!("nsenter --net=/proc/{pid}/ns/net ")
        } else {
            format!("nsenter --preserve-credentials -U -n -t {pid} ")
        }
    } else {
        String::new()
    };
    println!(
        "try: {enter}.venv/bin/python cluster-under-test/node/tests/python/roundtrip.py confluent {bootstrap} demo 3 1000"
    );
    println!("Ctrl-C stops it.");
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    runtime.block_on(tokio::signal::ctrl_c())?;
    eprintln!("logjam: stopping the cluster");
    lab.stop_all();
    Ok(0)
}
