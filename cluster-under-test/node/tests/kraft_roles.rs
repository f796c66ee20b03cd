//! `process.roles` other than combined: a controller-only node (one voter, CONTROLLER
//! listener only, no client APIs) and two broker-only nodes (observers of the quorum that
//! register, heartbeat, replay the metadata log and serve clients). Topic creation through one
//! broker is visible through the other; produce goes to the partition leader only, the other
//! replica answering `NOT_LEADER_OR_FOLLOWER`.

mod common;

use std::io::Write;
use std::time::Duration;

use common::controller_and_brokers::ControllerAndBrokers;
use common::partition::produce_batch;
use common::{
    NodeProcess, connect, create_topics, describe_quorum, metadata, read_frame, request_frame,
    wait_until,
};
use kafka_protocol::messages::*;

/// Produces one record with acks=1 to partition 0 of `topic`; returns the error code.
fn produce(node: &NodeProcess, topic: &str) -> i16 {
    produce_batch(node.address, topic, &[b"v"], 1, 5000)
        .err()
        .unwrap_or(0)
}

#[test]
fn controller_only_and_broker_only_nodes_form_a_cluster() {
    let root = tempfile::tempdir().unwrap();
    let cluster = ControllerAndBrokers::start(root.path(), "logjam-roles", 2, "", "");
    let controller_address = cluster.controller.address;
    let brokers = &cluster.brokers;
    assert_eq!(
        describe_quorum(controller_address).map(|(leader, _)| leader),
        Some(1)
    );
    wait_until("both brokers are unfenced", Duration::from_secs(20), || {
        metadata(brokers[0].address).is_some_and(|m| m.brokers.len() == 2)
    });

    assert_eq!(
        create_topics(brokers[0].address, &[("roles", 2, 2)]),
        vec![0]
    );
    wait_until(
        "the other broker sees the topic",
        Duration::from_secs(10),
        || {
            metadata(brokers[1].address).is_some_and(|m| {
                m.topics
                    .iter()
                    .any(|t| t.name.as_ref().is_some_and(|n| n.as_str() == "roles"))
            })
        },
    );
    let described = metadata(brokers[1].address).unwrap();
    let topic = described
        .topics
        .iter()
        .find(|t| t.name.as_ref().is_some_and(|n| n.as_str() == "roles"))
        .expect("the other broker sees the topic");
    let partition = &topic.partitions[0];
    let mut replicas: Vec<i32> = partition.replica_nodes.iter().map(|b| b.0).collect();
    replicas.sort_unstable();
    assert_eq!(replicas, vec![2, 3]);
    let leader = partition.leader_id.0;
    let (leading, following) = if leader == 2 {
        (&brokers[0], &brokers[1])
    } else {
        (&brokers[1], &brokers[0])
    };
    assert_eq!(produce(leading, "roles"), 0);
    assert_eq!(
        produce(following, "roles"),
        kafka_protocol::ResponseError::NotLeaderOrFollower.code()
    );

    // The controller listener does not serve client APIs: the connection is closed.
    let mut stream = connect(controller_address);
    let frame = request_frame(ApiKey::Metadata, 12, 1, &MetadataRequest::default());
    stream.write_all(&frame).unwrap();
    assert!(read_frame(&mut stream).is_none());
}
