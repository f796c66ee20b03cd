//! The classic group protocol over the wire on `logjam-node` processes (requests built with
//! `kafka-protocol` alone): bad and out-of-order requests (sync before join, absurd session
//! timeouts, a heartbeat of the wrong generation, commits of unknown members or stale
//! generations) get Kafka's errors and the coordinator keeps serving the group; the group's
//! generation and offsets survive the coordinator's death (its members heartbeat on at the new
//! coordinator). The `skip-offset-fence` canary's effect, with this test's fencing as its twin;
//! the `double-assign` canary's effect next to its twin (a two-member rebalance driven step by
//! step), which then also shows a session expiring: the group rebalances and DescribeGroups
//! names the cause `session-timeout`.

mod common;

use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use bytes::Bytes;
use kafka_protocol::messages::join_group_request::JoinGroupRequestProtocol;
use kafka_protocol::messages::offset_commit_request::{
    OffsetCommitRequestPartition, OffsetCommitRequestTopic,
};
use kafka_protocol::messages::offset_fetch_request::OffsetFetchRequestTopic;
use kafka_protocol::messages::sync_group_request::SyncGroupRequestAssignment;
use kafka_protocol::messages::{
    ApiKey, DescribeGroupsRequest, DescribeGroupsResponse, FindCoordinatorRequest,
    FindCoordinatorResponse, GroupId, HeartbeatRequest, HeartbeatResponse, JoinGroupRequest,
    JoinGroupResponse, OffsetCommitRequest, OffsetCommitResponse, OffsetFetchRequest,
    OffsetFetchResponse, SyncGroupRequest, SyncGroupResponse, TopicName,
};
use kafka_protocol::protocol::StrBytes;

use common::{Cluster, connect, exchange, wait_until};

const DATA: &str = "classic-data";

fn text(value: &str) -> StrBytes {
    StrBytes::from_string(value.to_owned())
}

fn find(via: SocketAddr, group: &str) -> i32 {
    let mut stream = connect(via);
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let response: FindCoordinatorResponse = exchange(
            &mut stream,
            ApiKey::FindCoordinator,
            3,
            &FindCoordinatorRequest::default()
                .with_key_type(0)
                .with_key(text(group)),
        );
        if response.error_code == 0 {
            return response.node_id.0;
        }
        assert_eq!(response.error_code, 15, "{response:?}");
        assert!(Instant::now() < deadline, "no coordinator for {group}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn join(stream: &mut TcpStream, group: &str, member: &str, session_ms: i32) -> JoinGroupResponse {
    join_as(stream, group, member, session_ms, 30_000)
}

fn join_as(
    stream: &mut TcpStream,
    group: &str,
    member: &str,
    session_ms: i32,
    rebalance_ms: i32,
) -> JoinGroupResponse {
    exchange(
        stream,
        ApiKey::JoinGroup,
        5,
        &JoinGroupRequest::default()
            .with_group_id(GroupId(text(group)))
            .with_session_timeout_ms(session_ms)
            .with_rebalance_timeout_ms(rebalance_ms)
            .with_member_id(text(member))
            .with_protocol_type(text("consumer"))
            .with_protocols(vec![
                JoinGroupRequestProtocol::default()
                    .with_name(text("range"))
                    .with_metadata(Bytes::from_static(b"sub")),
            ]),
    )
}

/// JoinGroup retried while the coordinator loads (14, 16).
fn join_ready(stream: &mut TcpStream, group: &str, member: &str) -> JoinGroupResponse {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let joined = join(stream, group, member, 30_000);
        if !matches!(joined.error_code, 14 | 16) || Instant::now() > deadline {
            return joined;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn sync(stream: &mut TcpStream, group: &str, member: &str, generation: i32) -> SyncGroupResponse {
    sync_with(stream, group, member, generation, &[(member, b"all")])
}

fn sync_with(
    stream: &mut TcpStream,
    group: &str,
    member: &str,
    generation: i32,
    assignments: &[(&str, &'static [u8])],
) -> SyncGroupResponse {
    exchange(
        stream,
        ApiKey::SyncGroup,
        3,
        &SyncGroupRequest::default()
            .with_group_id(GroupId(text(group)))
            .with_generation_id(generation)
            .with_member_id(text(member))
            .with_assignments(
                assignments
                    .iter()
                    .map(|(m, a)| {
                        SyncGroupRequestAssignment::default()
                            .with_member_id(text(m))
                            .with_assignment(Bytes::from_static(a))
                    })
                    .collect(),
            ),
    )
}

fn heartbeat(stream: &mut TcpStream, group: &str, member: &str, generation: i32) -> i16 {
    let response: HeartbeatResponse = exchange(
        stream,
        ApiKey::Heartbeat,
        3,
        &HeartbeatRequest::default()
            .with_group_id(GroupId(text(group)))
            .with_generation_id(generation)
            .with_member_id(text(member)),
    );
    response.error_code
}

fn commit(stream: &mut TcpStream, group: &str, member: &str, generation: i32, offset: i64) -> i16 {
    let response: OffsetCommitResponse = exchange(
        stream,
        ApiKey::OffsetCommit,
        8,
        &OffsetCommitRequest::default()
            .with_group_id(GroupId(text(group)))
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

fn fetched(stream: &mut TcpStream, group: &str) -> (i16, i64) {
    let response: OffsetFetchResponse = exchange(
        stream,
        ApiKey::OffsetFetch,
        7,
        &OffsetFetchRequest::default()
            .with_group_id(GroupId(text(group)))
            .with_topics(Some(vec![
                OffsetFetchRequestTopic::default()
                    .with_name(TopicName(text(DATA)))
                    .with_partition_indexes(vec![0]),
            ])),
    );
    let offset = response
        .topics
        .first()
        .map_or(-1, |t| t.partitions[0].committed_offset);
    (response.error_code, offset)
}

/// A one-member group, joined (MEMBER_ID_REQUIRED first) and synced: (member id, generation).
fn settled_member(stream: &mut TcpStream, group: &str) -> (String, i32) {
    let first = join_ready(stream, group, "");
    assert_eq!(first.error_code, 79, "MEMBER_ID_REQUIRED: {first:?}");
    let member = first.member_id.to_string();
    let joined = join(stream, group, &member, 30_000);
    assert_eq!(joined.error_code, 0, "{joined:?}");
    assert_eq!(joined.leader.as_str(), member, "the only member leads");
    let synced = sync(stream, group, &member, joined.generation_id);
    assert_eq!(synced.error_code, 0, "{synced:?}");
    assert_eq!(&synced.assignment[..], b"all");
    (member, joined.generation_id)
}

const SETTINGS: &str = "broker.heartbeat.interval.ms=500\nbroker.session.timeout.ms=3000\ngroup.initial.rebalance.delay.ms=0";

#[test]
fn bad_group_requests_get_kafkas_errors_and_the_group_survives_failover() {
    let root = tempfile::tempdir().unwrap();
    let mut cluster = Cluster::start(root.path(), 3, SETTINGS);
    let first = cluster.nodes[0].address;
    assert_eq!(common::create_topics(first, &[(DATA, 1, 3)]), vec![0]);
    let group = "classic-group";
    let coordinator = find(first, group);
    let addresses: Vec<SocketAddr> = cluster.nodes.iter().map(|n| n.address).collect();
    let at = |node: i32| addresses[(node - 1) as usize];
    let mut stream = connect(at(coordinator));

    // Out of order and absurd: Kafka's errors, nothing joined.
    let deadline = Instant::now() + Duration::from_secs(60);
    let early = loop {
        let code = sync(&mut stream, group, "never-joined", 1).error_code;
        if !matches!(code, 14 | 16) || Instant::now() > deadline {
            break code;
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    assert_eq!(early, 25, "UNKNOWN_MEMBER_ID: sync before join");
    assert_eq!(heartbeat(&mut stream, group, "never-joined", 1), 25);
    assert_eq!(
        join(&mut stream, group, "", 1).error_code,
        26,
        "INVALID_SESSION_TIMEOUT"
    );
    assert_eq!(join(&mut stream, group, "", 1_800_001).error_code, 26);
    assert_eq!(join(&mut stream, group, "made-up", 30_000).error_code, 25);

    let (member, generation) = settled_member(&mut stream, group);
    assert_eq!(generation, 1);
    assert_eq!(heartbeat(&mut stream, group, &member, generation), 0);
    assert_eq!(
        heartbeat(&mut stream, group, &member, generation + 1),
        22,
        "ILLEGAL_GENERATION"
    );
    assert_eq!(commit(&mut stream, group, &member, generation, 42), 0);
    assert_eq!(
        commit(&mut stream, group, &member, generation - 1, 99),
        22,
        "a stale generation is fenced"
    );
    assert_eq!(
        commit(&mut stream, group, "zombie", generation, 99),
        25,
        "UNKNOWN_MEMBER_ID"
    );
    assert_eq!(
        commit(&mut stream, group, "", -1, 99),
        25,
        "a simple commit to a group with members"
    );
    // The coordinator keeps serving the group after all that.
    assert_eq!(heartbeat(&mut stream, group, &member, generation), 0);
    assert_eq!(fetched(&mut stream, group), (0, 42));

    // The coordinator dies: the next one loads generation 1 and its member from the log, so
    // the member's heartbeats and commits go on there, and the offset is still 42.
    cluster.nodes[(coordinator - 1) as usize].kill();
    let survivor = cluster.nodes[(coordinator % 3) as usize].address;
    let mut beat = None;
    wait_until(
        "the member heartbeats at the new coordinator",
        Duration::from_secs(60),
        || {
            let next = find(survivor, group);
            if next == coordinator {
                return false;
            }
            let mut stream = connect(at(next));
            let code = heartbeat(&mut stream, group, &member, generation);
            beat = Some((next, code));
            code == 0
        },
    );
    let (next, _) = beat.unwrap();
    let mut stream = connect(at(next));
    // A heartbeat is answered NONE while the group loads (as Kafka's); reads wait for it.
    let mut offset = (14, -1);
    wait_until("the new coordinator loads", Duration::from_secs(30), || {
        offset = fetched(&mut stream, group);
        offset.0 != 14
    });
    assert_eq!(offset, (0, 42));
    assert_eq!(commit(&mut stream, group, &member, generation, 43), 0);
    assert_eq!(commit(&mut stream, group, &member, generation - 1, 99), 22);
    assert_eq!(fetched(&mut stream, group), (0, 43));
}

#[test]
fn canary_skip_offset_fence_accepts_a_stale_generation() {
    let root = tempfile::tempdir().unwrap();
    let cluster = Cluster::start(
        root.path(),
        1,
        &format!("{SETTINGS}\nlogjam.canaries=skip-offset-fence"),
    );
    let address = cluster.nodes[0].address;
    assert_eq!(common::create_topics(address, &[(DATA, 1, 1)]), vec![0]);
    let group = "canary-group";
    find(address, group);
    let mut stream = connect(address);
    let (member, generation) = settled_member(&mut stream, group);
    assert_eq!(commit(&mut stream, group, &member, generation, 42), 0);
    // The twin above refuses this with ILLEGAL_GENERATION; the canary takes it.
    assert_eq!(commit(&mut stream, group, &member, generation - 1, 7), 0);
    assert_eq!(
        fetched(&mut stream, group),
        (0, 7),
        "the zombie's commit moved the group back"
    );
}

/// Two members through a rebalance driven step by step: the first settles alone, the second
/// joins, the first learns of it by heartbeat and rejoins, the leader (the first) assigns
/// "A" to itself and "B" to the second. Returns what the second was given, after which the
/// second stops heartbeating (session 1.5 s) and the DescribeGroups v5 cause once the group
/// has noticed.
fn two_members(canaries: &str) -> (Bytes, String, String) {
    let root = tempfile::tempdir().unwrap();
    let cluster = Cluster::start(
        root.path(),
        1,
        &format!("{SETTINGS}\ngroup.min.session.timeout.ms=1000\n{canaries}"),
    );
    let address = cluster.nodes[0].address;
    let group = "pair";
    find(address, group);
    let mut one = connect(address);
    let first = join_ready(&mut one, group, "");
    let m1 = first.member_id.to_string();
    assert_eq!(
        join_as(&mut one, group, &m1, 10_000, 10_000).generation_id,
        1
    );
    assert_eq!(sync(&mut one, group, &m1, 1).error_code, 0);

    let mut two = connect(address);
    let m2 = join_as(&mut two, group, "", 1_500, 10_000)
        .member_id
        .to_string();
    let joining = {
        let m2 = m2.clone();
        std::thread::spawn(move || {
            let joined = join_as(&mut two, group, &m2, 1_500, 10_000);
            assert_eq!(joined.error_code, 0, "{joined:?}");
            let synced = sync_with(&mut two, group, &m2, joined.generation_id, &[]);
            assert_eq!(synced.error_code, 0, "{synced:?}");
            synced.assignment
        })
    };
    wait_until(
        "the first member is told to rejoin",
        Duration::from_secs(10),
        || heartbeat(&mut one, group, &m1, 1) == 27,
    );
    let rejoined = join_as(&mut one, group, &m1, 10_000, 10_000);
    assert_eq!((rejoined.error_code, rejoined.generation_id), (0, 2));
    assert_eq!(rejoined.leader.as_str(), m1);
    assert_eq!(rejoined.members.len(), 2);
    let led = sync_with(&mut one, group, &m1, 2, &[(&m1, b"A"), (&m2, b"B")]);
    assert_eq!(&led.assignment[..], b"A");
    let second = joining.join().unwrap();
    // Each member's host as Kafka shows it (`InetAddress.toString`): "/" and the peer's IP.
    let described: DescribeGroupsResponse = exchange(
        &mut one,
        ApiKey::DescribeGroups,
        5,
        &DescribeGroupsRequest::default().with_groups(vec![GroupId(text(group))]),
    );
    let hosts: Vec<&str> = described.groups[0]
        .members
        .iter()
        .map(|m| m.client_host.as_str())
        .collect();
    assert_eq!(hosts, ["/127.0.0.1", "/127.0.0.1"], "{described:?}");

    // The second member goes silent; the first keeps heartbeating until the group notices.
    let mut cause = String::new();
    wait_until(
        "the silent member's session expires",
        Duration::from_secs(20),
        || {
            let beat = heartbeat(&mut one, group, &m1, 2);
            let described: DescribeGroupsResponse = exchange(
                &mut one,
                ApiKey::DescribeGroups,
                5,
                &DescribeGroupsRequest::default().with_groups(vec![GroupId(text(group))]),
            );
            let g = &described.groups[0];
            cause = g
                .unknown_tagged_fields
                .get(&10_000)
                .map(|b| String::from_utf8_lossy(b).into_owned())
                .unwrap_or_default();
            beat == 27 && g.group_state.as_str() == "PreparingRebalance" && g.members.len() == 1
        },
    );
    (second, m2, cause)
}

#[test]
fn canary_double_assign_gives_two_members_the_same_partitions() {
    let (honest, _, cause) = two_members("");
    assert_eq!(
        &honest[..],
        b"B",
        "the twin: the leader's assignment is delivered as sent"
    );
    assert_eq!(cause, "session-timeout");
    let (doubled, _, _) = two_members("logjam.canaries=double-assign");
    assert_eq!(
        &doubled[..],
        b"A",
        "the canary gives the second member the leader's partitions"
    );
}

/// A JoinGroup v5 whose header carries `client_id`.
fn join_from_client(
    stream: &mut TcpStream,
    client_id: &str,
    group: &str,
    member: &str,
) -> JoinGroupResponse {
    use bytes::{Buf, BufMut, BytesMut};
    use kafka_protocol::messages::{RequestHeader, ResponseHeader};
    use kafka_protocol::protocol::{Decodable, Encodable};
    use std::io::Write;
    let request = JoinGroupRequest::default()
        .with_group_id(GroupId(text(group)))
        .with_session_timeout_ms(30_000)
        .with_rebalance_timeout_ms(30_000)
        .with_member_id(text(member))
        .with_protocol_type(text("consumer"))
        .with_protocols(vec![
            JoinGroupRequestProtocol::default()
                .with_name(text("range"))
                .with_metadata(Bytes::from_static(b"sub")),
        ]);
    let mut buf = BytesMut::new();
    buf.put_i32(0);
    RequestHeader::default()
        .with_request_api_key(ApiKey::JoinGroup as i16)
        .with_request_api_version(5)
        .with_correlation_id(7)
        .with_client_id(Some(text(client_id)))
        .encode(&mut buf, ApiKey::JoinGroup.request_header_version(5))
        .unwrap();
    request.encode(&mut buf, 5).unwrap();
    let length = (buf.len() - 4) as i32;
    buf[..4].copy_from_slice(&length.to_be_bytes());
    stream.write_all(&buf).unwrap();
    let mut response = common::read_frame(stream).expect("the node answered the JoinGroup");
    ResponseHeader::decode(&mut response, ApiKey::JoinGroup.response_header_version(5)).unwrap();
    let body = JoinGroupResponse::decode(&mut response, 5).unwrap();
    assert_eq!(response.remaining(), 0);
    body
}

/// Regression test: the member id was the whole client id, a dash and a uuid; with a client
/// id of 32 767 bytes (the most a request header's INT16 string carries; Kafka's own bound,
/// so a 40 000-byte one cannot be sent at all) neither the JoinGroup answer nor the group's
/// record could hold it, and the node dropped the connection. The id is now cut to 1 024
/// bytes and the group settles and is written.
#[test]
fn a_member_with_the_largest_client_id_joins_syncs_and_is_written() {
    let root = tempfile::tempdir().unwrap();
    let cluster = Cluster::start(root.path(), 1, SETTINGS);
    let address = cluster.nodes[0].address;
    let group = "huge-client";
    find(address, group);
    let client_id = "c".repeat(i16::MAX as usize);
    let mut stream = connect(address);
    let deadline = Instant::now() + Duration::from_secs(60);
    let asked = loop {
        let asked = join_from_client(&mut stream, &client_id, group, "");
        if !matches!(asked.error_code, 14 | 16) || Instant::now() > deadline {
            break asked;
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    assert_eq!(asked.error_code, 79, "MEMBER_ID_REQUIRED");
    let member = asked.member_id.to_string();
    assert!(
        member.len() <= 1024 && member.starts_with("ccc"),
        "{}",
        member.len()
    );
    let joined = join_from_client(&mut stream, &client_id, group, &member);
    assert_eq!((joined.error_code, joined.generation_id), (0, 1));
    let synced = sync(&mut stream, group, &member, 1);
    assert_eq!(synced.error_code, 0, "the generation's record was written");
    let described: DescribeGroupsResponse = exchange(
        &mut stream,
        ApiKey::DescribeGroups,
        5,
        &DescribeGroupsRequest::default().with_groups(vec![GroupId(text(group))]),
    );
    let described = &described.groups[0];
    assert_eq!(described.group_state.as_str(), "Stable");
    assert_eq!(described.members[0].client_id.len(), client_id.len());
}
