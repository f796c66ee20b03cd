//! The version sweep: every API a `logjam-node` process advertises in ApiVersions, on its client
//! listener and on its controller listener, is called at every version of its advertised range
//! (with the request header version that version implies, flexible or not) with a request that
//! takes the handler's real path (a real record batch, an existing topic partition, a new topic
//! name, ...). Each answer must arrive on the same connection, decode at that version with
//! nothing left over, and mean what the API promises at that version (an offset, the records,
//! the topic asked for), so a field dropped or a version-dependent meaning got wrong fails too.
//!
//! The requests are built with `kafka-protocol` alone, never with the node's own code. Every
//! failure is collected (API, version, symptom) and the test fails listing them all.

mod common;

use connection::Connection;

use std::net::SocketAddr;

use kafka_protocol::messages::api_versions_response::ApiVersion;
use kafka_protocol::messages::{
    ApiKey, ApiVersionsRequest, BrokerId, CreateTopicsRequest, DescribeQuorumRequest, FetchRequest,
    InitProducerIdRequest, ListOffsetsRequest, MetadataRequest, ProduceRequest, ProducerId,
    RequestKind, ResponseKind, TopicName, WriteTxnMarkersRequest, create_topics_request,
    describe_quorum_request, fetch_request, list_offsets_request, metadata_request,
    produce_request, write_txn_markers_request,
};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::records::RecordBatchDecoder;
use uuid::Uuid;

use common::{NodeProcess, batch, free_port};

const TOPIC: &str = "sweep";
const METADATA_TOPIC: &str = "__cluster_metadata";

fn name(text: &str) -> TopicName {
    TopicName(StrBytes::from_string(text.to_owned()))
}

fn text(value: &str) -> StrBytes {
    StrBytes::from_string(value.to_owned())
}

/// What the requests of the sweep refer to: the test topic and the cluster.
struct Context {
    node_id: i32,
    cluster_id: String,
    topic_id: Uuid,
    leader_epoch: i32,
    partition_epoch: i32,
    /// The first offset after the records produced so far.
    log_end: i64,
    /// A broker registered by the sweep (id, epoch), for heartbeats and producer id blocks.
    registered: Option<(i32, i64)>,
    /// The metadata quorum's epoch.
    quorum_epoch: i32,
    /// The transactional producers of the transaction APIs' sweep.
    producers: txn::Producers,
}

fn start_node(dir: &std::path::Path) -> (NodeProcess, SocketAddr) {
    let (client_port, controller_port) = (free_port(), free_port());
    let text = common::cluster_config_text(
        1,
        &dir.join("data"),
        client_port,
        controller_port,
        &format!("1@127.0.0.1:{controller_port}"),
        "broker.heartbeat.interval.ms=500\nbroker.session.timeout.ms=2000\n\
         transaction.state.log.min.isr=1\ntransaction.state.log.num.partitions=5\n\
         offsets.topic.num.partitions=5\ngroup.initial.rebalance.delay.ms=0\n\
         offsets.topic.replication.factor=1\ntransaction.state.log.replication.factor=1",
    );
    let client: SocketAddr = format!("127.0.0.1:{client_port}").parse().unwrap();
    let controller: SocketAddr = format!("127.0.0.1:{controller_port}").parse().unwrap();
    (
        NodeProcess::start_with_config(dir, &text, client),
        controller,
    )
}

fn advertised(connection: &mut Connection) -> Vec<ApiVersion> {
    match connection.call(
        ApiKey::ApiVersions,
        0,
        &RequestKind::ApiVersions(ApiVersionsRequest::default()),
    ) {
        Ok(ResponseKind::ApiVersions(response)) => {
            assert_eq!(response.error_code, 0, "ApiVersions v0 failed");
            response.api_keys
        }
        other => panic!("ApiVersions v0: {other:?}"),
    }
}

/// Creates the test topic, produces to it and learns its id and epochs.
fn prepare(client: &mut Connection) -> Context {
    let created = client.call(
        ApiKey::CreateTopics,
        7,
        &RequestKind::CreateTopics(create_request(TOPIC)),
    );
    assert!(
        matches!(&created, Ok(ResponseKind::CreateTopics(r)) if r.topics[0].error_code == 0),
        "creating the sweep topic: {created:?}"
    );
    let mut context = Context {
        node_id: 1,
        cluster_id: String::new(),
        topic_id: Uuid::nil(),
        leader_epoch: -1,
        partition_epoch: -1,
        log_end: 0,
        registered: None,
        quorum_epoch: -1,
        producers: txn::Producers::default(),
    };
    // The topic is in the node's image once CreateTopics answers; its leader may take a moment.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    loop {
        let Ok(ResponseKind::Metadata(metadata)) = client.call(
            ApiKey::Metadata,
            12,
            &RequestKind::Metadata(metadata_request_for(12, TOPIC)),
        ) else {
            panic!("Metadata v12 failed while preparing");
        };
        let topic = &metadata.topics[0];
        if topic.error_code == 0 && topic.partitions.first().is_some_and(|p| p.leader_id.0 == 1) {
            context.cluster_id = metadata
                .cluster_id
                .map(|c| c.to_string())
                .unwrap_or_default();
            context.topic_id = topic.topic_id;
            context.leader_epoch = topic.partitions[0].leader_epoch;
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "no leader for {TOPIC}: {metadata:?}"
        );
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    let produced = client.call(ApiKey::Produce, 9, &produce_request_for(9, &context));
    let Ok(ResponseKind::Produce(response)) = produced else {
        panic!("Produce v9 failed while preparing: {produced:?}");
    };
    let partition = &response.responses[0].partition_responses[0];
    assert_eq!(
        partition.error_code, 0,
        "Produce v9 while preparing: {response:?}"
    );
    context.log_end = partition.base_offset + 1;
    context.producers = txn::prepare(client);
    groups::prepare(client);
    context
}

/// Validated only, so every version on both listeners can ask the same growth of the sweep's
/// one-partition topic.
fn create_partitions_request() -> kafka_protocol::messages::CreatePartitionsRequest {
    kafka_protocol::messages::CreatePartitionsRequest::default()
        .with_timeout_ms(10_000)
        .with_validate_only(true)
        .with_topics(vec![
            kafka_protocol::messages::create_partitions_request::CreatePartitionsTopic::default()
                .with_name(name(TOPIC))
                .with_count(2)
                .with_assignments(None),
        ])
}

/// A CreatePartitions answer to [`create_partitions_request`]: accepted for the sweep's topic.
fn check_create_partitions(
    response: &kafka_protocol::messages::CreatePartitionsResponse,
) -> Result<(), String> {
    let topic = response.results.first().ok_or("no topic in the response")?;
    if topic.name.0.as_str() != TOPIC || topic.error_code != 0 {
        return Err(format!(
            "topic {:?} error {} {:?}",
            topic.name.0, topic.error_code, topic.error_message
        ));
    }
    Ok(())
}

fn create_request(topic: &str) -> CreateTopicsRequest {
    CreateTopicsRequest::default()
        .with_timeout_ms(10_000)
        .with_topics(vec![
            create_topics_request::CreatableTopic::default()
                .with_name(name(topic))
                .with_num_partitions(1)
                .with_replication_factor(1),
        ])
}

fn metadata_request_for(version: i16, topic: &str) -> MetadataRequest {
    let request = MetadataRequest::default().with_topics(Some(vec![
        metadata_request::MetadataRequestTopic::default().with_name(Some(name(topic))),
    ]));
    if version >= 4 {
        request.with_allow_auto_topic_creation(false)
    } else {
        request
    }
}

fn produce_request_for(version: i16, context: &Context) -> RequestKind {
    let topic = produce_request::TopicProduceData::default().with_partition_data(vec![
        produce_request::PartitionProduceData::default()
            .with_index(0)
            .with_records(Some(batch(&[format!("sweep v{version}").as_bytes()]))),
    ]);
    let topic = if version >= 13 {
        topic.with_topic_id(context.topic_id)
    } else {
        topic.with_name(name(TOPIC))
    };
    RequestKind::Produce(
        ProduceRequest::default()
            .with_acks(-1)
            .with_timeout_ms(10_000)
            .with_topic_data(vec![topic]),
    )
}

fn fetch_request_for(version: i16, context: &Context) -> FetchRequest {
    let partition = fetch_request::FetchPartition::default()
        .with_partition(0)
        .with_fetch_offset(0)
        .with_partition_max_bytes(1 << 20);
    let partition = if version >= 9 {
        partition.with_current_leader_epoch(context.leader_epoch)
    } else {
        partition
    };
    let topic = fetch_request::FetchTopic::default().with_partitions(vec![partition]);
    let topic = if version >= 13 {
        topic.with_topic_id(context.topic_id)
    } else {
        topic.with_topic(name(TOPIC))
    };
    FetchRequest::default()
        .with_max_wait_ms(0)
        .with_min_bytes(1)
        .with_max_bytes(1 << 20)
        .with_topics(vec![topic])
}

/// A request of `key` at `version` that takes the handler's real path.
fn request_for(key: ApiKey, version: i16, context: &Context) -> RequestKind {
    if let Some(request) = txn::request_for(key, version, context) {
        return request;
    }
    if let Some(request) = groups::request_for(key, version, context) {
        return request;
    }
    if let Some(request) = epochs::request_for(key, context) {
        return request;
    }
    if let Some(request) = configs::request_for(key) {
        return request;
    }
    match key {
        ApiKey::Produce => produce_request_for(version, context),
        ApiKey::Fetch => RequestKind::Fetch(fetch_request_for(version, context)),
        ApiKey::ListOffsets => {
            let partition = list_offsets_request::ListOffsetsPartition::default()
                .with_partition_index(0)
                .with_timestamp(-1);
            let partition = if version >= 4 {
                partition.with_current_leader_epoch(context.leader_epoch)
            } else {
                partition
            };
            RequestKind::ListOffsets(
                ListOffsetsRequest::default()
                    .with_replica_id(BrokerId(-1))
                    .with_topics(vec![
                        list_offsets_request::ListOffsetsTopic::default()
                            .with_name(name(TOPIC))
                            .with_partitions(vec![partition]),
                    ]),
            )
        }
        // v0 has no null list: an empty one asks for every topic, which must include ours.
        ApiKey::Metadata if version == 0 => {
            RequestKind::Metadata(MetadataRequest::default().with_topics(Some(Vec::new())))
        }
        ApiKey::Metadata => RequestKind::Metadata(metadata_request_for(version, TOPIC)),
        ApiKey::ApiVersions => {
            let request = ApiVersionsRequest::default();
            RequestKind::ApiVersions(if version >= 3 {
                request
                    .with_client_software_name(text("logjam-sweep"))
                    .with_client_software_version(text("1.0"))
            } else {
                request
            })
        }
        ApiKey::CreateTopics => RequestKind::CreateTopics(create_request(&new_topic(version))),
        ApiKey::CreatePartitions => RequestKind::CreatePartitions(create_partitions_request()),
        ApiKey::InitProducerId => RequestKind::InitProducerId(
            InitProducerIdRequest::default()
                .with_transactional_id(None)
                .with_transaction_timeout_ms(60_000),
        ),
        ApiKey::DescribeQuorum => {
            RequestKind::DescribeQuorum(DescribeQuorumRequest::default().with_topics(vec![
                describe_quorum_request::TopicData::default()
                    .with_topic_name(name(METADATA_TOPIC))
                    .with_partitions(vec![describe_quorum_request::PartitionData::default()]),
            ]))
        }
        // The coordinator's marker for a producer the partition has not seen: appended.
        ApiKey::WriteTxnMarkers => {
            RequestKind::WriteTxnMarkers(WriteTxnMarkersRequest::default().with_markers(vec![
                write_txn_markers_request::WritableTxnMarker::default()
                    .with_producer_id(ProducerId(4242))
                    .with_producer_epoch(0)
                    .with_transaction_result(true)
                    .with_coordinator_epoch(0)
                    .with_topics(vec![
                        write_txn_markers_request::WritableTxnMarkerTopic::default()
                            .with_name(name(TOPIC))
                            .with_partition_indexes(vec![0]),
                    ]),
            ]))
        }
        other => panic!("the sweep has no request for {other:?}: add one"),
    }
}

fn new_topic(version: i16) -> String {
    format!("sweep-created-v{version}-{}", std::process::id())
}

/// Checks that `response` means what `key` promises at `version`.
fn check(
    key: ApiKey,
    version: i16,
    response: &ResponseKind,
    context: &mut Context,
) -> Result<(), String> {
    if let Some(checked) = txn::check(version, response, context) {
        return checked;
    }
    if let Some(checked) = groups::check(version, response) {
        return checked;
    }
    if let Some(checked) = epochs::check(response, context) {
        return checked;
    }
    if let Some(checked) = configs::check(version, response) {
        return checked;
    }
    match response {
        ResponseKind::Produce(response) => {
            let topic = response
                .responses
                .first()
                .ok_or("no topic in the response")?;
            if version >= 13 && topic.topic_id != context.topic_id {
                return Err(format!(
                    "topic id {} instead of {}",
                    topic.topic_id, context.topic_id
                ));
            }
            if version < 13 && topic.name.0.as_str() != TOPIC {
                return Err(format!("topic {:?} instead of {TOPIC}", topic.name.0));
            }
            let partition = topic.partition_responses.first().ok_or("no partition")?;
            if partition.error_code != 0 || partition.base_offset != context.log_end {
                return Err(format!(
                    "error {} base offset {} (expected 0 and {})",
                    partition.error_code, partition.base_offset, context.log_end
                ));
            }
            context.log_end += 1;
        }
        ResponseKind::Fetch(response) => {
            if response.error_code != 0 {
                return Err(format!("top-level error {}", response.error_code));
            }
            let topic = response
                .responses
                .first()
                .ok_or("no topic in the response")?;
            if version >= 13 && topic.topic_id != context.topic_id {
                return Err(format!(
                    "topic id {} instead of {}",
                    topic.topic_id, context.topic_id
                ));
            }
            if version < 13 && topic.topic.0.as_str() != TOPIC {
                return Err(format!("topic {:?} instead of {TOPIC}", topic.topic.0));
            }
            let partition = topic.partitions.first().ok_or("no partition")?;
            if partition.error_code != 0 || partition.high_watermark != context.log_end {
                return Err(format!(
                    "error {} high watermark {} (expected 0 and {})",
                    partition.error_code, partition.high_watermark, context.log_end
                ));
            }
            let mut records = partition.records.clone().ok_or("no records")?;
            let batches = RecordBatchDecoder::decode_all(&mut records)
                .map_err(|error| format!("records do not decode: {error}"))?;
            let first = batches
                .first()
                .and_then(|batch| batch.records.first())
                .ok_or("no record at offset 0")?;
            if first.offset != 0 {
                return Err(format!("first record at offset {}", first.offset));
            }
        }
        ResponseKind::ListOffsets(response) => {
            let topic = response.topics.first().ok_or("no topic in the response")?;
            let partition = topic.partitions.first().ok_or("no partition")?;
            if topic.name.0.as_str() != TOPIC
                || partition.error_code != 0
                || partition.offset != context.log_end
            {
                return Err(format!(
                    "topic {:?} error {} offset {} (expected {TOPIC}, 0 and {})",
                    topic.name.0, partition.error_code, partition.offset, context.log_end
                ));
            }
        }
        ResponseKind::Metadata(response) => {
            if !response
                .brokers
                .iter()
                .any(|b| b.node_id.0 == context.node_id)
            {
                return Err(format!(
                    "this node is not among the brokers: {:?}",
                    response.brokers
                ));
            }
            let asked: Vec<_> = response
                .topics
                .iter()
                .filter(|t| version == 0 || t.name.as_ref().map(|n| n.0.as_str()) == Some(TOPIC))
                .collect();
            if version > 0 && response.topics.len() != 1 {
                return Err(format!("{} topics for one asked", response.topics.len()));
            }
            let Some(topic) = asked
                .iter()
                .find(|t| t.name.as_ref().map(|n| n.0.as_str()) == Some(TOPIC))
            else {
                return Err(format!(
                    "{TOPIC} missing among {} topics",
                    response.topics.len()
                ));
            };
            if topic.name.as_ref().map(|n| n.0.as_str()) != Some(TOPIC)
                || topic.error_code != 0
                || topic.partitions.len() != 1
                || topic.partitions[0].leader_id.0 != context.node_id
            {
                return Err(format!("wrong topic description: {topic:?}"));
            }
            if version >= 10 && topic.topic_id != context.topic_id {
                return Err(format!(
                    "topic id {} instead of {}",
                    topic.topic_id, context.topic_id
                ));
            }
        }
        ResponseKind::ApiVersions(response) => {
            if response.error_code != 0 || response.api_keys.is_empty() {
                return Err(format!(
                    "error {} with {} APIs",
                    response.error_code,
                    response.api_keys.len()
                ));
            }
        }
        ResponseKind::CreateTopics(response) => {
            let topic = response.topics.first().ok_or("no topic in the response")?;
            if topic.name.0.as_str() != new_topic(version) || topic.error_code != 0 {
                return Err(format!(
                    "topic {:?} error {}",
                    topic.name.0, topic.error_code
                ));
            }
            if version >= 7 && topic.topic_id.is_nil() {
                return Err("no topic id".to_owned());
            }
        }
        ResponseKind::CreatePartitions(response) => check_create_partitions(response)?,
        ResponseKind::InitProducerId(response) => {
            if response.error_code != 0 || response.producer_id.0 < 0 {
                return Err(format!(
                    "error {} producer id {}",
                    response.error_code, response.producer_id.0
                ));
            }
        }
        ResponseKind::WriteTxnMarkers(response) => {
            let marker = response
                .markers
                .first()
                .ok_or("no marker in the response")?;
            let topic = marker.topics.first().ok_or("no topic in the marker")?;
            let partition = topic.partitions.first().ok_or("no partition")?;
            if marker.producer_id.0 != 4242
                || topic.name.0.as_str() != TOPIC
                || partition.partition_index != 0
                || partition.error_code != 0
            {
                return Err(format!("wrong marker result: {response:?}"));
            }
            // The marker took one offset.
            context.log_end += 1;
        }
        ResponseKind::DescribeQuorum(response) => {
            let partition = response
                .topics
                .first()
                .and_then(|t| t.partitions.first())
                .ok_or("no partition in the response")?;
            if response.error_code != 0
                || partition.error_code != 0
                || partition.leader_id.0 != context.node_id
                || partition.current_voters.len() != 1
            {
                return Err(format!("wrong quorum description: {response:?}"));
            }
        }
        other => {
            let _ = (key, other);
        }
    }
    Ok(())
}

/// Sweeps every advertised version of every advertised API on one listener.
fn sweep(
    connection: &mut Connection,
    listener: &str,
    apis: &[ApiVersion],
    context: &mut Context,
    request: impl Fn(ApiKey, i16, &Context) -> RequestKind,
    check: impl Fn(ApiKey, i16, &ResponseKind, &mut Context) -> Result<(), String>,
) -> (usize, Vec<String>) {
    let mut calls = 0;
    let mut failures = Vec::new();
    for api in apis {
        let Ok(key) = ApiKey::try_from(api.api_key) else {
            failures.push(format!(
                "{listener}: unknown API key {} advertised",
                api.api_key
            ));
            continue;
        };
        let range = key.valid_versions();
        if api.min_version < range.min || api.max_version > range.max {
            failures.push(format!(
                "{listener}: {key:?} advertised {}..={}, beyond what the protocol defines ({}..={})",
                api.min_version, api.max_version, range.min, range.max
            ));
            continue;
        }
        for version in api.min_version..=api.max_version {
            calls += 1;
            let body = request(key, version, context);
            let outcome = connection
                .call(key, version, &body)
                .and_then(|response| check(key, version, &response, context));
            if let Err(symptom) = outcome {
                failures.push(format!("{listener}: {key:?} v{version}: {symptom}"));
            }
        }
    }
    (calls, failures)
}

#[test]
fn every_advertised_version_of_every_advertised_api_is_answered_correctly() {
    let dir = tempfile::tempdir().unwrap();
    let (node, controller_address) = start_node(dir.path());
    let mut client = Connection::open(node.address);
    let mut context = prepare(&mut client);

    let client_apis = advertised(&mut client);
    let (client_calls, mut failures) = sweep(
        &mut client,
        "client listener",
        &client_apis,
        &mut context,
        request_for,
        check,
    );

    let mut controller = Connection::open(controller_address);
    context.quorum_epoch = controller::quorum_epoch(&mut controller);
    let controller_apis = advertised(&mut controller);
    let (controller_calls, controller_failures) = sweep(
        &mut controller,
        "controller listener",
        &controller_apis,
        &mut context,
        controller::request_for,
        controller::check,
    );
    failures.extend(controller_failures);

    let log = std::fs::read_to_string(dir.path().join("node.log")).unwrap_or_default();
    assert!(
        failures.is_empty(),
        "{} of {} calls failed:\n{}\nnode log tail:\n{}",
        failures.len(),
        client_calls + controller_calls,
        failures.join("\n"),
        common::tail(&log, 3000)
    );
    // The sweep did cover the APIs clients need, at more than one version each.
    for key in [
        ApiKey::Produce,
        ApiKey::Fetch,
        ApiKey::ListOffsets,
        ApiKey::Metadata,
    ] {
        let api = client_apis
            .iter()
            .find(|api| api.api_key == key as i16)
            .unwrap_or_else(|| panic!("{key:?} not advertised"));
        assert!(api.max_version > api.min_version, "{key:?}: {api:?}");
    }
    for key in [ApiKey::Vote, ApiKey::Fetch, ApiKey::BrokerRegistration] {
        assert!(
            controller_apis.iter().any(|api| api.api_key == key as i16),
            "{key:?} not advertised on the controller listener"
        );
    }
    drop(node);
}

#[path = "sweep/configs.rs"]
mod configs;
#[path = "sweep/connection.rs"]
mod connection;
#[path = "sweep/controller.rs"]
mod controller;
#[path = "sweep/epochs.rs"]
mod epochs;
#[path = "sweep/groups.rs"]
mod groups;
#[path = "sweep/txn.rs"]
mod txn;
