//! Ports for test nodes on 127.0.0.1: below Linux's ephemeral range, and never the same port
//! for two tests running at once, whether they share a process (`cargo test`) or not
//! (`cargo nextest`, which `.ci/run` uses). Shared by the node's and the client's tests.

use std::sync::atomic::{AtomicU16, Ordering};

/// The ports tests walk: 20000-31999, below the ephemeral range (32768-60999).
const LOW: u16 = 20_000;
const SPAN: u16 = 12_000;
/// Under nextest, each test running at once has a block of its own.
const BLOCKS: u16 = 16;

/// A port that was free a moment ago, below Linux's ephemeral range.
///
/// A port the kernel hands out for `bind(0)` is an ephemeral one, and so is the local port of
/// every outgoing connection: between this check and the node's own bind, another node's
/// connection (a fetcher, a heartbeat, the quorum) could take it, and the node would fail to
/// start with "address in use". Ports below the range are never taken that way.
///
/// Two tests must not pick the same port between its check and the node's bind. The tests of
/// one process (`cargo test` runs a binary's tests as threads, and one binary at a time) walk
/// one counter from a per-process start. Under cargo-nextest every test is a process of its
/// own and several run at once, so per-process starts could overlap; nextest numbers the tests
/// running at once (`NEXTEST_TEST_GLOBAL_SLOT`: 0, 1, ... up to its thread count), and each
/// slot walks a block of its own (750 ports), which no other running test touches.
pub fn free_port() -> u16 {
    static NEXT: AtomicU16 = AtomicU16::new(0);
    let slot = std::env::var("NEXTEST_TEST_GLOBAL_SLOT")
        .ok()
        .and_then(|slot| slot.parse::<u16>().ok());
    let (base, span) = match slot {
        Some(slot) => (LOW + (slot % BLOCKS) * (SPAN / BLOCKS), SPAN / BLOCKS),
        None => (LOW, SPAN),
    };
    let start = (std::process::id() % u32::from(span)) as u16;
    for _ in 0..span {
        let step = NEXT.fetch_add(1, Ordering::Relaxed);
        let port = base + (start.wrapping_add(step) % span);
        if std::net::TcpListener::bind(("127.0.0.1", port)).is_ok() {
            return port;
        }
    }
    panic!("no free port in {base}..{}", base + span)
}
