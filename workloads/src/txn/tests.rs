//! Unit tests of the txn workload: its generator and its read_committed fetch ranges.

use super::*;

#[test]
fn generators_replay_values_are_unique_and_a_share_aborts() {
    let run = |seed| {
        let mut generator = TxnGenerator::new(seed, 0, 4, 10);
        (0..500)
            .map(|_| generator.next_invocation())
            .collect::<Vec<_>>()
    };
    assert_eq!(run(9), run(9));
    assert_ne!(run(9), run(10));
    let ops = run(3);
    let mut seen = std::collections::HashSet::new();
    let (mut txns, mut aborted) = (0, 0);
    for op in &ops {
        if let TxnInvocation::Txn { steps, abort } = op {
            txns += 1;
            aborted += usize::from(*abort);
            assert!((1..=MAX_TXN_LENGTH).contains(&steps.len()));
            for step in steps {
                if let Step::Send { key, value } = step {
                    assert!(seen.insert((*key, *value)), "{value:?} of {key:?} repeated");
                }
            }
        }
    }
    assert!(txns > 450, "about 95% are transactions: {txns}");
    assert!(
        (20..80).contains(&aborted),
        "about 10% aborted: {aborted} of {txns}"
    );
    let none = TxnGenerator::new(3, 0, 4, 0);
    let mut none = none;
    assert!((0..500).all(|_| !matches!(
        none.next_invocation(),
        TxnInvocation::Txn { abort: true, .. }
    )));
}

#[test]
fn abandoned_transactions_come_only_when_asked_and_leave_other_ops_alone() {
    let ops = |abandon| {
        let mut generator = TxnGenerator::new(5, 0, 4, 10).with_abandon_percent(abandon);
        (0..2000)
            .map(|_| generator.next_invocation())
            .collect::<Vec<_>>()
    };
    let plain = ops(0);
    assert_eq!(
        plain,
        {
            let mut generator = TxnGenerator::new(5, 0, 4, 10);
            (0..2000)
                .map(|_| generator.next_invocation())
                .collect::<Vec<_>>()
        },
        "a zero share draws nothing: the same seed replays the same ops"
    );
    assert!(
        !plain
            .iter()
            .any(|op| matches!(op, TxnInvocation::Abandon { .. }))
    );
    let abandoned = ops(10)
        .iter()
        .filter(|op| matches!(op, TxnInvocation::Abandon { .. }))
        .count();
    assert!(
        (100..260).contains(&abandoned),
        "about 10% of the 90% not aborted: {abandoned}"
    );
}

/// After a failed transaction every partition goes back: a read one to its position with
/// its leader epoch, one never read to no position (it used to stay wherever the failed
/// transaction's polls left it, and sought positions lost their epoch).
#[test]
fn rewind_restores_positions_with_epochs_and_unread_partitions() {
    use logjam_client::consumer::SeekTo;
    use logjam_client::ids::{LeaderEpoch, Offset};
    let mut consumer = Consumer::from_properties([("bootstrap.servers", "127.0.0.1:1")]).unwrap();
    let (read, unread) = (TopicPartition::new("t", 0), TopicPartition::new("t", 1));
    consumer.assign([read.clone(), unread.clone()]);
    let before = Position {
        offset: Offset(5),
        leader_epoch: Some(LeaderEpoch(3)),
    };
    consumer.seek_to_position(&read, before).unwrap();
    let saved = snapshot(&consumer);
    // The failed transaction's polls moved both partitions.
    consumer.seek(&read, SeekTo::Offset(Offset(9))).unwrap();
    consumer.seek(&unread, SeekTo::Offset(Offset(4))).unwrap();
    rewind(&mut consumer, saved);
    assert_eq!(consumer.position_with_epoch(&read), Some(before));
    assert_eq!(consumer.position(&unread), None);
}

#[test]
fn ops_are_tagged_as_jepsen_tags_them() {
    let send = Step::Send {
        key: Key(0),
        value: Value(1),
    };
    assert_eq!(function_of(&[send.clone(), send.clone()]), Function::Send);
    assert_eq!(function_of(&[Step::Poll]), Function::Poll);
    assert_eq!(function_of(&[Step::Poll, send]), Function::Txn);
}
