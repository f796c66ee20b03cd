//! The eos workload's seeded op source (feeds of the input, pipeline transactions, the ones
//! that crash or turn zombie) and the text of an output record.

use logjam_history::InputRecord;
use rand::rngs::StdRng;
use rand::{RngExt, SeedableRng};

use crate::workload;

/// Input records written per `produce` op.
pub const FEED_SIZE: usize = 10;

/// One operation of an eos process.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EosInvocation {
    /// Write these `(partition, value)` input records with the idempotent producer.
    Feed(Vec<(i32, i64)>),
    /// One pipeline transaction.
    Pipeline,
    /// One pipeline transaction, then the process crashes as the commit returns (before a
    /// plain offset commit, in the common mistake's mode) and restarts: it leaves the group
    /// and rejoins with fresh clients.
    PipelineThenCrash,
    /// One pipeline transaction whose member pauses after its sends, past the session
    /// timeout, before it commits its offsets and the transaction (a zombie).
    PipelineZombie,
}

/// Pipeline ops that crash after their commit, in percent, by default.
pub const CRASH_PERCENT: u32 = 3;

/// The seeded op source of a run: a third of the ops feed the input, the rest process it.
#[derive(Debug)]
pub struct EosGenerator {
    rng: StdRng,
    partitions: u32,
    next_value: i64,
    crash_percent: u32,
    zombie_percent: u32,
}

impl EosGenerator {
    /// The generator of a run seeded with `seed`, over `partitions` input partitions, with
    /// `crash_percent`% of pipeline ops crashing their process as the commit returns.
    pub fn new(seed: u64, partitions: u32, crash_percent: u32) -> EosGenerator {
        EosGenerator {
            rng: StdRng::seed_from_u64(seed ^ 0x656f_7300),
            partitions: partitions.max(1),
            next_value: 0,
            crash_percent: crash_percent.min(100),
            zombie_percent: 0,
        }
    }

    /// The same generator with `percent`% of pipeline ops zombies (after the crashing ones).
    pub fn with_zombie_percent(mut self, percent: u32) -> EosGenerator {
        self.zombie_percent = percent.min(100);
        self
    }

    /// The next operation.
    pub fn next_invocation(&mut self) -> EosInvocation {
        if self.rng.random_range(0..3) == 0 {
            let values = (0..FEED_SIZE)
                .map(|_| {
                    self.next_value += 1;
                    let partition = self.rng.random_range(0..self.partitions) as i32;
                    (partition, self.next_value)
                })
                .collect();
            EosInvocation::Feed(values)
        } else {
            let roll = self.rng.random_range(0..100);
            if roll < self.crash_percent {
                EosInvocation::PipelineThenCrash
            } else if roll < self.crash_percent + self.zombie_percent {
                EosInvocation::PipelineZombie
            } else {
                EosInvocation::Pipeline
            }
        }
    }
}

impl workload::Generator for EosGenerator {
    type Op = EosInvocation;

    fn next_op(&mut self) -> EosInvocation {
        self.next_invocation()
    }
}

/// The value an output record carries: `input partition,input offset,input value,txn`.
pub fn output_value(input: &InputRecord, txn: u64) -> String {
    format!("{},{},{},{txn}", input.partition, input.offset, input.value)
}

/// Parses [`output_value`]'s text.
pub fn parse_output_value(text: &str) -> Option<(InputRecord, u64)> {
    let mut parts = text.split(',').map(str::trim);
    let partition = parts.next()?.parse().ok()?;
    let offset = parts.next()?.parse().ok()?;
    let value = parts.next()?.parse().ok()?;
    let txn = parts.next()?.parse().ok()?;
    Some((
        InputRecord {
            partition,
            offset,
            value,
        },
        txn,
    ))
}

/// Pipeline ops that are zombies, in percent, with `logjam.eos=zombie`: with one zombie at a
/// time, about one every few seconds at the harness's default rate.
pub const ZOMBIE_PERCENT: u32 = 2;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn output_values_round_trip_and_inputs_are_unique() {
        let input = InputRecord {
            partition: 2,
            offset: 41,
            value: 1041,
        };
        assert_eq!(
            parse_output_value(&output_value(&input, 7)),
            Some((input, 7))
        );
        assert_eq!(parse_output_value("1,2"), None);
        let mut generator = EosGenerator::new(5, 4, CRASH_PERCENT);
        let mut seen = std::collections::HashSet::new();
        let mut feeds = 0;
        for _ in 0..300 {
            if let EosInvocation::Feed(values) = generator.next_invocation() {
                feeds += 1;
                for (partition, value) in values {
                    assert!((0..4).contains(&partition));
                    assert!(seen.insert(value), "value {value} repeated");
                }
            }
        }
        assert!((60..140).contains(&feeds), "about a third feed: {feeds}");
    }

    #[test]
    fn zombies_are_a_seeded_share_of_pipeline_ops_only_when_asked() {
        let count = |mut generator: EosGenerator| {
            (0..3000)
                .filter(|_| generator.next_invocation() == EosInvocation::PipelineZombie)
                .count()
        };
        assert_eq!(count(EosGenerator::new(5, 4, CRASH_PERCENT)), 0);
        let zombies = count(EosGenerator::new(5, 4, CRASH_PERCENT).with_zombie_percent(2));
        assert!(
            (20..60).contains(&zombies),
            "2% of 2000 pipeline ops: {zombies}"
        );
    }
}
