//! Fuzzing the request path: random bytes and mutated valid requests never take a node down,
//! and it keeps serving valid requests after each.
//!
//! The fuzz is bounded (a fixed number of proptest cases) so it runs in every test run:
//! random bytes and mutations of valid requests of every supported API go through the same
//! entry point the sockets use, `frame::handle_frame`.

mod common;

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use bytes::{Buf, Bytes, BytesMut};
use common::{batch, config, request_frame};
use kafka_protocol::messages::create_topics_request::CreatableTopic;
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::write_txn_markers_request::{
    WritableTxnMarker, WritableTxnMarkerTopic,
};
use kafka_protocol::messages::*;
use kafka_protocol::protocol::Decodable;
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::records::RecordBatchDecoder;
use logjam_node::broker::Broker;
use logjam_node::network::framing::{FrameOutcome, handle_frame};
use proptest::prelude::*;

/// How long a fuzz case waits for an answer; a Fetch may ask to wait longer.
const PATIENCE: Duration = Duration::from_millis(100);

fn topic_name(name: &'static str) -> TopicName {
    TopicName(StrBytes::from_static_str(name))
}

/// One valid request of every supported API, as frames without the length prefix.
fn valid_frames() -> Vec<Bytes> {
    let strip = |frame: BytesMut| frame.freeze().slice(4..);
    vec![
        strip(request_frame(
            ApiKey::ApiVersions,
            3,
            1,
            &ApiVersionsRequest::default()
                .with_client_software_name(StrBytes::from_static_str("fuzz"))
                .with_client_software_version(StrBytes::from_static_str("1")),
        )),
        strip(request_frame(
            ApiKey::Metadata,
            12,
            2,
            &MetadataRequest::default().with_topics(Some(vec![
                MetadataRequestTopic::default().with_name(Some(topic_name("fuzz"))),
            ])),
        )),
        strip(request_frame(
            ApiKey::CreateTopics,
            7,
            3,
            &CreateTopicsRequest::default().with_topics(vec![
                CreatableTopic::default()
                    .with_name(topic_name("fuzz-created"))
                    .with_num_partitions(2)
                    .with_replication_factor(1),
            ]),
        )),
        strip(request_frame(
            ApiKey::Produce,
            9,
            4,
            &ProduceRequest::default()
                .with_acks(-1)
                .with_timeout_ms(1000)
                .with_topic_data(vec![
                    TopicProduceData::default()
                        .with_name(topic_name("fuzz"))
                        .with_partition_data(vec![
                            PartitionProduceData::default()
                                .with_index(0)
                                .with_records(Some(batch(&[b"a", b"bb"]))),
                        ]),
                ]),
        )),
        strip(request_frame(
            ApiKey::Fetch,
            12,
            5,
            &FetchRequest::default()
                .with_max_wait_ms(0)
                .with_max_bytes(1 << 20)
                .with_topics(vec![
                    FetchTopic::default()
                        .with_topic(topic_name("fuzz"))
                        .with_partitions(vec![
                            FetchPartition::default()
                                .with_partition(0)
                                .with_fetch_offset(0)
                                .with_partition_max_bytes(1 << 20),
                        ]),
                ]),
        )),
        strip(request_frame(
            ApiKey::ListOffsets,
            7,
            6,
            &ListOffsetsRequest::default().with_topics(vec![
                ListOffsetsTopic::default()
                    .with_name(topic_name("fuzz"))
                    .with_partitions(vec![
                        ListOffsetsPartition::default()
                            .with_partition_index(0)
                            .with_timestamp(-1),
                    ]),
            ]),
        )),
        // The transaction coordinator's APIs (coordinator/txn.rs).
        strip(request_frame(
            ApiKey::FindCoordinator,
            4,
            7,
            &FindCoordinatorRequest::default()
                .with_key_type(1)
                .with_coordinator_keys(vec![StrBytes::from_static_str("fuzz-txn")]),
        )),
        strip(request_frame(
            ApiKey::InitProducerId,
            4,
            8,
            &InitProducerIdRequest::default()
                .with_transactional_id(Some(TransactionalId(StrBytes::from_static_str("fuzz-txn"))))
                .with_transaction_timeout_ms(60_000),
        )),
        strip(request_frame(
            ApiKey::AddPartitionsToTxn,
            3,
            9,
            &AddPartitionsToTxnRequest::default()
                .with_v3_and_below_transactional_id(TransactionalId(StrBytes::from_static_str(
                    "fuzz-txn",
                )))
                .with_v3_and_below_producer_id(ProducerId(0))
                .with_v3_and_below_topics(vec![
                    add_partitions_to_txn_request::AddPartitionsToTxnTopic::default()
                        .with_name(topic_name("fuzz"))
                        .with_partitions(vec![0]),
                ]),
        )),
        // v4+: batched, the leader's verify-only form.
        strip(request_frame(
            ApiKey::AddPartitionsToTxn,
            5,
            12,
            &AddPartitionsToTxnRequest::default().with_transactions(vec![
                add_partitions_to_txn_request::AddPartitionsToTxnTransaction::default()
                    .with_transactional_id(TransactionalId(StrBytes::from_static_str("fuzz-txn")))
                    .with_producer_id(ProducerId(0))
                    .with_verify_only(true)
                    .with_topics(vec![
                        add_partitions_to_txn_request::AddPartitionsToTxnTopic::default()
                            .with_name(topic_name("fuzz"))
                            .with_partitions(vec![0, 1]),
                    ]),
            ]),
        )),
        strip(request_frame(
            ApiKey::AddOffsetsToTxn,
            4,
            13,
            &AddOffsetsToTxnRequest::default()
                .with_transactional_id(TransactionalId(StrBytes::from_static_str("fuzz-txn")))
                .with_producer_id(ProducerId(0))
                .with_group_id(GroupId(StrBytes::from_static_str("fuzz-group"))),
        )),
        strip(request_frame(
            ApiKey::TxnOffsetCommit,
            5,
            23,
            &TxnOffsetCommitRequest::default()
                .with_transactional_id(TransactionalId(StrBytes::from_static_str("fuzz-txn")))
                .with_group_id(GroupId(StrBytes::from_static_str("fuzz-group")))
                .with_producer_id(ProducerId(0))
                .with_generation_id(3)
                .with_member_id(StrBytes::from_static_str("m"))
                .with_group_instance_id(Some(StrBytes::from_static_str("i")))
                .with_topics(vec![
                    txn_offset_commit_request::TxnOffsetCommitRequestTopic::default()
                        .with_name(topic_name("fuzz"))
                        .with_partitions(vec![
                            txn_offset_commit_request::TxnOffsetCommitRequestPartition::default()
                                .with_partition_index(0)
                                .with_committed_offset(5)
                                .with_committed_metadata(Some(StrBytes::from_static_str("x"))),
                        ]),
                ]),
        )),
        strip(request_frame(
            ApiKey::DescribeTransactions,
            0,
            14,
            &DescribeTransactionsRequest::default().with_transactional_ids(vec![TransactionalId(
                StrBytes::from_static_str("fuzz-txn"),
            )]),
        )),
        strip(request_frame(
            ApiKey::ListTransactions,
            1,
            15,
            &ListTransactionsRequest::default()
                .with_state_filters(vec![StrBytes::from_static_str("Ongoing")])
                .with_producer_id_filters(vec![ProducerId(0)])
                .with_duration_filter(1_000),
        )),
        strip(request_frame(
            ApiKey::EndTxn,
            4,
            10,
            &EndTxnRequest::default()
                .with_transactional_id(TransactionalId(StrBytes::from_static_str("fuzz-txn")))
                .with_committed(true),
        )),
        strip(request_frame(
            ApiKey::WriteTxnMarkers,
            1,
            11,
            &WriteTxnMarkersRequest::default().with_markers(vec![
                WritableTxnMarker::default()
                    .with_producer_id(ProducerId(77))
                    .with_producer_epoch(0)
                    .with_transaction_result(false)
                    .with_coordinator_epoch(0)
                    .with_topics(vec![
                        WritableTxnMarkerTopic::default()
                            .with_name(topic_name("fuzz"))
                            .with_partition_indexes(vec![0, 1]),
                    ]),
            ]),
        )),
        // The group coordinator's APIs (coordinator/group.rs).
        strip(request_frame(
            ApiKey::OffsetCommit,
            9,
            12,
            &OffsetCommitRequest::default()
                .with_group_id(GroupId(StrBytes::from_static_str("fuzz-group")))
                .with_generation_id_or_member_epoch(-1)
                .with_topics(vec![
                    offset_commit_request::OffsetCommitRequestTopic::default()
                        .with_name(topic_name("fuzz"))
                        .with_partitions(vec![
                            offset_commit_request::OffsetCommitRequestPartition::default()
                                .with_partition_index(0)
                                .with_committed_offset(3)
                                .with_committed_metadata(Some(StrBytes::from_static_str("m"))),
                        ]),
                ]),
        )),
        strip(request_frame(
            ApiKey::OffsetFetch,
            8,
            13,
            &OffsetFetchRequest::default().with_groups(vec![
                offset_fetch_request::OffsetFetchRequestGroup::default()
                    .with_group_id(GroupId(StrBytes::from_static_str("fuzz-group")))
                    .with_topics(None),
            ]),
        )),
        strip(request_frame(
            ApiKey::OffsetFetch,
            1,
            14,
            &OffsetFetchRequest::default()
                .with_group_id(GroupId(StrBytes::from_static_str("fuzz-group")))
                .with_topics(Some(vec![
                    offset_fetch_request::OffsetFetchRequestTopic::default()
                        .with_name(topic_name("fuzz"))
                        .with_partition_indexes(vec![0]),
                ])),
        )),
        strip(request_frame(
            ApiKey::JoinGroup,
            5,
            15,
            &JoinGroupRequest::default()
                .with_group_id(GroupId(StrBytes::from_static_str("fuzz-group")))
                .with_session_timeout_ms(10_000)
                .with_rebalance_timeout_ms(10_000)
                .with_protocol_type(StrBytes::from_static_str("consumer"))
                .with_protocols(vec![
                    join_group_request::JoinGroupRequestProtocol::default()
                        .with_name(StrBytes::from_static_str("range"))
                        .with_metadata(Bytes::from_static(b"m")),
                ]),
        )),
        strip(request_frame(
            ApiKey::SyncGroup,
            5,
            16,
            &SyncGroupRequest::default()
                .with_group_id(GroupId(StrBytes::from_static_str("fuzz-group")))
                .with_generation_id(1)
                .with_member_id(StrBytes::from_static_str("m"))
                .with_assignments(vec![
                    sync_group_request::SyncGroupRequestAssignment::default()
                        .with_member_id(StrBytes::from_static_str("m"))
                        .with_assignment(Bytes::from_static(b"a")),
                ]),
        )),
        strip(request_frame(
            ApiKey::Heartbeat,
            4,
            17,
            &HeartbeatRequest::default()
                .with_group_id(GroupId(StrBytes::from_static_str("fuzz-group")))
                .with_member_id(StrBytes::from_static_str("m")),
        )),
        strip(request_frame(
            ApiKey::LeaveGroup,
            5,
            18,
            &LeaveGroupRequest::default()
                .with_group_id(GroupId(StrBytes::from_static_str("fuzz-group")))
                .with_members(vec![
                    leave_group_request::MemberIdentity::default()
                        .with_member_id(StrBytes::from_static_str("m"))
                        .with_reason(Some(StrBytes::from_static_str("bye"))),
                ]),
        )),
        strip(request_frame(
            ApiKey::DescribeGroups,
            5,
            19,
            &DescribeGroupsRequest::default()
                .with_groups(vec![GroupId(StrBytes::from_static_str("fuzz-group"))]),
        )),
        strip(request_frame(
            ApiKey::ListGroups,
            5,
            20,
            &ListGroupsRequest::default()
                .with_states_filter(vec![StrBytes::from_static_str("Stable")]),
        )),
        strip(request_frame(
            ApiKey::DeleteGroups,
            2,
            21,
            &DeleteGroupsRequest::default()
                .with_groups_names(vec![GroupId(StrBytes::from_static_str("fuzz-group"))]),
        )),
        strip(request_frame(
            ApiKey::OffsetDelete,
            0,
            22,
            &OffsetDeleteRequest::default()
                .with_group_id(GroupId(StrBytes::from_static_str("fuzz-group")))
                .with_topics(vec![
                    offset_delete_request::OffsetDeleteRequestTopic::default()
                        .with_name(topic_name("fuzz"))
                        .with_partitions(vec![
                            offset_delete_request::OffsetDeleteRequestPartition::default()
                                .with_partition_index(0),
                        ]),
                ]),
        )),
        // The new consumer protocol (KIP-848).
        strip(request_frame(
            ApiKey::ConsumerGroupHeartbeat,
            1,
            23,
            &ConsumerGroupHeartbeatRequest::default()
                .with_group_id(GroupId(StrBytes::from_static_str("fuzz-cg")))
                .with_member_id(StrBytes::from_static_str("fuzz-member-0000000001"))
                .with_member_epoch(0)
                .with_rebalance_timeout_ms(10_000)
                .with_subscribed_topic_names(Some(vec![topic_name("fuzz")]))
                .with_server_assignor(Some(StrBytes::from_static_str("range")))
                .with_topic_partitions(Some(vec![
                    consumer_group_heartbeat_request::TopicPartitions::default()
                        .with_partitions(vec![0, 1]),
                ])),
        )),
        strip(request_frame(
            ApiKey::ConsumerGroupDescribe,
            1,
            24,
            &ConsumerGroupDescribeRequest::default()
                .with_group_ids(vec![GroupId(StrBytes::from_static_str("fuzz-cg"))]),
        )),
        // The topic CreateTopics made above, grown.
        strip(request_frame(
            ApiKey::CreatePartitions,
            3,
            25,
            &kafka_protocol::messages::CreatePartitionsRequest::default()
                .with_timeout_ms(5_000)
                .with_topics(vec![
                    kafka_protocol::messages::create_partitions_request::CreatePartitionsTopic::default()
                        .with_name(topic_name("fuzz-created"))
                        .with_count(4)
                        .with_assignments(None),
                ]),
        )),
    ]
}

fn broker(dir: &std::path::Path) -> Arc<Broker> {
    let broker = Broker::open(config(
        dir,
        0,
        "transaction.state.log.num.partitions=2\ntransaction.state.log.min.isr=1",
    ))
    .unwrap();
    broker.create_topic("fuzz", Some(2), None, &[]).unwrap();
    Arc::new(broker)
}

/// One node shared by every fuzz case of a test binary: damage would accumulate, so the last
/// case checks a node that has already survived all the earlier ones.
fn shared() -> &'static (tempfile::TempDir, Arc<Broker>, tokio::runtime::Runtime) {
    static SHARED: OnceLock<(tempfile::TempDir, Arc<Broker>, tokio::runtime::Runtime)> =
        OnceLock::new();
    SHARED.get_or_init(|| {
        // Fuzzed CreateTopics requests create many topics, each holding files open.
        logjam_node::network::server::raise_open_files_limit();
        let dir = tempfile::tempdir().unwrap();
        let broker = broker(dir.path());
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        (dir, broker, runtime)
    })
}

/// The node still answers ApiVersions, and a valid Produce followed by a Fetch of what it
/// appended.
async fn assert_still_serving(broker: &Broker) {
    let frames = valid_frames();
    let versions: ApiVersionsResponse = decode(
        handle_frame(broker, "/127.0.0.1", frames[0].clone()).await,
        ApiKey::ApiVersions,
        3,
    );
    assert_eq!(versions.error_code, 0);
    let produced: ProduceResponse = decode(
        handle_frame(broker, "/127.0.0.1", frames[3].clone()).await,
        ApiKey::Produce,
        9,
    );
    let partition = &produced.responses[0].partition_responses[0];
    assert_eq!(
        partition.error_code, 0,
        "valid produce refused: {partition:?}"
    );
    let fetch = FetchRequest::default()
        .with_max_wait_ms(0)
        .with_max_bytes(1 << 20)
        .with_topics(vec![
            FetchTopic::default()
                .with_topic(topic_name("fuzz"))
                .with_partitions(vec![
                    FetchPartition::default()
                        .with_partition(0)
                        .with_fetch_offset(partition.base_offset)
                        .with_partition_max_bytes(1 << 20),
                ]),
        ]);
    let frame = request_frame(ApiKey::Fetch, 12, 5, &fetch)
        .freeze()
        .slice(4..);
    let fetched: FetchResponse = decode(
        handle_frame(broker, "/127.0.0.1", frame).await,
        ApiKey::Fetch,
        12,
    );
    let data = &fetched.responses[0].partitions[0];
    assert_eq!(data.error_code, 0, "valid fetch refused: {data:?}");
    let mut records = data.records.clone().unwrap_or_default();
    let batches = RecordBatchDecoder::decode_all(&mut records).unwrap();
    let values: Vec<Bytes> = batches
        .iter()
        .flat_map(|set| &set.records)
        .filter(|record| record.offset >= partition.base_offset)
        .take(2)
        .map(|record| record.value.clone().unwrap())
        .collect();
    assert_eq!(
        values,
        vec![Bytes::from_static(b"a"), Bytes::from_static(b"bb")]
    );
}

/// Decodes the response frame a handler produced.
fn decode<R: Decodable>(outcome: FrameOutcome, key: ApiKey, version: i16) -> R {
    let FrameOutcome::Respond(frame) = outcome else {
        panic!("a valid request was not answered: {outcome:?}");
    };
    let mut frame = frame.freeze().slice(4..);
    ResponseHeader::decode(&mut frame, key.response_header_version(version)).unwrap();
    let response = R::decode(&mut frame, version).unwrap();
    assert_eq!(frame.remaining(), 0);
    response
}

#[derive(Debug, Clone)]
enum Mutation {
    Flip { at: usize, mask: u8 },
    Truncate { at: usize },
    Overwrite { at: usize, bytes: Vec<u8> },
    Insert { at: usize, bytes: Vec<u8> },
}

fn mutate(frame: &Bytes, mutations: &[Mutation]) -> Bytes {
    let mut bytes = frame.to_vec();
    for mutation in mutations {
        if bytes.is_empty() {
            break;
        }
        match mutation {
            Mutation::Flip { at, mask } => {
                let at = at % bytes.len();
                bytes[at] ^= mask | 1;
            }
            Mutation::Truncate { at } => bytes.truncate(at % bytes.len()),
            Mutation::Overwrite { at, bytes: new } => {
                for (i, byte) in new.iter().enumerate() {
                    let at = (at + i) % bytes.len();
                    bytes[at] = *byte;
                }
            }
            Mutation::Insert { at, bytes: new } => {
                let at = at % bytes.len();
                bytes.splice(at..at, new.iter().copied());
            }
        }
    }
    Bytes::from(bytes)
}

fn mutation() -> impl Strategy<Value = Mutation> {
    prop_oneof![
        (any::<usize>(), any::<u8>()).prop_map(|(at, mask)| Mutation::Flip { at, mask }),
        any::<usize>().prop_map(|at| Mutation::Truncate { at }),
        // Overwrite with the values most likely to hit length fields: -1, 0, huge.
        (
            any::<usize>(),
            prop_oneof![
                Just(vec![0xff, 0xff, 0xff, 0xff]),
                Just(vec![0x7f, 0xff, 0xff, 0xff]),
                Just(vec![0, 0, 0, 0]),
                Just(vec![0xff, 0xff, 0xff, 0xff, 0x0f]),
                proptest::collection::vec(any::<u8>(), 1..8),
            ]
        )
            .prop_map(|(at, bytes)| Mutation::Overwrite { at, bytes }),
        (
            any::<usize>(),
            proptest::collection::vec(any::<u8>(), 1..16)
        )
            .prop_map(|(at, bytes)| Mutation::Insert { at, bytes }),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 5000, failure_persistence: None, ..ProptestConfig::default() })]

    /// Mutated valid requests of every API: never a panic, and the node keeps serving.
    #[test]
    fn mutated_valid_requests_never_break_the_node(
        which in 0usize..7,
        mutations in proptest::collection::vec(mutation(), 1..4),
    ) {
        let (_, broker, runtime) = shared();
        let frame = mutate(&valid_frames()[which], &mutations);
        runtime.block_on(async {
            // A mutated Fetch may legitimately long-poll for days: bound the wait, not the outcome.
            let _ = tokio::time::timeout(PATIENCE, handle_frame(broker, "/127.0.0.1", frame)).await;
            assert_still_serving(broker).await;
        });
    }

    /// Random bytes, with a plausible header in front half of the time.
    #[test]
    fn random_frames_never_break_the_node(
        key in 0i16..80,
        version in -1i16..20,
        body in proptest::collection::vec(any::<u8>(), 0..256),
        with_header in any::<bool>(),
    ) {
        let (_, broker, runtime) = shared();
        let mut frame = Vec::new();
        if with_header {
            frame.extend_from_slice(&key.to_be_bytes());
            frame.extend_from_slice(&version.to_be_bytes());
            frame.extend_from_slice(&7i32.to_be_bytes());
        }
        frame.extend_from_slice(&body);
        runtime.block_on(async {
            let _ = tokio::time::timeout(PATIENCE, handle_frame(broker, "/127.0.0.1", Bytes::from(frame))).await;
            assert_still_serving(broker).await;
        });
    }
}

/// Regression: `kafka-protocol` pre-allocated arrays from the wire length, so a tiny request
/// claiming two billion topics aborted the process (see vendor/kafka-protocol).
#[tokio::test]
async fn huge_array_length_does_not_abort() {
    let dir = tempfile::tempdir().unwrap();
    let broker = broker(dir.path());
    // Metadata v1 header, then a topics array of i32::MAX entries and nothing else.
    let mut frame = request_frame(
        ApiKey::Metadata,
        1,
        9,
        &MetadataRequest::default().with_topics(Some(vec![])),
    );
    let length_at = frame.len() - 4;
    frame[length_at..].copy_from_slice(&i32::MAX.to_be_bytes());
    let outcome = handle_frame(&broker, "/127.0.0.1", frame.freeze().slice(4..)).await;
    assert!(matches!(outcome, FrameOutcome::Close(_)), "{outcome:?}");
    assert_still_serving(&broker).await;
}
