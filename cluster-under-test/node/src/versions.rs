//! The APIs and versions each listener serves: the one table ApiVersions advertises and the
//! version checks enforce, so a client is never offered a version the node does not answer.
//!
//! Each range is what the node's handlers really implement and the version sweep
//! (`tests/api_version_sweep.rs`) answers correctly, not the whole range `kafka-protocol` knows:
//! that crate's `ApiKey::valid_versions` includes versions Kafka marks unstable (InitProducerId
//! v6, whose 2PC fields its message types cannot encode), DescribeQuorum stops at v1 (v2's
//! voter endpoints are not tracked, so a v2 answer would be missing them), and the controller
//! listener's Fetch is the KRaft fetch, which needs `LastFetchedEpoch` (v12+) to detect a
//! diverging log.
//!
//! The minimums are Kafka 4's (KIP-896 removed Produce v0-v2, Fetch v0-v3, ListOffsets v0 and
//! CreateTopics v0-v1, and `kafka-protocol` 0.18 cannot decode them either). Clients that still
//! need them (librdkafka with `broker.version.fallback` below 0.11, kafka-python pinned to
//! `(0, 10)`) are refused by Kafka 4 brokers in the same way. librdkafka 2.x and kafka-python
//! negotiate within these ranges: Metadata from v0, ApiVersions from v0, Produce v3+ (message
//! format v2), Fetch v4+, ListOffsets v1+, OffsetForLeaderEpoch v2+.

use kafka_protocol::messages::ApiKey;
use kafka_protocol::messages::api_versions_response::ApiVersion;

/// One served API: its key and the inclusive version range.
pub type Served = (ApiKey, i16, i16);

/// The client listener's APIs (a broker).
pub const CLIENT_APIS: &[Served] = &[
    (ApiKey::Produce, 3, 13),
    (ApiKey::Fetch, 4, 18),
    (ApiKey::ListOffsets, 1, 10),
    // Consumers' truncation detection (KIP-320); v0-v1 are gone in Kafka 4 (KIP-896).
    (ApiKey::OffsetForLeaderEpoch, 2, 4),
    (ApiKey::Metadata, 0, 13),
    (ApiKey::ApiVersions, 0, 4),
    (ApiKey::CreateTopics, 2, 7),
    (ApiKey::CreatePartitions, 0, 3),
    // v0 is gone in Kafka 4 (KIP-896).
    (ApiKey::DescribeConfigs, 1, 4),
    // v2 adds the voters' endpoints (`Nodes`, KIP-853), which the quorum does not track.
    (ApiKey::DescribeQuorum, 0, 1),
    // v6 is unstable in Kafka (two-phase commit) and not encodable by kafka-protocol 0.18.
    (ApiKey::InitProducerId, 0, 5),
    // v0 is gone in Kafka 4 (KIP-896) and not in kafka-protocol 0.18; v1 is flexible.
    (ApiKey::WriteTxnMarkers, 1, 1),
    // The transaction coordinator (coordinator/txn.rs).
    (ApiKey::FindCoordinator, 0, 6),
    (ApiKey::AddPartitionsToTxn, 0, 5),
    (ApiKey::AddOffsetsToTxn, 0, 4),
    (ApiKey::EndTxn, 0, 5),
    // The group coordinator's half of a transaction (coordinator/group.rs).
    (ApiKey::TxnOffsetCommit, 0, 5),
    (ApiKey::DescribeTransactions, 0, 0),
    // v2's regular-expression filter is not served.
    (ApiKey::ListTransactions, 0, 1),
    // The group coordinator, classic protocol (coordinator/group.rs).
    (ApiKey::OffsetCommit, 2, 9),
    (ApiKey::OffsetFetch, 1, 9),
    (ApiKey::JoinGroup, 0, 9),
    (ApiKey::SyncGroup, 0, 5),
    (ApiKey::Heartbeat, 0, 4),
    (ApiKey::LeaveGroup, 0, 5),
    // v6 (KIP-1043's error message, GROUP_ID_NOT_FOUND) is not served.
    (ApiKey::DescribeGroups, 0, 5),
    (ApiKey::ListGroups, 0, 5),
    (ApiKey::DeleteGroups, 0, 2),
    (ApiKey::OffsetDelete, 0, 0),
    // The new consumer protocol (KIP-848; coordinator/group/consumer_members.rs).
    (ApiKey::ConsumerGroupHeartbeat, 0, 1),
    (ApiKey::ConsumerGroupDescribe, 0, 1),
];

/// The controller listener's APIs: the KRaft RPCs and the controller's own.
pub const CONTROLLER_APIS: &[Served] = &[
    // The KRaft fetch of `__cluster_metadata`: LastFetchedEpoch exists from v12.
    (ApiKey::Fetch, 12, 18),
    (ApiKey::Vote, 0, 2),
    (ApiKey::BeginQuorumEpoch, 0, 1),
    (ApiKey::EndQuorumEpoch, 0, 1),
    (ApiKey::FetchSnapshot, 0, 1),
    (ApiKey::DescribeQuorum, 0, 1),
    (ApiKey::BrokerRegistration, 0, 4),
    (ApiKey::BrokerHeartbeat, 0, 1),
    (ApiKey::AlterPartition, 2, 3),
    (ApiKey::CreateTopics, 2, 7),
    (ApiKey::CreatePartitions, 0, 3),
    (ApiKey::AllocateProducerIds, 0, 0),
    (ApiKey::ApiVersions, 0, 4),
];

/// Whether `table` serves `key` at `version`.
pub fn serves(table: &[Served], key: ApiKey, version: i16) -> bool {
    table
        .iter()
        .any(|&(served, min, max)| served == key && (min..=max).contains(&version))
}

/// Whether `table` lists `key` at all.
pub fn lists(table: &[Served], key: ApiKey) -> bool {
    table.iter().any(|&(served, _, _)| served == key)
}

/// `table` as ApiVersions' `ApiKeys`.
pub fn advertised(table: &[Served]) -> Vec<ApiVersion> {
    table
        .iter()
        .map(|&(key, min, max)| {
            ApiVersion::default()
                .with_api_key(key as i16)
                .with_min_version(min)
                .with_max_version(max)
        })
        .collect()
}

/// The client listener's APIs with the versions it accepts ([`CLIENT_APIS`]), as ApiVersions
/// answers them.
pub fn supported_versions() -> Vec<ApiVersion> {
    advertised(CLIENT_APIS)
}

#[cfg(test)]
mod tests {
    use bytes::BytesMut;
    use kafka_protocol::messages::{RequestKind, ResponseKind};

    use super::*;

    /// Every advertised version is one the protocol crate can decode a request of and encode
    /// a response at: a default request round-trips and a default response encodes.
    #[test]
    fn every_advertised_version_is_decodable_and_encodable() {
        for table in [CLIENT_APIS, CONTROLLER_APIS] {
            for &(key, min, max) in table {
                let range = key.valid_versions();
                assert!(
                    min >= range.min && max <= range.max,
                    "{key:?} {min}..={max}"
                );
                for version in min..=max {
                    let response = default_response(key);
                    let mut buf = BytesMut::new();
                    response
                        .encode(&mut buf, version)
                        .unwrap_or_else(|e| panic!("{key:?} v{version} response: {e}"));
                    let request = default_request(key);
                    let mut buf = BytesMut::new();
                    request
                        .encode(&mut buf, version)
                        .unwrap_or_else(|e| panic!("{key:?} v{version} request: {e}"));
                    let decoded = RequestKind::decode(key, &mut buf.freeze(), version);
                    assert!(decoded.is_ok(), "{key:?} v{version}: {decoded:?}");
                }
            }
        }
    }

    fn default_request(key: ApiKey) -> RequestKind {
        use kafka_protocol::messages::*;
        match key {
            ApiKey::Produce => RequestKind::Produce(ProduceRequest::default()),
            ApiKey::Fetch => RequestKind::Fetch(FetchRequest::default()),
            ApiKey::ListOffsets => RequestKind::ListOffsets(ListOffsetsRequest::default()),
            ApiKey::OffsetForLeaderEpoch => {
                RequestKind::OffsetForLeaderEpoch(OffsetForLeaderEpochRequest::default())
            }
            ApiKey::DescribeConfigs => {
                RequestKind::DescribeConfigs(DescribeConfigsRequest::default())
            }
            ApiKey::Metadata => RequestKind::Metadata(MetadataRequest::default()),
            ApiKey::ApiVersions => RequestKind::ApiVersions(ApiVersionsRequest::default()),
            ApiKey::CreateTopics => RequestKind::CreateTopics(CreateTopicsRequest::default()),
            ApiKey::CreatePartitions => {
                RequestKind::CreatePartitions(CreatePartitionsRequest::default())
            }
            ApiKey::DescribeQuorum => RequestKind::DescribeQuorum(DescribeQuorumRequest::default()),
            ApiKey::InitProducerId => RequestKind::InitProducerId(
                InitProducerIdRequest::default().with_transactional_id(None),
            ),
            ApiKey::FindCoordinator => {
                RequestKind::FindCoordinator(FindCoordinatorRequest::default())
            }
            ApiKey::AddPartitionsToTxn => {
                RequestKind::AddPartitionsToTxn(AddPartitionsToTxnRequest::default())
            }
            ApiKey::AddOffsetsToTxn => {
                RequestKind::AddOffsetsToTxn(AddOffsetsToTxnRequest::default())
            }
            ApiKey::EndTxn => RequestKind::EndTxn(EndTxnRequest::default()),
            ApiKey::TxnOffsetCommit => {
                RequestKind::TxnOffsetCommit(TxnOffsetCommitRequest::default())
            }
            ApiKey::DescribeTransactions => {
                RequestKind::DescribeTransactions(DescribeTransactionsRequest::default())
            }
            ApiKey::ListTransactions => {
                RequestKind::ListTransactions(ListTransactionsRequest::default())
            }
            ApiKey::Vote => RequestKind::Vote(VoteRequest::default()),
            ApiKey::BeginQuorumEpoch => {
                RequestKind::BeginQuorumEpoch(BeginQuorumEpochRequest::default())
            }
            ApiKey::EndQuorumEpoch => RequestKind::EndQuorumEpoch(EndQuorumEpochRequest::default()),
            ApiKey::FetchSnapshot => RequestKind::FetchSnapshot(FetchSnapshotRequest::default()),
            ApiKey::BrokerRegistration => {
                RequestKind::BrokerRegistration(BrokerRegistrationRequest::default())
            }
            ApiKey::BrokerHeartbeat => {
                RequestKind::BrokerHeartbeat(BrokerHeartbeatRequest::default())
            }
            ApiKey::AlterPartition => RequestKind::AlterPartition(AlterPartitionRequest::default()),
            ApiKey::AllocateProducerIds => {
                RequestKind::AllocateProducerIds(AllocateProducerIdsRequest::default())
            }
            ApiKey::WriteTxnMarkers => {
                RequestKind::WriteTxnMarkers(WriteTxnMarkersRequest::default())
            }
            ApiKey::OffsetCommit => RequestKind::OffsetCommit(OffsetCommitRequest::default()),
            ApiKey::OffsetFetch => RequestKind::OffsetFetch(OffsetFetchRequest::default()),
            ApiKey::OffsetDelete => RequestKind::OffsetDelete(OffsetDeleteRequest::default()),
            ApiKey::DeleteGroups => RequestKind::DeleteGroups(DeleteGroupsRequest::default()),
            ApiKey::ListGroups => RequestKind::ListGroups(ListGroupsRequest::default()),
            ApiKey::DescribeGroups => RequestKind::DescribeGroups(DescribeGroupsRequest::default()),
            ApiKey::LeaveGroup => RequestKind::LeaveGroup(LeaveGroupRequest::default()),
            ApiKey::Heartbeat => RequestKind::Heartbeat(HeartbeatRequest::default()),
            ApiKey::SyncGroup => RequestKind::SyncGroup(SyncGroupRequest::default()),
            ApiKey::JoinGroup => RequestKind::JoinGroup(JoinGroupRequest::default()),
            ApiKey::ConsumerGroupHeartbeat => {
                RequestKind::ConsumerGroupHeartbeat(ConsumerGroupHeartbeatRequest::default())
            }
            ApiKey::ConsumerGroupDescribe => {
                RequestKind::ConsumerGroupDescribe(ConsumerGroupDescribeRequest::default())
            }
            other => panic!("no default request for {other:?}"),
        }
    }

    fn default_response(key: ApiKey) -> ResponseKind {
        use kafka_protocol::messages::*;
        match key {
            ApiKey::Produce => ResponseKind::Produce(ProduceResponse::default()),
            ApiKey::Fetch => ResponseKind::Fetch(FetchResponse::default()),
            ApiKey::ListOffsets => ResponseKind::ListOffsets(ListOffsetsResponse::default()),
            ApiKey::OffsetForLeaderEpoch => {
                ResponseKind::OffsetForLeaderEpoch(OffsetForLeaderEpochResponse::default())
            }
            ApiKey::DescribeConfigs => {
                ResponseKind::DescribeConfigs(DescribeConfigsResponse::default())
            }
            ApiKey::Metadata => ResponseKind::Metadata(MetadataResponse::default()),
            ApiKey::ApiVersions => ResponseKind::ApiVersions(ApiVersionsResponse::default()),
            ApiKey::CreateTopics => ResponseKind::CreateTopics(CreateTopicsResponse::default()),
            ApiKey::CreatePartitions => {
                ResponseKind::CreatePartitions(CreatePartitionsResponse::default())
            }
            ApiKey::DescribeQuorum => {
                ResponseKind::DescribeQuorum(DescribeQuorumResponse::default())
            }
            ApiKey::InitProducerId => {
                ResponseKind::InitProducerId(InitProducerIdResponse::default())
            }
            ApiKey::FindCoordinator => {
                ResponseKind::FindCoordinator(FindCoordinatorResponse::default())
            }
            ApiKey::AddPartitionsToTxn => {
                ResponseKind::AddPartitionsToTxn(AddPartitionsToTxnResponse::default())
            }
            ApiKey::AddOffsetsToTxn => {
                ResponseKind::AddOffsetsToTxn(AddOffsetsToTxnResponse::default())
            }
            ApiKey::EndTxn => ResponseKind::EndTxn(EndTxnResponse::default()),
            ApiKey::TxnOffsetCommit => {
                ResponseKind::TxnOffsetCommit(TxnOffsetCommitResponse::default())
            }
            ApiKey::DescribeTransactions => {
                ResponseKind::DescribeTransactions(DescribeTransactionsResponse::default())
            }
            ApiKey::ListTransactions => {
                ResponseKind::ListTransactions(ListTransactionsResponse::default())
            }
            ApiKey::Vote => ResponseKind::Vote(VoteResponse::default()),
            ApiKey::BeginQuorumEpoch => {
                ResponseKind::BeginQuorumEpoch(BeginQuorumEpochResponse::default())
            }
            ApiKey::EndQuorumEpoch => {
                ResponseKind::EndQuorumEpoch(EndQuorumEpochResponse::default())
            }
            ApiKey::FetchSnapshot => ResponseKind::FetchSnapshot(FetchSnapshotResponse::default()),
            ApiKey::BrokerRegistration => {
                ResponseKind::BrokerRegistration(BrokerRegistrationResponse::default())
            }
            ApiKey::BrokerHeartbeat => {
                ResponseKind::BrokerHeartbeat(BrokerHeartbeatResponse::default())
            }
            ApiKey::AlterPartition => {
                ResponseKind::AlterPartition(AlterPartitionResponse::default())
            }
            ApiKey::AllocateProducerIds => {
                ResponseKind::AllocateProducerIds(AllocateProducerIdsResponse::default())
            }
            ApiKey::WriteTxnMarkers => {
                ResponseKind::WriteTxnMarkers(WriteTxnMarkersResponse::default())
            }
            ApiKey::OffsetCommit => ResponseKind::OffsetCommit(OffsetCommitResponse::default()),
            ApiKey::OffsetFetch => ResponseKind::OffsetFetch(OffsetFetchResponse::default()),
            ApiKey::OffsetDelete => ResponseKind::OffsetDelete(OffsetDeleteResponse::default()),
            ApiKey::DeleteGroups => ResponseKind::DeleteGroups(DeleteGroupsResponse::default()),
            ApiKey::ListGroups => ResponseKind::ListGroups(ListGroupsResponse::default()),
            ApiKey::DescribeGroups => {
                ResponseKind::DescribeGroups(DescribeGroupsResponse::default())
            }
            ApiKey::LeaveGroup => ResponseKind::LeaveGroup(LeaveGroupResponse::default()),
            ApiKey::Heartbeat => ResponseKind::Heartbeat(HeartbeatResponse::default()),
            ApiKey::SyncGroup => ResponseKind::SyncGroup(SyncGroupResponse::default()),
            ApiKey::JoinGroup => ResponseKind::JoinGroup(JoinGroupResponse::default()),
            ApiKey::ConsumerGroupHeartbeat => {
                ResponseKind::ConsumerGroupHeartbeat(ConsumerGroupHeartbeatResponse::default())
            }
            ApiKey::ConsumerGroupDescribe => {
                ResponseKind::ConsumerGroupDescribe(ConsumerGroupDescribeResponse::default())
            }
            other => panic!("no default response for {other:?}"),
        }
    }
}
