//! The producer's front door: `send()` appends a record to the accumulator and returns a
//! [`DeliveryFuture`]; a background sender task (`producer/sender.rs`) decides when bytes go.
//!
//! `send()` blocks (asynchronously) only for metadata and for buffer memory, each bounded by
//! `max.block.ms`; running out of memory ends in [`Error::BufferExhausted`], Kafka's
//! `BufferExhaustedException`. Memory is reserved per *batch* (`max(batch.size, record)`)
//! from a pool of `buffer.memory` bytes, as Kafka's `BufferPool` does, so many partitions with
//! small batches exhaust it sooner than the bytes alone suggest.

pub mod accumulator;
pub mod batch;
pub mod idempotence;
pub mod partitioner;
pub mod sender;
pub mod transaction;
pub mod transactional;
pub mod txn_requests;

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use tokio::sync::{Notify, Semaphore, oneshot};

use crate::cluster::{Cluster, ClusterSettings};
use crate::config::ProducerConfig;
use crate::error::{Error, Result};
use crate::ids::{Offset, TopicPartition};
use crate::outcome::Certainty;
use accumulator::{Accumulator, AccumulatorSettings, Appended};
use batch::{BATCH_OVERHEAD_BYTES, PendingRecord, ProducerBatch};
use partitioner::Partitioner;

/// A record to send.
#[derive(Debug, Clone, Default)]
pub struct ProducerRecord {
    /// The topic.
    pub topic: String,
    /// An explicit partition; `None` lets the partitioner choose.
    pub partition: Option<i32>,
    /// The key (murmur2-partitioned when present).
    pub key: Option<Bytes>,
    /// The value.
    pub value: Option<Bytes>,
    /// Headers.
    pub headers: Vec<(String, Option<Bytes>)>,
}

impl ProducerRecord {
    /// A record with a value and no key.
    pub fn new(topic: impl Into<String>, value: impl Into<Bytes>) -> ProducerRecord {
        ProducerRecord {
            topic: topic.into(),
            value: Some(value.into()),
            ..ProducerRecord::default()
        }
    }

    /// Sets the key.
    pub fn with_key(mut self, key: impl Into<Bytes>) -> ProducerRecord {
        self.key = Some(key.into());
        self
    }

    /// Sets an explicit partition.
    pub fn with_partition(mut self, partition: i32) -> ProducerRecord {
        self.partition = Some(partition);
        self
    }
}

/// Where an acknowledged record landed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecordMetadata {
    /// The partition.
    pub partition: TopicPartition,
    /// Its offset; `None` with acks=0 (only written to the socket) and for a batch the broker
    /// reported as a duplicate (`DUPLICATE_SEQUENCE_NUMBER`).
    pub offset: Option<Offset>,
    /// The record's create time, ms since the Unix epoch.
    pub timestamp_ms: i64,
    /// How many produce requests carried the record's batch (more than one: it was retried).
    pub attempts: u32,
}

/// Why a record was not acknowledged, and whether it may still be in the log.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{error} ({certainty:?}, {attempts} attempt(s))")]
pub struct ProduceError {
    /// The last error.
    pub error: Error,
    /// Definite only if no attempt may have been written (see `outcome.rs`).
    pub certainty: Certainty,
    /// How many produce requests carried the record's batch.
    pub attempts: u32,
}

/// The outcome of one record.
pub type DeliveryResult = std::result::Result<RecordMetadata, ProduceError>;

/// Resolves when the record's batch is acknowledged or fails for good.
#[derive(Debug)]
pub struct DeliveryFuture {
    receiver: oneshot::Receiver<DeliveryResult>,
}

impl std::future::Future for DeliveryFuture {
    type Output = DeliveryResult;

    fn poll(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<DeliveryResult> {
        std::pin::Pin::new(&mut self.receiver).poll(cx).map(|r| {
            // The sender dropped the promise without an answer: it may have been sent.
            r.unwrap_or(Err(ProduceError {
                error: Error::Closed,
                certainty: Certainty::Indefinite,
                attempts: 0,
            }))
        })
    }
}

/// State shared by `send()` callers and the sender task.
pub(crate) struct Shared {
    pub(crate) config: ProducerConfig,
    pub(crate) cluster: Arc<Cluster>,
    pub(crate) accumulator: Mutex<Accumulator>,
    partitioner: Mutex<Partitioner>,
    /// `buffer.memory` as permits of one byte each.
    pub(crate) memory: Arc<Semaphore>,
    /// `send()` calls waiting for memory: makes every batch ready (Kafka: pool has waiters).
    pub(crate) memory_waiters: AtomicUsize,
    /// Wakes the sender (new batch, full batch, flush, close).
    pub(crate) wake: Notify,
    /// Signalled by the sender whenever the accumulator and in-flight set are both empty.
    pub(crate) idle: Notify,
    pub(crate) in_flight_batches: AtomicUsize,
    /// A fatal error (idempotence refused): every later send fails with it.
    pub(crate) fatal: Mutex<Option<Error>>,
    pub(crate) closed: AtomicBool,
    /// The idempotent producer's id and epoch, published by the sender for observers.
    pub(crate) identity: Mutex<Option<(crate::ids::ProducerId, crate::ids::ProducerEpoch)>>,
    /// The transaction manager and coordinators, with `transactional.id`.
    pub(crate) txn: Option<Arc<txn_requests::TxnContext>>,
}

/// A Kafka producer: accumulator plus background sender.
pub struct Producer {
    shared: Arc<Shared>,
    sender: Mutex<Option<tokio::task::JoinHandle<()>>>,
}

impl std::fmt::Debug for Producer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Producer").finish_non_exhaustive()
    }
}

impl Producer {
    /// Creates a producer from Kafka properties and starts its sender task (needs a tokio
    /// runtime).
    ///
    /// # Errors
    /// Invalid configuration.
    pub fn from_properties<'a>(
        properties: impl IntoIterator<Item = (&'a str, &'a str)>,
    ) -> Result<Producer> {
        Ok(Producer::new(ProducerConfig::from_properties(properties)?))
    }

    /// Creates a producer and starts its sender task.
    pub fn new(config: ProducerConfig) -> Producer {
        let cluster = Arc::new(Cluster::new(ClusterSettings {
            bootstrap_servers: config.bootstrap_servers.clone(),
            client_id: config.client_id.clone(),
            request_timeout: config.request_timeout,
            allow_auto_topic_creation: true,
        }));
        let seed = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(1, |d| d.as_nanos() as u64);
        let shared = Arc::new(Shared {
            accumulator: Mutex::new(Accumulator::new(AccumulatorSettings {
                batch_size: config.batch_size,
                linger: config.linger,
                retry_backoff: config.retry_backoff,
                delivery_timeout: config.delivery_timeout,
            })),
            partitioner: Mutex::new(Partitioner::new(
                config.batch_size,
                config.partitioner_ignore_keys,
                seed,
            )),
            memory: Arc::new(Semaphore::new(config.buffer_memory)),
            memory_waiters: AtomicUsize::new(0),
            wake: Notify::new(),
            idle: Notify::new(),
            in_flight_batches: AtomicUsize::new(0),
            fatal: Mutex::new(None),
            closed: AtomicBool::new(false),
            identity: Mutex::new(None),
            txn: config
                .transactional_id
                .clone()
                .map(|id| Arc::new(txn_requests::TxnContext::new(id))),
            cluster,
            config,
        });
        let sender = tokio::spawn(sender::run(shared.clone()));
        Producer {
            shared,
            sender: Mutex::new(Some(sender)),
        }
    }

    /// The effective configuration (after Kafka's idempotence rules).
    pub fn config(&self) -> &ProducerConfig {
        &self.shared.config
    }

    /// Appends `record` to the accumulator and returns the promise of its outcome. Waits for
    /// the topic's metadata and for buffer memory, together at most `max.block.ms`.
    ///
    /// # Errors
    /// [`Error::Timeout`] (no metadata), [`Error::BufferExhausted`], [`Error::RecordTooLarge`],
    /// [`Error::Closed`], or the producer's fatal error. Nothing was queued; note that
    /// `outcome.rs` still classifies [`Error::Timeout`] as indefinite (the variant is shared
    /// with admin timeouts), which is conservative.
    pub async fn send(&self, record: ProducerRecord) -> Result<DeliveryFuture> {
        let shared = &self.shared;
        if shared.closed.load(Ordering::Acquire) {
            return Err(Error::Closed);
        }
        if let Some(fatal) = shared.fatal.lock().expect("fatal lock").clone() {
            return Err(fatal);
        }
        let started = Instant::now();
        let max_block = shared.config.max_block;
        let topic = record.topic.clone();
        shared
            .cluster
            .await_metadata(
                &format!("metadata for topic {topic}"),
                &[&topic],
                max_block,
                shared.config.retry_backoff,
                |m| m.partition_count(&topic).is_some_and(|n| n > 0),
            )
            .await?;
        let partition_count = shared
            .cluster
            .with_metadata(|m| m.partition_count(&topic))
            .unwrap_or(0);
        let (sender, receiver) = oneshot::channel();
        let pending = PendingRecord {
            key: record.key.clone(),
            value: record.value,
            headers: record.headers,
            timestamp_ms: SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map_or(0, |d| d.as_millis() as i64),
            completion: sender,
        };
        let size = pending.size_estimate();
        let limit = shared
            .config
            .max_request_size
            .min(shared.config.buffer_memory);
        if size + BATCH_OVERHEAD_BYTES > limit {
            let limit_name = if limit == shared.config.max_request_size {
                "max.request.size"
            } else {
                "buffer.memory"
            };
            return Err(Error::RecordTooLarge {
                size,
                limit_name,
                limit,
            });
        }
        let partition = match record.partition {
            Some(p) if p >= 0 && (p as usize) < partition_count => p,
            Some(p) => {
                return Err(Error::broker(
                    "Produce",
                    kafka_protocol::ResponseError::UnknownTopicOrPartition.code(),
                    Some(format!("{topic}-{p}")),
                ));
            }
            None => shared
                .partitioner
                .lock()
                .expect("partitioner lock")
                .partition(&topic, record.key.as_deref(), size, partition_count),
        };
        let tp = TopicPartition::new(topic, partition);
        if let Some(txn) = &shared.txn {
            // Kafka's `maybeAddPartition`: only inside a transaction; TV1 queues the partition
            // for AddPartitionsToTxn, which the sender sends before the partition's first batch.
            txn.manager().maybe_add_partition(&tp)?;
        }
        let appended = shared
            .accumulator
            .lock()
            .expect("accumulator lock")
            .try_append(&tp, pending);
        let pending = match appended {
            Appended::Existing { full } => {
                if full {
                    shared.wake.notify_one();
                }
                return Ok(DeliveryFuture { receiver });
            }
            Appended::NeedsNewBatch(pending) => pending,
        };
        // Reserve a batch buffer without holding the accumulator lock.
        let capacity = shared.config.batch_size.max(size + BATCH_OVERHEAD_BYTES);
        let remaining = max_block.saturating_sub(started.elapsed());
        shared.memory_waiters.fetch_add(1, Ordering::AcqRel);
        if shared.memory.available_permits() < capacity {
            // Memory is short: let the sender drain everything now.
            shared.wake.notify_one();
        }
        let permit = tokio::time::timeout(
            remaining,
            shared.memory.clone().acquire_many_owned(capacity as u32),
        )
        .await;
        shared.memory_waiters.fetch_sub(1, Ordering::AcqRel);
        let permit = match permit {
            Ok(Ok(permit)) => permit,
            Ok(Err(_)) => return Err(Error::Closed),
            Err(_) => {
                return Err(Error::BufferExhausted {
                    requested: capacity,
                    waited: started.elapsed(),
                    buffer_memory: shared.config.buffer_memory,
                });
            }
        };
        let mut accumulator = shared.accumulator.lock().expect("accumulator lock");
        // Another send may have opened a batch meanwhile; then the permit goes back.
        match accumulator.try_append(&tp, pending) {
            Appended::Existing { .. } => {}
            Appended::NeedsNewBatch(pending) => {
                accumulator.append_new_batch(ProducerBatch::new(
                    tp,
                    pending,
                    capacity,
                    Some(permit),
                    Instant::now(),
                ));
            }
        }
        drop(accumulator);
        shared.wake.notify_one();
        Ok(DeliveryFuture { receiver })
    }

    /// Makes every queued batch ready and waits until all are acknowledged or failed.
    pub async fn flush(&self) {
        let shared = &self.shared;
        shared
            .accumulator
            .lock()
            .expect("accumulator lock")
            .begin_flush();
        loop {
            let idle = shared.idle.notified();
            let empty = shared
                .accumulator
                .lock()
                .expect("accumulator lock")
                .is_empty()
                && shared.in_flight_batches.load(Ordering::Acquire) == 0;
            if empty {
                break;
            }
            shared.wake.notify_one();
            // The sender signals idleness; poll as well so a missed signal cannot hang us.
            let _ = tokio::time::timeout(Duration::from_millis(50), idle).await;
        }
        shared
            .accumulator
            .lock()
            .expect("accumulator lock")
            .end_flush();
    }

    /// Flushes, then stops the sender. Later sends fail with [`Error::Closed`].
    pub async fn close(&self) {
        self.flush().await;
        self.shared.closed.store(true, Ordering::Release);
        self.shared.wake.notify_one();
        let handle = self.sender.lock().expect("sender handle lock").take();
        if let Some(handle) = handle {
            let _ = handle.await;
        }
    }

    /// The producer id and epoch, once the idempotent producer has one.
    pub fn producer_id(&self) -> Option<(crate::ids::ProducerId, crate::ids::ProducerEpoch)> {
        if let Some(txn) = &self.shared.txn {
            // The transaction manager's, which the sender adopts on its next round.
            return txn.manager().producer();
        }
        sender::producer_identity(&self.shared)
    }
}

impl Drop for Producer {
    fn drop(&mut self) {
        self.shared.closed.store(true, Ordering::Release);
        self.shared.wake.notify_one();
    }
}
