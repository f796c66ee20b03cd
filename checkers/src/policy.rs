//! Per-workload policy: which anomaly kinds fail a run. Checkers report everything; a
//! [`Policy`] then splits the kinds found into bad and allowed, each allowance with its reason
//! (Jepsen's `allowed-error-types`, made explicit and printable).

use std::collections::BTreeMap;

use logjam_history::Header;
use serde::Serialize;

use crate::anomaly::AnomalyKind;

/// Settings of the queue workload that change what Kafka promises.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct QueueOptions {
    /// ww edges were inferred (header `config.ww_deps`, default true). With them, G1c is
    /// expected: Kafka does not isolate writes, so `t0 <ww t1 <wr t0` happens routinely.
    pub ww_edges: bool,
    /// Consumers used `subscribe` (header `config.sub_via`, or any `subscribe` op): group
    /// rebalances legitimately move positions, so external poll skips and rewinds happen.
    pub subscribe: bool,
    /// Polls are snapshot reads that reach the end of the log. Kafka polls are not: a poll
    /// that stopped at v_i does not prove v_(i+1) absent, so rw edges prove nothing and
    /// G-single/G2 are allowed unless this is set.
    pub snapshot_reads: bool,
    /// Consumers read with `isolation.level=read_committed` (header `config.isolation_level`).
    /// Recorded for the read-committed checks; it does not make one poll atomic (see
    /// [`Policy::queue`] on `partial-read`).
    pub read_committed: bool,
}

impl Default for QueueOptions {
    fn default() -> Self {
        QueueOptions {
            ww_edges: true,
            subscribe: false,
            snapshot_reads: false,
            read_committed: false,
        }
    }
}

impl QueueOptions {
    /// Options from a history header's `config`.
    pub fn from_header(header: &Header) -> QueueOptions {
        let defaults = QueueOptions::default();
        let subscribe = header
            .config
            .get("sub_via")
            .and_then(|v| v.as_array())
            .is_some_and(|a| a.iter().any(|s| s.as_str() == Some("subscribe")));
        QueueOptions {
            ww_edges: header.config_bool("ww_deps").unwrap_or(defaults.ww_edges),
            subscribe,
            snapshot_reads: header
                .config_bool("snapshot_reads")
                .unwrap_or(defaults.snapshot_reads),
            read_committed: header
                .config
                .get("isolation_level")
                .and_then(|v| v.as_str())
                .map_or(defaults.read_committed, |v| v == "read_committed"),
        }
    }
}

/// Decides which anomaly kinds fail a run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Policy {
    /// The policy's name, e.g. `queue`.
    pub name: String,
    /// Allowed kinds, each with the reason it is allowed.
    pub allowed: BTreeMap<AnomalyKind, String>,
}

impl Policy {
    /// Nothing is allowed: every anomaly fails the run.
    pub fn strict() -> Policy {
        Policy {
            name: "strict".to_owned(),
            allowed: BTreeMap::new(),
        }
    }

    /// The producer workload's policy: nothing allowed. `reordered-send` and `duplicate` are
    /// what Kafka's producer does without idempotence when a batch is retried with several
    /// requests in flight; a run shows them so the user sees what their settings allow.
    pub fn producer() -> Policy {
        Policy {
            name: "producer".to_owned(),
            allowed: BTreeMap::new(),
        }
    }

    /// The queue workload's policy: Jepsen's Kafka allowances, plus rw cycles unless polls
    /// are snapshot reads.
    pub fn queue(options: QueueOptions) -> Policy {
        let mut allowed = BTreeMap::new();
        allowed.insert(
            AnomalyKind::G0,
            "Kafka does not isolate writes: transaction writes interleave, so ww cycles are normal"
                .to_owned(),
        );
        allowed.insert(
            AnomalyKind::IntSendSkip,
            "other producers' records land between one op's sends; normal in Kafka".to_owned(),
        );
        if options.ww_edges {
            allowed.insert(
                AnomalyKind::G1c,
                "with ww edges inferred, t0 <ww t1 <wr t0 follows from the lack of write isolation"
                    .to_owned(),
            );
        }
        // Not even read_committed makes one poll return a whole transaction: a poll stops at
        // `max.poll.records` or the fetch byte limits, partition by partition. What
        // read_committed promises (no aborted or open transaction's records) is checked by the
        // read-committed checker; a poll ending between one write's records proves nothing
        // unless polls are snapshot reads.
        if !options.snapshot_reads {
            allowed.insert(
                AnomalyKind::PartialRead,
                "polls are not atomic reads, even read_committed: a poll may end between one \
                 write's records (max.poll.records, fetch limits)"
                    .to_owned(),
            );
        }
        if options.subscribe {
            for kind in [AnomalyKind::PollSkip, AnomalyKind::NonmonotonicPoll] {
                allowed.insert(
                    kind,
                    "consumers used subscribe: rebalances move positions between polls".to_owned(),
                );
            }
        }
        if !options.snapshot_reads {
            for kind in [AnomalyKind::GSingle, AnomalyKind::G2] {
                allowed.insert(
                    kind,
                    "polls are not snapshot reads: stopping at v_i does not prove v_(i+1) absent"
                        .to_owned(),
                );
            }
        }
        Policy {
            name: "queue".to_owned(),
            allowed,
        }
    }

    /// True when `kind` does not fail the run.
    pub fn allows(&self, kind: AnomalyKind) -> bool {
        self.allowed.contains_key(&kind)
    }
}
