//! KIP-848 consumer groups over the wire (requests built with `kafka-protocol` alone): a
//! member joins and gets every partition, a second member joins and the partitions move
//! revoke-then-assign, stale epochs are fenced, static members hold their instance id, offset
//! commits and fetches check the member epoch, classic and consumer groups keep to their own
//! ids, a member leaves (epoch -1) and the rest expire by the session clock (cause
//! `session-timeout` in describe and in the log), and the empty group is deleted (never one
//! with members, nor offsets of a topic it subscribes to); on a 3-node cluster the group and its
//! committed offsets survive the coordinator's death.

mod common;

use std::collections::BTreeSet;
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use kafka_protocol::messages::consumer_group_describe_response::DescribedGroup;
use kafka_protocol::messages::consumer_group_heartbeat_request::TopicPartitions;
use kafka_protocol::messages::join_group_request::JoinGroupRequestProtocol;
use kafka_protocol::messages::offset_commit_request::{
    OffsetCommitRequestPartition, OffsetCommitRequestTopic,
};
use kafka_protocol::messages::offset_fetch_request::{
    OffsetFetchRequestGroup, OffsetFetchRequestTopics,
};
use kafka_protocol::messages::{
    ApiKey, ConsumerGroupDescribeRequest, ConsumerGroupDescribeResponse,
    ConsumerGroupHeartbeatRequest, ConsumerGroupHeartbeatResponse, DescribeGroupsRequest,
    DescribeGroupsResponse, FindCoordinatorRequest, FindCoordinatorResponse, GroupId,
    JoinGroupRequest, JoinGroupResponse, LeaveGroupRequest, LeaveGroupResponse, ListGroupsRequest,
    ListGroupsResponse, OffsetCommitRequest, OffsetCommitResponse, OffsetFetchRequest,
    OffsetFetchResponse, TopicName,
};
use kafka_protocol::messages::{
    DeleteGroupsRequest, DeleteGroupsResponse, OffsetDeleteRequest, OffsetDeleteResponse,
    offset_delete_request,
};
use kafka_protocol::protocol::StrBytes;
use uuid::Uuid;

use common::{Cluster, NodeProcess, connect, exchange, wait_until};

const DATA: &str = "cg-data";
const CAUSE_TAG: i32 = 10_000;

fn text(value: &str) -> StrBytes {
    StrBytes::from_string(value.to_owned())
}

/// The node id coordinating `group`, per FindCoordinator v4 asked of `via`.
fn find(via: SocketAddr, group: &str) -> i32 {
    let mut stream = connect(via);
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let response: FindCoordinatorResponse = exchange(
            &mut stream,
            ApiKey::FindCoordinator,
            4,
            &FindCoordinatorRequest::default()
                .with_key_type(0)
                .with_coordinator_keys(vec![text(group)]),
        );
        let found = &response.coordinators[0];
        if found.error_code == 0 {
            return found.node_id.0;
        }
        assert!(Instant::now() < deadline, "no coordinator for {group}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// The topic id of `topic`.
fn topic_id(address: SocketAddr, topic: &str) -> Uuid {
    common::metadata(address)
        .unwrap()
        .topics
        .iter()
        .find(|t| t.name.as_ref().map(|n| n.as_str()) == Some(topic))
        .expect("the topic exists")
        .topic_id
}

/// One member as a test drives it.
struct Member {
    group: String,
    id: String,
    epoch: i32,
    instance: Option<String>,
    owned: BTreeSet<i32>,
}

impl Member {
    fn new(group: &str, instance: Option<&str>) -> Member {
        Member {
            group: group.to_owned(),
            id: Uuid::new_v4().to_string(),
            epoch: 0,
            instance: instance.map(str::to_owned),
            owned: BTreeSet::new(),
        }
    }

    fn request(&self, topic: Uuid, epoch: i32) -> ConsumerGroupHeartbeatRequest {
        let full = epoch == 0;
        ConsumerGroupHeartbeatRequest::default()
            .with_group_id(GroupId(text(&self.group)))
            .with_member_id(text(&self.id))
            .with_member_epoch(epoch)
            .with_instance_id(self.instance.as_deref().map(text))
            .with_rebalance_timeout_ms(if full { 30_000 } else { -1 })
            .with_subscribed_topic_names(full.then(|| vec![TopicName(text(DATA))]))
            .with_topic_partitions(Some(if self.owned.is_empty() {
                vec![]
            } else {
                vec![
                    TopicPartitions::default()
                        .with_topic_id(topic)
                        .with_partitions(self.owned.iter().copied().collect()),
                ]
            }))
    }
}

/// One heartbeat, retried while the coordinator loads or moves.
fn heartbeat_raw(
    stream: &mut TcpStream,
    request: &ConsumerGroupHeartbeatRequest,
) -> ConsumerGroupHeartbeatResponse {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let response: ConsumerGroupHeartbeatResponse =
            exchange(stream, ApiKey::ConsumerGroupHeartbeat, 1, request);
        if !matches!(response.error_code, 14..=16) || Instant::now() > deadline {
            return response;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// A heartbeat of `member` at its epoch reporting what it owns; on success it takes the
/// answer's epoch and assignment (as a client acknowledging at once). Returns the error code.
fn heartbeat(stream: &mut TcpStream, topic: Uuid, member: &mut Member) -> i16 {
    let response = heartbeat_raw(stream, &member.request(topic, member.epoch));
    if response.error_code != 0 {
        return response.error_code;
    }
    assert_eq!(
        response.member_id.as_ref().map(|m| m.as_str()),
        Some(member.id.as_str())
    );
    assert!(response.heartbeat_interval_ms > 0, "{response:?}");
    member.epoch = response.member_epoch;
    if let Some(assignment) = response.assignment {
        member.owned = assignment
            .topic_partitions
            .iter()
            .filter(|t| t.topic_id == topic)
            .flat_map(|t| t.partitions.iter().copied())
            .collect();
    }
    0
}

fn describe(stream: &mut TcpStream, group: &str) -> DescribedGroup {
    let response: ConsumerGroupDescribeResponse = exchange(
        stream,
        ApiKey::ConsumerGroupDescribe,
        1,
        &ConsumerGroupDescribeRequest::default().with_group_ids(vec![GroupId(text(group))]),
    );
    response.groups.into_iter().next().unwrap()
}

fn cause(group: &DescribedGroup) -> Option<String> {
    group
        .unknown_tagged_fields
        .get(&CAUSE_TAG)
        .map(|b| String::from_utf8_lossy(b).into_owned())
}

/// OffsetCommit v9 of `DATA` partition 0 by (member, epoch): the error code.
fn commit(stream: &mut TcpStream, group: &str, member: &str, epoch: i32, offset: i64) -> i16 {
    let response: OffsetCommitResponse = exchange(
        stream,
        ApiKey::OffsetCommit,
        9,
        &OffsetCommitRequest::default()
            .with_group_id(GroupId(text(group)))
            .with_generation_id_or_member_epoch(epoch)
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

/// OffsetFetch v9 of `DATA` partition 0 by (member, epoch): (group error, offset).
fn fetch(stream: &mut TcpStream, group: &str, member: Option<&str>, epoch: i32) -> (i16, i64) {
    let response: OffsetFetchResponse = exchange(
        stream,
        ApiKey::OffsetFetch,
        9,
        &OffsetFetchRequest::default().with_groups(vec![
            OffsetFetchRequestGroup::default()
                .with_group_id(GroupId(text(group)))
                .with_member_id(member.map(text))
                .with_member_epoch(epoch)
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

/// A classic member joining `group` with JoinGroup v3 (no member id round trip).
fn classic_join(stream: &mut TcpStream, group: &str) -> JoinGroupResponse {
    exchange(
        stream,
        ApiKey::JoinGroup,
        3,
        &JoinGroupRequest::default()
            .with_group_id(GroupId(text(group)))
            .with_session_timeout_ms(30_000)
            .with_rebalance_timeout_ms(30_000)
            .with_protocol_type(text("consumer"))
            .with_protocols(vec![
                JoinGroupRequestProtocol::default()
                    .with_name(text("range"))
                    .with_metadata(bytes::Bytes::from_static(b"sub")),
            ]),
    )
}

const SETTINGS: &str = "offsets.topic.num.partitions=3\noffsets.topic.replication.factor=1\n\
    group.initial.rebalance.delay.ms=0\n\
    group.consumer.min.session.timeout.ms=1000\ngroup.consumer.session.timeout.ms=6000\n\
    group.consumer.min.heartbeat.interval.ms=100\ngroup.consumer.heartbeat.interval.ms=500";

#[test]
fn members_join_reconcile_fence_leave_and_expire() {
    let dir = tempfile::tempdir().unwrap();
    let node = NodeProcess::start(dir.path(), SETTINGS);
    assert_eq!(
        common::create_topics(node.address, &[(DATA, 4, 1)]),
        vec![0]
    );
    let topic = topic_id(node.address, DATA);
    let group = "kip848-group";
    assert_eq!(find(node.address, group), 1);
    let mut stream = connect(node.address);

    // A joins: epoch 1, every partition.
    let mut a = Member::new(group, None);
    assert_eq!(heartbeat(&mut stream, topic, &mut a), 0);
    assert_eq!(a.epoch, 1);
    assert_eq!(a.owned, BTreeSet::from([0, 1, 2, 3]));
    let described = describe(&mut stream, group);
    assert_eq!(described.error_code, 0, "{described:?}");
    assert_eq!(described.group_state.as_str(), "Stable");
    assert_eq!(described.group_epoch, 1);
    assert_eq!(cause(&described).as_deref(), Some("join"));

    // B joins: epoch 2, nothing yet (A still owns everything).
    let mut b = Member::new(group, None);
    assert_eq!(heartbeat(&mut stream, topic, &mut b), 0);
    assert_eq!(b.epoch, 2);
    assert!(
        b.owned.is_empty(),
        "B gets nothing A still owns: {:?}",
        b.owned
    );
    assert_eq!(
        describe(&mut stream, group).group_state.as_str(),
        "Reconciling"
    );

    // A is asked to revoke half and stays at epoch 1 until it has.
    assert_eq!(heartbeat(&mut stream, topic, &mut a), 0);
    assert_eq!(a.epoch, 1, "A keeps its epoch while revoking");
    assert_eq!(a.owned.len(), 2, "A keeps half: {:?}", a.owned);
    // A acknowledges the revocation: epoch 2.
    assert_eq!(heartbeat(&mut stream, topic, &mut a), 0);
    assert_eq!(a.epoch, 2);
    // B now gets the released half.
    assert_eq!(heartbeat(&mut stream, topic, &mut b), 0);
    assert_eq!(b.epoch, 2);
    assert_eq!(b.owned.len(), 2);
    assert!(a.owned.is_disjoint(&b.owned));
    assert_eq!(
        a.owned.union(&b.owned).copied().collect::<BTreeSet<_>>(),
        BTreeSet::from([0, 1, 2, 3])
    );
    let described = describe(&mut stream, group);
    assert_eq!(described.group_state.as_str(), "Stable", "{described:?}");
    assert_eq!(described.members.len(), 2);

    // A stale or made-up epoch is fenced.
    let fenced = heartbeat_raw(&mut stream, &a.request(topic, 7));
    assert_eq!(fenced.error_code, 110, "FENCED_MEMBER_EPOCH: {fenced:?}");

    // Offsets: committed at the member's epoch; a stale epoch or an unknown member is refused.
    assert_eq!(commit(&mut stream, group, &b.id, b.epoch, 42), 0);
    assert_eq!(
        commit(&mut stream, group, &b.id, 1, 43),
        113,
        "STALE_MEMBER_EPOCH"
    );
    assert_eq!(
        commit(&mut stream, group, "nobody", 2, 44),
        25,
        "UNKNOWN_MEMBER_ID"
    );
    assert_eq!(fetch(&mut stream, group, Some(&b.id), b.epoch), (0, 42));
    assert_eq!(fetch(&mut stream, group, Some(&b.id), 1).0, 113);
    assert_eq!(
        fetch(&mut stream, group, None, -1),
        (0, 42),
        "the admin fetch"
    );

    // Static members: a second member cannot take an instance id still held.
    let mut c = Member::new(group, Some("instance-1"));
    assert_eq!(heartbeat(&mut stream, topic, &mut c), 0);
    let mut d = Member::new(group, Some("instance-1"));
    assert_eq!(
        heartbeat(&mut stream, topic, &mut d),
        111,
        "UNRELEASED_INSTANCE_ID"
    );

    // Classic and consumer groups keep to their own ids.
    let joined = classic_join(&mut stream, "classic-group");
    assert_eq!(joined.error_code, 0, "{joined:?}");
    let mut e = Member::new("classic-group", None);
    assert_eq!(
        heartbeat(&mut stream, topic, &mut e),
        69,
        "GROUP_ID_NOT_FOUND"
    );
    assert_eq!(
        classic_join(&mut stream, group).error_code,
        23,
        "INCONSISTENT_GROUP_PROTOCOL"
    );
    // An empty classic group becomes a consumer group.
    let joined = classic_join(&mut stream, "converted-group");
    assert_eq!(joined.error_code, 0, "{joined:?}");
    let left: LeaveGroupResponse = exchange(
        &mut stream,
        ApiKey::LeaveGroup,
        0,
        &LeaveGroupRequest::default()
            .with_group_id(GroupId(text("converted-group")))
            .with_member_id(joined.member_id.clone()),
    );
    assert_eq!(left.error_code, 0);
    let mut f = Member::new("converted-group", None);
    assert_eq!(heartbeat(&mut stream, topic, &mut f), 0);
    assert_eq!(f.epoch, 1);

    // DescribeGroups and ListGroups show the consumer group as Kafka 4 does: the classic
    // describe does not see a consumer group (Dead, no members, no error).
    for version in [0, 5] {
        let classic: DescribeGroupsResponse = exchange(
            &mut stream,
            ApiKey::DescribeGroups,
            version,
            &DescribeGroupsRequest::default().with_groups(vec![GroupId(text(group))]),
        );
        let described = &classic.groups[0];
        assert_eq!(described.error_code, 0, "v{version}: {described:?}");
        assert_eq!(described.group_state.as_str(), "Dead", "v{version}");
        assert_eq!(described.protocol_type.as_str(), "", "v{version}");
        assert!(described.members.is_empty(), "v{version}: {described:?}");
    }
    let listed: ListGroupsResponse = exchange(
        &mut stream,
        ApiKey::ListGroups,
        5,
        &ListGroupsRequest::default().with_types_filter(vec![text("consumer")]),
    );
    let ids: BTreeSet<&str> = listed.groups.iter().map(|g| g.group_id.as_str()).collect();
    assert!(
        ids.contains(group) && !ids.contains("classic-group"),
        "{listed:?}"
    );
    assert!(
        listed
            .groups
            .iter()
            .all(|g| g.group_type.as_str() == "consumer")
    );

    // B leaves: the cause is `leave`.
    let left = heartbeat_raw(&mut stream, &b.request(topic, -1));
    assert_eq!(left.error_code, 0);
    assert_eq!(left.member_epoch, -1);
    let described = describe(&mut stream, group);
    assert_eq!(cause(&described).as_deref(), Some("leave"));
    assert_eq!(described.members.len(), 2);

    // A group with members is not deleted, nor are offsets of a topic it subscribes to.
    assert_eq!(delete_group(&mut stream, group), 68, "NON_EMPTY_GROUP");
    assert_eq!(
        delete_offset(&mut stream, group),
        (0, 86),
        "GROUP_SUBSCRIBED_TO_TOPIC"
    );

    // A and C stop heartbeating: the session clock (6 s) fences them.
    wait_until(
        "the session clock empties the group",
        Duration::from_secs(20),
        || describe(&mut stream, group).members.is_empty(),
    );
    let described = describe(&mut stream, group);
    assert_eq!(described.group_state.as_str(), "Empty");
    assert_eq!(cause(&described).as_deref(), Some("session-timeout"));
    let log = std::fs::read_to_string(dir.path().join("node.log")).unwrap();
    assert!(
        log.lines()
            .any(|l| l.contains("group=kip848-group") && l.contains("cause=session-timeout")),
        "the log names the clock"
    );
    // A fenced member is told so and rejoins from epoch 0.
    assert_eq!(
        heartbeat(&mut stream, topic, &mut a),
        25,
        "UNKNOWN_MEMBER_ID"
    );

    // The empty group is deleted with its offsets.
    assert_eq!(delete_group(&mut stream, group), 0);
    assert_eq!(
        describe(&mut stream, group).error_code,
        69,
        "GROUP_ID_NOT_FOUND"
    );
    assert_eq!(fetch(&mut stream, group, None, -1), (0, -1));
    assert_eq!(delete_group(&mut stream, group), 69);
}

/// DeleteGroups v2 of one group: its error code.
fn delete_group(stream: &mut TcpStream, group: &str) -> i16 {
    let response: DeleteGroupsResponse = exchange(
        stream,
        ApiKey::DeleteGroups,
        2,
        &DeleteGroupsRequest::default().with_groups_names(vec![GroupId(text(group))]),
    );
    response.results[0].error_code
}

/// OffsetDelete of `DATA` partition 0: (group error, partition error).
fn delete_offset(stream: &mut TcpStream, group: &str) -> (i16, i16) {
    let response: OffsetDeleteResponse = exchange(
        stream,
        ApiKey::OffsetDelete,
        0,
        &OffsetDeleteRequest::default()
            .with_group_id(GroupId(text(group)))
            .with_topics(vec![
                offset_delete_request::OffsetDeleteRequestTopic::default()
                    .with_name(TopicName(text(DATA)))
                    .with_partitions(vec![
                        offset_delete_request::OffsetDeleteRequestPartition::default()
                            .with_partition_index(0),
                    ]),
            ]),
    );
    let partition = response
        .topics
        .first()
        .and_then(|t| t.partitions.first())
        .map_or(-1, |p| p.error_code);
    (response.error_code, partition)
}

#[test]
fn a_consumer_group_and_its_offsets_survive_the_coordinator() {
    let root = tempfile::tempdir().unwrap();
    let mut cluster = Cluster::start(
        root.path(),
        3,
        "broker.heartbeat.interval.ms=500\nbroker.session.timeout.ms=3000\n\
         offsets.topic.num.partitions=5\n\
         group.consumer.min.session.timeout.ms=1000\ngroup.consumer.session.timeout.ms=20000",
    );
    let first = cluster.nodes[0].address;
    assert_eq!(common::create_topics(first, &[(DATA, 2, 3)]), vec![0]);
    let topic = topic_id(first, DATA);
    let group = "kip848-moved";
    let coordinator = find(first, group);
    let at = |id: i32| cluster.nodes[(id - 1) as usize].address;
    let mut stream = connect(at(coordinator));
    let mut a = Member::new(group, None);
    assert_eq!(heartbeat(&mut stream, topic, &mut a), 0);
    assert_eq!((a.epoch, a.owned.len()), (1, 2));
    assert_eq!(commit(&mut stream, group, &a.id, a.epoch, 17), 0);

    cluster.nodes[(coordinator - 1) as usize].kill();
    let survivor = cluster.nodes[(coordinator % 3) as usize].address;
    let mut next = coordinator;
    wait_until(
        "another node coordinates the group",
        Duration::from_secs(60),
        || {
            next = find(survivor, group);
            next != coordinator
        },
    );
    let mut stream = connect(cluster.nodes[(next - 1) as usize].address);
    // The member carries on at its epoch: the group was reloaded, not rebuilt.
    assert_eq!(heartbeat(&mut stream, topic, &mut a), 0);
    assert_eq!((a.epoch, a.owned.len()), (1, 2));
    let mut described = describe(&mut stream, group);
    wait_until(
        "the new coordinator names the move",
        Duration::from_secs(10),
        || {
            described = describe(&mut stream, group);
            cause(&described).as_deref() == Some("coordinator-moved")
        },
    );
    assert_eq!(described.group_epoch, 1);
    assert_eq!(described.members.len(), 1);
    assert_eq!(fetch(&mut stream, group, Some(&a.id), a.epoch), (0, 17));
}

/// The revocation clock: a member asked to revoke that does not within its rebalance
/// timeout (Java's `max.poll.interval.ms`) is fenced with cause `poll-timeout`, although it
/// keeps heartbeating. A static member leaving with epoch -2 and coming back under a new
/// member id takes its assignment over without a new group epoch (`static-member-replaced`).
#[test]
fn the_revocation_clock_and_a_static_member_replaced() {
    let dir = tempfile::tempdir().unwrap();
    let node = NodeProcess::start(dir.path(), SETTINGS);
    assert_eq!(
        common::create_topics(node.address, &[(DATA, 4, 1)]),
        vec![0]
    );
    let topic = topic_id(node.address, DATA);
    let group = "kip848-poll";
    find(node.address, group);
    let mut stream = connect(node.address);

    // A joins with a 1 s rebalance timeout and owns everything; B joins.
    let mut a = Member::new(group, None);
    let join = a.request(topic, 0).with_rebalance_timeout_ms(1_000);
    let joined = heartbeat_raw(&mut stream, &join);
    assert_eq!((joined.error_code, joined.member_epoch), (0, 1));
    a.epoch = 1;
    a.owned = BTreeSet::from([0, 1, 2, 3]);
    let mut b = Member::new(group, None);
    assert_eq!(heartbeat(&mut stream, topic, &mut b), 0);
    // A heartbeats on but never gives anything up.
    let start = Instant::now();
    let mut code = 0;
    while Instant::now() - start < Duration::from_secs(10) {
        code = heartbeat_raw(&mut stream, &a.request(topic, a.epoch)).error_code;
        if code != 0 {
            break;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    // Fenced: removed, as Kafka, so its next heartbeat does not know it.
    assert_eq!(
        code, 25,
        "A is fenced by the revocation clock: UNKNOWN_MEMBER_ID"
    );
    assert!(
        Instant::now() - start < Duration::from_secs(5),
        "within its rebalance timeout"
    );
    let described = describe(&mut stream, group);
    assert_eq!(cause(&described).as_deref(), Some("poll-timeout"));
    assert_eq!(described.members.len(), 1);
    // B gets everything.
    wait_until("B owns every partition", Duration::from_secs(10), || {
        heartbeat(&mut stream, topic, &mut b) == 0 && b.owned.len() == 4
    });

    // A static member leaves meaning to come back (-2) and returns under a new id.
    let static_group = "kip848-static";
    let mut s1 = Member::new(static_group, Some("instance-s"));
    assert_eq!(heartbeat(&mut stream, topic, &mut s1), 0);
    let epoch = describe(&mut stream, static_group).group_epoch;
    let left = heartbeat_raw(&mut stream, &s1.request(topic, -2));
    assert_eq!((left.error_code, left.member_epoch), (0, -2));
    let mut s2 = Member::new(static_group, Some("instance-s"));
    assert_eq!(heartbeat(&mut stream, topic, &mut s2), 0);
    assert_eq!(
        s2.owned,
        BTreeSet::from([0, 1, 2, 3]),
        "it takes its assignment back"
    );
    let described = describe(&mut stream, static_group);
    assert_eq!(described.group_epoch, epoch, "no rebalance");
    assert_eq!(cause(&described).as_deref(), Some("static-member-replaced"));
    assert_eq!(described.members.len(), 1);
    assert_eq!(described.members[0].member_id.as_str(), s2.id);
}
