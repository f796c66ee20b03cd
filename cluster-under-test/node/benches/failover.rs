//! Controller failover time: three combined `logjam-node` processes with Kafka's default
//! quorum timeouts (`controller.quorum.election.timeout.ms=1000`,
//! `controller.quorum.fetch.timeout.ms=2000`); each trial SIGKILLs the active controller and
//! measures until a survivor answers DescribeQuorum as leader of a newer epoch (polled every
//! 10 ms), then restarts the killed node and waits until it serves again, so every trial
//! after the first kills a leader while a voter restarted the trial before is back: the case
//! where a stale connection to the restarted voter lost Raft requests (issue 12 §3). Prints
//! every trial (marking those the restarted voter won), the median and the max. Two times per
//! trial: until the first new leader answers, and until the leader that then keeps its
//! leadership for 3 s was elected (a lost Raft request made a new leader resign, which only
//! the second shows); the summary is of the second.
//!
//! Run with `cargo bench -p logjam-node --bench failover`; `LOGJAM_FAILOVER_TRIALS` changes
//! the number of trials (default 20).

#[path = "../tests/common/mod.rs"]
mod common;

use std::time::{Duration, Instant};

use common::Cluster;

/// A new leader counts once it has kept its leadership this long (longer than the fetch
/// timeout after which a leader no follower fetches from resigns).
const STABLE_FOR: Duration = Duration::from_millis(3000);

fn main() {
    if std::env::args().any(|arg| arg == "--list" || arg == "--test") {
        return;
    }
    let trials: usize = std::env::var("LOGJAM_FAILOVER_TRIALS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(20);
    let root = tempfile::tempdir().unwrap();
    let mut cluster = Cluster::start(
        root.path(),
        3,
        "broker.heartbeat.interval.ms=500\nbroker.session.timeout.ms=3000",
    );
    let all = [0usize, 1, 2];
    let mut times_ms = Vec::with_capacity(trials);
    let mut restarted: Option<usize> = None;
    println!(
        "| trial | killed | first leader | first ms | settled leader | epoch | settled ms | \
         settled leader restarted the trial before |"
    );
    println!("|---|---|---|---|---|---|---|---|");
    for trial in 1..=trials {
        let (leader, epoch) = cluster.wait_for_leader(&all, 0, Duration::from_secs(30));
        let killed_at = Instant::now();
        cluster.nodes[leader].kill();
        let survivors: Vec<usize> = all.iter().copied().filter(|i| *i != leader).collect();
        let (first, first_epoch) =
            cluster.wait_for_leader(&survivors, epoch, Duration::from_secs(30));
        let first_ms = killed_at.elapsed().as_secs_f64() * 1000.0;
        let (mut new, mut new_epoch, mut elected) = (first, first_epoch, killed_at.elapsed());
        loop {
            std::thread::sleep(STABLE_FOR);
            if cluster.leader_among(&survivors) == Some((new, new_epoch)) {
                break;
            }
            (new, new_epoch) =
                cluster.wait_for_leader(&survivors, new_epoch, Duration::from_secs(30));
            elected = killed_at.elapsed();
        }
        let elapsed = elected.as_secs_f64() * 1000.0;
        times_ms.push(elapsed);
        println!(
            "| {trial} | {} | {} | {first_ms:.0} | {} | {new_epoch} | {elapsed:.0} | {} |",
            leader + 1,
            first + 1,
            new + 1,
            if restarted == Some(new) { "yes" } else { "no" }
        );
        cluster.nodes[leader].restart();
        restarted = Some(leader);
    }
    times_ms.sort_by(f64::total_cmp);
    let median = if times_ms.len() % 2 == 1 {
        times_ms[times_ms.len() / 2]
    } else {
        (times_ms[times_ms.len() / 2 - 1] + times_ms[times_ms.len() / 2]) / 2.0
    };
    println!(
        "\nfailover over {} trials: median {median:.0} ms, max {:.0} ms, min {:.0} ms",
        times_ms.len(),
        times_ms.last().copied().unwrap_or(0.0),
        times_ms.first().copied().unwrap_or(0.0)
    );
}
