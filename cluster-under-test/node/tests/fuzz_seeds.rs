//! Not a check: writes the committed seed corpus of the cargo-fuzz targets under `fuzz/seeds/`
//! (see fuzz/run.sh), so each target starts from valid inputs instead of guessing past length
//! fields and CRCs: a request of every client API at every served version, real record
//! batches, and real log directories (clean and crashed) in the storage_recovery target's
//! format. Run it when the requests or the storage format change:
//! `cargo test -p logjam-node --test fuzz_seeds -- --ignored`.

mod common;

use std::path::{Path, PathBuf};

use bytes::BytesMut;
use common::{batch, request_frame};
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::*;
use kafka_protocol::protocol::{Encodable, StrBytes};
use logjam_node::versions::CLIENT_APIS;
use logjam_storage::{BatchBuilder, LeaderEpoch, LogConfig, LogManager, TopicPartition, lock_log};

/// What `fuzz/fuzz_targets/storage_recovery.rs` splits its input at.
const SEPARATOR: &[u8] = b"\n@@logjam-file@@\n";

fn seeds(target: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../fuzz/seeds")
        .join(target);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn default_request(key: ApiKey) -> RequestKind {
    match key {
        ApiKey::Produce => RequestKind::Produce(ProduceRequest::default().with_acks(-1)),
        ApiKey::Fetch => RequestKind::Fetch(FetchRequest::default()),
        ApiKey::ListOffsets => RequestKind::ListOffsets(ListOffsetsRequest::default()),
        ApiKey::OffsetForLeaderEpoch => {
            RequestKind::OffsetForLeaderEpoch(OffsetForLeaderEpochRequest::default())
        }
        ApiKey::DescribeConfigs => RequestKind::DescribeConfigs(
            DescribeConfigsRequest::default().with_resources(vec![
                describe_configs_request::DescribeConfigsResource::default()
                    .with_resource_type(2)
                    .with_resource_name(StrBytes::from_static_str("fuzz")),
            ]),
        ),
        ApiKey::Metadata => RequestKind::Metadata(MetadataRequest::default()),
        ApiKey::ApiVersions => RequestKind::ApiVersions(ApiVersionsRequest::default()),
        ApiKey::CreateTopics => RequestKind::CreateTopics(CreateTopicsRequest::default()),
        ApiKey::CreatePartitions => RequestKind::CreatePartitions(
            kafka_protocol::messages::CreatePartitionsRequest::default().with_topics(vec![
                kafka_protocol::messages::create_partitions_request::CreatePartitionsTopic::default()
                    .with_name(TopicName(StrBytes::from_static_str("fuzz")))
                    .with_count(3)
                    .with_assignments(None),
            ]),
        ),
        ApiKey::DescribeQuorum => RequestKind::DescribeQuorum(DescribeQuorumRequest::default()),
        ApiKey::InitProducerId => RequestKind::InitProducerId(
            InitProducerIdRequest::default()
                .with_producer_id(ProducerId(-1))
                .with_producer_epoch(-1),
        ),
        ApiKey::ConsumerGroupHeartbeat => RequestKind::ConsumerGroupHeartbeat(
            ConsumerGroupHeartbeatRequest::default()
                .with_group_id(GroupId(StrBytes::from_static_str("seed-cg")))
                .with_member_id(StrBytes::from_static_str("seed-member-000000000001"))
                .with_subscribed_topic_names(Some(vec![TopicName(StrBytes::from_static_str(
                    "fuzz",
                ))]))
                .with_topic_partitions(Some(vec![])),
        ),
        ApiKey::ConsumerGroupDescribe => RequestKind::ConsumerGroupDescribe(
            ConsumerGroupDescribeRequest::default()
                .with_group_ids(vec![GroupId(StrBytes::from_static_str("seed-cg"))]),
        ),
        // The coordinators' APIs: an empty request still takes the handler's path.
        ApiKey::WriteTxnMarkers => RequestKind::WriteTxnMarkers(WriteTxnMarkersRequest::default()),
        ApiKey::FindCoordinator => RequestKind::FindCoordinator(FindCoordinatorRequest::default()),
        ApiKey::AddPartitionsToTxn => RequestKind::AddPartitionsToTxn(AddPartitionsToTxnRequest::default()),
        ApiKey::AddOffsetsToTxn => RequestKind::AddOffsetsToTxn(AddOffsetsToTxnRequest::default()),
        ApiKey::EndTxn => RequestKind::EndTxn(EndTxnRequest::default()),
        ApiKey::TxnOffsetCommit => RequestKind::TxnOffsetCommit(TxnOffsetCommitRequest::default()),
        ApiKey::DescribeTransactions => RequestKind::DescribeTransactions(DescribeTransactionsRequest::default()),
        ApiKey::ListTransactions => RequestKind::ListTransactions(ListTransactionsRequest::default()),
        ApiKey::OffsetCommit => RequestKind::OffsetCommit(OffsetCommitRequest::default()),
        ApiKey::OffsetFetch => RequestKind::OffsetFetch(OffsetFetchRequest::default()),
        ApiKey::JoinGroup => RequestKind::JoinGroup(JoinGroupRequest::default()),
        ApiKey::SyncGroup => RequestKind::SyncGroup(SyncGroupRequest::default()),
        ApiKey::Heartbeat => RequestKind::Heartbeat(HeartbeatRequest::default()),
        ApiKey::LeaveGroup => RequestKind::LeaveGroup(LeaveGroupRequest::default()),
        ApiKey::DescribeGroups => RequestKind::DescribeGroups(DescribeGroupsRequest::default()),
        ApiKey::ListGroups => RequestKind::ListGroups(ListGroupsRequest::default()),
        ApiKey::DeleteGroups => RequestKind::DeleteGroups(DeleteGroupsRequest::default()),
        ApiKey::OffsetDelete => RequestKind::OffsetDelete(OffsetDeleteRequest::default()),
        other => panic!("no seed request for {other:?}: add one"),
    }
}

/// A request frame without its length prefix: header, then the body.
fn frame_of(key: ApiKey, version: i16, body: &RequestKind) -> BytesMut {
    let mut buf = BytesMut::new();
    RequestHeader::default()
        .with_request_api_key(key as i16)
        .with_request_api_version(version)
        .with_correlation_id(1)
        .with_client_id(Some(StrBytes::from_static_str("seed")))
        .encode(&mut buf, key.request_header_version(version))
        .unwrap();
    body.encode(&mut buf, version).unwrap();
    buf
}

#[test]
#[ignore = "writes fuzz/seeds; run by hand when requests or the storage format change"]
fn write_fuzz_seeds() {
    let requests = seeds("node_request");
    for &(key, min, max) in CLIENT_APIS {
        for version in [min, max] {
            let frame = frame_of(key, version, &default_request(key));
            std::fs::write(requests.join(format!("{key:?}-v{version}")), &frame).unwrap();
        }
    }
    let produce = ProduceRequest::default()
        .with_acks(-1)
        .with_timeout_ms(1000)
        .with_topic_data(vec![
            TopicProduceData::default()
                .with_name(TopicName(StrBytes::from_static_str("fuzz")))
                .with_partition_data(vec![
                    PartitionProduceData::default()
                        .with_index(0)
                        .with_records(Some(batch(&[b"a", b"bb"]))),
                ]),
        ]);
    std::fs::write(
        requests.join("Produce-v9-records"),
        &request_frame(ApiKey::Produce, 9, 2, &produce)[4..],
    )
    .unwrap();

    let batches = seeds("record_batch");
    let mut builder = BatchBuilder::new(1_000);
    builder.record(Some(b"key"), Some(b"value"));
    let one = builder.build();
    builder.record(None, Some(b"second"));
    let two = builder.build();
    std::fs::write(batches.join("one-record"), &one).unwrap();
    std::fs::write(batches.join("two-batches"), [one.clone(), two].concat()).unwrap();
    std::fs::write(
        batches.join("protocol-batch"),
        batch(&[b"x", b"yy", b"zzz"]),
    )
    .unwrap();

    let recovery = seeds("storage_recovery");
    for clean in [true, false] {
        let dir = tempfile::tempdir().unwrap();
        let config = LogConfig {
            segment_bytes: 16 * 1024,
            index_interval_bytes: 256,
            ..LogConfig::default()
        };
        let tp = TopicPartition::new("fuzz", 0);
        let manager = LogManager::open(dir.path(), config.clone()).unwrap();
        let log = manager.create_log(tp.clone(), config).unwrap();
        // The broker's clock at append: no batch may be stamped an hour after it.
        let now_ms = 1_700_000_000_000;
        for epoch in 1..=3 {
            let mut log = lock_log(&log);
            log.append_as_leader(&one, LeaderEpoch(epoch), now_ms)
                .unwrap();
            log.append_as_leader(&batch(&[b"x", b"yy"]), LeaderEpoch(epoch), now_ms)
                .unwrap();
        }
        lock_log(&log).flush().unwrap();
        if clean {
            manager.shutdown().unwrap();
        } else {
            lock_log(&log)
                .append_as_leader(&one, LeaderEpoch(3), now_ms)
                .unwrap();
        }
        drop(log);
        drop(manager);
        let partition = dir.path().join(tp.dir_name());
        let stem = "00000000000000000000";
        let read = |path: PathBuf| std::fs::read(path).ok();
        let parts = [
            read(partition.join(format!("{stem}.log"))),
            read(partition.join(format!("{stem}.index"))),
            read(partition.join(format!("{stem}.timeindex"))),
            read(partition.join("leader-epoch-checkpoint")),
            read(dir.path().join("recovery-point-offset-checkpoint")),
            read(dir.path().join("log-start-offset-checkpoint")),
            read(partition.join(format!("{stem}.snapshot"))),
            read(dir.path().join(".kafka_cleanshutdown")),
        ];
        let mut input = Vec::new();
        for (i, part) in parts.iter().enumerate() {
            if i > 0 {
                input.extend_from_slice(SEPARATOR);
            }
            input.extend_from_slice(part.as_deref().unwrap_or_default());
        }
        let name = if clean { "clean-shutdown" } else { "crashed" };
        std::fs::write(recovery.join(name), input).unwrap();
    }
}
