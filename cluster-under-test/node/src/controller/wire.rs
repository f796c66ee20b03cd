//! KRaft RPCs on the wire: [`logjam_raft::Message`] to and from the `kafka-protocol` request and
//! response types (Vote v2, BeginQuorumEpoch v0, EndQuorumEpoch v0, Fetch v12, FetchSnapshot
//! v0), for topic `__cluster_metadata` partition 0. Pure conversions; the sockets are in
//! `quorum.rs`.

use bytes::Bytes;
use kafka_protocol::messages::{
    ApiKey, BrokerId as WireBrokerId, RequestKind, ResponseKind, TopicName,
    begin_quorum_epoch_request, begin_quorum_epoch_response, end_quorum_epoch_request,
    end_quorum_epoch_response, fetch_request, fetch_response, fetch_snapshot_request,
    fetch_snapshot_response, vote_request, vote_response,
};
use kafka_protocol::protocol::StrBytes;
use logjam_raft::rpc::begin_quorum_epoch::{BeginQuorumEpochRequest, BeginQuorumEpochResponse};
use logjam_raft::rpc::end_quorum_epoch::{EndQuorumEpochRequest, EndQuorumEpochResponse};
use logjam_raft::rpc::fetch::{EpochEndOffset, FetchRequest, FetchResponse, LeaderIdAndEpoch};
use logjam_raft::rpc::fetch_snapshot::{FetchSnapshotRequest, FetchSnapshotResponse};
use logjam_raft::rpc::vote::{VoteRequest, VoteResponse};
use logjam_raft::{Epoch, ErrorCode, Message, NodeId, Offset, SnapshotId};

use crate::controller::entry_codec::{decode_entries, encode_entries};

/// The metadata topic's name.
pub const METADATA_TOPIC: &str = "__cluster_metadata";

/// The metadata topic's id, fixed by Kafka (`Uuid.METADATA_TOPIC_ID`, 1).
pub const METADATA_TOPIC_ID: uuid::Uuid = uuid::Uuid::from_u128(1);

/// The version this node sends for each KRaft API.
pub fn version_of(key: ApiKey) -> i16 {
    match key {
        ApiKey::Vote => 2,
        ApiKey::Fetch => 12,
        _ => 0,
    }
}

fn topic() -> TopicName {
    TopicName(StrBytes::from_static_str(METADATA_TOPIC))
}

fn node(id: i32) -> Option<NodeId> {
    u32::try_from(id).ok().map(NodeId)
}

fn wire_node(id: Option<NodeId>) -> WireBrokerId {
    WireBrokerId(id.map_or(-1, |id| id.0 as i32))
}

fn epoch(value: i32) -> Epoch {
    Epoch(u32::try_from(value).unwrap_or(0))
}

fn offset(value: i64) -> Offset {
    Offset(u64::try_from(value).unwrap_or(0))
}

fn error_code(error: Option<ErrorCode>) -> i16 {
    error.map_or(0, ErrorCode::code)
}

fn error_from(code: i16) -> Option<ErrorCode> {
    match code {
        6 => Some(ErrorCode::NotLeaderOrFollower),
        74 => Some(ErrorCode::FencedLeaderEpoch),
        75 => Some(ErrorCode::UnknownLeaderEpoch),
        94 => Some(ErrorCode::InconsistentVoterSet),
        98 => Some(ErrorCode::SnapshotNotFound),
        99 => Some(ErrorCode::PositionOutOfRange),
        0 => None,
        // Anything else is treated as "not the leader": the replica retries elsewhere.
        _ => Some(ErrorCode::NotLeaderOrFollower),
    }
}

/// A Raft request as a Kafka request: key, version and body.
pub fn request_to_wire(message: &Message, cluster_id: &str) -> Option<(ApiKey, RequestKind)> {
    let cluster = Some(StrBytes::from_string(cluster_id.to_owned()));
    Some(match message {
        Message::Vote(request) => (
            ApiKey::Vote,
            RequestKind::Vote(
                kafka_protocol::messages::VoteRequest::default()
                    .with_cluster_id(cluster)
                    .with_voter_id(wire_node(Some(request.voter_id)))
                    .with_topics(vec![
                        vote_request::TopicData::default()
                            .with_topic_name(topic())
                            .with_partitions(vec![
                                vote_request::PartitionData::default()
                                    .with_replica_epoch(request.candidate_epoch.0 as i32)
                                    .with_replica_id(wire_node(Some(request.candidate_id)))
                                    .with_last_offset_epoch(request.last_offset_epoch.0 as i32)
                                    .with_last_offset(request.last_offset.0 as i64)
                                    .with_pre_vote(request.pre_vote),
                            ]),
                    ]),
            ),
        ),
        Message::BeginQuorumEpoch(request) => (
            ApiKey::BeginQuorumEpoch,
            RequestKind::BeginQuorumEpoch(
                kafka_protocol::messages::BeginQuorumEpochRequest::default()
                    .with_cluster_id(cluster)
                    .with_topics(vec![
                        begin_quorum_epoch_request::TopicData::default()
                            .with_topic_name(topic())
                            .with_partitions(vec![
                                begin_quorum_epoch_request::PartitionData::default()
                                    .with_leader_id(wire_node(Some(request.leader_id)))
                                    .with_leader_epoch(request.leader_epoch.0 as i32),
                            ]),
                    ]),
            ),
        ),
        Message::EndQuorumEpoch(request) => (
            ApiKey::EndQuorumEpoch,
            RequestKind::EndQuorumEpoch(
                kafka_protocol::messages::EndQuorumEpochRequest::default()
                    .with_cluster_id(cluster)
                    .with_topics(vec![
                        end_quorum_epoch_request::TopicData::default()
                            .with_topic_name(topic())
                            .with_partitions(vec![
                                end_quorum_epoch_request::PartitionData::default()
                                    .with_leader_id(wire_node(Some(request.leader_id)))
                                    .with_leader_epoch(request.leader_epoch.0 as i32)
                                    .with_preferred_successors(
                                        request
                                            .preferred_candidates
                                            .iter()
                                            .map(|id| id.0 as i32)
                                            .collect(),
                                    ),
                            ]),
                    ]),
            ),
        ),
        Message::Fetch(request) => (
            ApiKey::Fetch,
            RequestKind::Fetch(
                kafka_protocol::messages::FetchRequest::default()
                    .with_cluster_id(cluster)
                    .with_replica_id(wire_node(Some(request.replica_id)))
                    .with_max_wait_ms(i32::try_from(request.max_wait_ms).unwrap_or(i32::MAX))
                    .with_min_bytes(1)
                    .with_max_bytes(8 << 20)
                    .with_topics(vec![
                        fetch_request::FetchTopic::default()
                            .with_topic(topic())
                            .with_partitions(vec![
                                fetch_request::FetchPartition::default()
                                    .with_current_leader_epoch(
                                        request.current_leader_epoch.0 as i32,
                                    )
                                    .with_fetch_offset(request.fetch_offset.0 as i64)
                                    .with_last_fetched_epoch(request.last_fetched_epoch.0 as i32)
                                    .with_log_start_offset(-1)
                                    .with_partition_max_bytes(8 << 20),
                            ]),
                    ]),
            ),
        ),
        Message::FetchSnapshot(request) => (
            ApiKey::FetchSnapshot,
            RequestKind::FetchSnapshot(
                kafka_protocol::messages::FetchSnapshotRequest::default()
                    .with_cluster_id(cluster)
                    .with_replica_id(wire_node(Some(request.replica_id)))
                    .with_max_bytes(i32::try_from(request.max_bytes).unwrap_or(i32::MAX))
                    .with_topics(vec![
                        fetch_snapshot_request::TopicSnapshot::default()
                            .with_name(topic())
                            .with_partitions(vec![
                                fetch_snapshot_request::PartitionSnapshot::default()
                                    .with_current_leader_epoch(
                                        request.current_leader_epoch.0 as i32,
                                    )
                                    .with_snapshot_id(
                                        fetch_snapshot_request::SnapshotId::default()
                                            .with_end_offset(
                                                request.snapshot_id.end_offset.0 as i64,
                                            )
                                            .with_epoch(request.snapshot_id.epoch.0 as i32),
                                    )
                                    .with_position(request.position as i64),
                            ]),
                    ]),
            ),
        ),
        _ => return None,
    })
}

/// A Kafka request as a Raft request, with its sender; `None` for anything that is not a
/// well-formed KRaft request for `__cluster_metadata-0`. `me` fills `VoterId` in versions
/// that do not carry it.
pub fn request_from_wire(kind: RequestKind, me: NodeId) -> Option<(NodeId, Message)> {
    match kind {
        RequestKind::Vote(request) => {
            let p = request.topics.first()?.partitions.first()?;
            let from = node(p.replica_id.0)?;
            Some((
                from,
                Message::Vote(VoteRequest {
                    candidate_epoch: epoch(p.replica_epoch),
                    candidate_id: from,
                    voter_id: node(request.voter_id.0).unwrap_or(me),
                    last_offset_epoch: epoch(p.last_offset_epoch),
                    last_offset: offset(p.last_offset),
                    pre_vote: p.pre_vote,
                }),
            ))
        }
        RequestKind::BeginQuorumEpoch(request) => {
            let p = request.topics.first()?.partitions.first()?;
            let from = node(p.leader_id.0)?;
            Some((
                from,
                Message::BeginQuorumEpoch(BeginQuorumEpochRequest {
                    leader_id: from,
                    leader_epoch: epoch(p.leader_epoch),
                    voter_id: me,
                }),
            ))
        }
        RequestKind::EndQuorumEpoch(request) => {
            let p = request.topics.first()?.partitions.first()?;
            let from = node(p.leader_id.0)?;
            Some((
                from,
                Message::EndQuorumEpoch(EndQuorumEpochRequest {
                    leader_id: from,
                    leader_epoch: epoch(p.leader_epoch),
                    preferred_candidates: p
                        .preferred_successors
                        .iter()
                        .filter_map(|id| node(*id))
                        .collect(),
                }),
            ))
        }
        RequestKind::Fetch(request) => {
            let p = request.topics.first()?.partitions.first()?;
            let from =
                node(request.replica_id.0).or_else(|| node(request.replica_state.replica_id.0))?;
            Some((
                from,
                Message::Fetch(FetchRequest {
                    replica_id: from,
                    current_leader_epoch: epoch(p.current_leader_epoch),
                    fetch_offset: offset(p.fetch_offset),
                    last_fetched_epoch: epoch(p.last_fetched_epoch),
                    max_wait_ms: u64::try_from(request.max_wait_ms).unwrap_or(0),
                }),
            ))
        }
        RequestKind::FetchSnapshot(request) => {
            let p = request.topics.first()?.partitions.first()?;
            let from = node(request.replica_id.0)?;
            Some((
                from,
                Message::FetchSnapshot(FetchSnapshotRequest {
                    replica_id: from,
                    current_leader_epoch: epoch(p.current_leader_epoch),
                    snapshot_id: SnapshotId {
                        end_offset: offset(p.snapshot_id.end_offset),
                        epoch: epoch(p.snapshot_id.epoch),
                    },
                    position: u64::try_from(p.position).unwrap_or(0),
                    max_bytes: u64::try_from(request.max_bytes).unwrap_or(0),
                }),
            ))
        }
        _ => None,
    }
}

fn leader_and_epoch(leader: LeaderIdAndEpoch) -> (WireBrokerId, i32) {
    (wire_node(leader.leader_id), leader.leader_epoch.0 as i32)
}

/// A Raft response as a Kafka response body.
pub fn response_to_wire(message: &Message) -> Option<ResponseKind> {
    Some(match message {
        Message::VoteResponse(response) => ResponseKind::Vote(
            kafka_protocol::messages::VoteResponse::default().with_topics(vec![
                vote_response::TopicData::default()
                    .with_topic_name(topic())
                    .with_partitions(vec![
                        vote_response::PartitionData::default()
                            .with_error_code(error_code(response.error))
                            .with_leader_id(wire_node(response.leader_id))
                            .with_leader_epoch(response.leader_epoch.0 as i32)
                            .with_vote_granted(response.vote_granted),
                    ]),
            ]),
        ),
        Message::BeginQuorumEpochResponse(response) => ResponseKind::BeginQuorumEpoch(
            kafka_protocol::messages::BeginQuorumEpochResponse::default().with_topics(vec![
                begin_quorum_epoch_response::TopicData::default()
                    .with_topic_name(topic())
                    .with_partitions(vec![
                        begin_quorum_epoch_response::PartitionData::default()
                            .with_error_code(error_code(response.error))
                            .with_leader_id(wire_node(response.leader_id))
                            .with_leader_epoch(response.leader_epoch.0 as i32),
                    ]),
            ]),
        ),
        Message::EndQuorumEpochResponse(response) => ResponseKind::EndQuorumEpoch(
            kafka_protocol::messages::EndQuorumEpochResponse::default().with_topics(vec![
                end_quorum_epoch_response::TopicData::default()
                    .with_topic_name(topic())
                    .with_partitions(vec![
                        end_quorum_epoch_response::PartitionData::default()
                            .with_error_code(error_code(response.error))
                            .with_leader_id(wire_node(response.leader_id))
                            .with_leader_epoch(response.leader_epoch.0 as i32),
                    ]),
            ]),
        ),
        Message::FetchResponse(response) => {
            let (leader_id, leader_epoch) = leader_and_epoch(response.current_leader);
            let mut partition = fetch_response::PartitionData::default()
                .with_error_code(error_code(response.error))
                .with_high_watermark(response.high_watermark.0 as i64)
                .with_last_stable_offset(response.high_watermark.0 as i64)
                .with_log_start_offset(response.log_start_offset.0 as i64)
                .with_current_leader(
                    fetch_response::LeaderIdAndEpoch::default()
                        .with_leader_id(leader_id)
                        .with_leader_epoch(leader_epoch),
                )
                .with_preferred_read_replica(WireBrokerId(-1))
                .with_records(Some(encode_entries(&response.records)));
            if let Some(diverging) = response.diverging_epoch {
                partition = partition.with_diverging_epoch(
                    fetch_response::EpochEndOffset::default()
                        .with_epoch(diverging.epoch.0 as i32)
                        .with_end_offset(diverging.end_offset.0 as i64),
                );
            }
            if let Some(snapshot) = response.snapshot_id {
                partition = partition.with_snapshot_id(
                    fetch_response::SnapshotId::default()
                        .with_end_offset(snapshot.end_offset.0 as i64)
                        .with_epoch(snapshot.epoch.0 as i32),
                );
            }
            ResponseKind::Fetch(
                kafka_protocol::messages::FetchResponse::default().with_responses(vec![
                    // Name (v12) and Kafka's fixed id of the metadata topic (v13+): the
                    // response is encoded at the request's version, which keeps the one it has.
                    fetch_response::FetchableTopicResponse::default()
                        .with_topic(topic())
                        .with_topic_id(METADATA_TOPIC_ID)
                        .with_partitions(vec![partition]),
                ]),
            )
        }
        Message::FetchSnapshotResponse(response) => {
            let (leader_id, leader_epoch) = leader_and_epoch(response.current_leader);
            ResponseKind::FetchSnapshot(
                kafka_protocol::messages::FetchSnapshotResponse::default().with_topics(vec![
                    fetch_snapshot_response::TopicSnapshot::default()
                        .with_name(topic())
                        .with_partitions(vec![
                            fetch_snapshot_response::PartitionSnapshot::default()
                                .with_error_code(error_code(response.error))
                                .with_snapshot_id(
                                    fetch_snapshot_response::SnapshotId::default()
                                        .with_end_offset(response.snapshot_id.end_offset.0 as i64)
                                        .with_epoch(response.snapshot_id.epoch.0 as i32),
                                )
                                .with_current_leader(
                                    fetch_snapshot_response::LeaderIdAndEpoch::default()
                                        .with_leader_id(leader_id)
                                        .with_leader_epoch(leader_epoch),
                                )
                                .with_size(response.size as i64)
                                .with_position(response.position as i64)
                                .with_unaligned_records(Bytes::from(
                                    response.unaligned_records.clone(),
                                )),
                        ]),
                ]),
            )
        }
        _ => return None,
    })
}

fn leader_from(leader_id: i32, leader_epoch: i32) -> LeaderIdAndEpoch {
    LeaderIdAndEpoch {
        leader_id: node(leader_id),
        leader_epoch: epoch(leader_epoch),
    }
}

/// A Kafka response body as a Raft response; `None` when it does not have the KRaft shape.
pub fn response_from_wire(kind: ResponseKind) -> Option<Message> {
    Some(match kind {
        ResponseKind::Vote(response) => {
            let p = response.topics.first()?.partitions.first()?;
            Message::VoteResponse(VoteResponse {
                error: error_from(p.error_code),
                leader_id: node(p.leader_id.0),
                leader_epoch: epoch(p.leader_epoch),
                vote_granted: p.vote_granted,
            })
        }
        ResponseKind::BeginQuorumEpoch(response) => {
            let p = response.topics.first()?.partitions.first()?;
            Message::BeginQuorumEpochResponse(BeginQuorumEpochResponse {
                error: error_from(p.error_code),
                leader_id: node(p.leader_id.0),
                leader_epoch: epoch(p.leader_epoch),
            })
        }
        ResponseKind::EndQuorumEpoch(response) => {
            let p = response.topics.first()?.partitions.first()?;
            Message::EndQuorumEpochResponse(EndQuorumEpochResponse {
                error: error_from(p.error_code),
                leader_id: node(p.leader_id.0),
                leader_epoch: epoch(p.leader_epoch),
            })
        }
        ResponseKind::Fetch(response) => {
            let p = response.responses.first()?.partitions.first()?;
            let records = decode_entries(p.records.clone().unwrap_or_default()).ok()?;
            Message::FetchResponse(FetchResponse {
                error: error_from(p.error_code),
                current_leader: leader_from(
                    p.current_leader.leader_id.0,
                    p.current_leader.leader_epoch,
                ),
                high_watermark: offset(p.high_watermark),
                log_start_offset: offset(p.log_start_offset),
                diverging_epoch: (p.diverging_epoch.end_offset >= 0).then(|| EpochEndOffset {
                    epoch: epoch(p.diverging_epoch.epoch),
                    end_offset: offset(p.diverging_epoch.end_offset),
                }),
                snapshot_id: (p.snapshot_id.end_offset >= 0).then(|| SnapshotId {
                    end_offset: offset(p.snapshot_id.end_offset),
                    epoch: epoch(p.snapshot_id.epoch),
                }),
                records,
            })
        }
        ResponseKind::FetchSnapshot(response) => {
            let p = response.topics.first()?.partitions.first()?;
            Message::FetchSnapshotResponse(FetchSnapshotResponse {
                error: error_from(p.error_code),
                current_leader: leader_from(
                    p.current_leader.leader_id.0,
                    p.current_leader.leader_epoch,
                ),
                snapshot_id: SnapshotId {
                    end_offset: offset(p.snapshot_id.end_offset),
                    epoch: epoch(p.snapshot_id.epoch),
                },
                size: u64::try_from(p.size).unwrap_or(0),
                position: u64::try_from(p.position).unwrap_or(0),
                unaligned_records: p.unaligned_records.to_vec(),
            })
        }
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use logjam_raft::{Entry, EntryKind};

    /// Every message survives encode → bytes → decode at the version this node sends.
    #[test]
    fn raft_messages_round_trip_through_kafka_encoding() {
        let requests = vec![
            Message::Vote(VoteRequest {
                candidate_epoch: Epoch(3),
                candidate_id: NodeId(2),
                voter_id: NodeId(1),
                last_offset_epoch: Epoch(2),
                last_offset: Offset(10),
                pre_vote: true,
            }),
            Message::Fetch(FetchRequest {
                replica_id: NodeId(2),
                current_leader_epoch: Epoch(3),
                fetch_offset: Offset(5),
                last_fetched_epoch: Epoch(2),
                max_wait_ms: 500,
            }),
        ];
        for message in requests {
            let (key, kind) = request_to_wire(&message, "c").unwrap();
            let version = version_of(key);
            let mut buf = bytes::BytesMut::new();
            kind.encode(&mut buf, version).unwrap();
            let decoded = RequestKind::decode(key, &mut buf.freeze(), version).unwrap();
            assert_eq!(request_from_wire(decoded, NodeId(1)).unwrap().1, message);
        }
        let response = Message::FetchResponse(FetchResponse {
            error: None,
            current_leader: LeaderIdAndEpoch {
                leader_id: Some(NodeId(1)),
                leader_epoch: Epoch(3),
            },
            high_watermark: Offset(4),
            log_start_offset: Offset(0),
            diverging_epoch: None,
            snapshot_id: Some(SnapshotId {
                end_offset: Offset(2),
                epoch: Epoch(1),
            }),
            records: vec![Entry {
                offset: Offset(5),
                epoch: Epoch(3),
                kind: EntryKind::Data(b"[]".to_vec()),
            }],
        });
        let kind = response_to_wire(&response).unwrap();
        let mut buf = bytes::BytesMut::new();
        kind.encode(&mut buf, 12).unwrap();
        let decoded = ResponseKind::decode(ApiKey::Fetch, &mut buf.freeze(), 12).unwrap();
        assert_eq!(response_from_wire(decoded).unwrap(), response);
    }
}
