//! The `logjam` harness as a library: every module of the command line (`main.rs` is only the
//! sandbox and the dispatch), so the fuzz targets under `fuzz/` and the benchmarks can reach
//! the parsers of scenarios, timelines and nightly suites.
//!
//! # Layout
//!
//! - The command line: [`cli`] (arguments, exit codes), one module per subcommand: [`run`]
//!   (`logjam run`, in phases), [`check`] and [`lincheck`] (`logjam check`), [`cluster`]
//!   (`logjam cluster up`), [`scenario`], [`matrix`], [`nightly`], [`member`] (one group
//!   member as its own process), [`report`] (the HTML pages).
//! - The lab: [`lab`] (node processes and their faults: kill, pause, power loss, corruption;
//!   `lab/sandbox.rs` the namespaces, `lab/net.rs` the network, `lab/nft.rs` the nftables
//!   rules of partitions and cuts, `lab/stopped.rs` a pause that has taken hold).
//! - Faults as decisions: [`nemesis`] (pure, seeded) and [`timeline`] (scripted); `run/`
//!   carries them out.
//! - What a run measured: [`metrics`] (one run's outcome, as the matrix and nightly tabulate
//!   it), [`rates`] (op rates per fault window), [`rebalances`] (group causes from the nodes'
//!   logs), [`progress`] (the live bar), [`error_text`] (how errors print).

pub mod check;
pub mod cli;
pub mod cluster;
pub mod error_text;
pub mod lab;
pub mod lincheck;
pub mod matrix;
pub mod member;
pub mod metrics;
pub mod nemesis;
pub mod nightly;
pub mod progress;
pub mod rates;
pub mod rebalances;
pub mod report;
pub mod run;
pub mod scenario;
pub mod timeline;
