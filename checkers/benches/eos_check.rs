//! Benchmark: the exactly-once checker over a generated 1,000,000-record pipeline history
//! (8 partitions; the input fed by `produce` ops of 100 sends; 10 processes running
//! `pipeline` transactions of 10 inputs, 1% aborted and redone; nemesis events; the final
//! reads of `eos-out` and `eos-in` in batches of 1,000, `log-end`, `group-offsets`), checked
//! end to end from the JSONL file on one core. The check runs in a fresh child process so
//! its peak RSS (`VmHWM`) measures the checker alone. `cargo bench -p logjam-checkers --bench
//! eos_check`; `LOGJAM_BENCH_RECORDS` overrides the size.

use std::io::BufWriter;
use std::path::Path;
use std::process::{Command, ExitCode};
use std::time::Instant;

use logjam_history::{
    EosEndValue, EosReadValue, Function, GroupOffsetsValue, Header, HistoryWriter, InputRecord, Op,
    OpIndex, OpType, OpValue, OutputRecord, PipelineValue, Process, ProcessId, ProduceValue,
    ProducedSend, SendOutcome,
};

const CHILD_ENV: &str = "LOGJAM_BENCH_EOS_PATH";
const PARTITIONS: i64 = 8;
const PROCESSES: u64 = 10;
const BATCH: usize = 10;
const READ_BATCH: usize = 1000;

fn vm_hwm_bytes() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .map_or(0, |kb| kb * 1024)
}

fn cpu_seconds() -> f64 {
    let schedstat = std::fs::read_to_string("/proc/self/schedstat").unwrap_or_default();
    schedstat
        .split_whitespace()
        .next()
        .and_then(|ns| ns.parse::<u64>().ok())
        .map_or(0.0, |ns| ns as f64 / 1e9)
}

fn child(path: &Path) -> ExitCode {
    let start = Instant::now();
    let cpu_start = cpu_seconds();
    let report = logjam_checkers::check_file(path).expect("bench history is well formed");
    let cpu = cpu_seconds() - cpu_start;
    println!(
        "check_file: {cpu:.3} s CPU on one core ({:.3} s wall), peak RSS {:.1} MiB",
        start.elapsed().as_secs_f64(),
        vm_hwm_bytes() as f64 / (1 << 20) as f64
    );
    println!(
        "  {} op lines, {} client ops, {} records read; verdict {}: {}",
        report.stats.op_lines,
        report.stats.client_ops,
        report.stats.ok_records_read,
        report.verdict.as_str(),
        report.reason
    );
    if report.verdict == logjam_checkers::Verdict::Valid {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

/// Writes ops with increasing indexes and times.
struct Out<W: std::io::Write> {
    writer: HistoryWriter<W>,
    next: u64,
}

impl<W: std::io::Write> Out<W> {
    fn op(&mut self, process: Process, op_type: OpType, f: Function, value: serde_json::Value) {
        let op = Op {
            index: OpIndex(self.next),
            time_ns: self.next * 1_000,
            process,
            op_type,
            f,
            value: OpValue::Json(value),
            error: None,
        };
        self.next += 1;
        self.writer.append_op(&op).expect("write op");
    }

    fn client(
        &mut self,
        process: u64,
        f: Function,
        invoke: serde_json::Value,
        done: OpType,
        value: serde_json::Value,
    ) {
        let p = Process::Client(ProcessId(process));
        self.op(p, OpType::Invoke, f.clone(), invoke);
        self.op(p, done, f, value);
    }
}

fn generate(records: i64, path: &Path) {
    let file = std::fs::File::create(path).expect("create history");
    let header = Header::new("eos", 1, "2026-01-01T00:00:00Z".to_owned());
    let writer =
        HistoryWriter::new(BufWriter::with_capacity(1 << 20, file), &header).expect("header");
    let mut out = Out { writer, next: 0 };
    // The input: value v at partition v % 8, offset v / 8.
    let input = |v: i64| InputRecord {
        partition: (v % PARTITIONS) as i32,
        offset: v / PARTITIONS,
        value: v,
    };
    let mut seq = 0;
    for chunk in (0..records).collect::<Vec<_>>().chunks(100) {
        let sends: Vec<ProducedSend> = chunk
            .iter()
            .map(|v| {
                seq += 1;
                let mut s = ProducedSend::invoked(seq, v % PARTITIONS, *v);
                s.outcome = Some(SendOutcome::Ok);
                s.offset = Some(v / PARTITIONS);
                s
            })
            .collect();
        let value = ProduceValue { sends }.to_json();
        out.client(
            0,
            Function::Produce,
            serde_json::Value::Null,
            OpType::Ok,
            value,
        );
    }
    // Pipelines: per partition, batches of BATCH inputs; every 100th transaction aborts first.
    let mut txn = 0u64;
    let mut outputs: Vec<Vec<OutputRecord>> = vec![Vec::new(); PARTITIONS as usize];
    let per_partition = (records + PARTITIONS - 1) / PARTITIONS;
    for start in (0..per_partition).step_by(BATCH) {
        for p in 0..PARTITIONS {
            let inputs: Vec<InputRecord> = (start..(start + BATCH as i64).min(per_partition))
                .map(|o| o * PARTITIONS + p)
                .filter(|v| *v < records)
                .map(input)
                .collect();
            if inputs.is_empty() {
                continue;
            }
            let next = inputs.last().map_or(0, |i| i.offset + 1);
            for attempt in 0..2 {
                txn += 1;
                let aborted = attempt == 0 && txn.is_multiple_of(100);
                let value = PipelineValue {
                    txn,
                    producer: Some(format!("eos-{}", txn % PROCESSES)),
                    inputs: inputs.clone(),
                    offsets: [(p as i32, next)].into(),
                    offsets_in_txn: true,
                    rebalances: Vec::new(),
                    crashed_after_commit: false,
                    group_metadata: true,
                    paused_ms: None,
                };
                let done = if aborted { OpType::Fail } else { OpType::Ok };
                out.client(
                    txn % PROCESSES + 1,
                    Function::Pipeline,
                    serde_json::json!({ "txn": txn }),
                    done,
                    serde_json::to_value(value).expect("json"),
                );
                if !aborted {
                    let list = &mut outputs[p as usize];
                    for i in &inputs {
                        list.push(OutputRecord {
                            partition: p as i32,
                            offset: list.len() as i64,
                            input: *i,
                            txn,
                        });
                    }
                    break;
                }
            }
            if txn.is_multiple_of(5000) {
                out.op(
                    Process::Nemesis,
                    OpType::Info,
                    Function::Kill,
                    serde_json::json!({"targets": ["n1"]}),
                );
            }
        }
    }
    let reader = PROCESSES + 1;
    let mut ends = std::collections::BTreeMap::new();
    for (p, list) in outputs.iter().enumerate() {
        ends.insert(p as i32, list.len() as i64);
        for chunk in list.chunks(READ_BATCH) {
            out.client(
                reader,
                Function::EosRead,
                serde_json::Value::Null,
                OpType::Ok,
                EosReadValue::outputs(chunk),
            );
        }
    }
    let end = EosEndValue {
        topic: "eos-out".into(),
        ends: ends.clone(),
        high_watermarks: ends,
    };
    out.client(
        reader,
        Function::LogEnd,
        serde_json::Value::Null,
        OpType::Ok,
        serde_json::to_value(end).expect("json"),
    );
    let offsets = (0..PARTITIONS)
        .map(|p| (p as i32, (records - p + PARTITIONS - 1) / PARTITIONS))
        .collect();
    let group = GroupOffsetsValue {
        group: "eos".into(),
        offsets,
    };
    out.client(
        reader,
        Function::GroupOffsets,
        serde_json::Value::Null,
        OpType::Ok,
        serde_json::to_value(group).expect("json"),
    );
    let inputs: Vec<InputRecord> = (0..records).map(input).collect();
    for chunk in inputs.chunks(READ_BATCH) {
        out.client(
            reader,
            Function::EosRead,
            serde_json::Value::Null,
            OpType::Ok,
            EosReadValue::inputs(chunk),
        );
    }
    out.writer.flush().expect("flush");
}

fn main() -> ExitCode {
    if let Ok(path) = std::env::var(CHILD_ENV) {
        return child(Path::new(&path));
    }
    let smoke = std::env::args().any(|a| a == "--test");
    let records: i64 = std::env::var("LOGJAM_BENCH_RECORDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(if smoke { 20_000 } else { 1_000_000 });
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("history.jsonl");
    let start = Instant::now();
    generate(records, &path);
    let size = std::fs::metadata(&path).map(|m| m.len()).unwrap_or(0);
    println!(
        "generated a {records}-record pipeline history ({:.1} MiB) in {:.2} s",
        size as f64 / (1 << 20) as f64,
        start.elapsed().as_secs_f64()
    );
    let status = Command::new(std::env::current_exe().expect("current exe"))
        .env(CHILD_ENV, &path)
        .status()
        .expect("run check child");
    if status.success() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}
