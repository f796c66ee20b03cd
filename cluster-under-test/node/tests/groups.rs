//! The group coordinator's offsets on a 3-node cluster of `logjam-node` processes, over the
//! wire (requests built with `kafka-protocol` alone): `__consumer_offsets` created on first
//! FindCoordinator with Kafka's settings, a group's coordinator being the leader of its
//! partition (`abs(javaHashCode(group)) % 50`), simple-group commits (generation -1, no
//! member) visible to OffsetFetch v1-v9 at the coordinator, Kafka's errors for bad input,
//! and committed offsets surviving the coordinator's death (the next leader loads them).

mod common;

use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use kafka_protocol::messages::offset_commit_request::{
    OffsetCommitRequestPartition, OffsetCommitRequestTopic,
};
use kafka_protocol::messages::offset_fetch_request::{
    OffsetFetchRequestGroup, OffsetFetchRequestTopic, OffsetFetchRequestTopics,
};
use kafka_protocol::messages::{
    ApiKey, GroupId, OffsetCommitRequest, OffsetCommitResponse, OffsetFetchRequest,
    OffsetFetchResponse, TopicName,
};

use common::txn::{find_coordinator, partition_for, text};
use common::{Cluster, connect, exchange, wait_until};

const OFFSETS_TOPIC: &str = "__consumer_offsets";
const DATA: &str = "group-data";

/// The coordinator of `group`.
fn find(via: SocketAddr, group: &str) -> i32 {
    find_coordinator(via, 0, group)
}

/// One OffsetCommit; the error code of each partition.
fn commit_once(
    stream: &mut TcpStream,
    version: i16,
    group: &str,
    generation: i32,
    member: &str,
    offsets: &[(&str, i32, i64)],
) -> Vec<i16> {
    let topics = offsets
        .iter()
        .map(|(topic, partition, offset)| {
            OffsetCommitRequestTopic::default()
                .with_name(TopicName(text(topic)))
                .with_partitions(vec![
                    OffsetCommitRequestPartition::default()
                        .with_partition_index(*partition)
                        .with_committed_offset(*offset)
                        .with_committed_leader_epoch(-1)
                        .with_committed_metadata(Some(text("meta"))),
                ])
        })
        .collect();
    let response: OffsetCommitResponse = exchange(
        stream,
        ApiKey::OffsetCommit,
        version,
        &OffsetCommitRequest::default()
            .with_group_id(GroupId(text(group)))
            .with_generation_id_or_member_epoch(generation)
            .with_member_id(text(member))
            .with_retention_time_ms(-1)
            .with_topics(topics),
    );
    response
        .topics
        .iter()
        .flat_map(|t| t.partitions.iter().map(|p| p.error_code))
        .collect()
}

/// OffsetCommit retried as clients do while the coordinator loads or cannot replicate yet.
fn commit(stream: &mut TcpStream, group: &str, offsets: &[(&str, i32, i64)]) -> Vec<i16> {
    commit_as(stream, 8, group, -1, "", offsets)
}

/// [`commit`] at `version` for `member` of `generation`.
fn commit_as(
    stream: &mut TcpStream,
    version: i16,
    group: &str,
    generation: i32,
    member: &str,
    offsets: &[(&str, i32, i64)],
) -> Vec<i16> {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let codes = commit_once(stream, version, group, generation, member, offsets);
        if !codes.iter().any(|c| matches!(c, 14..=16)) || Instant::now() > deadline {
            return codes;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// OffsetFetch v7 of `DATA` partitions 0..3: (group error, [(offset, metadata, error)]),
/// retried as clients do while the coordinator loads (`COORDINATOR_LOAD_IN_PROGRESS`, or
/// `NOT_COORDINATOR` before it has seen its leadership) for up to `patience`.
fn fetch_v7(stream: &mut TcpStream, group: &str) -> (i16, Vec<(i64, String, i16)>) {
    fetch_within(stream, group, Duration::from_secs(30))
}

fn fetch_within(
    stream: &mut TcpStream,
    group: &str,
    patience: Duration,
) -> (i16, Vec<(i64, String, i16)>) {
    let deadline = Instant::now() + patience;
    loop {
        let fetched = fetch_once(stream, group);
        if !matches!(fetched.0, 14..=16) || Instant::now() > deadline {
            return fetched;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn fetch_once(stream: &mut TcpStream, group: &str) -> (i16, Vec<(i64, String, i16)>) {
    let response: OffsetFetchResponse = exchange(
        stream,
        ApiKey::OffsetFetch,
        7,
        &OffsetFetchRequest::default()
            .with_group_id(GroupId(text(group)))
            .with_topics(Some(vec![
                OffsetFetchRequestTopic::default()
                    .with_name(TopicName(text(DATA)))
                    .with_partition_indexes(vec![0, 1, 2]),
            ]))
            .with_require_stable(true),
    );
    let partitions = response
        .topics
        .iter()
        .flat_map(|t| t.partitions.iter())
        .map(|p| {
            (
                p.committed_offset,
                p.metadata
                    .as_ref()
                    .map(|m| m.to_string())
                    .unwrap_or_default(),
                p.error_code,
            )
        })
        .collect();
    (response.error_code, partitions)
}

#[test]
fn offsets_committed_fetched_refused_and_kept_across_failover() {
    let root = tempfile::tempdir().unwrap();
    let mut cluster = Cluster::start(
        root.path(),
        3,
        "broker.heartbeat.interval.ms=500\nbroker.session.timeout.ms=3000",
    );
    let first = cluster.nodes[0].address;
    assert_eq!(common::create_topics(first, &[(DATA, 3, 3)]), vec![0]);
    let group = "logjam-group-1";
    let coordinator = find(first, group);

    // The topic, as Kafka creates it: 50 partitions, 3 replicas.
    let metadata = common::metadata(first).unwrap();
    let topic = metadata
        .topics
        .iter()
        .find(|t| t.name.as_ref().map(|n| n.as_str()) == Some(OFFSETS_TOPIC))
        .expect("__consumer_offsets exists");
    assert_eq!(topic.partitions.len(), 50);
    assert!(topic.partitions.iter().all(|p| p.replica_nodes.len() == 3));
    // Metadata marks it internal, as Kafka's `Topic.isInternal`; a data topic is not.
    assert!(topic.is_internal);
    let data = metadata
        .topics
        .iter()
        .find(|t| t.name.as_ref().map(|n| n.as_str()) == Some(DATA))
        .expect("the data topic exists");
    assert!(!data.is_internal);
    // Only the coordinators write it: a client's produce is INVALID_TOPIC_EXCEPTION (17) at
    // any node, as Kafka's "Cannot append to internal topic".
    // (A node that has not applied the topic's creation yet knows no such topic: 3.)
    for node in &cluster.nodes {
        let mut answer = Ok(0);
        wait_until(
            "every node knows the topic",
            Duration::from_secs(10),
            || {
                answer = common::partition::produce(node.address, OFFSETS_TOPIC, b"forged", -1);
                answer != Err(3)
            },
        );
        assert_eq!(answer, Err(17));
    }
    let index = partition_for(group);
    let leader = topic
        .partitions
        .iter()
        .find(|p| p.partition_index == index)
        .unwrap()
        .leader_id
        .0;
    assert_eq!(
        coordinator, leader,
        "the coordinator leads partition {index}"
    );

    let addresses: Vec<SocketAddr> = cluster.nodes.iter().map(|n| n.address).collect();
    let at = |node: i32| addresses[(node - 1) as usize];
    let mut other = connect(at(coordinator % 3 + 1));
    assert_eq!(
        commit_once(&mut other, 8, group, -1, "", &[(DATA, 0, 1)]),
        vec![16],
        "NOT_COORDINATOR elsewhere"
    );

    let mut stream = connect(at(coordinator));
    // Nothing committed yet: -1 and empty metadata, no error.
    let (code, nothing) = fetch_v7(&mut stream, group);
    assert_eq!(code, 0);
    assert!(
        nothing
            .iter()
            .all(|(o, m, e)| (*o, m.as_str(), *e) == (-1, "", 0)),
        "{nothing:?}"
    );

    // A simple group's commits (no generation, no member), visible to the next fetch.
    assert_eq!(
        commit(&mut stream, group, &[(DATA, 0, 10), (DATA, 1, 20)]),
        vec![0, 0]
    );
    assert_eq!(commit(&mut stream, group, &[(DATA, 0, 11)]), vec![0]);
    let (code, fetched) = fetch_v7(&mut stream, group);
    assert_eq!(code, 0);
    assert_eq!(
        fetched,
        vec![
            (11, "meta".into(), 0),
            (20, "meta".into(), 0),
            (-1, String::new(), 0)
        ]
    );

    // v1 (per-partition errors only) and v8 (batched groups, null topics = all) agree.
    let v1: OffsetFetchResponse = exchange(
        &mut stream,
        ApiKey::OffsetFetch,
        1,
        &OffsetFetchRequest::default()
            .with_group_id(GroupId(text(group)))
            .with_topics(Some(vec![
                OffsetFetchRequestTopic::default()
                    .with_name(TopicName(text(DATA)))
                    .with_partition_indexes(vec![1]),
            ])),
    );
    assert_eq!(v1.topics[0].partitions[0].committed_offset, 20);
    let v8: OffsetFetchResponse = exchange(
        &mut stream,
        ApiKey::OffsetFetch,
        8,
        &OffsetFetchRequest::default().with_groups(vec![
            OffsetFetchRequestGroup::default()
                .with_group_id(GroupId(text(group)))
                .with_topics(None),
            OffsetFetchRequestGroup::default()
                .with_group_id(GroupId(text("")))
                .with_topics(Some(vec![
                    OffsetFetchRequestTopics::default()
                        .with_name(TopicName(text(DATA)))
                        .with_partition_indexes(vec![0]),
                ])),
        ]),
    );
    let all: Vec<(i32, i64)> = v8.groups[0].topics[0]
        .partitions
        .iter()
        .map(|p| (p.partition_index, p.committed_offset))
        .collect();
    assert_eq!(all, vec![(0, 11), (1, 20)]);
    assert_eq!(
        v8.groups[1].error_code, 24,
        "INVALID_GROUP_ID for an empty id"
    );

    // Bad input: Kafka's errors, nothing committed.
    assert_eq!(
        commit_once(&mut stream, 8, group, 3, "who", &[(DATA, 0, 99)]),
        vec![25],
        "UNKNOWN_MEMBER_ID: a member of a group that has none"
    );
    let fresh = "logjam-group-fresh";
    let mut fresh_stream = connect(at(find(first, fresh)));
    assert_eq!(
        commit_as(&mut fresh_stream, 8, fresh, 3, "who", &[(DATA, 0, 99)]),
        vec![22],
        "ILLEGAL_GENERATION for an unknown group before v9"
    );
    assert_eq!(
        commit_as(&mut fresh_stream, 9, fresh, 3, "who", &[(DATA, 0, 99)]),
        vec![69],
        "GROUP_ID_NOT_FOUND from v9"
    );
    assert_eq!(
        commit_once(
            &mut stream,
            8,
            group,
            -1,
            "",
            &[("no-such-topic", 0, 5), (DATA, 2, 5)]
        ),
        vec![3, 0],
        "UNKNOWN_TOPIC_OR_PARTITION for that partition only"
    );
    assert_eq!(
        commit_once(&mut stream, 8, "", -1, "", &[(DATA, 0, 5)]),
        vec![24]
    );
    let (_, after) = fetch_v7(&mut stream, group);
    assert_eq!(
        after.iter().map(|p| p.0).collect::<Vec<_>>(),
        vec![11, 20, 5]
    );

    // The coordinator dies: the next leader of the partition loads the committed offsets.
    cluster.nodes[(coordinator - 1) as usize].kill();
    let survivor = cluster.nodes[(coordinator % 3) as usize].address;
    let mut last = None;
    wait_until(
        "a new coordinator serves the committed offsets",
        Duration::from_secs(60),
        || {
            let next = find(survivor, group);
            if next == coordinator {
                return false;
            }
            let mut stream = connect(at(next));
            let fetched = fetch_within(&mut stream, group, Duration::from_secs(5));
            let done = fetched.0 == 0;
            last = Some(fetched);
            done
        },
    );
    let (_, survived) = last.unwrap();
    assert_eq!(
        survived.iter().map(|p| p.0).collect::<Vec<_>>(),
        vec![11, 20, 5]
    );
}
