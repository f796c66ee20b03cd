//! Shared helpers of the integration tests (and, by `#[path]`, the
//! benches): the large-history generator.

pub mod register_histories;
