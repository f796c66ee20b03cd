//! The schedule phase of a run: hands the workload's ops to client processes at the target
//! rate until the time limit. As Jepsen's `stagger`, the rate is global: op `k + 1` is due a
//! uniform random delay (mean `1 / rate`) after op `k`, whichever process is free to take it.
//!
//! - A process blocked in an op (a send to a dead or cut-off leader) does not hold up the
//!   schedule: the next op goes to another free process, and when none is free a fresh one
//!   (new id) is started, up to [`open_bound`] ops open at once. Only when that many are
//!   open does the schedule wait for one to finish; the waits are counted and reported.
//! - A process whose op ended `info` is retired at once (its clients are closed in the
//!   background, so a close that waits on a dead node holds nothing up) and the next op goes
//!   to a fresh process with a new id, as in Jepsen.
//! - Idle processes stay open while the schedule keeps using them (the most recently used is
//!   taken first), so at a high rate the pool settles at the size the rate needs instead of
//!   closing a process the moment `--concurrency` others are idle and opening a fresh one (new
//!   connections) for the next op. A process left unused for [`IDLE_CLOSE`] is closed, down
//!   to `--concurrency`, so a fault's burst of fresh processes does not outlive it.
//!
//! The schedule falls behind by at most one second (after waiting at the bound it resumes
//! from now rather than bursting to catch up).

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use logjam_history::ProcessId;
use logjam_workloads::recorder::{RecordError, Recorder};
use logjam_workloads::workload::{Client, Completion, Generator, Workload};
use rand::rngs::StdRng;
use rand::{RngExt, SeedableRng};
use tokio::task::JoinSet;
use tokio::time::Instant;

/// How many ops may be open at once: 100 per `--concurrency` process. With acks=all on RF 3
/// a killed, paused or cut-off replica holds every send until it is back or drops out of the
/// ISR, so during a fault about half the ops (the sends) block, each for up to
/// `delivery.timeout.ms` (10 s): at 100 ops/s about 500 open. The default bound (500) keeps
/// the schedule going through that; each open op is one process with its own connections.
pub(super) fn open_bound(concurrency: u32) -> usize {
    100 * concurrency.max(1) as usize
}

/// How long a process beyond the first `--concurrency` may sit idle before it is closed. A
/// few scheduling periods of the slowest op (a 100 ms poll) at any rate: long enough that a
/// process finishing its op is reused by the next ones rather than closed and replaced.
pub(super) const IDLE_CLOSE: Duration = Duration::from_secs(2);

/// What the schedule did, for run.json and the summary.
#[derive(Debug, Clone, Copy, Default, serde::Serialize)]
pub(super) struct ScheduleStats {
    /// Ops handed to processes.
    pub(super) invoked: u64,
    /// Process ids used (the first `--concurrency`, then every fresh one).
    pub(super) processes: u64,
    /// Processes retired after an `info` op (each replaced by a fresh one on demand).
    pub(super) retired: u64,
    /// Fresh processes started because every live one was busy.
    pub(super) started_when_busy: u64,
    /// Idle processes closed after [`IDLE_CLOSE`] unused (the pool shrinking after a burst).
    pub(super) closed_idle: u64,
    /// The most ops open at once.
    pub(super) peak_open: usize,
    /// The bound on open ops.
    pub(super) open_bound: usize,
    /// Times the schedule had to wait because the bound was reached.
    pub(super) waits_at_bound: u64,
    /// The first process id not used (the final phase's process).
    #[serde(skip)]
    pub(super) next_process: u64,
}

/// The number of ops open right now, for the progress line.
#[derive(Debug, Default, Clone)]
pub(super) struct OpenOps(Arc<AtomicUsize>);

impl OpenOps {
    /// Ops open now.
    pub(super) fn get(&self) -> usize {
        self.0.load(Ordering::Relaxed)
    }
}

type Finished<C> = Result<(C, Completion), RecordError>;

/// Runs `workload` at `rate` ops/s with `concurrency` processes (more while some are
/// blocked) until `deadline`, then waits for every open op to end.
///
/// # Errors
/// When the history cannot be written.
pub(super) async fn run<W: Workload>(
    workload: Arc<W>,
    recorder: Arc<Recorder>,
    seed: u64,
    rate: f64,
    concurrency: u32,
    deadline: Instant,
    open_ops: OpenOps,
) -> Result<ScheduleStats, RecordError> {
    let concurrency = concurrency.max(1) as usize;
    let bound = open_bound(concurrency as u32);
    let mut generator = workload.generator(seed);
    let mut rng = StdRng::seed_from_u64(seed ^ 0x7363_6865_6475_6c65);
    let mut stats = ScheduleStats {
        open_bound: bound,
        ..ScheduleStats::default()
    };
    let mut next_id = 0u64;
    let mut fresh = |stats: &mut ScheduleStats| {
        let client = workload.client(ProcessId(next_id), &recorder);
        next_id += 1;
        stats.processes += 1;
        client
    };
    // Idle processes with the time each became idle; the most recently used is taken first,
    // so the vector is in order of that time and the longest unused sit at its front.
    let start = Instant::now();
    let mut idle: Idle<W::Client> = (0..concurrency)
        .map(|_| (fresh(&mut stats), start))
        .collect();
    let mut running: JoinSet<Finished<W::Client>> = JoinSet::new();
    let mut closing = JoinSet::new();
    let mean = 1.0 / rate.max(0.01);
    let mut due = Instant::now();
    loop {
        due += Duration::from_secs_f64(rng.random_range(0.0..2.0 * mean));
        if due >= deadline {
            break;
        }
        // Take in what finished while waiting for the op's time.
        loop {
            tokio::select! {
                biased;
                Some(joined) = running.join_next(), if !running.is_empty() => {
                    settle(joined, &mut idle, &mut closing, &mut stats)?;
                }
                () = tokio::time::sleep_until(due) => break,
            }
        }
        close_unused(&mut idle, concurrency, &mut closing, &mut stats);
        let client = match idle.pop() {
            Some((client, _)) => client,
            None if running.len() < bound => {
                stats.started_when_busy += 1;
                fresh(&mut stats)
            }
            None => {
                stats.waits_at_bound += 1;
                while idle.is_empty() {
                    let Some(joined) = running.join_next().await else {
                        break;
                    };
                    settle(joined, &mut idle, &mut closing, &mut stats)?;
                }
                match idle.pop() {
                    Some((client, _)) => client,
                    None => fresh(&mut stats),
                }
            }
        };
        // Waiting at the bound: resume from now, at most a second behind.
        let now = Instant::now();
        if now > due + Duration::from_secs(1) {
            due = now;
        }
        if now >= deadline {
            idle.push((client, now));
            break;
        }
        let op = generator.next_op();
        stats.invoked += 1;
        let mut client = client;
        running.spawn(async move {
            let completion = client.invoke(op).await?;
            Ok((client, completion))
        });
        stats.peak_open = stats.peak_open.max(running.len());
        open_ops.0.store(running.len(), Ordering::Relaxed);
    }
    while let Some(joined) = running.join_next().await {
        settle(joined, &mut idle, &mut closing, &mut stats)?;
        open_ops.0.store(running.len(), Ordering::Relaxed);
    }
    for (client, _) in idle {
        closing.spawn(client.close());
    }
    // Closing flushes what a retired producer still holds; it ends within its delivery
    // timeout, but nothing waits for a node the final phase does not need.
    closing.detach_all();
    stats.next_process = next_id;
    Ok(stats)
}

/// Idle processes and when each became idle, oldest first.
type Idle<C> = Vec<(C, Instant)>;

/// Closes (in the background) the processes unused for [`IDLE_CLOSE`], keeping at least
/// `keep` idle, after reaping the closes that finished.
fn close_unused<C: Client>(
    idle: &mut Idle<C>,
    keep: usize,
    closing: &mut JoinSet<()>,
    stats: &mut ScheduleStats,
) {
    // A finished task keeps its allocation until it is joined: without this, every process
    // ever closed or retired (about 30 a second under faults) stayed in memory for the run.
    while closing.try_join_next().is_some() {}
    let Some(cutoff) = Instant::now().checked_sub(IDLE_CLOSE) else {
        return;
    };
    let unused = idle
        .iter()
        .take_while(|(_, since)| *since < cutoff)
        .count()
        .min(idle.len().saturating_sub(keep));
    for (client, _) in idle.drain(..unused) {
        stats.closed_idle += 1;
        closing.spawn(client.close());
    }
}

/// Takes a finished op's process back: idle again, or retired after `info` (closed in the
/// background).
fn settle<C: Client>(
    joined: Result<Finished<C>, tokio::task::JoinError>,
    idle: &mut Idle<C>,
    closing: &mut JoinSet<()>,
    stats: &mut ScheduleStats,
) -> Result<(), RecordError> {
    let (client, completion) = match joined {
        Ok(finished) => finished?,
        Err(error) => std::panic::resume_unwind(error.into_panic()),
    };
    if completion == Completion::Info {
        stats.retired += 1;
        closing.spawn(client.close());
    } else {
        idle.push((client, Instant::now()));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A process that does nothing; only its closing matters here.
    struct Quiet;

    impl Client for Quiet {
        type Op = ();
        fn process(&self) -> ProcessId {
            ProcessId(0)
        }
        async fn invoke(&mut self, (): ()) -> Result<Completion, RecordError> {
            Ok(Completion::Ok)
        }
        async fn close(self) {}
    }

    /// Finished closes are reaped at the next look at the idle processes, so a long run does
    /// not keep one task allocation per process it ever closed.
    #[tokio::test]
    async fn finished_closes_are_reaped() {
        let mut closing = JoinSet::new();
        let mut stats = ScheduleStats::default();
        let mut idle: Idle<Quiet> = (0..50).map(|_| (Quiet, Instant::now())).collect();
        for _ in 0..1000 {
            closing.spawn(Quiet.close());
        }
        // The closes run (and finish) while this task sleeps.
        tokio::time::sleep(Duration::from_millis(20)).await;
        assert_eq!(closing.len(), 1000, "finished, but not yet joined");
        close_unused(&mut idle, 50, &mut closing, &mut stats);
        assert_eq!(closing.len(), 0, "every finished close was joined");
        assert_eq!(idle.len(), 50, "none was idle long enough to close");
    }
}
