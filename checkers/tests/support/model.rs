//! A correct in-memory Kafka-like log, driven by seeded random clients, that records what it
//! does as a schema-v1 history. Histories it produces are valid by construction; the property
//! tests corrupt them, and the benchmark checks a million-op one. Shared by `tests/` and
//! `benches/` (included with `#[path]`), never part of the library.
//!
//! Model: per key, a log of `(offset, value)`; offsets usually consecutive, sometimes with a
//! gap (as transaction markers leave). Each client op takes effect atomically at its
//! completion: `ok` always, `fail` never, `info` with probability 1/2. Consumers keep a
//! position per key; ok polls return up to `poll_max` records from it and advance it; info and
//! fail polls return nothing and do not move (Jepsen's consumer rollback). Transactions read
//! the state before their own sends, as read-committed consumers do. After the main phase the
//! nemesis heals and one process assigns every key and final-polls each key from offset 0.

#![allow(dead_code)]

use logjam_history::builder::{poll_micro, send_micro};
use logjam_history::{
    Function, Header, Key, MicroOp, Op, OpIndex, OpType, OpValue, Process, ProcessId,
};

/// splitmix64: tiny, seeded, good enough for generators.
#[derive(Clone)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed)
    }
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    /// Uniform in `0..n` (n > 0).
    pub fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n
    }
    /// True with probability `numerator / denominator`.
    pub fn chance(&mut self, numerator: u64, denominator: u64) -> bool {
        self.below(denominator) < numerator
    }
}

/// Generator settings.
#[derive(Clone, Debug)]
pub struct ModelConfig {
    pub seed: u64,
    pub processes: u64,
    pub keys: u64,
    /// Op lines to emit in the main phase (invokes + completions + nemesis).
    pub op_lines: u64,
    /// Most records one poll returns per key.
    pub poll_max: usize,
    /// Out of 64: how many ops are transactions.
    pub txn_per_64: u64,
    /// Out of 64: how many completions are info / fail.
    pub info_per_64: u64,
    pub fail_per_64: u64,
    /// Emit nemesis events and a final heal.
    pub nemesis: bool,
    /// Leave an offset gap after one append in 8, as transaction markers would (which also
    /// takes the history out of the log linearizability check's reach).
    pub offset_gaps: bool,
}

impl ModelConfig {
    /// The benchmark's shape: ~10 keys, mixed sends and polls, no transactions.
    pub fn bench(op_lines: u64) -> ModelConfig {
        ModelConfig {
            seed: 42,
            processes: 10,
            keys: 10,
            op_lines,
            poll_max: 5,
            txn_per_64: 0,
            info_per_64: 2,
            fail_per_64: 1,
            nemesis: true,
            offset_gaps: false,
        }
    }
}

#[derive(Clone)]
enum Pending {
    Send { key: i64, value: i64 },
    Poll { keys: Vec<i64> },
    Txn { micro: Vec<(bool, i64, i64)> }, // (is_send, key, value)
    Assign { keys: Vec<i64> },
}

struct Client {
    assigned: Vec<i64>,
    /// Position (index into the model log) per key.
    position: Vec<usize>,
    pending: Option<(Pending, Function)>,
}

struct Model {
    offset_gaps: bool,
    logs: Vec<Vec<(i64, i64)>>,
    next_offset: Vec<i64>,
    next_value: Vec<i64>,
}

impl Model {
    fn append(&mut self, rng: &mut Rng, key: i64, value: i64) -> i64 {
        let k = key as usize;
        let offset = self.next_offset[k];
        self.logs[k].push((offset, value));
        // Sometimes leave a gap, as a transaction marker would.
        self.next_offset[k] += if self.offset_gaps && rng.chance(1, 8) {
            2
        } else {
            1
        };
        offset
    }
}

struct Emitter<'a, F: FnMut(Op)> {
    index: u64,
    sink: &'a mut F,
}

impl<F: FnMut(Op)> Emitter<'_, F> {
    fn emit(&mut self, process: Process, op_type: OpType, f: Function, value: OpValue) {
        let index = self.index;
        self.index += 1;
        (self.sink)(Op {
            index: OpIndex(index),
            time_ns: index * 1_000,
            process,
            op_type,
            f,
            value,
            error: match op_type {
                OpType::Info => Some(serde_json::json!("timeout")),
                OpType::Fail => Some(serde_json::json!("definite")),
                _ => None,
            },
        });
    }
}

/// The header of a model history.
pub fn header(config: &ModelConfig) -> Header {
    let mut header = Header::new("queue", config.seed, "2026-01-01T00:00:00Z");
    header.nodes = vec!["n1".into(), "n2".into(), "n3".into()];
    let map: serde_json::Map<String, serde_json::Value> = (0..config.keys)
        .map(|k| {
            (
                k.to_string(),
                serde_json::json!({"topic": format!("t{}", k / 2), "partition": k % 2}),
            )
        })
        .collect();
    header.config = serde_json::json!({ "key_topic_partitions": map, "sub_via": ["assign"] });
    header
}

/// Runs the model, handing every op line to `sink` in history order.
pub fn generate(config: &ModelConfig, sink: &mut impl FnMut(Op)) {
    let mut rng = Rng::new(config.seed);
    let keys = config.keys as usize;
    let mut model = Model {
        offset_gaps: config.offset_gaps,
        logs: vec![Vec::new(); keys],
        next_offset: vec![0; keys],
        next_value: vec![0; keys],
    };
    let mut clients: Vec<Client> = (0..config.processes)
        .map(|p| Client {
            assigned: vec![(p % config.keys) as i64],
            position: vec![0; keys],
            pending: None,
        })
        .collect();
    let mut out = Emitter { index: 0, sink };
    let mut partitioned = false;
    while out.index < config.op_lines {
        if config.nemesis && rng.chance(1, 512) {
            let f = if partitioned {
                Function::Heal
            } else {
                Function::Partition
            };
            partitioned = !partitioned;
            out.emit(
                Process::Nemesis,
                OpType::Info,
                f,
                OpValue::Json(serde_json::json!({"targets": ["n1"]})),
            );
            continue;
        }
        let p = rng.below(config.processes) as usize;
        let process = Process::Client(ProcessId(p as u64));
        let client = &mut clients[p];
        match client.pending.take() {
            None => {
                let (pending, f, value) = invoke(config, &mut rng, &mut model, client);
                out.emit(process, OpType::Invoke, f.clone(), value);
                client.pending = Some((pending, f));
            }
            Some((pending, f)) => {
                let roll = rng.below(64);
                let op_type = if roll < config.fail_per_64 {
                    OpType::Fail
                } else if roll < config.fail_per_64 + config.info_per_64 {
                    OpType::Info
                } else {
                    OpType::Ok
                };
                let value = complete(&mut rng, &mut model, client, &pending, op_type);
                out.emit(process, op_type, f, value);
            }
        }
    }
    // Finish every open op as info without effect, heal, then final polls.
    for (p, client) in clients.iter_mut().enumerate() {
        if let Some((pending, f)) = client.pending.take() {
            let value = invoke_value(&pending);
            out.emit(Process::Client(ProcessId(p as u64)), OpType::Info, f, value);
        }
    }
    if config.nemesis {
        out.emit(
            Process::Nemesis,
            OpType::Info,
            Function::Heal,
            OpValue::Json(serde_json::json!({"targets": ["n1", "n2", "n3"]})),
        );
    }
    let all: Vec<Key> = (0..keys as i64).map(Key).collect();
    let reader = Process::Client(ProcessId(0));
    out.emit(
        reader,
        OpType::Invoke,
        Function::Assign,
        OpValue::Keys(all.clone()),
    );
    out.emit(reader, OpType::Ok, Function::Assign, OpValue::Keys(all));
    for (k, log) in model.logs.iter().enumerate() {
        let records: Vec<(i64, i64)> = log.clone();
        let poll = OpValue::MicroOps(vec![MicroOp::Poll { reads: None }]);
        out.emit(reader, OpType::Invoke, Function::FinalPoll, poll);
        let value = OpValue::MicroOps(vec![poll_micro(&[(k as i64, &records)])]);
        out.emit(reader, OpType::Ok, Function::FinalPoll, value);
    }
}

fn invoke(
    config: &ModelConfig,
    rng: &mut Rng,
    model: &mut Model,
    client: &mut Client,
) -> (Pending, Function, OpValue) {
    let keys = config.keys;
    let fresh_value = |model: &mut Model, key: i64| {
        let v = model.next_value[key as usize];
        model.next_value[key as usize] += 1;
        v
    };
    let pending = if rng.chance(1, 128) {
        let count = 1 + rng.below(3.min(keys));
        let mut assigned: Vec<i64> = (0..count).map(|_| rng.below(keys) as i64).collect();
        assigned.sort_unstable();
        assigned.dedup();
        (Pending::Assign { keys: assigned }, Function::Assign)
    } else if rng.chance(config.txn_per_64, 64) {
        let n = 1 + rng.below(4);
        let micro = (0..n)
            .map(|_| {
                if rng.chance(1, 2) {
                    let key = rng.below(keys) as i64;
                    (true, key, fresh_value(model, key))
                } else {
                    (false, 0, 0)
                }
            })
            .collect();
        (Pending::Txn { micro }, Function::Txn)
    } else if rng.chance(1, 2) {
        let key = rng.below(keys) as i64;
        let value = fresh_value(model, key);
        (Pending::Send { key, value }, Function::Send)
    } else {
        (
            Pending::Poll {
                keys: client.assigned.clone(),
            },
            Function::Poll,
        )
    };
    let value = invoke_value(&pending.0);
    (pending.0, pending.1, value)
}

fn invoke_value(pending: &Pending) -> OpValue {
    match pending {
        Pending::Send { key, value } => OpValue::MicroOps(vec![send_micro(*key, *value, None)]),
        Pending::Poll { .. } => OpValue::MicroOps(vec![MicroOp::Poll { reads: None }]),
        Pending::Txn { micro } => OpValue::MicroOps(
            micro
                .iter()
                .map(|&(is_send, k, v)| {
                    if is_send {
                        send_micro(k, v, None)
                    } else {
                        MicroOp::Poll { reads: None }
                    }
                })
                .collect(),
        ),
        Pending::Assign { keys } => OpValue::Keys(keys.iter().map(|&k| Key(k)).collect()),
    }
}

/// Reads up to `max` records per assigned key from the client's positions.
fn poll_records(
    model: &Model,
    client: &mut Client,
    max: usize,
    advance: bool,
) -> Vec<(i64, Vec<(i64, i64)>)> {
    let mut result = Vec::new();
    for &key in &client.assigned {
        let log = &model.logs[key as usize];
        let start = client.position[key as usize].min(log.len());
        let end = (start + max).min(log.len());
        if end > start {
            result.push((key, log[start..end].to_vec()));
        }
        if advance {
            client.position[key as usize] = end;
        }
    }
    result
}

fn poll_value(reads: &[(i64, Vec<(i64, i64)>)]) -> MicroOp {
    let borrowed: Vec<(i64, &[(i64, i64)])> =
        reads.iter().map(|(k, r)| (*k, r.as_slice())).collect();
    poll_micro(&borrowed)
}

fn complete(
    rng: &mut Rng,
    model: &mut Model,
    client: &mut Client,
    pending: &Pending,
    op_type: OpType,
) -> OpValue {
    let takes_effect = match op_type {
        OpType::Ok => true,
        OpType::Info => rng.chance(1, 2),
        _ => false,
    };
    match pending {
        Pending::Send { key, value } => {
            let offset = takes_effect.then(|| model.append(rng, *key, *value));
            match op_type {
                OpType::Ok => OpValue::MicroOps(vec![send_micro(*key, *value, offset)]),
                _ => invoke_value(pending),
            }
        }
        Pending::Poll { .. } => {
            if op_type == OpType::Ok {
                let reads = poll_records(model, client, 5, true);
                OpValue::MicroOps(vec![poll_value(&reads)])
            } else {
                invoke_value(pending)
            }
        }
        Pending::Assign { keys } => {
            if op_type == OpType::Ok {
                client.assigned = keys.clone();
            }
            invoke_value(pending)
        }
        Pending::Txn { micro } => {
            if !takes_effect {
                return invoke_value(pending);
            }
            // Reads see the state before this txn's own sends (read committed).
            let ok = op_type == OpType::Ok;
            let mut reads = micro
                .iter()
                .filter(|m| !m.0)
                .map(|_| poll_records(model, client, 3, ok))
                .collect::<Vec<_>>()
                .into_iter();
            let mut filled = Vec::with_capacity(micro.len());
            for &(is_send, k, v) in micro {
                if is_send {
                    let offset = model.append(rng, k, v);
                    filled.push(send_micro(k, v, Some(offset)));
                } else {
                    filled.push(poll_value(&reads.next().unwrap_or_default()));
                }
            }
            if ok {
                OpValue::MicroOps(filled)
            } else {
                invoke_value(pending)
            }
        }
    }
}

/// Collects a whole model history in memory.
pub fn history(config: &ModelConfig) -> (Header, Vec<Op>) {
    let mut ops = Vec::new();
    generate(config, &mut |op| ops.push(op));
    (header(config), ops)
}
