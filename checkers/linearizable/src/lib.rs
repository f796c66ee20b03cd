//! Linearizability checking for logjam histories.
//!
//! Given a history of concurrent operations (each with a call time, a return
//! time and an output, or an unknown outcome) and a sequential [`Model`],
//! [`check`] decides whether some total order of the operations respects
//! real time and the model: [`Verdict::Valid`], [`Verdict::Invalid`] with a
//! [`Counterexample`], or [`Verdict::Unknown`] with an [`UnknownReason`]
//! (empty history, search budget exhausted), never silently valid.
//!
//! The search is Wing & Gong's, in Lowe's just-in-time form (the algorithm
//! of Porcupine), with a visited cache of (linearized set, state) pairs,
//! P-compositionality (Horn & Kroening: each part of a model's
//! [`Model::partition`] is checked alone) and a few reductions documented in
//! `search.rs`. Before searching, a cheap stale-read scan (`witness.rs`)
//! decides parts whose failure has a two- or three-operation witness, and
//! for registers whose writes set distinct values a zone order (`zones.rs`)
//! decides valid parts without a search. The
//! crate is pure and synchronous: no I/O except the corpus importers' file
//! reads (and `/proc/meminfo` for the default memory budget), no async, no
//! randomness; independent parts are searched on scoped threads.
//!
//! ```text
//!  history ──► checker::check ──► Model::partition ──► one search per part
//!                                                        │  state_table (hash-consed states)
//!                                                        │  bitset + cache (visited configs)
//!                                                        ▼
//!                       CheckResult { verdict, partitions, counterexample() }
//! ```
//!
//! # Layout
//!
//! * [`operation`]: the history shape ([`Operation`], [`Outcome`],
//!   [`Timestamp`]) and why intervals are closed.
//! * [`model`]: the [`Model`] trait, the sequential specification.
//! * [`models`]: register, CAS register, key-value (per key and as one map)
//!   and the Kafka partition log.
//! * `checker`: [`check`], partitioning and result assembly.
//! * `search`: the WGL/Lowe search for one part and its reductions;
//!   `prepare`: the tables two reductions consult.
//! * `state_table`, `bitset`, `cache`, `hash`: the search's data structures
//!   (interned states, the linearized set, the visited cache, hashing).
//! * [`verdict`]: [`Verdict`], [`CheckResult`], per-part reports.
//! * [`counterexample`]: the longest linearizable prefix and what blocked it.
//! * [`budget`]: step, time and memory limits; `memory`: how the search
//!   counts its own bytes.
//! * `witness`: cheap witness scans run before the search (stale reads).
//! * `zones`: the fast path for registers whose writes set distinct values:
//!   a linearization from Gibbons and Korach's zones, checked, in O(n log n).
//! * [`oracle`]: a brute-force checker for tiny histories (property tests).
//! * [`porcupine`]: importers for Porcupine's test corpus (etcd Jepsen logs
//!   and kv histories) and its `expected.tsv`.
//! * [`error`]: [`HistoryError`] for malformed histories.

#![deny(missing_docs)]

mod bitset;
pub mod budget;
mod cache;
mod checker;
pub mod counterexample;
pub mod error;
mod hash;
mod linearized;
mod memory;
pub mod model;
pub mod models;
pub mod operation;
pub mod oracle;
pub mod porcupine;
mod prepare;
mod search;
mod state_table;
pub mod verdict;
mod witness;
mod zones;

pub use budget::Budget;
pub use checker::{CheckOptions, check};
pub use counterexample::Counterexample;
pub use error::HistoryError;
pub use model::{Effect, Model};
pub use operation::{ClientId, OpIndex, Operation, Outcome, Timestamp};
pub use verdict::{CheckResult, PartitionOutcome, PartitionReport, UnknownReason, Verdict};
