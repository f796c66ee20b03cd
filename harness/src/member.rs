//! `logjam member`: one consumer-group member as an OS process of its own, so the lab can
//! pause it with SIGSTOP (a real GC pause: its connections stay open and say nothing), kill it
//! or restart it. The member pool of a run (`run/members.rs`) starts these; nobody else needs
//! to.
//!
//! The member subscribes to one topic with logjam-client's consumer, polls in a loop, spends
//! `--process-ms` per record it got (the "processing between polls" of the poll clock),
//! commits its positions after every poll that returned records (`commit_sync`), and prints
//! one JSON line per event on stdout:
//!
//! ```text
//! {"event":"rebalance","generation":3,"member_id":"…","assigned":[0,2],"revoked":[],"cause":"join"}
//! {"event":"polled","records":12,"partitions":{"0":[40,51]}}
//! {"event":"committed","offsets":{"0":52}}
//! {"event":"closed"}
//! ```
//!
//! SIGTERM closes it as an application would (`close()`: a dynamic member sends LeaveGroup, a
//! static one does not), then it exits 0. When its parent (the harness) dies it exits at once.

use std::collections::BTreeMap;
use std::io::Write;
use std::time::Duration;

use anyhow::Context;
use clap::Args;
use logjam_client::consumer::Consumer;
use serde_json::json;

/// Arguments of `logjam member` (the pool passes them; not meant to be typed).
#[derive(Debug, Args)]
pub struct MemberArgs {
    /// bootstrap.servers.
    #[arg(long)]
    pub bootstrap: String,
    /// group.id.
    #[arg(long)]
    pub group: String,
    /// The topic it subscribes to.
    #[arg(long)]
    pub topic: String,
    /// Milliseconds of processing per record received, spent before the next poll.
    #[arg(long, default_value_t = 0)]
    pub process_ms: u64,
    /// A consumer property, `key=value`, repeatable.
    #[arg(long = "set", value_name = "KEY=VALUE")]
    pub set: Vec<String>,
}

/// How long one poll waits for records.
const POLL_TIMEOUT: Duration = Duration::from_millis(200);

/// Runs the member until SIGTERM; returns its exit code.
///
/// # Errors
/// A property that is not `key=value` or that the consumer refuses, or no runtime.
pub fn run(args: &MemberArgs) -> anyhow::Result<u8> {
    let mut properties = vec![
        ("bootstrap.servers".to_owned(), args.bootstrap.clone()),
        ("group.id".to_owned(), args.group.clone()),
        ("auto.offset.reset".to_owned(), "earliest".to_owned()),
        ("enable.auto.commit".to_owned(), "false".to_owned()),
    ];
    for setting in &args.set {
        let (key, value) = setting
            .split_once('=')
            .with_context(|| format!("`--set {setting}`: expected key=value"))?;
        properties.retain(|(k, _)| k != key);
        properties.push((key.to_owned(), value.to_owned()));
    }
    let mut consumer =
        Consumer::from_properties(properties.iter().map(|(k, v)| (k.as_str(), v.as_str())))
            .map_err(|error| anyhow::anyhow!("consumer properties: {error}"))?;
    consumer
        .subscribe([args.topic.clone()])
        .map_err(|error| anyhow::anyhow!("subscribe: {error}"))?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    runtime.block_on(async {
        let mut terminate =
            tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
        let parent = nix::unistd::getppid();
        tokio::spawn(async move {
            loop {
                tokio::time::sleep(Duration::from_millis(500)).await;
                // The harness died (this process was handed to another parent): no member
                // outlives its run.
                if nix::unistd::getppid() != parent {
                    std::process::exit(3);
                }
            }
        });
        loop {
            tokio::select! {
                _ = terminate.recv() => break,
                () = one_round(&mut consumer, args.process_ms) => {}
            }
        }
        let _ = tokio::time::timeout(Duration::from_secs(5), consumer.close()).await;
        emit(&json!({"event": "closed"}));
        anyhow::Ok(0)
    })
}

/// One poll, its processing time, its commit, and the events they produced.
async fn one_round(consumer: &mut Consumer, process_ms: u64) {
    let polled = consumer.poll(POLL_TIMEOUT).await;
    report_rebalances(consumer);
    let records = match polled {
        Ok(records) => records,
        Err(error) => {
            emit(&json!({"event": "poll-error", "error": error.to_string()}));
            tokio::time::sleep(POLL_TIMEOUT).await;
            return;
        }
    };
    if records.is_empty() {
        return;
    }
    let mut ranges: BTreeMap<String, (i64, i64)> = BTreeMap::new();
    for record in &records {
        let range = ranges
            .entry(record.partition.partition.0.to_string())
            .or_insert((record.offset.0, record.offset.0));
        range.0 = range.0.min(record.offset.0);
        range.1 = range.1.max(record.offset.0);
    }
    emit(&json!({"event": "polled", "records": records.len(), "partitions": ranges}));
    if process_ms > 0 {
        let records = u64::try_from(records.len()).unwrap_or(u64::MAX);
        tokio::time::sleep(Duration::from_millis(process_ms.saturating_mul(records))).await;
    }
    let offsets: BTreeMap<String, i64> = consumer
        .assignment()
        .iter()
        .filter_map(|tp| {
            consumer
                .position(tp)
                .map(|offset| (tp.partition.0.to_string(), offset.0))
        })
        .collect();
    match consumer.commit_sync().await {
        Ok(()) => emit(&json!({"event": "committed", "offsets": offsets})),
        Err(error) => emit(&json!({"event": "commit-error", "error": error.to_string()})),
    }
    report_rebalances(consumer);
}

fn report_rebalances(consumer: &mut Consumer) {
    for event in consumer.take_rebalance_events() {
        let partitions = |list: &[logjam_client::ids::TopicPartition]| -> Vec<i32> {
            let mut partitions: Vec<i32> = list.iter().map(|tp| tp.partition.0).collect();
            partitions.sort_unstable();
            partitions
        };
        emit(&json!({
            "event": "rebalance",
            "generation": event.generation,
            "member_id": event.member_id,
            "assigned": partitions(&event.assigned),
            "revoked": partitions(&event.revoked),
            "cause": event.cause.name(),
        }));
    }
}

/// One event line on stdout, flushed at once: the pool reads it as it happens, and a member
/// killed right after loses nothing it printed.
fn emit(event: &serde_json::Value) {
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{event}");
    let _ = out.flush();
}
