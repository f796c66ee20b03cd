//! TxnOffsetCommit under Transactions V2 racing the previous transaction's markers: EndTxn
//! v5 answers at the bumped epoch before its COMMIT marker reaches the group's
//! `__consumer_offsets` partition, so the next transaction's TxnOffsetCommit (v5, no
//! AddOffsetsToTxn: the group coordinator's verification adds the partition) can arrive while
//! the previous transaction is still open there. Its offsets must not join that transaction
//! (committed by the old marker, though the next transaction aborts), nor open one the
//! transaction coordinator never verified: the group coordinator answers a retriable error
//! until the marker has landed, as Kafka does.

mod common;

use std::net::TcpStream;
use std::time::{Duration, Instant};

use kafka_protocol::messages::offset_fetch_request::OffsetFetchRequestTopic;
use kafka_protocol::messages::txn_offset_commit_request::{
    TxnOffsetCommitRequestPartition, TxnOffsetCommitRequestTopic,
};
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;

use common::{Cluster, connect, exchange};

const DATA: &str = "txo2-data";
const SETTINGS: &str = "group.initial.rebalance.delay.ms=0\ntransaction.version=2";

fn text(value: &str) -> StrBytes {
    StrBytes::from_string(value.to_owned())
}

/// Retries `attempt` while it answers a retriable coordinator error (load in progress, not
/// available, not coordinator, concurrent transactions): the final code and how many
/// retriable answers came first.
fn retried(mut attempt: impl FnMut() -> i16) -> (i16, u32) {
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut retries = 0;
    loop {
        let code = attempt();
        if !matches!(code, 14..=16 | 51) || Instant::now() > deadline {
            return (code, retries);
        }
        retries += 1;
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// FindCoordinator v3 for `key` (0 group, 1 transaction), retried while the internal
/// topic is created and loaded.
fn find(stream: &mut TcpStream, key: &str, key_type: i8) -> i16 {
    retried(|| {
        let response: FindCoordinatorResponse = exchange(
            stream,
            ApiKey::FindCoordinator,
            3,
            &FindCoordinatorRequest::default()
                .with_key_type(key_type)
                .with_key(text(key)),
        );
        response.error_code
    })
    .0
}

fn init(stream: &mut TcpStream, id: &str) -> (i64, i16) {
    let mut answer = (0, 0);
    let (code, _) = retried(|| {
        let response: InitProducerIdResponse = exchange(
            stream,
            ApiKey::InitProducerId,
            4,
            &InitProducerIdRequest::default()
                .with_transactional_id(Some(TransactionalId(text(id))))
                .with_transaction_timeout_ms(60_000)
                .with_producer_id(ProducerId(-1))
                .with_producer_epoch(-1),
        );
        answer = (response.producer_id.0, response.producer_epoch);
        response.error_code
    });
    assert_eq!(code, 0);
    answer
}

/// TxnOffsetCommit v5 of `offset` for DATA-0, retried: (code, retriable answers).
fn txn_commit(
    stream: &mut TcpStream,
    id: &str,
    producer: (i64, i16),
    group: &str,
    offset: i64,
) -> (i16, u32) {
    retried(|| {
        let response: TxnOffsetCommitResponse = exchange(
            stream,
            ApiKey::TxnOffsetCommit,
            5,
            &TxnOffsetCommitRequest::default()
                .with_transactional_id(TransactionalId(text(id)))
                .with_group_id(GroupId(text(group)))
                .with_producer_id(ProducerId(producer.0))
                .with_producer_epoch(producer.1)
                .with_generation_id(-1)
                .with_member_id(text(""))
                .with_topics(vec![
                    TxnOffsetCommitRequestTopic::default()
                        .with_name(TopicName(text(DATA)))
                        .with_partitions(vec![
                            TxnOffsetCommitRequestPartition::default()
                                .with_partition_index(0)
                                .with_committed_offset(offset)
                                .with_committed_leader_epoch(-1),
                        ]),
                ]),
        );
        response.topics[0].partitions[0].error_code
    })
}

/// EndTxn v5: the producer with the epoch it goes on with.
fn end(stream: &mut TcpStream, id: &str, producer: (i64, i16), commit: bool) -> (i64, i16) {
    let mut bumped = producer;
    let (code, _) = retried(|| {
        let response: EndTxnResponse = exchange(
            stream,
            ApiKey::EndTxn,
            5,
            &EndTxnRequest::default()
                .with_transactional_id(TransactionalId(text(id)))
                .with_producer_id(ProducerId(producer.0))
                .with_producer_epoch(producer.1)
                .with_committed(commit),
        );
        bumped = (response.producer_id.0, response.producer_epoch);
        response.error_code
    });
    assert_eq!(code, 0, "EndTxn(commit={commit}) of {producer:?}");
    bumped
}

/// The stable committed offset of DATA-0 once no transaction holds one.
fn stable(stream: &mut TcpStream, group: &str) -> i64 {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let response: OffsetFetchResponse = exchange(
            stream,
            ApiKey::OffsetFetch,
            7,
            &OffsetFetchRequest::default()
                .with_group_id(GroupId(text(group)))
                .with_require_stable(true)
                .with_topics(Some(vec![
                    OffsetFetchRequestTopic::default()
                        .with_name(TopicName(text(DATA)))
                        .with_partition_indexes(vec![0]),
                ])),
        );
        let partition = &response.topics[0].partitions[0];
        if response.error_code == 0 && partition.error_code == 0 {
            return partition.committed_offset;
        }
        assert!(Instant::now() < deadline, "no stable offset: {response:?}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Goal: the next transaction's offsets never join the previous one, whose marker has not
/// reached `__consumer_offsets` yet. Method: one node, TV2; rounds of a committed
/// transaction (offset 10r) followed at once (no wait for its marker) by a transaction
/// committing offset 10r+5 that is then aborted; after each round the stable offset must be
/// 10r. Joined to the committed transaction unverified, 10r+5 would be committed by its
/// marker while the transaction coordinator never learnt of the second transaction (its
/// EndTxn(abort) then fails, or the offset shows); the race must have been hit (retriable
/// answers to the second TxnOffsetCommit), or the test proves nothing.
#[test]
fn tv2_offsets_right_after_end_txn_wait_for_the_previous_marker() {
    let root = tempfile::tempdir().unwrap();
    let cluster = Cluster::start(root.path(), 1, SETTINGS);
    let address = cluster.nodes[0].address;
    assert_eq!(common::create_topics(address, &[(DATA, 1, 1)]), vec![0]);
    let mut stream = connect(address);
    let (id, group) = ("txo2-producer", "txo2-group");
    assert_eq!(find(&mut stream, group, 0), 0);
    assert_eq!(find(&mut stream, id, 1), 0);
    let mut producer = init(&mut stream, id);
    let mut retriable = 0;
    for round in 1..=25 {
        let committed = 10 * round;
        assert_eq!(txn_commit(&mut stream, id, producer, group, committed).0, 0);
        producer = end(&mut stream, id, producer, true);
        let (code, retries) = txn_commit(&mut stream, id, producer, group, committed + 5);
        assert_eq!(code, 0, "round {round}");
        retriable += retries;
        producer = end(&mut stream, id, producer, false);
        assert_eq!(
            stable(&mut stream, group),
            committed,
            "round {round}: the aborted transaction's offset is not committed"
        );
    }
    eprintln!("retriable answers to the racing TxnOffsetCommits: {retriable}");
    assert!(
        retriable > 0,
        "no TxnOffsetCommit raced its previous marker"
    );
}
