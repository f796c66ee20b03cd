//! Benchmark: how many client ops per second the recorder writes into `history.jsonl`, and
//! the CPU it spends per 10,000 ops/s (issue 19's target: ≥ 50,000 ops/s, < 0.5 core per
//! 10,000 ops/s). Tasks on a two-worker tokio runtime (as the harness's) each act as a client
//! process: an invoke and a completion per op, half sends (acknowledged with an offset), half
//! polls returning `LOGJAM_BENCH_POLL_RECORDS` records (default 100, over 5 keys: at a high
//! rate every process reads every partition, so polls carry many records).
//!
//! Run with `cargo bench -p logjam-workloads --bench recording`; `LOGJAM_BENCH_OPS` sets the
//! client ops (default 400,000; `--test`, CI's smoke mode, uses 20,000).

use std::sync::Arc;
use std::time::Instant;

use logjam_history::{
    Function, Header, HistoryReader, Key, KeyReads, MicroOp, Offset, OpType, OpValue, Process,
    ProcessId, Record, Value,
};
use logjam_workloads::recorder::Recorder;

/// Client processes recording at once.
const PROCESSES: u64 = 50;
/// Keys a poll's records are spread over.
const KEYS: i64 = 5;

fn env_number(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|value| value.parse().ok())
        .unwrap_or(default)
}

/// User + system CPU seconds of this process, every thread (Linux `/proc/self/stat`).
fn cpu_seconds() -> f64 {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    // Fields after the command name (which may hold spaces) start after the last ')'.
    let fields: Vec<&str> = stat
        .rsplit_once(')')
        .map(|(_, rest)| rest.split_whitespace().collect())
        .unwrap_or_default();
    // utime and stime are fields 14 and 15 (1-based), so 11 and 12 after the ')'.
    let ticks = |index: usize| {
        fields
            .get(index)
            .and_then(|f| f.parse::<f64>().ok())
            .unwrap_or(0.0)
    };
    (ticks(11) + ticks(12)) / 100.0
}

fn poll_reads(process: u64, op: u64, records: u64) -> Vec<KeyReads> {
    let per_key = records.div_ceil(KEYS as u64).max(1);
    let mut left = records;
    let mut reads = Vec::new();
    for key in 0..KEYS {
        if left == 0 {
            break;
        }
        let count = per_key.min(left);
        left -= count;
        let first = (op * per_key) as i64;
        reads.push(KeyReads {
            key: Key(key),
            records: (0..count as i64)
                .map(|i| Record {
                    offset: Offset(first + i),
                    value: Value((process as i64) << 32 | (first + i)),
                })
                .collect(),
            fetch: None,
        });
    }
    reads
}

async fn client(recorder: Arc<Recorder>, process: u64, ops: u64, poll_records: u64) {
    let who = Process::Client(ProcessId(process));
    for op in 0..ops {
        if op % 2 == 0 {
            let value = Value((process as i64) << 32 | op as i64);
            let send = |offset| {
                OpValue::MicroOps(vec![MicroOp::Send {
                    key: Key((op as i64) % KEYS),
                    value,
                    offset,
                }])
            };
            recorder
                .record(who, OpType::Invoke, Function::Send, send(None), None)
                .expect("recorded");
            recorder
                .record(
                    who,
                    OpType::Ok,
                    Function::Send,
                    send(Some(Offset(op as i64))),
                    None,
                )
                .expect("recorded");
        } else {
            let invoke = OpValue::MicroOps(vec![MicroOp::Poll { reads: None }]);
            recorder
                .record(who, OpType::Invoke, Function::Poll, invoke, None)
                .expect("recorded");
            let reads = poll_reads(process, op, poll_records);
            let done = OpValue::MicroOps(vec![MicroOp::Poll { reads: Some(reads) }]);
            recorder
                .record(who, OpType::Ok, Function::Poll, done, None)
                .expect("recorded");
        }
        // Yield as a client waiting on the network would.
        tokio::task::yield_now().await;
    }
}

fn main() {
    let smoke = std::env::args().any(|a| a == "--test");
    let ops = if smoke {
        20_000
    } else {
        env_number("LOGJAM_BENCH_OPS", 400_000)
    };
    let poll_records = env_number("LOGJAM_BENCH_POLL_RECORDS", 100);
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("history.jsonl");
    let recorder = Arc::new(
        Recorder::create(&path, &Header::new("queue", 1, "2026-12-01T00:00:00Z"))
            .expect("history created"),
    );
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    let per_process = ops / PROCESSES;
    let cpu_before = cpu_seconds();
    let started = Instant::now();
    runtime.block_on(async {
        let mut tasks = tokio::task::JoinSet::new();
        for process in 0..PROCESSES {
            tasks.spawn(client(recorder.clone(), process, per_process, poll_records));
        }
        while let Some(done) = tasks.join_next().await {
            done.expect("client task");
        }
    });
    let seconds = started.elapsed().as_secs_f64();
    let cpu = cpu_seconds() - cpu_before;
    drop(recorder);
    let recorded = per_process * PROCESSES;
    let bytes = std::fs::metadata(&path).map(|m| m.len()).unwrap_or(0);
    // Read back: the history is whole and every op is there.
    let mut lines = 0u64;
    for op in HistoryReader::open(&path).expect("history opens") {
        op.expect("op reads back");
        lines += 1;
    }
    assert_eq!(lines, 2 * recorded, "every invoke and completion read back");
    let ops_per_second = recorded as f64 / seconds;
    let cores_per_10k = cpu / recorded as f64 * 10_000.0;
    println!(
        "recording: {recorded} client ops ({poll_records} records per poll) in {seconds:.2} s: \
         {ops_per_second:.0} ops/s; CPU {cpu:.2} s = {cores_per_10k:.3} cores per 10,000 ops/s; \
         history {:.1} MB ({:.0} bytes per op)",
        bytes as f64 / 1e6,
        bytes as f64 / recorded as f64
    );
}
