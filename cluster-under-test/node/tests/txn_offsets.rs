//! TxnOffsetCommit end to end on a `logjam-node` process, over the wire (requests built with
//! `kafka-protocol` alone): offsets committed in a transaction are invisible to OffsetFetch
//! until EndTxn(commit)'s marker reaches the group's `__consumer_offsets` partition (with
//! `require_stable`, `UNSTABLE_OFFSET_COMMIT` meanwhile), never visible after an abort, fenced
//! by KIP-447 against the live group, and rebuilt from the log by a coordinator restarted
//! between TxnOffsetCommit and EndTxn.

mod common;

use std::net::TcpStream;
use std::time::{Duration, Instant};

use bytes::Bytes;
use kafka_protocol::messages::join_group_request::JoinGroupRequestProtocol;
use kafka_protocol::messages::offset_fetch_request::OffsetFetchRequestTopic;
use kafka_protocol::messages::sync_group_request::SyncGroupRequestAssignment;
use kafka_protocol::messages::txn_offset_commit_request::{
    TxnOffsetCommitRequestPartition, TxnOffsetCommitRequestTopic,
};
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;

use common::{Cluster, connect, exchange, wait_until};

const DATA: &str = "txo-data";
const SETTINGS: &str = "broker.heartbeat.interval.ms=500\nbroker.session.timeout.ms=3000\n\
group.initial.rebalance.delay.ms=0\ntransaction.version=1";

fn text(value: &str) -> StrBytes {
    StrBytes::from_string(value.to_owned())
}

/// Retries `attempt` while it answers a retriable coordinator error (load in progress, not
/// available, not coordinator, concurrent transactions).
fn retried(mut attempt: impl FnMut() -> i16) -> i16 {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let code = attempt();
        if !matches!(code, 14..=16 | 51) || Instant::now() > deadline {
            return code;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

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
}

fn init(stream: &mut TcpStream, id: &str) -> (i64, i16) {
    let mut answer = (0, 0);
    let code = retried(|| {
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

fn add_offsets(stream: &mut TcpStream, id: &str, producer: (i64, i16), group: &str) -> i16 {
    retried(|| {
        let response: AddOffsetsToTxnResponse = exchange(
            stream,
            ApiKey::AddOffsetsToTxn,
            3,
            &AddOffsetsToTxnRequest::default()
                .with_transactional_id(TransactionalId(text(id)))
                .with_producer_id(ProducerId(producer.0))
                .with_producer_epoch(producer.1)
                .with_group_id(GroupId(text(group))),
        );
        response.error_code
    })
}

/// TxnOffsetCommit v3 of `offset` for DATA-0 as `member` (generation, member id).
fn txn_commit(
    stream: &mut TcpStream,
    id: &str,
    producer: (i64, i16),
    group: &str,
    member: (i32, &str),
    offset: i64,
) -> i16 {
    retried(|| {
        let response: TxnOffsetCommitResponse = exchange(
            stream,
            ApiKey::TxnOffsetCommit,
            3,
            &TxnOffsetCommitRequest::default()
                .with_transactional_id(TransactionalId(text(id)))
                .with_group_id(GroupId(text(group)))
                .with_producer_id(ProducerId(producer.0))
                .with_producer_epoch(producer.1)
                .with_generation_id(member.0)
                .with_member_id(text(member.1))
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

fn end(stream: &mut TcpStream, id: &str, producer: (i64, i16), commit: bool) -> i16 {
    retried(|| {
        let response: EndTxnResponse = exchange(
            stream,
            ApiKey::EndTxn,
            3,
            &EndTxnRequest::default()
                .with_transactional_id(TransactionalId(text(id)))
                .with_producer_id(ProducerId(producer.0))
                .with_producer_epoch(producer.1)
                .with_committed(commit),
        );
        response.error_code
    })
}

/// OffsetFetch v7 of DATA-0: (group error, partition error, offset).
fn fetched(stream: &mut TcpStream, group: &str, require_stable: bool) -> (i16, i16, i64) {
    let response: OffsetFetchResponse = exchange(
        stream,
        ApiKey::OffsetFetch,
        7,
        &OffsetFetchRequest::default()
            .with_group_id(GroupId(text(group)))
            .with_require_stable(require_stable)
            .with_topics(Some(vec![
                OffsetFetchRequestTopic::default()
                    .with_name(TopicName(text(DATA)))
                    .with_partition_indexes(vec![0]),
            ])),
    );
    let partition = response.topics.first().map(|t| &t.partitions[0]);
    (
        response.error_code,
        partition.map_or(0, |p| p.error_code),
        partition.map_or(-1, |p| p.committed_offset),
    )
}

/// The stable offset once no transaction holds one (and the coordinator is loaded).
fn stable(stream: &mut TcpStream, group: &str) -> i64 {
    let mut last = (0, 0, 0);
    let deadline = Instant::now() + Duration::from_secs(30);
    while Instant::now() < deadline {
        last = fetched(stream, group, true);
        if last.0 == 0 && last.1 == 0 {
            return last.2;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    panic!("no stable offset for {group}: {last:?}");
}

/// A one-member classic group, joined and synced: (member id, generation).
fn settled_member(stream: &mut TcpStream, group: &str) -> (String, i32) {
    let join = |stream: &mut TcpStream, member: &str| -> JoinGroupResponse {
        exchange(
            stream,
            ApiKey::JoinGroup,
            5,
            &JoinGroupRequest::default()
                .with_group_id(GroupId(text(group)))
                .with_session_timeout_ms(30_000)
                .with_rebalance_timeout_ms(30_000)
                .with_member_id(text(member))
                .with_protocol_type(text("consumer"))
                .with_protocols(vec![
                    JoinGroupRequestProtocol::default()
                        .with_name(text("range"))
                        .with_metadata(Bytes::from_static(b"sub")),
                ]),
        )
    };
    let first = join(stream, "");
    assert_eq!(first.error_code, 79, "{first:?}");
    let member = first.member_id.to_string();
    let joined = join(stream, &member);
    assert_eq!(joined.error_code, 0, "{joined:?}");
    let synced: SyncGroupResponse = exchange(
        stream,
        ApiKey::SyncGroup,
        3,
        &SyncGroupRequest::default()
            .with_group_id(GroupId(text(group)))
            .with_generation_id(joined.generation_id)
            .with_member_id(text(&member))
            .with_assignments(vec![
                SyncGroupRequestAssignment::default()
                    .with_member_id(text(&member))
                    .with_assignment(Bytes::from_static(b"all")),
            ]),
    );
    assert_eq!(synced.error_code, 0, "{synced:?}");
    (member, joined.generation_id)
}

#[test]
fn txn_offsets_commit_abort_fence_and_survive_a_restart() {
    let root = tempfile::tempdir().unwrap();
    let mut cluster = Cluster::start(root.path(), 1, SETTINGS);
    let address = cluster.nodes[0].address;
    assert_eq!(common::create_topics(address, &[(DATA, 1, 1)]), vec![0]);
    let mut stream = connect(address);
    let (id, group) = ("txo-1", "txo-group");
    assert_eq!(find(&mut stream, group, 0), 0);
    assert_eq!(find(&mut stream, id, 1), 0);
    let producer = init(&mut stream, id);

    // Committed: invisible until EndTxn(commit), UNSTABLE_OFFSET_COMMIT with require_stable.
    assert_eq!(add_offsets(&mut stream, id, producer, group), 0);
    assert_eq!(
        txn_commit(&mut stream, id, producer, group, (-1, ""), 42),
        0
    );
    assert_eq!(fetched(&mut stream, group, false), (0, 0, -1));
    assert_eq!(
        fetched(&mut stream, group, true),
        (0, 88, -1),
        "UNSTABLE_OFFSET_COMMIT while pending"
    );
    assert_eq!(end(&mut stream, id, producer, true), 0);
    assert_eq!(stable(&mut stream, group), 42);
    assert_eq!(fetched(&mut stream, group, false), (0, 0, 42));

    // Aborted: never visible.
    assert_eq!(add_offsets(&mut stream, id, producer, group), 0);
    assert_eq!(
        txn_commit(&mut stream, id, producer, group, (-1, ""), 99),
        0
    );
    assert_eq!(fetched(&mut stream, group, true).1, 88);
    assert_eq!(end(&mut stream, id, producer, false), 0);
    assert_eq!(stable(&mut stream, group), 42);

    // KIP-447: fenced against the live group.
    let live = "txo-live";
    let (member, generation) = settled_member(&mut stream, live);
    assert_eq!(add_offsets(&mut stream, id, producer, live), 0);
    let commit = |stream: &mut TcpStream, generation: i32, member: &str| {
        txn_commit(stream, id, producer, live, (generation, member), 7)
    };
    assert_eq!(
        commit(&mut stream, generation - 1, &member),
        22,
        "ILLEGAL_GENERATION"
    );
    assert_eq!(
        commit(&mut stream, generation, "stranger"),
        25,
        "UNKNOWN_MEMBER_ID"
    );
    assert_eq!(commit(&mut stream, generation, &member), 0);
    assert_eq!(end(&mut stream, id, producer, true), 0);
    assert_eq!(stable(&mut stream, live), 7);

    // A restart between TxnOffsetCommit and EndTxn: the pending offset is rebuilt from the
    // log (still unstable), and the commit marker then commits it.
    assert_eq!(add_offsets(&mut stream, id, producer, group), 0);
    assert_eq!(
        txn_commit(&mut stream, id, producer, group, (-1, ""), 77),
        0
    );
    cluster.nodes[0].restart();
    let mut stream = connect(address);
    wait_until(
        "the group coordinator reloads",
        Duration::from_secs(30),
        || fetched(&mut stream, group, false).0 == 0,
    );
    assert_eq!(fetched(&mut stream, group, false), (0, 0, 42));
    assert_eq!(fetched(&mut stream, group, true), (0, 88, -1));
    assert_eq!(end(&mut stream, id, producer, true), 0);
    assert_eq!(stable(&mut stream, group), 77);
}
