//! Unit tests of the queue workload: its seeded generator.

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
