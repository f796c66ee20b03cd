//! The producer workload: each process is one batching producer (`logjam-client`'s
//! accumulator and sender, up to `max.in.flight.requests.per.connection` requests in flight),
//! and each op submits several sends to it one after another, without waiting for their
//! acknowledgements, then waits for every outcome. Every send is recorded with its order of
//! submission within the producer and its own outcome (schema: `logjam_history::produce`), so
//! the producer checker can see a retried batch land after a later one (`reordered-send`) and
//! a batch written twice (`duplicate`, from the final reads).
//!
//! - [`ProducerGenerator`]: pure and seeded, one for the run: which keys each op's sends go to
//!   and their values (unique per key: one counter for the run).
//! - [`ProducerClient`]: one producer process; sends are spaced by [`SEND_SPACING`] so that
//!   one op's sends form several batches and several requests are in flight at once, as in an
//!   application that sends continuously.
//! - [`ProducerWorkload`]: the two behind the harness's
//!   [`Workload`](crate::workload::Workload) interface; its final phase reads every partition
//!   back with the queue workload's final reads (`final-poll`, `log-end`).

mod adapter;

pub use adapter::ProducerWorkload;

use std::sync::Arc;
use std::time::{Duration, Instant};

use logjam_client::outcome::Certainty;
use logjam_client::producer::{Producer, ProducerRecord};
use logjam_history::{
    Function, Key, OpType, OpValue, Process, ProcessId, ProduceValue, ProducedSend, SendOutcome,
};
use rand::rngs::StdRng;
use rand::{RngExt, SeedableRng};

use crate::queue::Targets;
use crate::recorder::{RecordError, Recorder};
use crate::workload::{self, Completion};

/// Sends per `produce` op.
pub const SENDS_PER_OP: usize = 10;

/// Time between two sends of one op: long enough that each send tends to start a batch of its
/// own (with a short `linger.ms`), so one op keeps several requests in flight.
pub const SEND_SPACING: Duration = Duration::from_millis(20);

/// One `produce` op: the sends to submit, in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Burst {
    /// `(key, value)` per send, in order of submission.
    pub sends: Vec<(Key, i64)>,
}

/// The seeded op source of a run: keys at random, values from one counter (unique per key).
#[derive(Debug)]
pub struct ProducerGenerator {
    rng: StdRng,
    keys: u32,
    next_value: i64,
}

impl ProducerGenerator {
    /// The generator of a run seeded with `seed`, over `keys` keys.
    pub fn new(seed: u64, keys: u32) -> ProducerGenerator {
        ProducerGenerator {
            rng: StdRng::seed_from_u64(seed ^ 0x7072_6f64_7563_6572),
            keys: keys.max(1),
            next_value: 0,
        }
    }

    /// The next op: [`SENDS_PER_OP`] sends to random keys.
    pub fn next_burst(&mut self) -> Burst {
        let sends = (0..SENDS_PER_OP)
            .map(|_| {
                let key = Key(i64::from(self.rng.random_range(0..self.keys)));
                self.next_value += 1;
                (key, self.next_value)
            })
            .collect();
        Burst { sends }
    }
}

impl workload::Generator for ProducerGenerator {
    type Op = Burst;

    fn next_op(&mut self) -> Burst {
        self.next_burst()
    }
}

/// Client settings of a producer run.
#[derive(Debug, Clone)]
pub struct ProducerSettings {
    /// The topic whose partitions are the keys.
    pub topic: String,
    /// Number of keys (= partitions).
    pub keys: u32,
    /// Producer properties (Kafka names), `bootstrap.servers` included.
    pub producer: Vec<(String, String)>,
    /// Consumer properties for the final reads, `bootstrap.servers` included.
    pub consumer: Vec<(String, String)>,
    /// How long one send may take, from `send()` to its outcome, before it is recorded as
    /// indeterminate by the workload itself.
    pub send_timeout: Duration,
}

/// One producer process.
pub struct ProducerClient {
    process: ProcessId,
    settings: Arc<ProducerSettings>,
    recorder: Arc<Recorder>,
    targets: Arc<Targets>,
    producer: Option<Producer>,
    /// The next send's order of submission within this producer.
    next_seq: u64,
}

impl std::fmt::Debug for ProducerClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ProducerClient")
            .field("process", &self.process)
            .field("next_seq", &self.next_seq)
            .finish_non_exhaustive()
    }
}

type Outcome = Result<(Option<i64>, u32), (Certainty, String, u32)>;

impl ProducerClient {
    /// A fresh process `process`; its producer connects on its first op.
    pub fn new(
        process: ProcessId,
        settings: Arc<ProducerSettings>,
        recorder: Arc<Recorder>,
        targets: Arc<Targets>,
    ) -> ProducerClient {
        ProducerClient {
            process,
            settings,
            recorder,
            targets,
            producer: None,
            next_seq: 0,
        }
    }

    fn record(&self, op_type: OpType, value: &ProduceValue) -> Result<(), RecordError> {
        self.recorder
            .record(
                Process::Client(self.process),
                op_type,
                Function::Produce,
                OpValue::Json(value.to_json()),
                None,
            )
            .map(drop)
    }

    fn producer(&mut self) -> Result<&Producer, String> {
        if self.producer.is_none() {
            let properties = self
                .settings
                .producer
                .iter()
                .map(|(key, value)| (key.as_str(), value.as_str()));
            let producer = Producer::from_properties(properties)
                .map_err(|error| format!("producer: {error}"))?;
            self.producer = Some(producer);
        }
        Ok(self.producer.as_ref().expect("just created"))
    }

    /// Submits the burst's sends one after another (each `send()` returns once the record is
    /// in the accumulator), then waits for every outcome and records them.
    ///
    /// # Errors
    /// Only when the history cannot be written.
    pub async fn invoke(&mut self, burst: Burst) -> Result<Completion, RecordError> {
        let mut value = ProduceValue {
            sends: burst
                .sends
                .iter()
                .map(|(key, v)| {
                    let send = ProducedSend::invoked(self.next_seq, key.0, *v);
                    self.next_seq += 1;
                    send
                })
                .collect(),
        };
        self.record(OpType::Invoke, &value)?;
        let timeout = self.settings.send_timeout;
        let topic = self.settings.topic.clone();
        let mut pending: Vec<(Instant, tokio::task::JoinHandle<(Outcome, Instant)>)> =
            Vec::with_capacity(value.sends.len());
        let mut blocked = Vec::with_capacity(value.sends.len());
        for (position, send) in value.sends.iter().enumerate() {
            if position > 0 {
                tokio::time::sleep(SEND_SPACING).await;
            }
            let record = ProducerRecord::new(topic.clone(), send.value.to_string())
                .with_partition(send.key as i32);
            let started = Instant::now();
            let submitted = match self.producer() {
                Err(error) => Err((Certainty::Definite, error, 0)),
                Ok(producer) => match tokio::time::timeout(timeout, producer.send(record)).await {
                    Err(_) => Err((
                        Certainty::Indefinite,
                        "send() blocked past the timeout".to_owned(),
                        0,
                    )),
                    Ok(Err(error)) => Err((error.certainty(), error.to_string(), 0)),
                    Ok(Ok(delivery)) => Ok(delivery),
                },
            };
            blocked.push(started.elapsed());
            let handle = tokio::spawn(async move {
                let outcome = match submitted {
                    Err(error) => Err(error),
                    Ok(delivery) => {
                        let left = timeout.saturating_sub(started.elapsed());
                        match tokio::time::timeout(left, delivery).await {
                            Err(_) => Err((
                                Certainty::Indefinite,
                                "no acknowledgement in time".to_owned(),
                                0,
                            )),
                            Ok(Err(error)) => {
                                Err((error.certainty, error.to_string(), error.attempts))
                            }
                            Ok(Ok(metadata)) => {
                                Ok((metadata.offset.map(|offset| offset.0), metadata.attempts))
                            }
                        }
                    }
                };
                (outcome, Instant::now())
            });
            pending.push((started, handle));
        }
        let mut completion = Completion::Ok;
        let mut any_ok = false;
        for ((send, (started, handle)), blocked) in value.sends.iter_mut().zip(pending).zip(blocked)
        {
            let (outcome, ended) = handle.await.unwrap_or_else(|_| {
                (
                    Err((Certainty::Indefinite, "the send's task died".to_owned(), 0)),
                    Instant::now(),
                )
            });
            send.blocked_us = Some(micros(blocked));
            send.latency_us = Some(micros(ended.saturating_duration_since(started)));
            match outcome {
                Ok((offset, attempts)) => {
                    any_ok = true;
                    send.outcome = Some(SendOutcome::Ok);
                    send.offset = offset;
                    send.attempts = Some(attempts);
                    if let Some(offset) = offset {
                        self.targets.observe(Key(send.key), offset);
                    }
                }
                Err((certainty, error, attempts)) => {
                    send.error = Some(error);
                    send.attempts = (attempts > 0).then_some(attempts);
                    if certainty == Certainty::Definite {
                        send.outcome = Some(SendOutcome::Fail);
                        if completion == Completion::Ok {
                            completion = Completion::Fail;
                        }
                    } else {
                        send.outcome = Some(SendOutcome::Info);
                        completion = Completion::Info;
                    }
                }
            }
        }
        // Some acknowledged and the rest certainly not written: the op did what it did, and
        // each send says which; only an indeterminate send retires the process.
        if completion == Completion::Fail && any_ok {
            completion = Completion::Ok;
        }
        let op_type = match completion {
            Completion::Ok => OpType::Ok,
            Completion::Fail => OpType::Fail,
            Completion::Info => OpType::Info,
        };
        self.record(op_type, &value)?;
        Ok(completion)
    }

    /// Closes the producer (it flushes what it still holds, up to `delivery.timeout.ms`).
    pub async fn close(mut self) {
        if let Some(producer) = self.producer.take() {
            producer.close().await;
        }
    }
}

fn micros(duration: Duration) -> u64 {
    u64::try_from(duration.as_micros()).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generator_replays_from_the_seed_with_unique_values() {
        let run = |seed| {
            let mut generator = ProducerGenerator::new(seed, 3);
            (0..50).map(|_| generator.next_burst()).collect::<Vec<_>>()
        };
        assert_eq!(run(4), run(4));
        assert_ne!(run(4), run(5));
        let values: std::collections::HashSet<i64> = run(4)
            .iter()
            .flat_map(|burst| burst.sends.iter().map(|(_, value)| *value))
            .collect();
        assert_eq!(values.len(), 50 * SENDS_PER_OP);
        assert!(
            run(4)
                .iter()
                .flat_map(|burst| &burst.sends)
                .all(|(key, _)| (0..3).contains(&key.0))
        );
    }
}
