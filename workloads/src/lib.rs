//! Workloads: seeded generators of operations, and the client adapters that run them against
//! the cluster through `logjam-client` and record every invoke and completion into the
//! history. Workloads never see the cluster's processes or the lab: only the client.
//!
//! # Layout
//!
//! - [`workload`]: the interface every workload offers the harness (generator, client
//!   adapter, the ops it writes, its topics and final phase).
//! - [`recorder`]: the single writer of `history.jsonl`.
//! - [`queue`]: Jepsen's queue workload (send / poll / assign / crash, final reads).
//! - [`txn`]: the queue in Jepsen's transactional mode: transactions of sends and
//!   read_committed polls, committed or aborted on purpose.
//! - [`group`]: the queue in Jepsen's subscribe mode: members of one consumer group that
//!   commit after every poll, every rebalance they saw recorded (`rebalance`).
//! - [`producer`]: one batching producer per process, many sends in flight, each send's
//!   order of submission and outcome recorded (`produce`), final reads.
//! - [`eos`]: a consume-transform-produce pipeline in one consumer group (`pipeline` ops,
//!   offsets committed in the output's transaction), final reads of output, offsets, input.
//!
//! ```text
//!  QueueGenerator ──Invocation──▶ QueueClient ──logjam-client──▶ cluster
//!   (seeded, pure)                   │ invoke / ok / fail / info
//!                                    ▼
//!                                 Recorder ──▶ history.jsonl ──▶ logjam-checkers
//! ```

pub mod eos;
pub mod group;
pub mod handoff;
pub mod producer;
pub mod queue;
pub mod recorder;
pub mod txn;
pub mod workload;
