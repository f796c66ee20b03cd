//! The `logjam` harness as a library: every module of the command line (`main.rs` is only the
//! sandbox and the dispatch), so the fuzz targets under `fuzz/` and the benchmarks can reach
//! the parsers of scenarios, timelines and nightly suites.

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
