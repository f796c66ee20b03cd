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
