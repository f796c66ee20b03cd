//! The producer checker: reads the `produce` ops of the producer workload (one batching
//! producer per process, many sends in flight; schema in `logjam_history::produce`) and the
//! final reads, and reports what retries did to the log:
//!
//! - `reordered-send`: within one producer (process) and one key, a send submitted later was
//!   acknowledged at a lower offset than one submitted earlier. Proven by the two
//!   acknowledgements alone; the witness also says whether the final reads found both values
//!   at their acknowledged offsets.
//! - `duplicate`: one sent value read at two or more offsets of its key by ok reads (a batch
//!   written twice: its first attempt's answer was lost and the retry was appended again).
//!   Only reads prove it; an acknowledgement alone never does.
//!
//! It also sums up what the sends went through ([`ProducerStats`]): latency from `send()` to
//! the outcome, how long `send()` itself blocked (`max.block.ms`: metadata and buffer
//! memory), retries, and buffer exhaustion.

use std::collections::{BTreeMap, BTreeSet};

use logjam_history::{
    CompletedOp, Function, Header, Key, MicroOp, Offset, OpValue, Outcome, Paired, ProduceValue,
    SendOutcome, Value,
};

use crate::anomaly::{Anomalies, Anomaly, AnomalyKind, OpRef};
use crate::checker::{Checker, Findings};
use crate::durability::DurabilityReport;
use crate::findings::{Stats, WorkloadStats};
use crate::queue::realtime::LinearizabilitySummary;

pub use crate::findings::{Percentiles, ProducerStats};

/// One acknowledged send.
#[derive(Debug, Clone)]
struct Acked {
    seq: u64,
    value: i64,
    offset: i64,
    attempts: Option<u32>,
    op: OpRef,
}

/// The op that sent a value, the offset it was acknowledged at and its attempts.
type SentBy = (OpRef, Option<i64>, Option<u32>);

/// Streaming producer checker.
pub struct ProducerChecker {
    stats: Stats,
    producer: ProducerStats,
    latencies: Vec<u64>,
    blocked: Vec<u64>,
    /// (process, key) → acknowledged sends.
    acked: BTreeMap<(u64, i64), Vec<Acked>>,
    /// (key, value) → the op that sent it, its acknowledged offset and attempts.
    sent: BTreeMap<(i64, i64), SentBy>,
    /// (key, value) → offsets ok reads found it at, with the first op that read it there.
    read_at: BTreeMap<(i64, i64), BTreeMap<i64, OpRef>>,
    keys: BTreeSet<i64>,
    warnings: Vec<String>,
}

impl ProducerChecker {
    /// A checker for a producer history.
    pub fn new(_header: &Header) -> ProducerChecker {
        ProducerChecker {
            stats: Stats::default(),
            producer: ProducerStats::default(),
            latencies: Vec::new(),
            blocked: Vec::new(),
            acked: BTreeMap::new(),
            sent: BTreeMap::new(),
            read_at: BTreeMap::new(),
            keys: BTreeSet::new(),
            warnings: Vec::new(),
        }
    }

    fn push_op(&mut self, op: CompletedOp) {
        self.stats.client_ops += 1;
        let counts = self.stats.by_f.entry(op.f.to_string()).or_default();
        match op.outcome {
            Outcome::Ok => counts.ok += 1,
            Outcome::Fail => counts.fail += 1,
            Outcome::Info => counts.info += 1,
        }
        match op.f {
            Function::Produce => self.push_produce(&op),
            Function::Poll | Function::FinalPoll if op.outcome == Outcome::Ok => {
                self.push_reads(&op);
            }
            _ => {}
        }
    }

    fn push_produce(&mut self, op: &CompletedOp) {
        let OpValue::Json(json) = &op.value else {
            self.warnings
                .push(format!("op {}: a produce op without sends", op.index()));
            return;
        };
        let value = match ProduceValue::from_json(json) {
            Ok(value) => value,
            Err(error) => {
                self.warnings.push(format!(
                    "op {}: a produce value this checker cannot read: {error}",
                    op.index()
                ));
                return;
            }
        };
        let reference = OpRef::from_op(op);
        let process = op.process.0;
        for send in value.sends {
            self.producer.sends += 1;
            self.keys.insert(send.key);
            if let Some(blocked) = send.blocked_us {
                self.blocked.push(blocked);
                if blocked >= 1000 {
                    self.producer.blocked_over_1ms += 1;
                }
            }
            // A never-completed op carries its invoke's value: no outcome, may have happened.
            let outcome = send.outcome.unwrap_or(SendOutcome::Info);
            let offset = match outcome {
                SendOutcome::Ok => send.offset,
                _ => None,
            };
            self.sent.insert(
                (send.key, send.value),
                (reference.clone(), offset, send.attempts),
            );
            match outcome {
                SendOutcome::Ok => {
                    self.producer.acknowledged += 1;
                    self.stats.ok_sends += 1;
                    if send.attempts.is_some_and(|attempts| attempts > 1) {
                        self.producer.retried += 1;
                    }
                    if let Some(latency) = send.latency_us {
                        self.latencies.push(latency);
                    }
                    if let Some(offset) = send.offset {
                        self.acked
                            .entry((process, send.key))
                            .or_default()
                            .push(Acked {
                                seq: send.seq,
                                value: send.value,
                                offset,
                                attempts: send.attempts,
                                op: reference.clone(),
                            });
                    }
                }
                SendOutcome::Fail => self.producer.failed += 1,
                SendOutcome::Info => self.producer.indeterminate += 1,
            }
            if send
                .error
                .as_deref()
                .is_some_and(|error| error.contains("within max.block.ms"))
            {
                self.producer.buffer_exhausted += 1;
            }
        }
    }

    fn push_reads(&mut self, op: &CompletedOp) {
        let reference = OpRef::from_op(op);
        for micro in op.value.micro_ops() {
            let MicroOp::Poll { reads: Some(reads) } = micro else {
                continue;
            };
            for key_reads in reads {
                let key = key_reads.key.0;
                self.keys.insert(key);
                for record in &key_reads.records {
                    self.stats.ok_records_read += 1;
                    self.read_at
                        .entry((key, record.value.0))
                        .or_default()
                        .entry(record.offset.0)
                        .or_insert_with(|| reference.clone());
                }
            }
        }
    }

    fn read_at(&self, key: i64, value: i64, offset: i64) -> bool {
        self.read_at
            .get(&(key, value))
            .is_some_and(|offsets| offsets.contains_key(&offset))
    }

    fn reordered(&self, out: &mut Anomalies) {
        for ((process, key), sends) in &self.acked {
            let mut sends: Vec<&Acked> = sends.iter().collect();
            sends.sort_by_key(|send| send.seq);
            // The earlier-submitted send acknowledged at the highest offset so far.
            let mut highest: Option<&Acked> = None;
            for send in sends {
                if let Some(earlier) = highest
                    && send.offset < earlier.offset
                {
                    let confirmed = self.read_at(*key, earlier.value, earlier.offset)
                        && self.read_at(*key, send.value, send.offset);
                    let mut anomaly = Anomaly::new(
                        AnomalyKind::ReorderedSend,
                        Some(Key(*key)),
                        format!(
                            "process {process}'s producer submitted value {} (send #{}) before \
                             value {} (send #{}) to key {key}, but they were acknowledged at \
                             offsets {} and {}: the later send sits first in the log{}{}",
                            earlier.value,
                            earlier.seq,
                            send.value,
                            send.seq,
                            earlier.offset,
                            send.offset,
                            attempts_note(earlier.attempts, send.attempts),
                            if confirmed {
                                "; the final reads found both there"
                            } else {
                                ""
                            }
                        ),
                    );
                    anomaly.ops = dedup_ops(vec![earlier.op.clone(), send.op.clone()]);
                    anomaly.offsets = vec![Offset(earlier.offset), Offset(send.offset)];
                    anomaly.values = vec![Value(earlier.value), Value(send.value)];
                    out.push(anomaly);
                }
                if highest.is_none_or(|h| send.offset > h.offset) {
                    highest = Some(send);
                }
            }
        }
    }

    fn duplicates(&self, out: &mut Anomalies) {
        for ((key, value), offsets) in &self.read_at {
            if offsets.len() < 2 {
                continue;
            }
            let listed: Vec<String> = offsets.keys().map(ToString::to_string).collect();
            let sender = self.sent.get(&(*key, *value));
            let origin = match sender {
                Some((op, Some(acked), attempts)) => format!(
                    " (sent by process {} in op {}, acknowledged at offset {acked}{})",
                    op.process,
                    op.index,
                    attempts.map_or(String::new(), |a| format!(" after {a} attempt(s)"))
                ),
                Some((op, None, _)) => format!(
                    " (sent by process {} in op {}, not acknowledged)",
                    op.process, op.index
                ),
                None => " (no produce op sent it)".to_owned(),
            };
            let mut anomaly = Anomaly::new(
                AnomalyKind::Duplicate,
                Some(Key(*key)),
                format!(
                    "value {value} of key {key} was read at offsets {}{origin}: one send stored \
                     more than once",
                    listed.join(", ")
                ),
            );
            let mut ops: Vec<OpRef> = sender.map(|(op, _, _)| op.clone()).into_iter().collect();
            ops.extend(offsets.values().cloned());
            anomaly.ops = dedup_ops(ops);
            anomaly.offsets = offsets.keys().map(|offset| Offset(*offset)).collect();
            anomaly.values = vec![Value(*value)];
            out.push(anomaly);
        }
    }
}

fn attempts_note(earlier: Option<u32>, later: Option<u32>) -> String {
    match (earlier, later) {
        (Some(a), Some(b)) if a > 1 || b > 1 => {
            format!(" (attempts: {a} and {b}: a retried batch)")
        }
        _ => String::new(),
    }
}

fn dedup_ops(ops: Vec<OpRef>) -> Vec<OpRef> {
    let mut seen = BTreeSet::new();
    ops.into_iter().filter(|op| seen.insert(op.index)).collect()
}

impl Checker for ProducerChecker {
    fn push(&mut self, item: Paired) {
        match item {
            Paired::Client(op) => self.push_op(op),
            Paired::Nemesis(_) => self.stats.nemesis_events += 1,
        }
    }

    fn finish(mut self: Box<Self>) -> Findings {
        let mut anomalies = Anomalies::default();
        self.reordered(&mut anomalies);
        self.duplicates(&mut anomalies);
        self.producer.ack_latency = Percentiles::of(&mut self.latencies);
        self.producer.blocked = Percentiles::of(&mut self.blocked);
        self.stats.keys = self.keys.len() as u64;
        // No loss analysis here (the queue workload's job): the durability report stays empty
        // and the summary shows the producer's own block instead.
        Findings {
            anomalies,
            durability: DurabilityReport::empty(),
            linearizability: LinearizabilitySummary::default(),
            stats: self.stats,
            warnings: self.warnings,
            workload_stats: Some(WorkloadStats::Producer(self.producer)),
        }
    }
}
