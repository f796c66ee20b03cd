//! The value of the producer workload's `produce` op ([`ProduceValue`]): the sends one
//! batching producer submitted in one op, each with its order of submission within the
//! producer and its own outcome. The workload writes it and the producer checker reads it, so
//! the schema lives here with the rest of the history format.
//!
//! One process is one producer (Kafka's `KafkaProducer`: accumulator, sender, up to
//! `max.in.flight.requests.per.connection` requests in flight). A `produce` op submits several
//! sends one after another without waiting for their acknowledgements, then waits for every
//! outcome. Invoke and completion carry the same list; the completion fills in each outcome:
//!
//! ```json
//! {"sends": [{"seq": 0, "key": 0, "value": 7}, {"seq": 1, "key": 1, "value": 8}]}
//! {"sends": [{"seq": 0, "key": 0, "value": 7, "outcome": "ok", "offset": 41, "attempts": 2,
//!             "blocked_us": 12, "latency_us": 3204551},
//!            {"seq": 1, "key": 1, "value": 8, "outcome": "info", "attempts": 3,
//!             "error": "delivery timed out ...", "blocked_us": 9, "latency_us": 10000870}]}
//! ```
//!
//! | field | meaning |
//! |---|---|
//! | `seq` | order of submission within the process's producer, from 0, never reused |
//! | `key`, `value` | the partition (key) and the value, unique per key within a run |
//! | `outcome` | completion only: `ok` (acknowledged), `fail` (certainly not written), `info` (may have been written) |
//! | `offset` | `ok` only: the acknowledged offset; absent when the broker gave none (acks=0) |
//! | `attempts` | how many produce requests carried the send's batch (> 1: it was retried) |
//! | `error` | `fail`/`info`: the client's error |
//! | `blocked_us` | how long `send()` itself blocked (metadata, buffer memory: `max.block.ms`) |
//! | `latency_us` | from `send()` being called to the outcome |
//!
//! The op is `ok` when every send was acknowledged, `info` when any outcome is `info` (the
//! process is then retired, as in Jepsen), `fail` otherwise. The per-send outcomes, not the
//! op's type, are what the checker reads.

use serde::{Deserialize, Serialize};

/// How one send ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SendOutcome {
    /// Acknowledged.
    Ok,
    /// Certainly not written.
    Fail,
    /// May have been written.
    Info,
}

/// One send of a `produce` op.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProducedSend {
    /// Order of submission within the producer, from 0.
    pub seq: u64,
    /// The key (partition of the workload's topic).
    pub key: i64,
    /// The value, unique per key within a run.
    pub value: i64,
    /// The outcome; absent in the invoke.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub outcome: Option<SendOutcome>,
    /// The acknowledged offset (`ok` only, absent when the broker gave none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub offset: Option<i64>,
    /// Produce requests that carried the send's batch.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attempts: Option<u32>,
    /// The client's error (`fail`/`info`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// How long `send()` blocked, µs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub blocked_us: Option<u64>,
    /// From `send()` to the outcome, µs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub latency_us: Option<u64>,
}

impl ProducedSend {
    /// A send as invoked: no outcome yet.
    pub fn invoked(seq: u64, key: i64, value: i64) -> ProducedSend {
        ProducedSend {
            seq,
            key,
            value,
            outcome: None,
            offset: None,
            attempts: None,
            error: None,
            blocked_us: None,
            latency_us: None,
        }
    }
}

/// The value of a `produce` op.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProduceValue {
    /// The sends, in order of submission.
    pub sends: Vec<ProducedSend>,
}

impl ProduceValue {
    /// Reads a `produce` op's JSON value.
    ///
    /// # Errors
    /// When the value does not have this shape.
    pub fn from_json(value: &serde_json::Value) -> Result<ProduceValue, serde_json::Error> {
        ProduceValue::deserialize(value)
    }

    /// The value as JSON, as the op carries it.
    pub fn to_json(&self) -> serde_json::Value {
        serde_json::to_value(self).expect("plain data serializes")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_and_leaves_absent_fields_out() {
        let mut send = ProducedSend::invoked(3, 1, 70);
        let invoke = ProduceValue {
            sends: vec![send.clone()],
        };
        assert_eq!(
            invoke.to_json(),
            serde_json::json!({"sends": [{"seq": 3, "key": 1, "value": 70}]})
        );
        send.outcome = Some(SendOutcome::Ok);
        send.offset = Some(12);
        send.attempts = Some(2);
        let done = ProduceValue { sends: vec![send] };
        assert_eq!(ProduceValue::from_json(&done.to_json()).unwrap(), done);
        assert!(ProduceValue::from_json(&serde_json::json!({"sends": [{"seq": 1}]})).is_err());
    }
}
