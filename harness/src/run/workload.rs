//! The workload phase of a run, inside the runtime: builds the workload (queue, txn, eos, group or producer) from
//! the run's settings, opens the history, and then, until the time limit, lets the schedule
//! hand ops to client processes while the nemesis injects and undoes faults and the watcher
//! records leader changes; heals everything, waits for the schedule's open ops, waits for the
//! cluster to serve again, and runs the workload's final phase.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use logjam_history::{Header, ProcessId};
use logjam_workloads::eos::{EosSettings, EosWorkload};
use logjam_workloads::group::{GroupSettings, GroupWorkload};
use logjam_workloads::producer::{ProducerSettings, ProducerWorkload};
use logjam_workloads::queue::{QueueSettings, QueueWorkload};
use logjam_workloads::recorder::Recorder;
use logjam_workloads::txn::{TxnSettings, TxnWorkload};
use logjam_workloads::workload::Workload;
use serde_json::json;
use tokio::time::Instant;

use super::faults::Nemesis;
use super::members::{self, MemberPool};
use super::observe::{self, WorkloadStats};
use super::record::timestamp;
use super::schedule::{self, OpenOps, ScheduleStats};
use super::start::{self, Settings};
use crate::cli::RunArgs;
use crate::lab::Lab;
use crate::nemesis::Fault;
use crate::timeline::Step;

/// How long a send may stay open beyond the producer's own `delivery.timeout.ms` before the
/// harness records it `info` itself (a producer that never answers is a bug, not a hang).
const SEND_GRACE: Duration = Duration::from_secs(5);

/// The queue workload with the run's settings, talking to `bootstrap`.
pub(super) fn queue(args: &RunArgs, settings: &Settings, bootstrap: &str) -> QueueWorkload {
    let mut producer = vec![("bootstrap.servers".to_owned(), bootstrap.to_owned())];
    producer.extend(settings.producer());
    let mut consumer = vec![
        ("bootstrap.servers".to_owned(), bootstrap.to_owned()),
        ("auto.offset.reset".to_owned(), "earliest".to_owned()),
    ];
    consumer.extend(settings.consumer());
    QueueWorkload::new(QueueSettings {
        topic: "queue".to_owned(),
        keys: args.keys,
        producer,
        consumer,
        poll_timeout: Duration::from_millis(100),
        crash_keep: logjam_workloads::queue::crash_keep(args.rate),
        send_timeout: settings.delivery_timeout() + SEND_GRACE,
        final_read_grace: logjam_workloads::queue::FINAL_READ_GRACE,
    })
}

/// The share of the txn workload's transactions aborted on purpose, in percent.
const TXN_ABORT_PERCENT: u32 = 10;

/// The txn workload's `transaction.timeout.ms` unless `--set` gives one: short, as Jepsen's
/// (1 s there), so a transaction a retired process left open is aborted by its coordinator
/// within seconds instead of holding every read_committed consumer at the LSO for Kafka's
/// 60 s.
const TXN_TIMEOUT_MS: &str = "10000";

/// The share of transactions `--set logjam.txn=abandon` abandons (their process dies before
/// EndTxn), in percent: about one a second at the default rate, each holding the LSO of the
/// partitions it sent to until its coordinator times it out.
const TXN_ABANDON_PERCENT: u32 = 1;

/// Kafka's `transaction.abort.timed.out.transaction.cleanup.interval.ms` default.
const TXN_SWEEP: Duration = Duration::from_secs(10);

/// The txn workload with the run's settings, talking to `bootstrap`: every consumer reads
/// read_committed.
pub(super) fn txn(args: &RunArgs, settings: &Settings, bootstrap: &str) -> TxnWorkload {
    let mut queue = queue(args, settings, bootstrap).settings().clone();
    queue.topic = "txn".to_owned();
    if !queue
        .producer
        .iter()
        .any(|(key, _)| key == "transaction.timeout.ms")
    {
        queue.producer.push((
            "transaction.timeout.ms".to_owned(),
            TXN_TIMEOUT_MS.to_owned(),
        ));
    }
    queue
        .consumer
        .push(("isolation.level".to_owned(), "read_committed".to_owned()));
    // A transaction a dead process left open holds the LSO until its coordinator's timeout
    // sweep aborts it: the final reads wait that long (Kafka's sweep runs every 10 s) before
    // they settle for the end they reached.
    let timeout_ms = queue
        .producer
        .iter()
        .filter(|(key, _)| key == "transaction.timeout.ms")
        .filter_map(|(_, value)| value.trim().parse::<u64>().ok())
        .max()
        .unwrap_or(60_000);
    queue.final_read_grace = Duration::from_millis(timeout_ms) + TXN_SWEEP;
    TxnWorkload::new(TxnSettings {
        queue,
        transactional_id_prefix: "logjam-txn".to_owned(),
        abort_percent: TXN_ABORT_PERCENT,
        abandon_percent: if settings.txn_option("abandon") {
            TXN_ABANDON_PERCENT
        } else {
            0
        },
    })
}

/// How much longer than the session timeout a zombie pauses: the coordinator's expiry, the
/// rebalance and the new owner's reprocessing all fit in it.
const ZOMBIE_PAUSE_PAST_SESSION: Duration = Duration::from_secs(4);

/// The eos workload with the run's settings: a pipeline group reading `eos-in` and writing
/// `eos-out`, offsets in the transaction unless `--set logjam.eos=offsets-outside-transaction`;
/// a few pipeline ops crash their process as the commit returns unless `logjam.eos=no-crashes`.
pub(super) fn eos(args: &RunArgs, settings: &Settings, bootstrap: &str) -> EosWorkload {
    let mut queue = queue(args, settings, bootstrap).settings().clone();
    if !queue
        .producer
        .iter()
        .any(|(key, _)| key == "transaction.timeout.ms")
    {
        queue.producer.push((
            "transaction.timeout.ms".to_owned(),
            TXN_TIMEOUT_MS.to_owned(),
        ));
    }
    EosWorkload::new(EosSettings {
        producer: queue.producer,
        consumer: queue.consumer,
        input_topic: "eos-in".to_owned(),
        output_topic: "eos-out".to_owned(),
        partitions: args.keys,
        group: "logjam-eos".to_owned(),
        transactional_id_prefix: "logjam-eos".to_owned(),
        offsets_in_txn: !settings.eos_option("offsets-outside-transaction"),
        group_metadata: !settings.eos_option("offsets-without-group-metadata"),
        zombie_pause: settings
            .eos_option("zombie")
            .then(|| settings.session_timeout() + ZOMBIE_PAUSE_PAST_SESSION),
        crash_percent: if settings.eos_option("no-crashes") {
            0
        } else {
            logjam_workloads::eos::CRASH_PERCENT
        },
        members: args.keys.clamp(1, args.concurrency.max(1)),
        member_per_process: settings.eos_option("member-per-process"),
        poll_timeout: Duration::from_millis(200),
        send_timeout: queue.send_timeout,
    })
}

/// The group workload with the run's settings, talking to `bootstrap`: the queue's, its
/// consumers members of the group `logjam-group`, at most `--concurrency` at once.
pub(super) fn group(args: &RunArgs, settings: &Settings, bootstrap: &str) -> GroupWorkload {
    let mut queue = queue(args, settings, bootstrap).settings().clone();
    queue.topic = "group".to_owned();
    GroupWorkload::new(GroupSettings {
        queue,
        group_id: "logjam-group".to_owned(),
        max_members: args.concurrency.max(1) as usize,
    })
}

/// The producer workload with the run's settings, talking to `bootstrap`.
pub(super) fn producer(args: &RunArgs, settings: &Settings, bootstrap: &str) -> ProducerWorkload {
    let mut producer = vec![("bootstrap.servers".to_owned(), bootstrap.to_owned())];
    producer.extend(settings.producer());
    let mut consumer = vec![
        ("bootstrap.servers".to_owned(), bootstrap.to_owned()),
        ("auto.offset.reset".to_owned(), "earliest".to_owned()),
    ];
    consumer.extend(settings.consumer());
    ProducerWorkload::new(ProducerSettings {
        topic: "producer".to_owned(),
        keys: args.keys,
        producer,
        consumer,
        send_timeout: settings.delivery_timeout() + SEND_GRACE,
    })
}

/// The member pool group's committed offsets of `topic`'s `partitions` (empty when the
/// coordinator does not answer within 10 s: the report then says the offsets did not survive).
async fn committed_offsets(bootstrap: &str, topic: &str, partitions: u32) -> BTreeMap<i32, i64> {
    let fetched = async {
        let mut consumer = logjam_client::consumer::Consumer::from_properties([
            ("bootstrap.servers", bootstrap),
            ("group.id", members::GROUP),
        ])
        .ok()?;
        consumer.subscribe([topic.to_owned()]).ok()?;
        let partitions: Vec<logjam_client::ids::TopicPartition> = (0..partitions)
            .map(|p| logjam_client::ids::TopicPartition::new(topic, i32::try_from(p).unwrap_or(0)))
            .collect();
        consumer.committed(&partitions).await.ok()
    };
    match tokio::time::timeout(Duration::from_secs(10), fetched).await {
        Ok(Some(offsets)) => offsets
            .into_iter()
            .map(|(tp, offset)| (tp.partition.0, offset.0))
            .collect(),
        _ => BTreeMap::new(),
    }
}

/// What the workload phase hands back to the record phase.
#[derive(Debug, Clone)]
pub(super) struct Phase {
    /// The harness's own cost.
    pub(super) stats: WorkloadStats,
    /// What the schedule did.
    pub(super) schedule: ScheduleStats,
    /// The workload phase in history time (ns since the history's start).
    pub(super) start_ns: u64,
    /// Its end (the time limit).
    pub(super) end_ns: u64,
    /// The member pool's rebalance summary (`rebalances.json`), when the run had one.
    pub(super) rebalances: Option<String>,
}

/// The run itself, inside the runtime.
#[allow(clippy::too_many_arguments)]
pub(super) async fn drive<W: Workload>(
    args: &RunArgs,
    workload: W,
    seed: u64,
    lab: &mut Lab,
    run_dir: &Path,
    settings: &Settings,
    faults: &[Fault],
    script: Option<&[Step]>,
    started: SystemTime,
) -> anyhow::Result<Phase> {
    let bootstrap = lab.bootstrap();
    let topics = workload.topics();
    let replication_factor = settings.replication_factor.unwrap_or(3);
    start::wait_until_ready(&bootstrap, &topics, replication_factor).await?;

    let mut header = Header::new(workload.name(), seed, timestamp(started, false));
    header.nodes = lab.nodes.iter().map(|node| node.name()).collect();
    let mut config = workload.history_config();
    config["nemesis"] = json!(faults.iter().map(ToString::to_string).collect::<Vec<_>>());
    config["client"] = json!(settings.producer().into_iter().collect::<BTreeMap<_, _>>());
    header.config = config;
    let recorder = Arc::new(Recorder::create(&run_dir.join("history.jsonl"), &header)?);
    let watched = topics
        .first()
        .map(|topic| topic.name.clone())
        .unwrap_or_default();
    let watcher = tokio::spawn(observe::watch_leaders(
        bootstrap.clone(),
        watched.clone(),
        recorder.clone(),
    ));

    let workload = Arc::new(workload);
    let deadline = Instant::now() + Duration::from_secs(args.time_limit);
    let start_ns = recorder.elapsed_ns();
    let open = OpenOps::default();
    let mut scheduled = tokio::spawn(schedule::run(
        workload.clone(),
        recorder.clone(),
        seed,
        args.rate,
        args.concurrency,
        deadline,
        open.clone(),
    ));

    let mut nemesis = Nemesis::new(
        seed,
        faults,
        script,
        Duration::from_secs(args.nemesis_interval.max(1)),
        super::isr_shrink::ShrinkTiming::from_settings(&settings.node),
    )
    .with_deadline(deadline);
    if args.members.members > 0 {
        nemesis.members = Some(MemberPool::start(
            &args.members,
            &bootstrap,
            &watched,
            run_dir,
        )?);
    }
    let workload_start = Instant::now();
    let (cpu_at_start, _) = observe::cpu_seconds();
    let mut progress = crate::progress::Progress::new(args.time_limit);
    while Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(50)).await;
        if scheduled.is_finished() {
            // Only an error ends the schedule early.
            break;
        }
        let elapsed = args
            .time_limit
            .saturating_sub(deadline.saturating_duration_since(Instant::now()).as_secs());
        let done = recorder.completions();
        progress.update(elapsed, (done.ok, done.fail, done.info), open.get(), || {
            nemesis.describe(lab)
        });
        nemesis.step(lab, &recorder, &bootstrap, &watched).await?;
    }
    progress.finish();
    let end_ns = recorder
        .elapsed_ns()
        .min(start_ns + args.time_limit * 1_000_000_000);
    // Heal first: an op blocked on a dead or paused node would otherwise hold the run for
    // its whole delivery timeout.
    let workload_end_ms = members::now_ms();
    nemesis.heal_all(lab, &recorder)?;
    let mut pool = nemesis.members.take();
    if let Some(pool) = &mut pool {
        pool.shutdown().await;
    }
    let schedule = (&mut scheduled)
        .await
        .map_err(|error| anyhow::anyhow!("the schedule panicked: {error}"))??;
    let workload_time = workload_start.elapsed();
    let done = recorder.completions();
    let (cpu, _) = observe::cpu_seconds();
    let ops = done.ok + done.fail + done.info;
    let stats = WorkloadStats {
        seconds: workload_time.as_secs_f64(),
        ops,
        ops_per_second: ops as f64 / workload_time.as_secs_f64().max(1e-9),
        harness_cpu_seconds: cpu - cpu_at_start,
        harness_cpu_share: (cpu - cpu_at_start) / workload_time.as_secs_f64().max(1e-9),
    };
    eprintln!("logjam: healed; waiting for recovery, then reading every partition back");
    let leaderless = start::wait_for_leaders(&bootstrap, &topics, replication_factor).await?;
    if !leaderless.is_empty() {
        // What the cluster did, recorded for the checker: not a harness failure.
        eprintln!(
            "logjam: partitions still without a leader 60 s after the heal: {leaderless:?}; \
             reporting them as unavailable"
        );
        let partitions: Vec<i32> = leaderless
            .iter()
            .filter(|(topic, _)| *topic == watched)
            .map(|(_, partition)| *partition)
            .collect();
        recorder.record(
            logjam_history::Process::Nemesis,
            logjam_history::OpType::Info,
            logjam_history::Function::from_name(logjam_checkers::availability::UNAVAILABLE),
            logjam_history::OpValue::Json(json!({"topic": watched, "partitions": partitions})),
            None,
        )?;
    }
    let final_deadline = Instant::now() + Duration::from_secs(60);
    workload
        .final_phase(ProcessId(schedule.next_process), &recorder, final_deadline)
        .await?;
    watcher.abort();
    let rebalances = match &pool {
        Some(pool) => {
            let committed = committed_offsets(&bootstrap, &watched, args.keys).await;
            let nodes: Vec<(String, std::path::PathBuf)> = lab
                .nodes
                .iter()
                .map(|node| (node.name(), node.dir.clone()))
                .collect();
            let report = members::report(
                run_dir,
                &nodes,
                (pool.started_ms, workload_end_ms),
                Duration::from_secs(pool.options().members_settle),
                committed,
            )?;
            Some(report.summary())
        }
        None => None,
    };
    Ok(Phase {
        stats,
        schedule,
        start_ns,
        end_ns,
        rebalances,
    })
}
