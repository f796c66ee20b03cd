//! `logjam run`: one test, end to end. Start the cluster and wait until it serves; run the
//! queue workload with faults on a seeded schedule for the time limit; heal everything, wait
//! for recovery, read every partition back; stop the cluster; check the history; store the
//! run under `results/<timestamp>-queue-seed<N>/` and point `results/latest` at it.
//!
//! The exit code is the checkers' verdict (0 valid, 1 invalid, 2 unknown); anything that goes
//! wrong in the harness itself is an error (exit 3), never a verdict.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use anyhow::{Context, bail};
use logjam_client::{Admin, NewTopic};
use logjam_history::{Function, Header, OpType, OpValue, Process};
use logjam_workloads::queue::{QueueClient, QueueGenerator, QueueSettings, Targets};
use logjam_workloads::recorder::Recorder;
use rand::rngs::StdRng;
use rand::{RngExt, SeedableRng};
use serde_json::json;
use tokio::time::Instant;

use crate::cli::RunArgs;
use crate::lab::{self, Lab, LabSpec, NetworkMode};
use crate::nemesis::{self, Fault, PartitionKind};
use crate::timeline::{self, Action, Step, Targets as ScriptTargets};
use logjam_history::{LEADER_CHANGE, LeadershipChange};

/// Client-side properties `--set` may carry; every other key goes to the nodes.
const CLIENT_KEYS: &[&str] = &[
    "acks",
    "enable.idempotence",
    "linger.ms",
    "batch.size",
    "retries",
    "delivery.timeout.ms",
    "request.timeout.ms",
    "max.in.flight.requests.per.connection",
];

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
                    Action::Undo(_) => continue,
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
    let (node_settings, user_client_settings, replication_factor) = split_settings(&args.set)?;
    // Kafka's usual production choice, bounded by the cluster size.
    let brokers = args.nodes.saturating_sub(args.controllers);
    let replication_factor =
        replication_factor.unwrap_or_else(|| i16::try_from(brokers.min(3)).unwrap_or(3));
    // Kafka 4's client defaults (acks=all, idempotence on) unless the user says otherwise.
    let client_settings = user_client_settings;
    let seed = args.seed.unwrap_or_else(|| {
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(1, |elapsed| elapsed.as_nanos() as u64)
    });
    std::fs::create_dir_all(&args.results_dir)
        .with_context(|| format!("cannot create {}", args.results_dir.display()))?;
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
        label.as_ref().map_or("queue", |label| label.name.as_str())
    ));
    std::fs::create_dir_all(&run_dir)
        .with_context(|| format!("cannot create {}", run_dir.display()))?;
    let replay = match &label {
        Some(label) => label.replay.replace("{seed}", &seed.to_string()),
        None => replay_command(args, seed),
    };
    let run_json = json!({
        "workload": "queue",
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
        "client_settings": client_settings.iter().cloned().collect::<BTreeMap<_, _>>(),
        "replication_factor": replication_factor,
        "started": timestamp(started, false),
        "version": env!("CARGO_PKG_VERSION"),
        "replay": replay,
    });
    std::fs::write(
        run_dir.join("run.json"),
        serde_json::to_string_pretty(&run_json)?,
    )?;
    eprintln!(
        "logjam: run {} (seed {seed}); replay with: {replay}",
        run_dir.display()
    );

    let binary = lab::node_binary(args.node_binary.as_deref())?;
    let spec = LabSpec {
        nodes: args.nodes,
        settings: node_settings.clone(),
        network: args.network,
        lazy_disks,
        controllers: args.controllers,
    };
    let mut lab = Lab::start(&binary, &run_dir, &spec)?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    let outcome = runtime.block_on(async {
        tokio::select! {
            outcome = drive(args, seed, &mut lab, &run_dir, &client_settings, replication_factor, &faults, script.as_deref(), started) => outcome,
            _ = tokio::signal::ctrl_c() => Err(anyhow::anyhow!("interrupted")),
        }
    });
    let shutdown = lab.shutdown();
    drop(lab);
    let stats = outcome?;
    shutdown?;
    let mut run_json = run_json;
    run_json["workload_stats"] = serde_json::to_value(stats)?;
    std::fs::write(
        run_dir.join("run.json"),
        serde_json::to_string_pretty(&run_json)?,
    )?;
    eprintln!(
        "logjam: workload: {} ops in {:.1} s ({:.0} ops/s); harness CPU {:.1} s ({:.0}% of a core)",
        stats.ops,
        stats.seconds,
        stats.ops_per_second,
        stats.harness_cpu_seconds,
        stats.harness_cpu_share * 100.0
    );

    let report = logjam_checkers::check_file(&run_dir)?;
    std::fs::write(run_dir.join("report.json"), report.to_json()?)?;
    let summary = report.summary();
    std::fs::write(run_dir.join("summary.txt"), &summary)?;
    let latest = args.results_dir.join("latest");
    let _ = std::fs::remove_file(&latest);
    if let Some(name) = run_dir.file_name() {
        let _ = std::os::unix::fs::symlink(name, &latest);
    }
    crate::report::after_run(&args.results_dir, &run_dir);
    print!("{summary}");
    println!("run stored in {}", run_dir.display());
    Ok((
        u8::try_from(report.verdict.exit_code()).unwrap_or(2),
        run_dir,
    ))
}

/// The run itself, inside the runtime.
#[allow(clippy::too_many_arguments)]
async fn drive(
    args: &RunArgs,
    seed: u64,
    lab: &mut Lab,
    run_dir: &Path,
    client_settings: &[(String, String)],
    replication_factor: i16,
    faults: &[Fault],
    script: Option<&[Step]>,
    started: SystemTime,
) -> anyhow::Result<WorkloadStats> {
    let bootstrap = lab.bootstrap();
    let topic = "queue".to_owned();
    wait_until_ready(&bootstrap, &topic, args.keys, replication_factor).await?;

    let mut header = Header::new("queue", seed, timestamp(started, false));
    header.nodes = lab.nodes.iter().map(|node| node.name()).collect();
    header.config = json!({
        "key_topic_partitions": (0..args.keys)
            .map(|key| (key.to_string(), json!({"topic": topic, "partition": key})))
            .collect::<serde_json::Map<_, _>>(),
        "sub_via": ["assign"],
        "nemesis": faults.iter().map(ToString::to_string).collect::<Vec<_>>(),
        "client": client_settings.iter().cloned().collect::<BTreeMap<_, _>>(),
    });
    let recorder = Arc::new(Recorder::create(&run_dir.join("history.jsonl"), &header)?);
    let mut producer = vec![("bootstrap.servers".to_owned(), bootstrap.clone())];
    producer.extend(client_settings.iter().cloned());
    let consumer = vec![
        ("bootstrap.servers".to_owned(), bootstrap.clone()),
        ("auto.offset.reset".to_owned(), "earliest".to_owned()),
    ];
    let settings = Arc::new(QueueSettings {
        topic,
        keys: args.keys,
        producer,
        consumer,
        poll_timeout: Duration::from_millis(100),
        send_timeout: Duration::from_secs(15),
    });
    let targets = Arc::new(Targets::new(args.keys));
    let deadline = Instant::now() + Duration::from_secs(args.time_limit);
    let watcher = tokio::spawn(watch_leaders(
        bootstrap.clone(),
        settings.topic.clone(),
        recorder.clone(),
    ));

    let mut clients = tokio::task::JoinSet::new();
    let concurrency = u64::from(args.concurrency.max(1));
    let per_process_rate = (args.rate / concurrency as f64).max(0.01);
    for process in 0..concurrency {
        let mut client = QueueClient::new(
            process,
            concurrency,
            settings.clone(),
            recorder.clone(),
            targets.clone(),
        );
        let keys = args.keys;
        clients.spawn(async move {
            let mut generator = QueueGenerator::new(seed, process, keys);
            let mut rng = StdRng::seed_from_u64(seed ^ process.rotate_left(17));
            while Instant::now() < deadline {
                client.invoke(generator.next_invocation()).await?;
                // Jepsen's stagger: a uniform delay with the target mean.
                let delay = rng.random_range(0.0..2.0 / per_process_rate);
                tokio::time::sleep(Duration::from_secs_f64(delay)).await;
            }
            anyhow::Ok(client)
        });
    }

    let mut nemesis_rng = StdRng::seed_from_u64(seed.rotate_left(7) ^ 0x6e656d65);
    let interval = Duration::from_secs(args.nemesis_interval.max(1));
    let mut active: Vec<Active> = Vec::new();
    let mut steps = script.unwrap_or(&[]).iter().peekable();
    let workload_start = Instant::now();
    let (cpu_at_start, _) = cpu_seconds();
    let mut next_fault = workload_start + interval;
    let mut progress = crate::progress::Progress::new(args.time_limit);
    while Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(50)).await;
        let elapsed = args
            .time_limit
            .saturating_sub(deadline.saturating_duration_since(Instant::now()).as_secs());
        let done = recorder.completions();
        progress.update(elapsed, (done.ok, done.fail, done.info), || {
            active.iter().map(|a| a.describe(lab)).collect()
        });
        if script.is_some() {
            while let Some(step) = steps.next_if(|step| workload_start + step.at <= Instant::now())
            {
                match &step.action {
                    Action::Undo(name) => {
                        let (due, kept): (Vec<Active>, Vec<Active>) = std::mem::take(&mut active)
                            .into_iter()
                            .partition(|a| a.fault.undo_name() == *name);
                        active = kept;
                        if due.is_empty() {
                            eprintln!("logjam: script line {}: nothing to {name}", step.line);
                        }
                        for fault in due {
                            undo(lab, &recorder, fault, &active)?;
                        }
                    }
                    Action::Cut(a, b) => {
                        let a =
                            resolve(lab, a, &mut nemesis_rng, &bootstrap, &settings.topic).await;
                        let b =
                            resolve(lab, b, &mut nemesis_rng, &bootstrap, &settings.topic).await;
                        active.extend(cut(lab, &recorder, vec![a, b])?);
                    }
                    Action::Fault(fault, targets) => {
                        let chosen =
                            resolve(lab, targets, &mut nemesis_rng, &bootstrap, &settings.topic)
                                .await;
                        active.extend(
                            inject(
                                lab,
                                &recorder,
                                *fault,
                                Some(chosen),
                                &mut nemesis_rng,
                                &bootstrap,
                                &settings.topic,
                            )
                            .await?,
                        );
                    }
                }
            }
            continue;
        }
        if faults.is_empty() || Instant::now() < next_fault {
            continue;
        }
        next_fault += interval;
        match active.pop() {
            Some(fault) => undo(lab, &recorder, fault, &active)?,
            None => {
                let fault = faults[nemesis_rng.random_range(0..faults.len())];
                active.extend(
                    inject(
                        lab,
                        &recorder,
                        fault,
                        None,
                        &mut nemesis_rng,
                        &bootstrap,
                        &settings.topic,
                    )
                    .await?,
                );
            }
        }
    }
    progress.finish();
    // Heal first: a client blocked on a dead or paused node would otherwise hold the join
    // (and the run) for its whole send timeout.
    while let Some(fault) = active.pop() {
        undo(lab, &recorder, fault, &active)?;
    }
    let mut finished = Vec::new();
    while let Some(joined) = clients.join_next().await {
        finished.push(joined.context("a client task panicked")??);
    }
    let workload = workload_start.elapsed();
    let done = recorder.completions();
    let (cpu, _) = cpu_seconds();
    let stats = WorkloadStats {
        seconds: workload.as_secs_f64(),
        ops: done.ok + done.fail + done.info,
        ops_per_second: (done.ok + done.fail + done.info) as f64 / workload.as_secs_f64().max(1e-9),
        harness_cpu_seconds: cpu - cpu_at_start,
        harness_cpu_share: (cpu - cpu_at_start) / workload.as_secs_f64().max(1e-9),
    };
    eprintln!("logjam: healed; waiting for recovery, then reading every partition back");
    wait_until_ready(&bootstrap, &settings.topic, args.keys, replication_factor).await?;
    let targets = targets.snapshot();
    let final_deadline = Instant::now() + Duration::from_secs(60);
    if let Some(reader) = finished.first_mut() {
        reader.final_reads(&targets, final_deadline).await?;
    }
    watcher.abort();
    Ok(stats)
}

/// What the watcher last saw of one partition.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Leadership {
    leader: Option<i32>,
    epoch: i32,
    isr: Vec<i32>,
}

/// Records every change of a partition's leader, leader epoch or ISR that the cluster's
/// metadata shows (polled every 250 ms) as a `leader-change` op of the nemesis process, so
/// the history says which election made a write vanish. `unclean` marks a new leader that
/// was not in the ISR last seen: an unclean election, or one the watcher saw only part of.
async fn watch_leaders(bootstrap: String, topic: String, recorder: Arc<Recorder>) {
    let Ok(admin) = Admin::from_properties([
        ("bootstrap.servers", bootstrap.as_str()),
        ("request.timeout.ms", "1000"),
    ]) else {
        return;
    };
    let name = |id: i32| format!("n{id}");
    let mut last: BTreeMap<i32, Leadership> = BTreeMap::new();
    loop {
        tokio::time::sleep(Duration::from_millis(250)).await;
        let Ok(topics) = admin.describe_topics(&[topic.as_str()]).await else {
            continue;
        };
        let Some(described) = topics.first() else {
            continue;
        };
        for partition in &described.partitions {
            let now = Leadership {
                leader: partition
                    .leader
                    .map(|leader| leader.0)
                    .filter(|id| *id >= 0),
                epoch: partition.leader_epoch.0,
                isr: partition.isr.iter().map(|id| id.0).collect(),
            };
            let key = partition.partition.0;
            let Some(before) = last.insert(key, now.clone()) else {
                continue;
            };
            if before == now {
                continue;
            }
            let unclean = now.leader.is_some_and(|leader| {
                before.leader != Some(leader) && !before.isr.contains(&leader)
            });
            let change = LeadershipChange {
                partition: key.into(),
                leader: now.leader.map(name),
                epoch: now.epoch.into(),
                isr: now.isr.iter().copied().map(name).collect(),
                previous_leader: before.leader.map(name),
                previous_isr: before.isr.iter().copied().map(name).collect(),
                unclean,
            };
            let Ok(value) = serde_json::to_value(&change) else {
                return;
            };
            if recorder
                .record(
                    Process::Nemesis,
                    OpType::Info,
                    Function::from_name(LEADER_CHANGE),
                    OpValue::Json(value),
                    None,
                )
                .is_err()
            {
                return;
            }
        }
    }
}

/// What the harness itself did during the workload phase: operations completed (ok, fail or
/// info) and the CPU it used (its own threads: clients, recorder, nemesis, and the lazy
/// disks' FUSE servers when mounted; not the nodes), as a share of one core.
#[derive(Debug, Clone, Copy, serde::Serialize)]
struct WorkloadStats {
    seconds: f64,
    ops: u64,
    ops_per_second: f64,
    harness_cpu_seconds: f64,
    harness_cpu_share: f64,
}

/// CPU seconds used by this process and by its reaped children.
fn cpu_seconds() -> (f64, f64) {
    use nix::sys::resource::{UsageWho, getrusage};
    let seconds = |who| {
        getrusage(who).map_or(0.0, |usage| {
            let (user, system) = (usage.user_time(), usage.system_time());
            user.tv_sec() as f64
                + user.tv_usec() as f64 / 1e6
                + system.tv_sec() as f64
                + system.tv_usec() as f64 / 1e6
        })
    };
    (
        seconds(UsageWho::RUSAGE_SELF),
        seconds(UsageWho::RUSAGE_CHILDREN),
    )
}

/// A fault in force, waiting for its undo.
#[derive(Debug)]
struct Active {
    fault: Fault,
    targets: Vec<usize>,
}

impl Active {
    fn describe(&self, lab: &Lab) -> String {
        format!("{} {}", self.fault, names(lab, &self.targets).join(","))
    }
}

fn names(lab: &Lab, nodes: &[usize]) -> Vec<String> {
    nodes.iter().map(|node| lab.nodes[*node].name()).collect()
}

/// The node leading a random partition of the workload's topic, if one is known.
async fn leader_of_some_partition(bootstrap: &str, topic: &str, rng: &mut StdRng) -> Option<usize> {
    roles_of(bootstrap, topic, None, rng)
        .await
        .map(|(leader, _)| leader)
}

/// The leader and the other replicas of partition `partition` (a random one when `None`),
/// as node indexes, if the cluster answers.
async fn roles_of(
    bootstrap: &str,
    topic: &str,
    partition: Option<u32>,
    rng: &mut StdRng,
) -> Option<(usize, Vec<usize>)> {
    let admin = Admin::from_properties([("bootstrap.servers", bootstrap)]).ok()?;
    let topics = admin.describe_topics(&[topic]).await.ok()?;
    let partitions = &topics.first()?.partitions;
    let index = match partition {
        Some(partition) => partition as usize,
        None => rng.random_range(0..partitions.len().max(1)),
    };
    let chosen = partitions.get(index)?;
    let leader = chosen.leader?.0;
    let to_index = |id: i32| usize::try_from(id - 1).ok();
    let followers = chosen
        .replicas
        .iter()
        .filter(|replica| replica.0 != leader)
        .filter_map(|replica| to_index(replica.0))
        .collect();
    Some((to_index(leader)?, followers))
}

fn role_fallback(targets: &ScriptTargets, shuffled: &[usize]) -> Vec<usize> {
    eprintln!("logjam: no leader known for {targets:?}; choosing a random node");
    shuffled[..1].to_vec()
}

/// The nodes a scripted step names. A role the cluster cannot answer for (no leader right
/// now) falls back to a seeded random node, and says so.
async fn resolve(
    lab: &Lab,
    targets: &ScriptTargets,
    rng: &mut StdRng,
    bootstrap: &str,
    topic: &str,
) -> Vec<usize> {
    let nodes = lab.nodes.len();
    let mut shuffled: Vec<usize> = (0..nodes).collect();
    rand::seq::SliceRandom::shuffle(shuffled.as_mut_slice(), rng);
    let mut chosen = match targets {
        ScriptTargets::All => shuffled,
        ScriptTargets::Majority => shuffled[..nodes / 2 + 1].to_vec(),
        ScriptTargets::Minority => shuffled[..((nodes - 1) / 2).max(1)].to_vec(),
        ScriptTargets::One => shuffled[..1].to_vec(),
        ScriptTargets::Leader(partition) => match roles_of(bootstrap, topic, *partition, rng).await
        {
            Some((leader, _)) => vec![leader],
            None => role_fallback(targets, &shuffled),
        },
        ScriptTargets::Followers(partition) => {
            match roles_of(bootstrap, topic, Some(*partition), rng).await {
                Some((_, followers)) => followers,
                None => role_fallback(targets, &shuffled),
            }
        }
        ScriptTargets::Nodes(list) => list.clone(),
    };
    chosen.sort_unstable();
    chosen
}

/// Injects `fault` (on `chosen` nodes, else on nodes the seeded schedule picks) and records it as a nemesis op (`info`: it happened; `fail`: it could not
/// be injected, with the reason). Returns the fault to undo later.
async fn inject(
    lab: &mut Lab,
    recorder: &Recorder,
    fault: Fault,
    chosen: Option<Vec<usize>>,
    rng: &mut StdRng,
    bootstrap: &str,
    topic: &str,
) -> anyhow::Result<Option<Active>> {
    let nodes = lab.nodes.len();
    // Nodes already down (killed or stopped by a fault still in force) stay down if this
    // fault cannot be injected and is put right.
    let down_before: Vec<usize> = (0..nodes)
        .filter(|&node| !lab.nodes[node].is_running())
        .collect();
    let mut value = serde_json::Map::new();
    let (targets, outcome) = match fault {
        Fault::Partition(kind) => {
            let focus = match (&chosen, kind) {
                (Some(chosen), _) => chosen.first().copied(),
                (None, PartitionKind::Leader) => {
                    let leader = leader_of_some_partition(bootstrap, topic, rng).await;
                    value.insert("leader".into(), json!(leader.map(|l| lab.nodes[l].name())));
                    leader
                }
                (None, _) => None,
            };
            let (cuts, groups) = nemesis::partition(kind, nodes, focus, rng);
            value.insert(
                "groups".into(),
                json!(groups.iter().map(|g| names(lab, g)).collect::<Vec<_>>()),
            );
            value.insert(
                "cuts".into(),
                json!(
                    cuts.iter()
                        .map(|(a, b)| [lab.nodes[*a].name(), lab.nodes[*b].name()])
                        .collect::<Vec<_>>()
                ),
            );
            let targets: Vec<usize> = (0..nodes).collect();
            (targets, lab.set_cuts(cuts))
        }
        _ => {
            let targets = chosen.unwrap_or_else(|| nemesis::targets(fault, nodes, rng));
            let mut outcome = Ok(());
            for &node in &targets {
                let result = match fault {
                    Fault::Kill => lab.kill(node),
                    Fault::Stop => {
                        lab.stop(node);
                        Ok(())
                    }
                    Fault::Pause => lab.pause(node),
                    Fault::PowerLoss => lab.power_loss(node).map(|loss| {
                        value.insert(
                            format!("lost-{}", lab.nodes[node].name()),
                            json!({"files": loss.files, "bytes": loss.bytes}),
                        );
                    }),
                    // A failed kill is recorded as a failed fault like any other, not an
                    // error that ends the run.
                    Fault::Corrupt => lab.kill(node).and_then(|()| {
                        lab.corrupt(node, rng).map(|done| {
                            value.insert("damage".into(), done);
                        })
                    }),
                    Fault::DiskFull => lab.set_disk_full(node, true),
                    Fault::Partition(_) => unreachable!("handled above"),
                };
                if let Err(error) = result {
                    outcome = Err(error);
                    break;
                }
            }
            (targets, outcome)
        }
    };
    value.insert("targets".into(), json!(names(lab, &targets)));
    let active = Active { fault, targets };
    match outcome {
        Ok(()) => {
            recorder.record(
                Process::Nemesis,
                OpType::Info,
                Function::from_name(&fault.to_string()),
                OpValue::Json(serde_json::Value::Object(value)),
                None,
            )?;
            eprintln!("logjam: nemesis {}", active.describe(lab));
            Ok(Some(active))
        }
        Err(error) => {
            // Whatever was half done is put right now: the fault did not happen.
            eprintln!("logjam: nemesis {fault} could not be injected: {error:#}");
            recorder.record(
                Process::Nemesis,
                OpType::Fail,
                Function::from_name(&fault.to_string()),
                OpValue::Json(serde_json::Value::Object(value)),
                Some(json!(format!("{error:#}"))),
            )?;
            restore(lab, &active, &down_before)?;
            Ok(None)
        }
    }
}

/// A scripted cut between groups, recorded as a `partition` with its groups and cuts.
fn cut(
    lab: &mut Lab,
    recorder: &Recorder,
    groups: Vec<Vec<usize>>,
) -> anyhow::Result<Option<Active>> {
    let cuts = nemesis::separate(&groups);
    let value = json!({
        "groups": groups.iter().map(|g| names(lab, g)).collect::<Vec<_>>(),
        "cuts": cuts.iter().map(|(a, b)| [lab.nodes[*a].name(), lab.nodes[*b].name()]).collect::<Vec<_>>(),
        "targets": names(lab, &(0..lab.nodes.len()).collect::<Vec<_>>()),
    });
    let fault = Fault::Partition(PartitionKind::Groups);
    let outcome = lab.set_cuts(cuts);
    let op_type = if outcome.is_ok() {
        OpType::Info
    } else {
        OpType::Fail
    };
    recorder.record(
        Process::Nemesis,
        op_type,
        Function::from_name(&fault.to_string()),
        OpValue::Json(value),
        outcome
            .as_ref()
            .err()
            .map(|error| json!(format!("{error:#}"))),
    )?;
    match outcome {
        Ok(()) => {
            let active = Active {
                fault,
                targets: (0..lab.nodes.len()).collect(),
            };
            eprintln!(
                "logjam: nemesis partition {:?}",
                groups.iter().map(|g| names(lab, g)).collect::<Vec<_>>()
            );
            Ok(Some(active))
        }
        Err(error) => {
            eprintln!("logjam: nemesis partition could not be injected: {error:#}");
            Ok(None)
        }
    }
}

/// Nodes that faults in force keep down on purpose (killed, stopped, powered off, corrupted):
/// undoing some other fault must not bring them back early.
fn held_down(active: &[Active]) -> Vec<usize> {
    active
        .iter()
        .filter(|a| {
            matches!(
                a.fault,
                Fault::Kill | Fault::Stop | Fault::PowerLoss | Fault::Corrupt
            )
        })
        .flat_map(|a| a.targets.iter().copied())
        .collect()
}

/// Puts the lab back as it was before `active`: heals, resumes, frees the disk, and starts
/// every target that is not running, except the nodes in `held` (down under another fault
/// still in force). Returns the nodes it started.
fn restore(lab: &mut Lab, active: &Active, held: &[usize]) -> anyhow::Result<Vec<usize>> {
    match active.fault {
        Fault::Partition(_) => lab.heal()?,
        Fault::Pause => {
            for &node in &active.targets {
                lab.resume(node)?;
            }
        }
        Fault::DiskFull => {
            for &node in &active.targets {
                lab.set_disk_full(node, false)?;
            }
        }
        _ => {}
    }
    let mut started = Vec::new();
    for &node in &active.targets {
        if !lab.nodes[node].is_running() && !held.contains(&node) {
            lab.start_node(node)?;
            started.push(node);
        }
    }
    Ok(started)
}

/// Undoes `active` and records the undo; nodes that faults `still` in force hold down stay
/// down. The op's `started` names the nodes the undo brought up: the targets of a kill's
/// restart, and, for a fault that does not kill, a target that died under it anyway (a full
/// disk can make a node give up).
fn undo(
    lab: &mut Lab,
    recorder: &Recorder,
    active: Active,
    still: &[Active],
) -> anyhow::Result<()> {
    let started = restore(lab, &active, &held_down(still))?;
    let mut value = serde_json::Map::new();
    value.insert("targets".into(), json!(names(lab, &active.targets)));
    if !started.is_empty() {
        value.insert("started".into(), json!(names(lab, &started)));
    }
    recorder.record(
        Process::Nemesis,
        OpType::Info,
        Function::from_name(active.fault.undo_name()),
        OpValue::Json(serde_json::Value::Object(value)),
        None,
    )?;
    eprintln!(
        "logjam: nemesis {} {}",
        active.fault.undo_name(),
        names(lab, &active.targets).join(",")
    );
    Ok(())
}

/// Waits until every broker serves clients (a node opens its client listener only once the
/// quorum has a leader and the broker is registered and unfenced), creates the topic
/// (idempotently) and waits until every partition has a leader.
async fn wait_until_ready(
    bootstrap: &str,
    topic: &str,
    keys: u32,
    replication_factor: i16,
) -> anyhow::Result<()> {
    let deadline = Instant::now() + Duration::from_secs(60);
    for address in bootstrap.split(',') {
        while tokio::net::TcpStream::connect(address).await.is_err() {
            if Instant::now() > deadline {
                bail!("the broker at {address} did not start serving within 60 s");
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
    let admin = Admin::from_properties([("bootstrap.servers", bootstrap)])?;
    let mut last_problem = String::from("no answer yet");
    while Instant::now() < deadline {
        // Already existing is fine (a second readiness wait after healing); any other failure
        // shows in the describe below.
        let _ = admin
            .create_topics(&[NewTopic::new(topic, keys as i32, replication_factor)])
            .await;
        match admin.describe_topics(&[topic]).await {
            Ok(described)
                if described.iter().any(|t| {
                    t.partitions.len() == keys as usize
                        && t.partitions
                            .iter()
                            .all(|p| p.leader.is_some_and(|leader| leader.0 >= 0))
                }) =>
            {
                return Ok(());
            }
            Ok(_) => last_problem = "partitions without a leader".to_owned(),
            Err(error) => last_problem = error.to_string(),
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    bail!("the cluster did not become ready within 60 s: {last_problem}")
}

/// Kafka properties as key/value pairs, in the order given.
type Properties = Vec<(String, String)>;

/// Splits `--set key=value` into node properties, client properties and the replication
/// factor.
fn split_settings(settings: &[String]) -> anyhow::Result<(Properties, Properties, Option<i16>)> {
    let mut node = Vec::new();
    let mut client = Vec::new();
    let mut replication_factor = None;
    for setting in settings {
        let (key, value) = lab::parse_setting(setting)?;
        if key == "replication.factor" {
            replication_factor = Some(
                value
                    .parse()
                    .with_context(|| format!("--set replication.factor={value}: not a number"))?,
            );
        } else if CLIENT_KEYS.contains(&key.as_str()) {
            client.push((key, value));
        } else {
            node.push((key, value));
        }
    }
    Ok((node, client, replication_factor))
}

fn replay_command(args: &RunArgs, seed: u64) -> String {
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
    use super::*;

    #[test]
    fn timestamps_are_utc_civil_dates() {
        let time = UNIX_EPOCH + Duration::from_secs(1_795_946_626); // 2026-11-29T10:03:46Z
        assert_eq!(timestamp(time, false), "2026-11-29T10:03:46Z");
        assert_eq!(timestamp(time, true), "20261129T100346Z");
        assert_eq!(timestamp(UNIX_EPOCH, false), "1970-01-01T00:00:00Z");
    }

    #[test]
    fn undoing_one_fault_leaves_nodes_another_fault_holds_down() {
        // The unclean-election timeline: a cut over every node, then the leader (n4) killed;
        // healing the cut must not restart n4 while its kill is in force.
        let partition = Active {
            fault: Fault::Partition(crate::nemesis::PartitionKind::One),
            targets: (0..6).collect(),
        };
        let kill = Active {
            fault: Fault::Kill,
            targets: vec![3],
        };
        let pause = Active {
            fault: Fault::Pause,
            targets: vec![1],
        };
        assert_eq!(held_down(&[partition, kill, pause]), vec![3]);
        let stop = Active {
            fault: Fault::Stop,
            targets: vec![0, 2],
        };
        assert_eq!(held_down(&[stop]), vec![0, 2]);
        assert!(held_down(&[]).is_empty());
    }

    #[test]
    fn settings_are_split_between_nodes_and_clients() {
        let (node, client, factor) = split_settings(&[
            "acks=1".into(),
            "min.insync.replicas=2".into(),
            "replication.factor=1".into(),
        ])
        .unwrap();
        assert_eq!(
            node,
            vec![("min.insync.replicas".to_owned(), "2".to_owned())]
        );
        assert_eq!(client, vec![("acks".to_owned(), "1".to_owned())]);
        assert_eq!(factor, Some(1));
        assert!(split_settings(&["acks".into()]).is_err());
    }
}
