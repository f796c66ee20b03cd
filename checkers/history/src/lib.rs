//! The logjam history format: schema v1 types, the streaming JSONL reader, the single writer,
//! and invoke/completion pairing. Pure (no tokio, no cluster crates) so any history can be
//! re-checked offline; the checkers live in `logjam-checkers`, the recorder in `harness/`.
//!
//! # Layout
//!
//! - [`ids`]: newtypes for op indices, processes, keys, offsets and values.
//! - [`header`]: line 1 of a history ([`Header`]), the schema version, the key → topic-partition map.
//! - [`op`]: one op line ([`Op`]), its type, function and typed value (queue micro-ops).
//! - [`reader`]: [`HistoryReader`], streaming, line-numbered errors, torn-tail tolerant.
//! - [`writer`]: [`HistoryWriter`], one line at a time, flushed.
//! - [`pairing`]: [`Pairer`] folds invoke + completion into [`CompletedOp`]; malformed
//!   histories become [`PairingError`]s (harness errors, never cluster anomalies).
//! - [`builder`]: [`HistoryBuilder`] for tests and fixtures.
//! - [`produce`]: the producer workload's `produce` value ([`ProduceValue`]): each send's
//!   order of submission within its producer and its own outcome.
//! - [`group`]: the `rebalance` value ([`Rebalance`]): a consumer-group assignment change a
//!   subscribed client saw.
//! - [`nemesis`]: the values nemesis ops carry: faults and undos ([`NemesisValue`]) and the
//!   leader watcher's `leader-change` ([`LeadershipChange`]).
//!
//! ```text
//!  harness ──Op──▶ HistoryWriter ──▶ history.jsonl ──▶ HistoryReader ──Op──▶ Pairer ──CompletedOp──▶ checkers
//!                                                          │                   └──NemesisEvent──▶ durability report
//!                                                          └─ TornTail (warning)
//! ```
//!
//! # Schema v1
//!
//! A history is JSONL: one JSON object per line, each line ending in `\n`.
//!
//! **Line 1, the header:**
//!
//! ```json
//! {"schema_version":1,"workload":"queue","seed":42,"start_time":"2026-01-01T00:00:00Z",
//!  "nodes":["n1","n2","n3"],"config":{"key_topic_partitions":{"0":{"topic":"t0","partition":0}}}}
//! ```
//!
//! | field | type | meaning |
//! |---|---|---|
//! | `schema_version` | integer | major version, `1`. Readers reject any other value with a clear message. |
//! | `workload` | string | `queue`, ... selects the checker and its policy |
//! | `seed` | integer | the seed that drove generators and faults |
//! | `start_time` | string | RFC 3339 wall-clock time of op time 0 |
//! | `nodes` | list of strings | node names, as nemesis targets name them |
//! | `config` | object | the full run configuration, free-form |
//!
//! `config` keys the checkers read, all optional: `key_topic_partitions`
//! (`{"<key>": {"topic": string, "partition": integer}}`), `ww_deps` (bool, default true),
//! `sub_via` (list of `"assign"`/`"subscribe"`).
//!
//! **Every other line is an op** (Jepsen's model):
//!
//! | field | type | meaning |
//! |---|---|---|
//! | `index` | integer | strictly increasing position in the history |
//! | `time` | integer | ns since the run started |
//! | `process` | integer or `"nemesis"` | the client process, or the fault injector |
//! | `type` | `"invoke"`, `"ok"`, `"fail"`, `"info"` | `fail`: certainly did not happen; `info`: may have |
//! | `f` | string | `send`, `poll`, `final-poll`, `txn`, `assign`, `subscribe`, `crash`, nemesis verbs, ... |
//! | `value` | JSON | argument (invoke) or result (completion), shape by `f` below |
//! | `error` | JSON, optional | the client's error classification for `fail`/`info` |
//!
//! Values by `f` (keys, values and offsets are integers; poll map keys are the integer key as
//! a string, as JSON requires):
//!
//! | `f` | invoke `value` | completion `value` |
//! |---|---|---|
//! | `send` | `[["send", k, v]]` | `[["send", k, [offset, v]]]`, offset `null` when unknown |
//! | `poll`, `final-poll` | `[["poll"]]` | `[["poll", {"<k>": [[offset, v], ...]}]]`, or with a third element `{"<k>": [from, to, lso, epoch]}` ([`Fetched`]) |
//! | `txn` | a mix of the micro-ops above | the same, filled in |
//! | `assign`, `subscribe` | `[k1, k2, ...]` | the same |
//! | `crash` | `null` | always `info` |
//! | `rebalance` | `{"generation", "member_id", "assigned": [k, ...], "revoked": [k, ...], "cause"}` ([`group`]) | the same, always `ok`: written right after the op during which the client saw the change |
//! | `produce` | `{"sends": [{"seq", "key", "value"}, ...]}` | the same, each send with `outcome`, `offset`, `attempts`, `error`, `blocked_us`, `latency_us` ([`produce`]) |
//! | nemesis (`partition`, `heal`, `kill`, `restart`, `pause`, `resume`, ...) | free-form, `{"targets": [...], ...}` | process `"nemesis"`, usually a single `info` line; an `invoke` + `info` pair is also accepted |
//!
//! `final-poll` marks the polls of the final phase (after healing and recovery); the
//! durability report uses them as "the final read". A completion whose `value` is `null`
//! inherits its invoke's value.
//!
//! **Read_committed fetches.** A read_committed consumer's poll may carry, as the optional
//! third element of its micro-op, what its fetches covered per key: `[from, to, lso, epoch]`
//! ([`Fetched`]): the position before and after the poll (every offset between was returned
//! or skipped as aborted data or a marker), the last stable offset the leader answered and
//! its leader epoch. A key fetched with nothing returned appears in the read map with `[]`.
//! Histories without it read as before (`fetch: None`); readers older than this element
//! refuse a poll that has it.
//!
//! **Compatibility.** Within v1 writers may only add optional fields; readers ignore fields
//! they do not know. A new major version means a new `schema_version`, and readers refuse it.
//! Fixtures for every version live in `checkers/history/tests/fixtures/`.
//!
//! **Torn tails.** The writer writes whole lines and flushes them as it goes (line by line,
//! or a burst of concurrent lines at once), so a harness killed mid-run leaves a readable
//! prefix and at worst one torn last line (no newline, does not parse). The reader
//! reports it as [`ReadError::TornTail`], a warning; any other bad line is an error naming its
//! 1-based line number.
//!
//! **Pairing.** Each client process has at most one open op. An invoke pairs with the next
//! completion of the same process into a [`CompletedOp`]; an invoke still open at the end is
//! treated as `info` (it may have happened). A completion without an invoke, or a second
//! invoke while one is open, is a [`PairingError`].

//! # Example
//!
//! ```
//! use logjam_history::{Header, HistoryBuilder, HistoryReader, HistoryWriter, pair};
//!
//! let mut b = HistoryBuilder::new("queue");
//! b.send_ok(0, 1, 10, 0);
//! b.poll_ok(1, &[(1, &[(0, 10)])]);
//! let (header, ops) = b.build();
//!
//! let mut file = Vec::new();
//! let mut writer = HistoryWriter::new(&mut file, &header)?;
//! for op in &ops {
//!     writer.write_op(op)?;
//! }
//!
//! let reader = HistoryReader::new(file.as_slice())?;
//! assert_eq!(reader.header().workload, "queue");
//! let read: Vec<_> = reader.collect::<Result<_, _>>()?;
//! let history = pair(read)?;
//! assert_eq!(history.ops.len(), 2);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

pub mod builder;
pub mod eos;
pub mod group;
pub mod header;
pub mod ids;
pub mod nemesis;
pub mod op;
pub mod pairing;
pub mod produce;
pub mod reader;
pub mod writer;

pub use builder::HistoryBuilder;
pub use eos::{
    EosEndValue, EosReadValue, EosRecords, GroupOffsetsValue, InputRecord, OutputRecord,
    PipelineValue,
};
pub use group::Rebalance;
pub use header::{Header, SCHEMA_VERSION, TopicPartition};
pub use ids::{Key, Offset, OpIndex, Process, ProcessId, Value};
pub use nemesis::{LEADER_CHANGE, LeadershipChange, NemesisValue};
pub use op::{Fetched, Function, KeyReads, MicroOp, Op, OpDecodeError, OpType, OpValue, Record};
pub use pairing::{
    CompletedOp, NemesisEvent, Outcome, Paired, PairedHistory, Pairer, PairingError, pair,
};
pub use produce::{ProduceValue, ProducedSend, SendOutcome};
pub use reader::{HistoryReader, ReadError};
pub use writer::{HistoryWriter, WriteError};
