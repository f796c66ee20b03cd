//! Unit tests of the queue workload: its seeded generator and how a poll becomes reads.

use logjam_client::consumer::ConsumerRecord;

use super::reads::key_reads;
use super::*;

#[test]
fn generators_replay_from_the_seed_and_values_are_unique_per_key() {
    let run = |seed| {
        let mut generator = QueueGenerator::new(seed, 3, 4);
        (0..500)
            .map(|_| generator.next_invocation())
            .collect::<Vec<_>>()
    };
    assert_eq!(run(9), run(9));
    assert_ne!(run(9), run(10));
    let mut seen = std::collections::HashSet::new();
    for process in 0..8 {
        let mut generator = QueueGenerator::new(1, process, 2);
        for _ in 0..2000 {
            if let Invocation::Send { key, value } = generator.next_invocation() {
                assert!(
                    seen.insert((key, value)),
                    "value {value:?} of key {key:?} repeated"
                );
            }
        }
    }
    assert!(seen.len() > 4000, "about half the ops are sends");
}

/// Up to the default rate every crash drawn is kept, and the ops are exactly those of a
/// generator without the setting (runs and their seeds replay as before); at 10,000 ops/s
/// crashes come at 1% of 1% of ops, so about one a second, and the other ops keep their mix.
#[test]
fn crashes_thin_out_above_the_default_rate_only() {
    let draw = |keep: f64| {
        let mut generator = QueueGenerator::new(5, 0, 4).with_crash_keep(keep);
        (0..200_000)
            .map(|_| generator.next_invocation())
            .collect::<Vec<_>>()
    };
    let plain: Vec<Invocation> = {
        let mut generator = QueueGenerator::new(5, 0, 4);
        (0..200_000).map(|_| generator.next_invocation()).collect()
    };
    assert_eq!(crash_keep(50.0), 1.0);
    assert_eq!(crash_keep(CRASH_RATE_FULL), 1.0);
    assert_eq!(crash_keep(f64::NAN), 1.0);
    assert_eq!(draw(crash_keep(100.0)), plain);
    let crashes = |ops: &[Invocation]| ops.iter().filter(|op| **op == Invocation::Crash).count();
    let polls = |ops: &[Invocation]| ops.iter().filter(|op| **op == Invocation::Poll).count();
    assert!(
        (1_800..2_200).contains(&crashes(&plain)),
        "{}",
        crashes(&plain)
    );
    let thinned = draw(crash_keep(10_000.0));
    assert!(crashes(&thinned) < 60, "{} crashes", crashes(&thinned));
    let share = polls(&thinned) as f64 / thinned.len() as f64;
    assert!((0.44..0.47).contains(&share), "polls are {share}");
}

/// A record of partition `key` at `offset` whose value is `value`'s digits.
fn polled(key: i32, offset: i64, value: &str) -> ConsumerRecord {
    ConsumerRecord {
        partition: TopicPartition::new("queue", key),
        offset: Offset(offset),
        leader_epoch: logjam_client::ids::LeaderEpoch(0),
        timestamp_ms: 0,
        key: None,
        value: Some(value.to_owned().into()),
        headers: Vec::new(),
    }
}

#[test]
fn a_poll_becomes_reads_per_key_and_raises_each_target_to_its_highest_offset() {
    let targets = Targets::new(3);
    targets.observe(Key(2), 50);
    let records = vec![
        polled(1, 7, "70"),
        polled(0, 3, "30"),
        polled(1, 8, "not a number"),
        polled(0, 4, "40"),
        polled(2, 9, "90"),
    ];
    let reads = key_reads(records, &targets);
    let shape: Vec<(i64, Vec<(i64, i64)>)> = reads
        .iter()
        .map(|kr| {
            let records = kr.records.iter().map(|r| (r.offset.0, r.value.0)).collect();
            (kr.key.0, records)
        })
        .collect();
    assert_eq!(
        shape,
        vec![
            (0, vec![(3, 30), (4, 40)]),
            (1, vec![(7, 70), (8, i64::MIN)]),
            (2, vec![(9, 90)]),
        ]
    );
    // Key 2 keeps its higher target: a poll never lowers one.
    assert_eq!(
        targets.snapshot(),
        BTreeMap::from([(0, 4), (1, 8), (2, 50)])
    );
}
