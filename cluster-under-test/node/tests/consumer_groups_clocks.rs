//! The KIP-848 members' clocks across a replication stall, over the wire on a 3-node
//! cluster: a join whose write times out (answered `COORDINATOR_NOT_AVAILABLE`) but commits
//! once the followers come back still arms the joiner's session clock, so a joiner that
//! never heartbeats again is fenced by it rather than kept forever.

mod common;

use std::net::TcpStream;
use std::time::Duration;

use kafka_protocol::messages::consumer_group_heartbeat_request::TopicPartitions;
use kafka_protocol::messages::{
    ApiKey, ConsumerGroupDescribeRequest, ConsumerGroupDescribeResponse,
    ConsumerGroupHeartbeatRequest, ConsumerGroupHeartbeatResponse, FindCoordinatorRequest,
    FindCoordinatorResponse, GroupId, TopicName,
};
use kafka_protocol::protocol::StrBytes;

use common::{Cluster, connect, exchange, wait_until};

const DATA: &str = "clk-data";
const GROUP: &str = "stalled-join";

fn text(value: &str) -> StrBytes {
    StrBytes::from_string(value.to_owned())
}

/// The node id coordinating `GROUP`, per FindCoordinator v4 asked on `stream`.
fn find(stream: &mut TcpStream) -> i32 {
    let mut coordinator = -1;
    wait_until(
        "a coordinator for the group",
        Duration::from_secs(60),
        || {
            let response: FindCoordinatorResponse = exchange(
                stream,
                ApiKey::FindCoordinator,
                4,
                &FindCoordinatorRequest::default()
                    .with_key_type(0)
                    .with_coordinator_keys(vec![text(GROUP)]),
            );
            coordinator = response.coordinators[0].node_id.0;
            response.coordinators[0].error_code == 0
        },
    );
    coordinator
}

/// The member ids of `GROUP` per ConsumerGroupDescribe (empty when there is no group yet).
fn members(stream: &mut TcpStream) -> Vec<String> {
    let response: ConsumerGroupDescribeResponse = exchange(
        stream,
        ApiKey::ConsumerGroupDescribe,
        1,
        &ConsumerGroupDescribeRequest::default().with_group_ids(vec![GroupId(text(GROUP))]),
    );
    response.groups[0]
        .members
        .iter()
        .map(|m| m.member_id.to_string())
        .collect()
}

/// Regression test: the clock changes of a decision were applied only after its write
/// replicated, so a join answered COORDINATOR_NOT_AVAILABLE (the write timed out) whose
/// records committed later left a member with no session clock: never fenced.
#[test]
fn a_join_whose_write_timed_out_still_arms_the_session_clock() {
    let root = tempfile::tempdir().unwrap();
    let cluster = Cluster::start(
        root.path(),
        3,
        "broker.heartbeat.interval.ms=500\nbroker.session.timeout.ms=60000\n\
         offsets.topic.num.partitions=1\n\
         group.consumer.min.session.timeout.ms=1000\ngroup.consumer.session.timeout.ms=9000\n\
         group.consumer.min.heartbeat.interval.ms=100\ngroup.consumer.heartbeat.interval.ms=500",
    );
    let first = cluster.nodes[0].address;
    assert_eq!(common::create_topics(first, &[(DATA, 1, 3)]), vec![0]);
    let coordinator = find(&mut connect(first));
    let node = |id: i32| &cluster.nodes[(id - 1) as usize];
    let mut stream = connect(node(coordinator).address);
    // The coordinator serves the group (its partition loaded) before the stall.
    wait_until("the coordinator loads", Duration::from_secs(30), || {
        let response: ConsumerGroupDescribeResponse = exchange(
            &mut stream,
            ApiKey::ConsumerGroupDescribe,
            1,
            &ConsumerGroupDescribeRequest::default().with_group_ids(vec![GroupId(text(GROUP))]),
        );
        response.groups[0].error_code == 69
    });

    // The followers stall: the join's records are appended but not replicated in time.
    let followers: Vec<i32> = (1..=3).filter(|&id| id != coordinator).collect();
    for &id in &followers {
        node(id).pause();
    }
    let joined: ConsumerGroupHeartbeatResponse = exchange(
        &mut stream,
        ApiKey::ConsumerGroupHeartbeat,
        1,
        &ConsumerGroupHeartbeatRequest::default()
            .with_group_id(GroupId(text(GROUP)))
            .with_member_id(text("stalled-member"))
            .with_member_epoch(0)
            .with_rebalance_timeout_ms(30_000)
            .with_subscribed_topic_names(Some(vec![TopicName(text(DATA))]))
            .with_topic_partitions(Some(Vec::<TopicPartitions>::new())),
    );
    for &id in &followers {
        node(id).resume();
    }
    assert_eq!(
        joined.error_code, 15,
        "COORDINATOR_NOT_AVAILABLE: the write timed out: {joined:?}"
    );

    // The records commit once the followers are back: the member is in the group, and as
    // it never heartbeats again its session clock (9 s, longer than the stall) fences it.
    wait_until(
        "the timed-out join commits",
        Duration::from_secs(20),
        || members(&mut stream) == ["stalled-member"],
    );
    wait_until(
        "the session clock fences the member",
        Duration::from_secs(20),
        || members(&mut stream).is_empty(),
    );
    assert_eq!(
        find(&mut stream),
        coordinator,
        "the coordinator never moved (a new coordinator arms every session on its load)"
    );
}
