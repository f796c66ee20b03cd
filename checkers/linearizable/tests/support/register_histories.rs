//! Seeded, pure generator of large register histories (tests and benches):
//! many sequential clients run against a simulated atomic register, each
//! operation taking effect at a random instant inside its interval, so the
//! history is linearizable by construction; optionally one read is then
//! made provably stale.
//!
//! Shared by `tests/budget.rs` and `benches/large.rs` (`#[path]` include),
//! so it has no dependency beyond the crate itself.

#![allow(dead_code)]

use logjam_linearizable::models::register::{RegisterOp, RegisterResult};
use logjam_linearizable::{ClientId, Operation, Outcome, Timestamp};

/// One register operation as the generator produces it.
pub type RegisterOperation = Operation<RegisterOp<u64>, RegisterResult<u64>>;

/// What to generate.
#[derive(Clone, Copy, Debug)]
pub struct Shape {
    /// Concurrent clients, each issuing one operation at a time.
    pub clients: u64,
    /// Operations in total.
    pub operations: usize,
    /// Per mille of writes whose client never learns the outcome (the write
    /// still takes effect; the client is replaced by a fresh id, as Jepsen
    /// does after `:info`).
    pub indeterminate_per_mille: u64,
    /// Make one read provably stale (see [`Generated::stale_read`]).
    pub stale_read: bool,
    /// The seed: same shape and seed, same history.
    pub seed: u64,
}

/// A generated history and what was done to it.
pub struct Generated {
    /// The operations, in call order.
    pub history: Vec<RegisterOperation>,
    /// The index of the read made stale, if any: it returns the value of a
    /// write that returned before another write was called, which itself
    /// returned before the read was called, and nothing else writes that
    /// value.
    pub stale_read: Option<usize>,
}

/// SplitMix64: tiny, seedable, good enough for shaping histories.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in `low..=high`.
    fn between(&mut self, low: u64, high: u64) -> u64 {
        low + self.next() % (high - low + 1)
    }
}

/// Generates a history of `shape`.
///
/// Every write writes a fresh value (1, 2, 3, ...), about half the
/// operations are writes. Durations are 1..=40 ticks with 0..=20 ticks
/// between a client's operations, so dozens of operations overlap.
pub fn generate(shape: &Shape) -> Generated {
    let mut rng = Rng(shape.seed);
    let mut next_free: Vec<u64> = (0..shape.clients).map(|_| rng.between(0, 20) * 4).collect();
    let mut client_ids: Vec<u64> = (0..shape.clients).collect();
    let mut next_client_id = shape.clients;
    let mut next_value = 1;
    // (linearization point, op index); points are distinct multiples of 4
    // plus a tie-breaker so the simulation order is total.
    let mut planned: Vec<(u64, usize)> = Vec::with_capacity(shape.operations);
    let mut history: Vec<RegisterOperation> = Vec::with_capacity(shape.operations);
    for index in 0..shape.operations {
        // The client that becomes free first issues the next operation.
        let client = (0..next_free.len())
            .min_by_key(|&client| (next_free[client], client))
            .expect("at least one client");
        let call = next_free[client];
        let return_at = call + rng.between(1, 40) * 4;
        let point = rng.between(call, return_at - 1) * 8 + (index as u64 % 8);
        next_free[client] = return_at + rng.between(1, 20) * 4;
        let is_write = rng.next().is_multiple_of(2);
        let (input, output) = if is_write {
            next_value += 1;
            (RegisterOp::Write(next_value - 1), RegisterResult::Written)
        } else {
            (RegisterOp::Read, RegisterResult::Read(None))
        };
        let indeterminate = is_write && rng.next() % 1000 < shape.indeterminate_per_mille;
        let client_id = client_ids[client];
        if indeterminate {
            client_ids[client] = next_client_id;
            next_client_id += 1;
        }
        history.push(Operation {
            client_id: ClientId(client_id),
            input,
            call: Timestamp(call),
            output: if indeterminate {
                Outcome::Unknown
            } else {
                Outcome::Returned(output)
            },
            return_at: if indeterminate {
                Timestamp::INFINITY
            } else {
                Timestamp(return_at)
            },
        });
        planned.push((point, index));
    }
    // Run the operations against one register in linearization order.
    planned.sort_unstable();
    let mut value = None;
    for &(_, index) in &planned {
        let operation = &mut history[index];
        match operation.input {
            RegisterOp::Write(written) => value = Some(written),
            RegisterOp::Read => {
                if let Outcome::Returned(result) = &mut operation.output {
                    *result = RegisterResult::Read(value);
                }
            }
        }
    }
    let stale_read = if shape.stale_read {
        make_stale(&mut history)
    } else {
        None
    };
    Generated {
        history,
        stale_read,
    }
}

/// Picks a completed read in the middle of the history and makes it return
/// the value of a write `w1` such that another completed write `w2` was
/// called after `w1` returned and returned before the read was called.
/// Values are unique, so no other write could have restored `w1`'s value:
/// the read is stale in every linearization.
fn make_stale(history: &mut [RegisterOperation]) -> Option<usize> {
    let completed_write = |operation: &RegisterOperation| {
        matches!(operation.input, RegisterOp::Write(_)) && !operation.is_optional()
    };
    for read in history.len() / 2..history.len() {
        let candidate = &history[read];
        if !matches!(candidate.input, RegisterOp::Read) || candidate.is_optional() {
            continue;
        }
        let read_call = candidate.call;
        // w2: the latest-returning completed write before the read's call.
        let Some(w2) = history[..read]
            .iter()
            .filter(|operation| completed_write(operation) && operation.return_at < read_call)
            .max_by_key(|operation| operation.return_at)
        else {
            continue;
        };
        let w2_call = w2.call;
        let Some(w1) = history[..read]
            .iter()
            .filter(|operation| completed_write(operation) && operation.return_at < w2_call)
            .max_by_key(|operation| operation.return_at)
        else {
            continue;
        };
        let RegisterOp::Write(stale) = w1.input else {
            unreachable!("w1 is a write")
        };
        history[read].output = Outcome::Returned(RegisterResult::Read(Some(stale)));
        return Some(read);
    }
    None
}
