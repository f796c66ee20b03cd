//! Table tests of every transition of the transaction coordinator and of every error it
//! answers.

use super::*;
use kafka_protocol::ResponseError as E;

const NOW: i64 = 10_000;

fn rules() -> Rules {
    Rules {
        max_timeout_ms: 900_000,
        tv2: false,
        canaries: Canaries::NONE,
    }
}

fn parts(list: &[(&str, i32)]) -> BTreeSet<TopicPartition> {
    list.iter().map(|(t, p)| ((*t).to_owned(), *p)).collect()
}

fn meta(state: TxnState, epoch: i16) -> TransactionMetadata {
    TransactionMetadata {
        producer_id: 7,
        previous_producer_id: -1,
        next_producer_id: -1,
        producer_epoch: epoch,
        last_producer_epoch: -1,
        timeout_ms: 60_000,
        state,
        partitions: if matches!(
            state,
            TxnState::Ongoing | TxnState::PrepareCommit | TxnState::PrepareAbort
        ) {
            parts(&[("t", 0)])
        } else {
            BTreeSet::new()
        },
        start_ms: 1_000,
        last_update_ms: 1_000,
        tv2: false,
    }
}

fn init(timeout_ms: i32, expected: Option<(i64, i16)>, fresh: Option<i64>) -> InitRequest {
    InitRequest {
        timeout_ms,
        expected,
        fresh_producer_id: fresh,
        now_ms: NOW,
    }
}

#[test]
fn init_producer_id_table() {
    use TxnState::*;
    // (current, request, expected outcome: Ok((state written, producer id, epoch)) or error)
    type Want = Result<Option<(TxnState, i64, i16)>, E>;
    let table: Vec<(Option<TransactionMetadata>, InitRequest, Want)> = vec![
        // A new id gets a fresh producer id at epoch 0.
        (None, init(60_000, None, Some(99)), Ok(Some((Empty, 99, 0)))),
        // Timeouts outside 1..=max.
        (
            None,
            init(0, None, Some(99)),
            Err(E::InvalidTransactionTimeout),
        ),
        (
            None,
            init(900_001, None, Some(99)),
            Err(E::InvalidTransactionTimeout),
        ),
        (
            Some(meta(Empty, 3)),
            init(-1, None, None),
            Err(E::InvalidTransactionTimeout),
        ),
        // Bumps from Empty and Complete*.
        (
            Some(meta(Empty, 3)),
            init(1, None, None),
            Ok(Some((Empty, 7, 4))),
        ),
        (
            Some(meta(CompleteCommit, 3)),
            init(1, None, None),
            Ok(Some((Empty, 7, 4))),
        ),
        (
            Some(meta(CompleteAbort, 3)),
            init(1, Some((7, 3)), None),
            Ok(Some((Empty, 7, 4))),
        ),
        // Markers in flight.
        (
            Some(meta(PrepareCommit, 3)),
            init(1, None, None),
            Err(E::ConcurrentTransactions),
        ),
        (
            Some(meta(PrepareAbort, 3)),
            init(1, None, None),
            Err(E::ConcurrentTransactions),
        ),
        // A stranger's producer id and epoch.
        (
            Some(meta(Empty, 3)),
            init(1, Some((8, 3)), None),
            Err(E::ProducerFenced),
        ),
        (
            Some(meta(Empty, 3)),
            init(1, Some((7, 1)), None),
            Err(E::ProducerFenced),
        ),
    ];
    for (index, (current, request, want)) in table.into_iter().enumerate() {
        let got =
            init_producer_id(current.as_ref(), &request, &rules()).map(|outcome| match outcome {
                InitOutcome::Write(m) => Some((m.state, m.producer_id, m.producer_epoch)),
                other => panic!("row {index}: {other:?}"),
            });
        assert_eq!(got, want, "row {index}");
    }
}

#[test]
fn init_producer_id_asks_for_a_producer_id_when_new_or_exhausted() {
    assert_eq!(
        init_producer_id(None, &init(1, None, None), &rules()),
        Ok(InitOutcome::NeedProducerId)
    );
    let exhausted = meta(TxnState::CompleteCommit, i16::MAX - 1);
    assert_eq!(
        init_producer_id(Some(&exhausted), &init(1, None, None), &rules()),
        Ok(InitOutcome::NeedProducerId)
    );
    let Ok(InitOutcome::Write(next)) =
        init_producer_id(Some(&exhausted), &init(1, None, Some(50)), &rules())
    else {
        panic!("no rotation");
    };
    assert_eq!(
        (
            next.producer_id,
            next.previous_producer_id,
            next.producer_epoch
        ),
        (50, 7, 0)
    );
    // A retry of that rotation, with the old id, gets the same answer.
    assert_eq!(
        init_producer_id(
            Some(&next),
            &init(1, Some((7, i16::MAX - 1)), None),
            &rules()
        ),
        Ok(InitOutcome::Answer(50, 0))
    );
}

#[test]
fn a_retried_init_producer_id_is_answered_without_a_second_bump() {
    let mut bumped = meta(TxnState::Empty, 4);
    bumped.last_producer_epoch = 3;
    assert_eq!(
        init_producer_id(Some(&bumped), &init(1, Some((7, 3)), None), &rules()),
        Ok(InitOutcome::Answer(7, 4))
    );
}

#[test]
fn init_producer_id_fences_an_open_transaction_and_aborts_it() {
    let ongoing = meta(TxnState::Ongoing, 3);
    let Ok(InitOutcome::FenceAndAbort(next)) =
        init_producer_id(Some(&ongoing), &init(1, None, None), &rules())
    else {
        panic!("no fence");
    };
    assert_eq!(
        (next.state, next.producer_epoch),
        (TxnState::PrepareAbort, 4)
    );
    assert_eq!(
        next.partitions, ongoing.partitions,
        "the abort covers its partitions"
    );
    // Its twin: with the canary the abort keeps the zombie's epoch.
    let canary = Rules {
        canaries: Canaries::NONE.with(Canary::NoZombieFence),
        ..rules()
    };
    let Ok(InitOutcome::FenceAndAbort(next)) =
        init_producer_id(Some(&ongoing), &init(1, None, None), &canary)
    else {
        panic!("no abort");
    };
    assert_eq!(next.producer_epoch, 3);
    let Ok(InitOutcome::Write(next)) = init_producer_id(
        Some(&meta(TxnState::Empty, 3)),
        &init(1, None, None),
        &canary,
    ) else {
        panic!("no write");
    };
    assert_eq!(next.producer_epoch, 3);
}

#[test]
fn add_partitions_table() {
    use TxnState::*;
    let new = parts(&[("t", 1)]);
    type Row = (
        Option<TransactionMetadata>,
        i64,
        i16,
        Result<Option<TxnState>, E>,
    );
    let table: Vec<Row> = vec![
        (None, 7, 3, Err(E::InvalidProducerIdMapping)),
        (Some(meta(Empty, 3)), 8, 3, Err(E::InvalidProducerIdMapping)),
        (Some(meta(Empty, 3)), 7, 2, Err(E::ProducerFenced)),
        (
            Some(meta(PrepareCommit, 3)),
            7,
            3,
            Err(E::ConcurrentTransactions),
        ),
        (
            Some(meta(PrepareAbort, 3)),
            7,
            3,
            Err(E::ConcurrentTransactions),
        ),
        (Some(meta(Empty, 3)), 7, 3, Ok(Some(Ongoing))),
        (Some(meta(CompleteCommit, 3)), 7, 3, Ok(Some(Ongoing))),
        (Some(meta(CompleteAbort, 3)), 7, 3, Ok(Some(Ongoing))),
        (Some(meta(Ongoing, 3)), 7, 3, Ok(Some(Ongoing))),
        (Some(meta(Dead, 3)), 7, 3, Err(E::InvalidProducerIdMapping)),
    ];
    for (index, (current, pid, epoch, want)) in table.into_iter().enumerate() {
        let got = add_partitions(current.as_ref(), pid, epoch, &new, NOW)
            .map(|next| next.map(|m| m.state));
        assert_eq!(got, want, "row {index}");
    }
    // A new transaction starts now with only the new partitions; an open one grows.
    let started = add_partitions(Some(&meta(Empty, 3)), 7, 3, &new, NOW)
        .unwrap()
        .unwrap();
    assert_eq!((started.start_ms, &started.partitions), (NOW, &new));
    let grown = add_partitions(Some(&meta(Ongoing, 3)), 7, 3, &new, NOW)
        .unwrap()
        .unwrap();
    assert_eq!(grown.partitions, parts(&[("t", 0), ("t", 1)]));
    assert_eq!(grown.start_ms, 1_000);
    // Already added: nothing to write.
    assert_eq!(
        add_partitions(Some(&meta(Ongoing, 3)), 7, 3, &parts(&[("t", 0)]), NOW),
        Ok(None)
    );
}

#[test]
fn verify_only_reports_each_partition() {
    let ongoing = meta(TxnState::Ongoing, 3);
    let both = parts(&[("t", 0), ("t", 1)]);
    assert_eq!(
        verify_partitions(Some(&ongoing), 7, 3, &both),
        Ok(vec![
            (("t".to_owned(), 0), None),
            (("t".to_owned(), 1), Some(E::TransactionAbortable)),
        ])
    );
    assert_eq!(
        verify_partitions(Some(&ongoing), 7, 2, &both),
        Err(E::ProducerFenced)
    );
    assert_eq!(
        verify_partitions(None, 7, 3, &both),
        Err(E::InvalidProducerIdMapping)
    );
}

#[test]
fn end_txn_table() {
    use TxnState::*;
    type Want = Result<(TxnState, i16), E>;
    // (state, request epoch, commit, tv2 bump, want: the state written or kept, and the epoch
    // answered)
    let table: Vec<(TxnState, i16, bool, bool, Want)> = vec![
        (Ongoing, 3, true, false, Ok((PrepareCommit, 3))),
        (Ongoing, 3, false, false, Ok((PrepareAbort, 3))),
        (Ongoing, 2, true, false, Err(E::ProducerFenced)),
        (Ongoing, 4, true, false, Err(E::ProducerFenced)),
        (Empty, 3, true, false, Err(E::InvalidTxnState)),
        (Empty, 3, false, false, Err(E::InvalidTxnState)),
        (
            PrepareCommit,
            3,
            true,
            false,
            Err(E::ConcurrentTransactions),
        ),
        // Markers being written: the other outcome waits too (KAFKA-18464's order).
        (
            PrepareCommit,
            3,
            false,
            false,
            Err(E::ConcurrentTransactions),
        ),
        (
            PrepareAbort,
            3,
            false,
            false,
            Err(E::ConcurrentTransactions),
        ),
        (PrepareAbort, 3, true, false, Err(E::ConcurrentTransactions)),
        (PrepareAbort, 1, true, false, Err(E::ConcurrentTransactions)),
        // Retries of a completed EndTxn.
        (CompleteCommit, 3, true, false, Ok((CompleteCommit, 3))),
        (CompleteCommit, 3, false, false, Err(E::InvalidTxnState)),
        (CompleteAbort, 3, false, false, Ok((CompleteAbort, 3))),
        (CompleteAbort, 3, true, false, Err(E::InvalidTxnState)),
        // TV2: the prepare bumps the epoch; a retry comes one epoch back.
        (Ongoing, 3, true, true, Ok((PrepareCommit, 4))),
        (Ongoing, 2, true, true, Err(E::ProducerFenced)),
        (CompleteCommit, 2, true, true, Ok((CompleteCommit, 3))),
        (CompleteCommit, 2, false, true, Err(E::InvalidTxnState)),
        (PrepareCommit, 2, true, true, Err(E::ConcurrentTransactions)),
        (
            PrepareCommit,
            2,
            false,
            true,
            Err(E::ConcurrentTransactions),
        ),
        // TV2 at the current (bumped) epoch while markers are written: the client was
        // answered that epoch by the EndTxn that prepared, and its next EndTxn (an empty
        // abort after a failed send) waits for the markers instead of being fenced
        // (KAFKA-18464, Kafka 4.0: the pending transition is checked before isValidEpoch).
        (PrepareCommit, 3, true, true, Err(E::ConcurrentTransactions)),
        (
            PrepareCommit,
            3,
            false,
            true,
            Err(E::ConcurrentTransactions),
        ),
        (PrepareAbort, 3, false, true, Err(E::ConcurrentTransactions)),
        (Empty, 2, false, true, Err(E::ProducerFenced)),
        (CompleteCommit, 3, true, true, Err(E::InvalidTxnState)),
        // TV2 aborts with nothing open.
        (Empty, 3, false, true, Ok((PrepareAbort, 4))),
        (Empty, 3, true, true, Err(E::InvalidTxnState)),
    ];
    for (index, (state, epoch, commit, bump, want)) in table.into_iter().enumerate() {
        let current = meta(state, 3);
        let got = end_txn(Some(&current), 7, epoch, commit, bump, NOW, None).map(|o| match o {
            EndOutcome::Write(m) => (m.state, m.producer_epoch),
            EndOutcome::Answer(pid, e) => {
                assert_eq!(pid, 7);
                (state, e)
            }
            EndOutcome::NeedProducerId => panic!("row {index}: no rotation expected"),
        });
        assert_eq!(
            got, want,
            "row {index}: {state:?} epoch {epoch} commit {commit}"
        );
    }
    assert_eq!(
        end_txn(None, 7, 3, true, false, NOW, None),
        Err(E::InvalidProducerIdMapping)
    );
    assert_eq!(
        end_txn(Some(&meta(Ongoing, 3)), 8, 3, true, false, NOW, None),
        Err(E::InvalidProducerIdMapping)
    );
}

#[test]
fn markers_then_completion() {
    let prepared = meta(TxnState::PrepareCommit, 3);
    let work = marker_work(&prepared).unwrap();
    assert!(work.commit);
    assert_eq!(work.partitions, parts(&[("t", 0)]));
    let done = complete(Some(&prepared), &work, NOW).unwrap();
    assert_eq!(done.state, TxnState::CompleteCommit);
    assert!(done.partitions.is_empty());
    // Already completed, or moved on: nothing to write.
    assert_eq!(complete(Some(&done), &work, NOW), None);
    assert_eq!(marker_work(&meta(TxnState::Ongoing, 3)), None);
    let abort = marker_work(&meta(TxnState::PrepareAbort, 3)).unwrap();
    assert!(!abort.commit);
}

#[test]
fn an_open_transaction_expires_after_its_timeout_with_a_fence() {
    let ongoing = meta(TxnState::Ongoing, 3);
    assert_eq!(expire(&ongoing, 1_000 + 59_999), None);
    let expired = expire(&ongoing, 1_000 + 60_000).unwrap();
    assert_eq!(
        (expired.state, expired.producer_epoch),
        (TxnState::PrepareAbort, 4)
    );
    assert_eq!(expire(&meta(TxnState::Empty, 3), i64::MAX), None);
    assert_eq!(expire(&meta(TxnState::PrepareCommit, 3), i64::MAX), None);
}

/// TV2 EndTxn at an epoch whose bump would exhaust it: a fresh producer id is asked for, the
/// prepare names it, the markers keep the old id at the bumped epoch, the completion moves to
/// the new id at epoch 0, and a retry with the old id is answered the new one.
#[test]
fn tv2_end_txn_moves_to_a_new_producer_id_when_the_epoch_is_exhausted() {
    let last = i16::MAX - 1;
    let table = [
        // (state, commit, bump, fresh, outcome: state, epoch, next producer id)
        (TxnState::Ongoing, true, true, None, None),
        (
            TxnState::Ongoing,
            true,
            true,
            Some(40),
            Some((TxnState::PrepareCommit, i16::MAX, 40)),
        ),
        (
            TxnState::Ongoing,
            false,
            true,
            Some(40),
            Some((TxnState::PrepareAbort, i16::MAX, 40)),
        ),
        (TxnState::Empty, false, true, None, None),
        (
            TxnState::CompleteCommit,
            false,
            true,
            Some(41),
            Some((TxnState::PrepareAbort, i16::MAX, 41)),
        ),
        // TV1 never bumps at EndTxn, so never rotates.
        (
            TxnState::Ongoing,
            true,
            false,
            None,
            Some((TxnState::PrepareCommit, last, -1)),
        ),
    ];
    for (index, (state, commit, bump, fresh, want)) in table.into_iter().enumerate() {
        let current = meta(state, last);
        let got = end_txn(Some(&current), 7, last, commit, bump, NOW, fresh).unwrap();
        match (got, want) {
            (EndOutcome::NeedProducerId, None) => {}
            (EndOutcome::Write(next), Some((state, epoch, next_id))) => {
                assert_eq!(
                    (
                        next.state,
                        next.producer_id,
                        next.producer_epoch,
                        next.next_producer_id
                    ),
                    (state, 7, epoch, next_id),
                    "row {index}"
                );
            }
            (got, want) => panic!("row {index}: {got:?}, wanted {want:?}"),
        }
    }
    // Below the bound the bump needs no new id.
    assert!(matches!(
        end_txn(Some(&meta(TxnState::Ongoing, last - 1)), 7, last - 1, true, true, NOW, None),
        Ok(EndOutcome::Write(next)) if next.producer_epoch == last && next.next_producer_id == -1
    ));

    let Ok(EndOutcome::Write(prepared)) = end_txn(
        Some(&meta(TxnState::Ongoing, last)),
        7,
        last,
        true,
        true,
        NOW,
        Some(40),
    ) else {
        panic!("prepare");
    };
    let work = marker_work(&prepared).unwrap();
    assert_eq!((work.producer_id, work.producer_epoch), (7, i16::MAX));
    let done = complete(Some(&prepared), &work, NOW).unwrap();
    assert_eq!(
        (
            done.state,
            done.producer_id,
            done.producer_epoch,
            done.previous_producer_id,
            done.next_producer_id
        ),
        (TxnState::CompleteCommit, 40, 0, 7, -1)
    );
    // The new id survives the log.
    let replayed = TransactionMetadata::from_value(&prepared.to_value(), None).unwrap();
    assert_eq!(replayed.next_producer_id, 40);
    // A retry of the same EndTxn (old id, old epoch) gets the new id; the other outcome is
    // refused; the old id at any other epoch is unknown.
    assert_eq!(
        end_txn(Some(&done), 7, last, true, true, NOW, None),
        Ok(EndOutcome::Answer(40, 0))
    );
    assert_eq!(
        end_txn(Some(&done), 7, last, false, true, NOW, None),
        Err(E::InvalidTxnState)
    );
    assert_eq!(
        end_txn(Some(&done), 7, 3, true, true, NOW, None),
        Err(E::InvalidProducerIdMapping)
    );
    // The new id goes on at epoch 0.
    let mut open = done.clone();
    open.state = TxnState::Ongoing;
    assert!(matches!(
        end_txn(Some(&open), 40, 0, true, true, NOW, None),
        Ok(EndOutcome::Write(next)) if next.producer_epoch == 1 && next.next_producer_id == -1
    ));
}

/// Issue #13: a producer fenced by an expiry or by a new producer's InitProducerId must stay
/// fenced. Under TV2 the fence's abort bumps twice (Kafka's fence, then the TV2 abort), so
/// the zombie's EndTxn at its old epoch is not taken for a retry of the abort.
#[test]
fn a_fenced_producer_stays_fenced_table() {
    // (tv2 transaction, how it is fenced, the epoch the abort is written at, the zombie's
    // EndTxn(abort) with TV2 bump at its old epoch 3)
    type Fence = fn(&TransactionMetadata) -> TransactionMetadata;
    let by_expiry: Fence = |m| expire(m, i64::MAX).unwrap();
    let by_init: Fence = |m| match init_producer_id(Some(m), &init(1, None, None), &rules()) {
        Ok(InitOutcome::FenceAndAbort(next)) => next,
        other => panic!("no fence: {other:?}"),
    };
    type Row = (bool, &'static str, Fence, i16, bool, Result<(), E>);
    let table: Vec<Row> = vec![
        (true, "expire", by_expiry, 5, true, Err(E::ProducerFenced)),
        (true, "init", by_init, 5, true, Err(E::ProducerFenced)),
        (false, "expire", by_expiry, 4, false, Err(E::ProducerFenced)),
        (false, "init", by_init, 4, false, Err(E::ProducerFenced)),
    ];
    for (index, (tv2, how, fence, want_epoch, bump, want)) in table.into_iter().enumerate() {
        let ongoing = TransactionMetadata {
            tv2,
            ..meta(TxnState::Ongoing, 3)
        };
        let prepared = fence(&ongoing);
        assert_eq!(
            (prepared.state, prepared.producer_epoch),
            (TxnState::PrepareAbort, want_epoch),
            "row {index} ({how}): the abort's epoch"
        );
        let work = marker_work(&prepared).unwrap();
        let aborted = complete(Some(&prepared), &work, NOW).unwrap();
        assert_eq!(aborted.state, TxnState::CompleteAbort, "row {index}");
        // The state as the coordinator holds it: replayed from its log records. The zombie's
        // KIP-360 InitProducerId at its old epoch is no retry of the fence (Kafka keeps no
        // last epoch at a fence, and the TV2 abort's last epoch is the fence's).
        let mut shard = crate::coordinator::txn::shard::TxnShard::default();
        for state in [&ongoing, &prepared, &aborted] {
            crate::coordinator::shard::CoordinatorShard::replay(
                &mut shard,
                &crate::coordinator::txn::shard::record_of("z", state),
            )
            .unwrap();
        }
        let replayed = shard.get("z").unwrap();
        assert_ne!(replayed.last_producer_epoch, 3, "row {index} ({how})");
        assert_eq!(
            init_producer_id(Some(replayed), &init(60_000, Some((7, 3)), None), &rules()),
            Err(E::ProducerFenced),
            "row {index} ({how}): the zombie's InitProducerId at its old epoch"
        );
        let got = end_txn(Some(&aborted), 7, 3, false, bump, NOW, None).map(|_| ());
        assert_eq!(
            got, want,
            "row {index} ({how}): EndTxn(abort) at the old epoch"
        );
        // The new epoch works: TV2 aborts at it with nothing open, bumping once more.
        if bump {
            assert_eq!(
                end_txn(Some(&aborted), 7, want_epoch, false, true, NOW, None),
                Ok(EndOutcome::Write(TransactionMetadata {
                    producer_epoch: want_epoch + 1,
                    state: TxnState::PrepareAbort,
                    last_update_ms: NOW,
                    ..aborted.clone()
                })),
                "row {index}: an abort with nothing open at the current epoch bumps it"
            );
        }
    }
}

/// The hang a faulted txn run found: a TV2 commit answered at bumped epoch 5 whose markers
/// were delayed by a partition, the client's abort after a failed send of its next
/// transaction, and a late produce's implicit add at epoch 5 once the markers landed. The
/// abort must wait for the markers (not be fenced), then bump to 6 and fence the late add;
/// fenced instead, the client gave up and the add opened a transaction nobody would end.
#[test]
fn an_abort_during_a_commits_markers_waits_then_fences_a_late_add() {
    let prepared = TransactionMetadata {
        tv2: true,
        partitions: parts(&[("t", 1), ("t", 2)]),
        ..meta(TxnState::PrepareCommit, 5)
    };
    assert_eq!(
        end_txn(Some(&prepared), 7, 5, false, true, NOW, None),
        Err(E::ConcurrentTransactions),
        "the abort waits for the commit's markers"
    );
    let work = marker_work(&prepared).unwrap();
    let committed = complete(Some(&prepared), &work, NOW).unwrap();
    assert_eq!(
        (committed.state, committed.producer_epoch),
        (TxnState::CompleteCommit, 5)
    );
    let aborting = match end_txn(Some(&committed), 7, 5, false, true, NOW, None) {
        Ok(EndOutcome::Write(next)) => next,
        other => panic!("the empty abort is written: {other:?}"),
    };
    assert_eq!(
        (aborting.state, aborting.producer_epoch),
        (TxnState::PrepareAbort, 6)
    );
    let work = marker_work(&aborting).unwrap();
    let aborted = complete(Some(&aborting), &work, NOW).unwrap();
    assert_eq!(
        add_partitions(Some(&aborted), 7, 5, &parts(&[("t", 0)]), NOW),
        Err(E::ProducerFenced),
        "the late produce's add at the old epoch is fenced"
    );
}
