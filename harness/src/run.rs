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
use crate::lab::{self, Lab};

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

/// The faults `--nemesis` accepts today, and those that need the namespace lab.
const FAULTS: &[&str] = &["kill", "pause"];
const FAULTS_NOT_YET: &[&str] = &["partition", "power-loss", "corrupt", "disk-full"];

/// Runs one test; returns the verdict's exit code.
///
/// # Errors
/// Anything that stops the harness: bad arguments, a cluster that never becomes ready, a
/// history that cannot be written.
pub fn run(args: &RunArgs) -> anyhow::Result<u8> {
    let faults = parse_faults(&args.nemesis)?;
    let (node_settings, user_client_settings, replication_factor) = split_settings(&args.set)?;
    // Kafka's usual production choice, bounded by the cluster size.
    let replication_factor =
        replication_factor.unwrap_or_else(|| i16::try_from(args.nodes.min(3)).unwrap_or(3));
    // Kafka 4's client defaults (acks=all, idempotence on) unless the user says otherwise.
    let client_settings = user_client_settings;
    let seed = args.seed.unwrap_or_else(|| {
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(1, |elapsed| elapsed.as_nanos() as u64)
    });
    let started = SystemTime::now();
    let run_dir = args
        .results_dir
        .join(format!("{}-queue-seed{seed}", timestamp(started, true)));
    std::fs::create_dir_all(&run_dir)
        .with_context(|| format!("cannot create {}", run_dir.display()))?;
    let replay = replay_command(args, seed);
    let run_json = json!({
        "workload": "queue",
        "seed": seed,
        "nodes": args.nodes,
        "time_limit_s": args.time_limit,
        "rate": args.rate,
        "concurrency": args.concurrency,
        "keys": args.keys,
        "nemesis": faults,
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
    let mut lab = Lab::start(&binary, &run_dir, args.nodes, &node_settings)?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    let outcome = runtime.block_on(async {
        tokio::select! {
            outcome = drive(args, seed, &mut lab, &run_dir, &client_settings, replication_factor, &faults, started) => outcome,
            _ = tokio::signal::ctrl_c() => Err(anyhow::anyhow!("interrupted")),
        }
    });
    lab.stop_all();
    drop(lab);
    outcome?;

    let report = logjam_checkers::check_file(&run_dir)?;
    std::fs::write(run_dir.join("report.json"), report.to_json()?)?;
    let summary = report.summary();
    std::fs::write(run_dir.join("summary.txt"), &summary)?;
    let latest = args.results_dir.join("latest");
    let _ = std::fs::remove_file(&latest);
    if let Some(name) = run_dir.file_name() {
        let _ = std::os::unix::fs::symlink(name, &latest);
    }
    print!("{summary}");
    println!("run stored in {}", run_dir.display());
    Ok(u8::try_from(report.verdict.exit_code()).unwrap_or(2))
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
    faults: &[String],
    started: SystemTime,
) -> anyhow::Result<()> {
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
        "nemesis": faults,
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
    let mut active: Option<(String, usize)> = None;
    let mut next_fault = Instant::now() + interval;
    let mut next_progress = Instant::now() + Duration::from_secs(5);
    while Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(50)).await;
        if Instant::now() >= next_progress {
            next_progress += Duration::from_secs(5);
            let elapsed = args
                .time_limit
                .saturating_sub(deadline.saturating_duration_since(Instant::now()).as_secs());
            let done = recorder.completions();
            eprintln!(
                "logjam: {elapsed}/{} s, {} ok, {} fail, {} info, fault: {}",
                args.time_limit,
                done.ok,
                done.fail,
                done.info,
                active
                    .as_ref()
                    .map_or("none".to_owned(), |(f, node)| format!("{f} n{}", node + 1))
            );
        }
        if faults.is_empty() || Instant::now() < next_fault {
            continue;
        }
        next_fault += interval;
        match active.take() {
            Some((fault, node)) => undo(lab, &recorder, &fault, node)?,
            None => {
                let fault = faults[nemesis_rng.random_range(0..faults.len())].clone();
                let node = nemesis_rng.random_range(0..lab.nodes.len());
                inject(lab, &recorder, &fault, node)?;
                active = Some((fault, node));
            }
        }
    }
    let mut finished = Vec::new();
    while let Some(joined) = clients.join_next().await {
        finished.push(joined.context("a client task panicked")??);
    }
    if let Some((fault, node)) = active.take() {
        undo(lab, &recorder, &fault, node)?;
    }
    eprintln!("logjam: healed; waiting for recovery, then reading every partition back");
    wait_until_ready(&bootstrap, &settings.topic, args.keys, replication_factor).await?;
    let targets = targets.snapshot();
    let final_deadline = Instant::now() + Duration::from_secs(60);
    if let Some(reader) = finished.first_mut() {
        reader.final_reads(&targets, final_deadline).await?;
    }
    Ok(())
}

fn nemesis_value(lab: &Lab, node: usize) -> OpValue {
    OpValue::Json(json!({"targets": [lab.nodes[node].name()]}))
}

fn inject(lab: &mut Lab, recorder: &Recorder, fault: &str, node: usize) -> anyhow::Result<()> {
    let value = nemesis_value(lab, node);
    match fault {
        "kill" => lab.kill(node)?,
        "pause" => lab.pause(node)?,
        other => bail!("fault {other} has no injector"),
    }
    recorder.record(
        Process::Nemesis,
        OpType::Info,
        Function::from_name(fault),
        value,
        None,
    )?;
    eprintln!("logjam: nemesis {fault} {}", lab.nodes[node].name());
    Ok(())
}

fn undo(lab: &mut Lab, recorder: &Recorder, fault: &str, node: usize) -> anyhow::Result<()> {
    let value = nemesis_value(lab, node);
    let undo = match fault {
        "kill" => {
            lab.start_node(node)?;
            "restart"
        }
        "pause" => {
            lab.resume(node)?;
            "resume"
        }
        other => bail!("fault {other} has no undo"),
    };
    recorder.record(
        Process::Nemesis,
        OpType::Info,
        Function::from_name(undo),
        value,
        None,
    )?;
    eprintln!("logjam: nemesis {undo} {}", lab.nodes[node].name());
    Ok(())
}

/// Creates the topic (idempotently) and waits until every partition has a leader.
async fn wait_until_ready(
    bootstrap: &str,
    topic: &str,
    keys: u32,
    replication_factor: i16,
) -> anyhow::Result<()> {
    let admin = Admin::from_properties([("bootstrap.servers", bootstrap)])?;
    let deadline = Instant::now() + Duration::from_secs(60);
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

fn parse_faults(list: &str) -> anyhow::Result<Vec<String>> {
    let mut faults = Vec::new();
    for fault in list
        .split(',')
        .map(str::trim)
        .filter(|fault| !fault.is_empty() && *fault != "none")
    {
        if FAULTS_NOT_YET.contains(&fault) {
            bail!(
                "--nemesis {fault}: this fault needs the network-namespace lab, which is not built \
                 yet; available: {}",
                FAULTS.join(", ")
            );
        }
        if !FAULTS.contains(&fault) {
            bail!(
                "--nemesis: unknown fault `{fault}`; available: {}",
                FAULTS.join(", ")
            );
        }
        faults.push(fault.to_owned());
    }
    Ok(faults)
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
    command
}

/// UTC time as `2026-11-29T10:03:46Z`, or `20261129T100346Z` for directory names.
fn timestamp(time: SystemTime, compact: bool) -> String {
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
    fn faults_not_yet_built_are_refused_by_name() {
        assert_eq!(parse_faults("kill, pause").unwrap(), vec!["kill", "pause"]);
        let error = parse_faults("kill,partition").unwrap_err().to_string();
        assert!(
            error.contains("partition") && error.contains("namespace"),
            "{error}"
        );
        assert!(
            parse_faults("explode")
                .unwrap_err()
                .to_string()
                .contains("explode")
        );
        assert!(parse_faults("none").unwrap().is_empty());
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
