//! `logjam-client-bench`: produce throughput and latency against a running cluster across
//! `batch.size` × `linger.ms` × `acks`, printed as a Markdown table. Latency is measured per
//! record from `send()` to its acknowledgement.

use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context;
use clap::Parser;
use logjam_client::{Admin, NewTopic, Producer, ProducerRecord};

/// Measures produce throughput and latency.
#[derive(Debug, Parser)]
#[command(version, about)]
struct Args {
    /// A broker to bootstrap from, host:port.
    #[arg(long)]
    bootstrap: String,
    /// Topic prefix; each combination writes to its own topic `<topic>-<n>`.
    #[arg(long, default_value = "bench")]
    topic: String,
    /// Partitions of each topic.
    #[arg(long, default_value_t = 3)]
    partitions: i32,
    /// Replication factor of the benchmark topic.
    #[arg(long, default_value_t = 1)]
    replication_factor: i16,
    /// Messages per combination.
    #[arg(long, default_value_t = 20_000)]
    messages: usize,
    /// Value size in bytes.
    #[arg(long, default_value_t = 100)]
    value_bytes: usize,
    /// batch.size values.
    #[arg(long, value_delimiter = ',', default_value = "16384,65536")]
    batch_size: Vec<usize>,
    /// linger.ms values.
    #[arg(long, value_delimiter = ',', default_value = "0,5,50")]
    linger_ms: Vec<u64>,
    /// acks values.
    #[arg(long, value_delimiter = ',', default_value = "1,all")]
    acks: Vec<String>,
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let index = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[index.min(sorted.len() - 1)]
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let admin = Admin::from_properties([("bootstrap.servers", args.bootstrap.as_str())])?;
    println!(
        "{} messages of {} bytes per combination, {} partitions, idempotence off\n",
        args.messages, args.value_bytes, args.partitions
    );
    println!("| batch.size | linger.ms | acks | messages/s | p50 ms | p99 ms |");
    println!("|---:|---:|:---:|---:|---:|---:|");
    let mut combination = 0;
    let run_id = std::process::id();
    for &batch_size in &args.batch_size {
        for &linger in &args.linger_ms {
            for acks in &args.acks {
                combination += 1;
                let topic = format!("{}-{run_id}-{combination}", args.topic);
                for (_, outcome) in admin
                    .create_topics(&[NewTopic::new(
                        &topic,
                        args.partitions,
                        args.replication_factor,
                    )])
                    .await?
                {
                    outcome.with_context(|| format!("creating {topic}"))?;
                }
                let batch = batch_size.to_string();
                let linger_text = linger.to_string();
                let producer = Arc::new(Producer::from_properties([
                    ("bootstrap.servers", args.bootstrap.as_str()),
                    ("batch.size", batch.as_str()),
                    ("linger.ms", linger_text.as_str()),
                    ("acks", acks.as_str()),
                    ("enable.idempotence", "false"),
                ])?);
                let value = bytes::Bytes::from(vec![b'x'; args.value_bytes]);
                // Warm up metadata and connections outside the measurement.
                producer
                    .send(ProducerRecord::new(&topic, value.clone()))
                    .await?
                    .await?;
                let started = Instant::now();
                let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
                for _ in 0..args.messages {
                    let sent_at = Instant::now();
                    let delivery = producer
                        .send(ProducerRecord::new(&topic, value.clone()))
                        .await?;
                    let tx = tx.clone();
                    tokio::spawn(async move {
                        let result = delivery.await;
                        let _ = tx.send((result.is_ok(), sent_at.elapsed()));
                    });
                }
                drop(tx);
                let mut latencies = Vec::with_capacity(args.messages);
                let mut failures = 0;
                while let Some((ok, latency)) = rx.recv().await {
                    if ok {
                        latencies.push(latency);
                    } else {
                        failures += 1;
                    }
                }
                let elapsed = started.elapsed();
                producer.close().await;
                latencies.sort();
                let rate = latencies.len() as f64 / elapsed.as_secs_f64();
                println!(
                    "| {batch_size} | {linger} | {acks} | {rate:.0} | {:.2} | {:.2} |{}",
                    percentile(&latencies, 0.50).as_secs_f64() * 1000.0,
                    percentile(&latencies, 0.99).as_secs_f64() * 1000.0,
                    if failures > 0 {
                        format!(" {failures} failed")
                    } else {
                        String::new()
                    }
                );
            }
        }
    }
    Ok(())
}
