//! `process.roles` other than combined: a controller-only node (one voter, CONTROLLER
//! listener only, no client APIs) and two broker-only nodes (observers of the quorum that
//! register, heartbeat, replay the metadata log and serve clients). Topic creation through one
//! broker is visible through the other; produce goes to the partition leader only, the other
//! replica answering `NOT_LEADER_OR_FOLLOWER`.

mod common;

use std::io::Write;
use std::time::Duration;

use common::{
    NodeProcess, batch, connect, create_topics, describe_quorum, exchange, free_port, metadata,
    read_frame, request_frame, wait_until,
};
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;

fn produce(node: &NodeProcess, topic: &str, partition: i32) -> i16 {
    let mut stream = connect(node.address);
    let request = ProduceRequest::default()
        .with_acks(1)
        .with_timeout_ms(5000)
        .with_topic_data(vec![
            TopicProduceData::default()
                .with_name(TopicName(StrBytes::from_string(topic.to_owned())))
                .with_partition_data(vec![
                    PartitionProduceData::default()
                        .with_index(partition)
                        .with_records(Some(batch(&[b"v"]))),
                ]),
        ]);
    let response: ProduceResponse = exchange(&mut stream, ApiKey::Produce, 9, &request);
    response.responses[0].partition_responses[0].error_code
}

#[test]
fn controller_only_and_broker_only_nodes_form_a_cluster() {
    let root = tempfile::tempdir().unwrap();
    let controller_port = free_port();
    let voters = format!("1@127.0.0.1:{controller_port}");
    let controller_address = format!("127.0.0.1:{controller_port}").parse().unwrap();
    // One cluster id for all three, as `kafka-storage format --cluster-id` would write.
    for id in 1..=3 {
        let data = root.path().join(format!("node{id}/data"));
        std::fs::create_dir_all(&data).unwrap();
        std::fs::write(
            data.join("meta.properties"),
            format!("version=1\ncluster.id=logjam-roles\nnode.id={id}\n"),
        )
        .unwrap();
    }
    let _controller = NodeProcess::start_with_config(
        &root.path().join("node1"),
        &format!(
            "node.id=1\nprocess.roles=controller\nlisteners=CONTROLLER://127.0.0.1:{controller_port}\n\
             controller.quorum.voters={voters}\nlog.dirs={}\n",
            root.path().join("node1/data").display()
        ),
        controller_address,
    );
    let brokers: Vec<NodeProcess> = [2, 3]
        .iter()
        .map(|id| {
            let port = free_port();
            let dir = root.path().join(format!("node{id}"));
            NodeProcess::start_with_config(
                &dir,
                &format!(
                    "node.id={id}\nprocess.roles=broker\nlisteners=PLAINTEXT://127.0.0.1:{port}\n\
                     controller.listener.names=CONTROLLER\ncontroller.quorum.voters={voters}\n\
                     log.dirs={}\nbroker.heartbeat.interval.ms=500\n",
                    dir.join("data").display()
                ),
                format!("127.0.0.1:{port}").parse().unwrap(),
            )
        })
        .collect();
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
    assert_eq!(produce(leading, "roles", 0), 0);
    assert_eq!(
        produce(following, "roles", 0),
        kafka_protocol::ResponseError::NotLeaderOrFollower.code()
    );

    // The controller listener does not serve client APIs: the connection is closed.
    let mut stream = connect(controller_address);
    let frame = request_frame(ApiKey::Metadata, 12, 1, &MetadataRequest::default());
    stream.write_all(&frame).unwrap();
    assert!(read_frame(&mut stream).is_none());
}
