//! A classic JoinGroup on the id of an empty KIP-848 consumer group, over the wire: the
//! consumer group is deleted (its offsets kept) and the id is a classic group's alone, so
//! its members commit offsets, ListGroups shows it as classic and ConsumerGroupDescribe no
//! longer finds a consumer group (Kafka's `maybeDeleteEmptyConsumerGroup`).

mod common;

use std::net::TcpStream;

use kafka_protocol::messages::consumer_group_heartbeat_request::TopicPartitions;
use kafka_protocol::messages::join_group_request::JoinGroupRequestProtocol;
use kafka_protocol::messages::offset_commit_request::{
    OffsetCommitRequestPartition, OffsetCommitRequestTopic,
};
use kafka_protocol::messages::offset_fetch_request::{
    OffsetFetchRequestGroup, OffsetFetchRequestTopics,
};
use kafka_protocol::messages::sync_group_request::SyncGroupRequestAssignment;
use kafka_protocol::messages::{
    ApiKey, ConsumerGroupDescribeRequest, ConsumerGroupDescribeResponse,
    ConsumerGroupHeartbeatRequest, ConsumerGroupHeartbeatResponse, FindCoordinatorRequest,
    FindCoordinatorResponse, GroupId, JoinGroupRequest, JoinGroupResponse, ListGroupsRequest,
    ListGroupsResponse, OffsetCommitRequest, OffsetCommitResponse, OffsetFetchRequest,
    OffsetFetchResponse, SyncGroupRequest, SyncGroupResponse, TopicName,
};
use kafka_protocol::protocol::StrBytes;

use common::{NodeProcess, connect, exchange};

const DATA: &str = "cj-data";
const GROUP: &str = "switching-group";

const SETTINGS: &str = "offsets.topic.num.partitions=1\noffsets.topic.replication.factor=1\n\
    group.initial.rebalance.delay.ms=0\n\
    group.consumer.min.session.timeout.ms=1000\ngroup.consumer.session.timeout.ms=6000\n\
    group.consumer.min.heartbeat.interval.ms=100\ngroup.consumer.heartbeat.interval.ms=500";

fn text(value: &str) -> StrBytes {
    StrBytes::from_string(value.to_owned())
}

/// Waits until FindCoordinator v4 names a coordinator of `GROUP` (the first ask creates
/// `__consumer_offsets`).
fn find(stream: &mut TcpStream) {
    common::wait_until(
        "a coordinator for the group",
        std::time::Duration::from_secs(60),
        || {
            let response: FindCoordinatorResponse = exchange(
                stream,
                ApiKey::FindCoordinator,
                4,
                &FindCoordinatorRequest::default()
                    .with_key_type(0)
                    .with_coordinator_keys(vec![text(GROUP)]),
            );
            response.coordinators[0].error_code == 0
        },
    );
}

/// A consumer-protocol heartbeat of `member` at `epoch` (0 joins subscribed to `DATA`),
/// retried while the coordinator loads.
fn heartbeat(stream: &mut TcpStream, member: &str, epoch: i32) -> ConsumerGroupHeartbeatResponse {
    let request = ConsumerGroupHeartbeatRequest::default()
        .with_group_id(GroupId(text(GROUP)))
        .with_member_id(text(member))
        .with_member_epoch(epoch)
        .with_rebalance_timeout_ms(if epoch == 0 { 30_000 } else { -1 })
        .with_subscribed_topic_names((epoch == 0).then(|| vec![TopicName(text(DATA))]))
        .with_topic_partitions((epoch == 0).then(Vec::<TopicPartitions>::new));
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    loop {
        let response: ConsumerGroupHeartbeatResponse =
            exchange(stream, ApiKey::ConsumerGroupHeartbeat, 1, &request);
        if !matches!(response.error_code, 14..=16) || std::time::Instant::now() > deadline {
            return response;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
}

/// OffsetCommit v9 of `DATA` partition 0 by (member, generation or epoch): the error code.
fn commit(stream: &mut TcpStream, member: &str, generation: i32, offset: i64) -> i16 {
    let response: OffsetCommitResponse = exchange(
        stream,
        ApiKey::OffsetCommit,
        9,
        &OffsetCommitRequest::default()
            .with_group_id(GroupId(text(GROUP)))
            .with_generation_id_or_member_epoch(generation)
            .with_member_id(text(member))
            .with_topics(vec![
                OffsetCommitRequestTopic::default()
                    .with_name(TopicName(text(DATA)))
                    .with_partitions(vec![
                        OffsetCommitRequestPartition::default()
                            .with_partition_index(0)
                            .with_committed_offset(offset)
                            .with_committed_leader_epoch(-1),
                    ]),
            ]),
    );
    response.topics[0].partitions[0].error_code
}

/// The admin's OffsetFetch v9 of `DATA` partition 0: (group error, offset).
fn fetch(stream: &mut TcpStream) -> (i16, i64) {
    let response: OffsetFetchResponse = exchange(
        stream,
        ApiKey::OffsetFetch,
        9,
        &OffsetFetchRequest::default().with_groups(vec![
            OffsetFetchRequestGroup::default()
                .with_group_id(GroupId(text(GROUP)))
                .with_member_epoch(-1)
                .with_topics(Some(vec![
                    OffsetFetchRequestTopics::default()
                        .with_name(TopicName(text(DATA)))
                        .with_partition_indexes(vec![0]),
                ])),
        ]),
    );
    let group = &response.groups[0];
    let offset = group
        .topics
        .first()
        .and_then(|t| t.partitions.first())
        .map_or(-1, |p| p.committed_offset);
    (group.error_code, offset)
}

/// Regression test: a classic JoinGroup on an empty consumer group left the consumer group
/// in place, so the id was both: the classic member's commits were checked against the
/// consumer group (UNKNOWN_MEMBER_ID forever), ListGroups hid the classic group and
/// ConsumerGroupDescribe still described an empty consumer group.
#[test]
fn a_classic_join_deletes_an_empty_consumer_group_but_not_its_offsets() {
    let dir = tempfile::tempdir().unwrap();
    let node = NodeProcess::start(dir.path(), SETTINGS);
    assert_eq!(
        common::create_topics(node.address, &[(DATA, 1, 1)]),
        vec![0]
    );
    let mut stream = connect(node.address);
    find(&mut stream);

    // A consumer-protocol member joins, commits and leaves: an empty consumer group.
    let joined = heartbeat(&mut stream, "kip848-member", 0);
    assert_eq!(joined.error_code, 0, "{joined:?}");
    assert_eq!(
        commit(&mut stream, "kip848-member", joined.member_epoch, 42),
        0
    );
    let left = heartbeat(&mut stream, "kip848-member", -1);
    assert_eq!(left.error_code, 0, "{left:?}");

    // A classic member joins the id and completes its generation.
    let joined: JoinGroupResponse = exchange(
        &mut stream,
        ApiKey::JoinGroup,
        3,
        &JoinGroupRequest::default()
            .with_group_id(GroupId(text(GROUP)))
            .with_session_timeout_ms(30_000)
            .with_rebalance_timeout_ms(30_000)
            .with_protocol_type(text("consumer"))
            .with_protocols(vec![
                JoinGroupRequestProtocol::default()
                    .with_name(text("range"))
                    .with_metadata(bytes::Bytes::from_static(b"sub")),
            ]),
    );
    assert_eq!(joined.error_code, 0, "{joined:?}");
    let member = joined.member_id.to_string();
    let synced: SyncGroupResponse = exchange(
        &mut stream,
        ApiKey::SyncGroup,
        3,
        &SyncGroupRequest::default()
            .with_group_id(GroupId(text(GROUP)))
            .with_generation_id(joined.generation_id)
            .with_member_id(text(&member))
            .with_assignments(vec![
                SyncGroupRequestAssignment::default()
                    .with_member_id(text(&member))
                    .with_assignment(bytes::Bytes::from_static(b"all")),
            ]),
    );
    assert_eq!(synced.error_code, 0, "{synced:?}");

    // The consumer group's offsets are kept; the classic member commits over them.
    assert_eq!(
        fetch(&mut stream),
        (0, 42),
        "the offsets survive the switch"
    );
    assert_eq!(
        commit(&mut stream, &member, joined.generation_id, 43),
        0,
        "the classic member's commit"
    );
    assert_eq!(fetch(&mut stream), (0, 43));

    // The id is a classic group's alone.
    let described: ConsumerGroupDescribeResponse = exchange(
        &mut stream,
        ApiKey::ConsumerGroupDescribe,
        1,
        &ConsumerGroupDescribeRequest::default().with_group_ids(vec![GroupId(text(GROUP))]),
    );
    assert_eq!(described.groups[0].error_code, 69, "{described:?}");
    let listed: ListGroupsResponse = exchange(
        &mut stream,
        ApiKey::ListGroups,
        5,
        &ListGroupsRequest::default(),
    );
    let listed: Vec<_> = listed
        .groups
        .iter()
        .map(|g| {
            (
                g.group_id.to_string(),
                g.group_type.to_string(),
                g.group_state.to_string(),
            )
        })
        .collect();
    assert_eq!(
        listed,
        [(GROUP.to_owned(), "classic".to_owned(), "Stable".to_owned())]
    );
}
