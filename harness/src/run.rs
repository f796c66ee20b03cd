//! `logjam run`: one test, end to end, in phases, one module each:
//!
//! - [`start`]: settings (node, client, the harness's short client timeouts) and waiting until
//!   the cluster serves the workload's topics;
//! - [`workload`]: builds the workload and runs the workload phase, then its final phase;
//! - [`schedule`]: hands the workload's ops to client processes at the target rate;
//! - [`faults`]: the nemesis, on a seeded schedule or a script;
//! - [`observe`]: the leader watcher, the progress line, the harness's own cost;
//! - [`record`]: run.json's figures, the achieved rates, the replay command, timestamps.
//!
//! This file ties them together: start the lab, drive the workload under faults, stop the
//! lab, check the history, store the run under `results/<timestamp>-<workload>-seed<N>/` and point
//! `results/latest` at it. The exit code is the checkers' verdict (0 valid, 1 invalid, 2
//! unknown); anything that goes wrong in the harness itself is an error (exit 3), never a
//! verdict.

mod cuts;
mod faults;
mod isr_shrink;
mod member_faults;
mod members;
mod observe;
mod record;
mod schedule;
mod start;
pub(crate) mod state;
mod workload;

use std::collections::BTreeMap;
use std::time::{SystemTime, UNIX_EPOCH};

use anyhow::{Context, bail};
use serde_json::json;

pub(crate) use self::record::timestamp;
use crate::cli::{RunArgs, WorkloadName};
use crate::lab::{self, Lab, LabSpec, NetworkMode};
use crate::nemesis::{self, Fault, PartitionKind};
use crate::timeline::{self, Action, Step};

/// Runs one test; returns the verdict's exit code.
///
/// # Errors
/// Anything that stops the harness: bad arguments, a cluster that never becomes ready, a
/// history that cannot be written.
pub fn run(args: &RunArgs, privilege: Option<lab::sandbox::Privilege>) -> anyhow::Result<u8> {
    let script = match &args.nemesis_script {
        Some(path) => Some(timeline::load(path, args.nodes)?),
        None => None,
    };
    execute(args, privilege, script, None).map(|(code, _)| code)
}

/// How a scenario labels its run: the directory name's middle part and the replay command.
#[derive(Debug, Clone)]
pub struct Label {
    /// `scenario-<name>` in `<timestamp>-<label>-seed<N>`.
    pub name: String,
    /// The command that replays the run.
    pub replay: String,
}

/// Runs one test with an already parsed script (if any); returns the verdict's exit code and
/// the stored run's directory.
///
/// # Errors
/// As [`run`].
pub fn execute(
    args: &RunArgs,
    privilege: Option<lab::sandbox::Privilege>,
    script: Option<Vec<Step>>,
    label: Option<Label>,
) -> anyhow::Result<(u8, std::path::PathBuf)> {
    // A script replaces the random schedule; its faults decide what the lab must offer.
    let faults = match &script {
        Some(steps) => {
            let mut faults = Vec::new();
            for step in steps {
                let fault = match &step.action {
                    Action::Fault(fault, _) => *fault,
                    Action::Cut(..) => Fault::Partition(PartitionKind::Groups),
                    Action::CutClients(..) => Fault::Partition(PartitionKind::Clients),
                    Action::Undo(_)
                    | Action::Member(..)
                    | Action::MemberUndo(_)
                    | Action::AddPartitions(_) => continue,
                };
                if !faults.contains(&fault) {
                    faults.push(fault);
                }
            }
            faults
        }
        None => nemesis::parse(&args.nemesis, args.nodes)?,
    };
    if args.network == NetworkMode::Loopback
        && let Some(fault) = faults.iter().find(|fault| fault.needs_namespaces())
    {
        bail!("--nemesis {fault} needs --network namespaces (packet drops between nodes)");
    }
    let lazy_disks = faults.iter().any(|fault| fault.needs_lazy_disk());
    let fault_names: Vec<String> = faults.iter().map(ToString::to_string).collect();
    let mut settings = start::split_settings(&args.set)?;
    // Kafka's usual production choice, bounded by the cluster size.
    let brokers = args.nodes.saturating_sub(args.controllers);
    let replication_factor = settings
        .replication_factor
        .unwrap_or_else(|| i16::try_from(brokers.min(3)).unwrap_or(3));
    settings.replication_factor = Some(replication_factor);
    // Kafka 4's client defaults (acks=all, idempotence on) unless the user says otherwise,
    // with the harness's short timeouts.
    let node_settings = settings.node.clone();
    let seed = args.seed.unwrap_or_else(|| {
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(1, |elapsed| elapsed.as_nanos() as u64)
    });
    std::fs::create_dir_all(&args.results_dir)
        .with_context(|| format!("cannot create {}", args.results_dir.display()))?;
    for killed in state::mark_killed_runs(&args.results_dir) {
        eprintln!(
            "logjam: {} did not finish: its harness died; marked killed in its run.json",
            killed.display()
        );
    }
    let swept = lab::sweep_leftovers(&args.results_dir);
    if !swept.is_empty() {
        eprintln!(
            "logjam: killed {} node process(es) left behind by a harness that died: {swept:?}",
            swept.len()
        );
    }
    let started = SystemTime::now();
    let run_dir = args.results_dir.join(format!(
        "{}-{}-seed{seed}",
        timestamp(started, true),
        label
            .as_ref()
            .map_or(args.workload.as_str(), |label| label.name.as_str())
    ));
    std::fs::create_dir_all(&run_dir)
        .with_context(|| format!("cannot create {}", run_dir.display()))?;
    let replay = match &label {
        Some(label) => label.replay.replace("{seed}", &seed.to_string()),
        None => record::replay_command(args, seed),
    };
    let run_json = json!({
        "workload": args.workload.as_str(),
        "seed": seed,
        "nodes": args.nodes,
        "controllers": args.controllers,
        "time_limit_s": args.time_limit,
        "rate": args.rate,
        "concurrency": args.concurrency,
        "keys": args.keys,
        "nemesis": fault_names,
        "network": args.network,
        "sandbox": privilege,
        "lazy_disks": lazy_disks,
        "nemesis_interval_s": args.nemesis_interval,
        "node_settings": node_settings.iter().cloned().collect::<BTreeMap<_, _>>(),
        "client_settings": settings.client.iter().cloned().collect::<BTreeMap<_, _>>(),
        "client_defaults": settings.client_defaults.iter().cloned().collect::<BTreeMap<_, _>>(),
        "replication_factor": replication_factor,
        "started": timestamp(started, false),
        "version": env!("CARGO_PKG_VERSION"),
        "replay": replay,
        "state": state::RUNNING,
        "harness": state::harness_identity(),
    });
    state::write_run_json(&run_dir, &run_json)?;
    eprintln!(
        "logjam: run {} (seed {seed}); replay with: {replay}",
        run_dir.display()
    );
    if !settings.client_defaults.is_empty() {
        eprintln!(
            "logjam: client timeouts {} (the harness's, as Jepsen's Kafka client, so ops end \
             within a fault window; --set them, e.g. to Kafka's 30000 and 120000, to test yours)",
            settings
                .client_defaults
                .iter()
                .map(|(key, value)| format!("{key}={value}"))
                .collect::<Vec<_>>()
                .join(" ")
        );
    }

    let code = drive_and_check(
        args, &settings, &faults, script, seed, started, &run_dir, run_json,
    )
    .inspect_err(|error| {
        // The run directory says why the run has no verdict; the error itself goes on.
        let _ = state::mark(
            &run_dir,
            state::FAILED,
            Some(&crate::error_text::chain(error)),
        );
    })?;
    Ok((code, run_dir))
}

/// The rest of a run once its directory exists: the lab, the workload under faults, the
/// check, the stored report. Returns the verdict's exit code.
#[allow(clippy::too_many_arguments)]
fn drive_and_check(
    args: &RunArgs,
    settings: &start::Settings,
    faults: &[Fault],
    script: Option<Vec<Step>>,
    seed: u64,
    started: SystemTime,
    run_dir: &std::path::Path,
    mut run_json: serde_json::Value,
) -> anyhow::Result<u8> {
    let binary = lab::node_binary(args.node_binary.as_deref())?;
    let spec = LabSpec {
        nodes: args.nodes,
        settings: settings.node.clone(),
        network: args.network,
        lazy_disks: faults.iter().any(|fault| fault.needs_lazy_disk()),
        controllers: args.controllers,
    };
    let mut lab = Lab::start(&binary, run_dir, &spec)?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    let outcome = runtime.block_on(async {
        let bootstrap = lab.bootstrap();
        let script = script.as_deref();
        let driven = async {
            match args.workload {
                WorkloadName::Queue => {
                    let queue = workload::queue(args, settings, &bootstrap);
                    workload::drive(
                        args, queue, seed, &mut lab, run_dir, settings, faults, script, started,
                    )
                    .await
                }
                WorkloadName::Producer => {
                    let producer = workload::producer(args, settings, &bootstrap);
                    workload::drive(
                        args, producer, seed, &mut lab, run_dir, settings, faults, script, started,
                    )
                    .await
                }
                WorkloadName::Group => {
                    let group = workload::group(args, settings, &bootstrap);
                    workload::drive(
                        args, group, seed, &mut lab, run_dir, settings, faults, script, started,
                    )
                    .await
                }
                WorkloadName::Txn => {
                    let txn = workload::txn(args, settings, &bootstrap);
                    workload::drive(
                        args, txn, seed, &mut lab, run_dir, settings, faults, script, started,
                    )
                    .await
                }
                WorkloadName::Eos => {
                    let eos = workload::eos(args, settings, &bootstrap);
                    workload::drive(
                        args, eos, seed, &mut lab, run_dir, settings, faults, script, started,
                    )
                    .await
                }
            }
        };
        tokio::select! {
            outcome = driven => outcome,
            _ = tokio::signal::ctrl_c() => Err(anyhow::anyhow!("interrupted")),
        }
    });
    if outcome.is_ok() {
        // The final reads are in the history: a run stopped from here on (a node that will not
        // shut down, a kill during shutdown) still proves its losses, and `logjam check` must
        // not take it for one cut off before its final reads.
        run_json["final_reads_done"] = true.into();
        state::write_run_json(run_dir, &run_json)?;
    }
    // Retired clients still closing in the background end with the runtime.
    runtime.shutdown_background();
    let shutdown = lab.shutdown();
    drop(lab);
    let phase = outcome?;
    shutdown?;
    let stats = phase.stats;
    let rates = record::rates(run_dir, &phase, args.rate)?;
    run_json["workload_stats"] = serde_json::to_value(stats)?;
    run_json["schedule"] = serde_json::to_value(phase.schedule)?;
    run_json["rates"] = serde_json::to_value(&rates)?;
    run_json["state"] = state::CHECKING.into();
    state::write_run_json(run_dir, &run_json)?;
    eprintln!(
        "logjam: workload: {} ops in {:.1} s ({:.0} ops/s); harness CPU {:.1} s ({:.0}% of a core)",
        stats.ops,
        stats.seconds,
        stats.ops_per_second,
        stats.harness_cpu_seconds,
        stats.harness_cpu_share * 100.0
    );
    if let Some(warning) = &rates.warning {
        eprintln!("logjam: WARNING: {warning}");
    }

    let report = logjam_checkers::check_file(run_dir)?;
    std::fs::write(run_dir.join("report.json"), report.to_json()?)?;
    let summary = format!(
        "{}{}{}{}",
        report.summary(),
        rates.summary(),
        record::schedule_summary(&phase),
        phase.rebalances.as_deref().unwrap_or("")
    );
    std::fs::write(run_dir.join("summary.txt"), &summary)?;
    let latest = args.results_dir.join("latest");
    let _ = std::fs::remove_file(&latest);
    if let Some(name) = run_dir.file_name() {
        let _ = std::os::unix::fs::symlink(name, &latest);
    }
    run_json["state"] = state::FINISHED.into();
    state::write_run_json(run_dir, &run_json)?;
    crate::report::after_run(&args.results_dir, run_dir);
    print!("{summary}");
    println!("run stored in {}", run_dir.display());
    Ok(u8::try_from(report.verdict.exit_code()).unwrap_or(2))
}
