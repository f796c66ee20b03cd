//! Dispatch of decoded requests by API key to one handler per API (one file each under
//! `api/`, Kafka's `KafkaApis`); DescribeQuorum is forwarded to the active controller here.
//!
//! Handlers receive a decoded request and return the response body; Produce returns a
//! [`Reply`] (a response, nothing for a successful acks=0 produce, or closing the connection
//! for a failed one, Kafka's only signal then). They never see raw bytes (`network/codec.rs`
//! owns decoding), nor the whole node: each gets the narrow handles it needs (the
//! [`ReplicaManager`] for Produce, Fetch, ListOffsets, OffsetForLeaderEpoch and
//! WriteTxnMarkers, the [`TopicCreator`] for CreateTopics, the
//! [`ProducerIdManager`] for InitProducerId, the [`TxnCoordinator`] for the transaction
//! APIs, the [`GroupCoordinator`] for the group APIs).
//!
//! [`ReplicaManager`]: crate::replica::ReplicaManager
//! [`TopicCreator`]: crate::topics::TopicCreator
//! [`ProducerIdManager`]: crate::coordinator::ProducerIdManager
//! [`TxnCoordinator`]: crate::coordinator::txn::TxnCoordinator
//! [`GroupCoordinator`]: crate::coordinator::group::GroupCoordinator

mod add_offsets_to_txn;
mod add_partitions_to_txn;
mod api_versions;
mod consumer_group_describe;
mod consumer_group_heartbeat;
mod create_partitions;
mod create_topics;
mod delete_groups;
mod describe_configs;
mod describe_groups;
mod describe_transactions;
mod end_txn;
mod fetch;
mod find_coordinator;
mod heartbeat;
mod init_producer_id;
mod join_group;
mod leave_group;
mod list_groups;
mod list_offsets;
mod list_transactions;
mod metadata;
mod offset_commit;
mod offset_delete;
mod offset_fetch;
mod offset_for_leader_epoch;
mod produce;
mod sync_group;
mod txn_offset_commit;
mod write_txn_markers;

use kafka_protocol::messages::{RequestHeader, RequestKind, ResponseKind};

use crate::broker::Broker;

/// What a handler wants sent back.
#[derive(Debug)]
pub enum Reply {
    /// Send this response.
    Respond(Box<ResponseKind>),
    /// Send nothing (acks=0 produce that succeeded).
    Silent,
    /// Close the connection (acks=0 produce that failed: Kafka's only error signal then).
    Close(&'static str),
}

/// Runs the handler for `request`.
pub async fn dispatch(
    broker: &Broker,
    header: &RequestHeader,
    client_host: &str,
    version: i16,
    request: RequestKind,
) -> Reply {
    Reply::Respond(Box::new(match request {
        RequestKind::ApiVersions(request) => ResponseKind::ApiVersions(api_versions::handle(
            &request,
            version,
            broker.config().transaction_version,
        )),
        RequestKind::Metadata(request) => {
            let cluster = metadata::Cluster {
                cluster_id: broker.cluster_id(),
                node_id: broker.config().node_id,
                auto_create_topics: broker.config().auto_create_topics_enable,
            };
            ResponseKind::Metadata(
                metadata::handle(
                    broker.replicas(),
                    broker.topic_creator(),
                    &cluster,
                    &request,
                    version,
                )
                .await,
            )
        }
        RequestKind::CreateTopics(request) => ResponseKind::CreateTopics(
            create_topics::handle(broker.topic_creator(), request, version).await,
        ),
        RequestKind::CreatePartitions(request) => ResponseKind::CreatePartitions(
            create_partitions::handle(broker.topic_creator(), request).await,
        ),
        RequestKind::Produce(request) => {
            return produce::handle(broker.replicas(), request, version).await;
        }
        RequestKind::Fetch(request) => {
            ResponseKind::Fetch(fetch::handle(broker.replicas(), &request, version).await)
        }
        RequestKind::DescribeQuorum(request) => {
            // Brokers forward DescribeQuorum to the active controller, as Kafka's do.
            let forwarded = broker
                .quorum()
                .forward(
                    RequestKind::DescribeQuorum(request),
                    std::time::Duration::from_secs(5),
                )
                .await;
            ResponseKind::DescribeQuorum(match forwarded {
                Some(ResponseKind::DescribeQuorum(response)) => response,
                _ => crate::controller::quorum::describe_quorum_response(None),
            })
        }
        RequestKind::InitProducerId(request) => ResponseKind::InitProducerId(
            init_producer_id::handle(broker.producer_ids(), broker.txn(), &request, version).await,
        ),
        RequestKind::FindCoordinator(request) => ResponseKind::FindCoordinator(
            find_coordinator::handle(broker.txn(), broker.groups(), &request, version).await,
        ),
        RequestKind::AddPartitionsToTxn(request) => ResponseKind::AddPartitionsToTxn(
            add_partitions_to_txn::handle(broker.txn(), &broker.image(), &request, version).await,
        ),
        RequestKind::AddOffsetsToTxn(request) => {
            let offsets_partitions = broker.config().int("offsets.topic.num.partitions") as i32;
            ResponseKind::AddOffsetsToTxn(
                add_offsets_to_txn::handle(broker.txn(), offsets_partitions, &request, version)
                    .await,
            )
        }
        RequestKind::EndTxn(request) => {
            ResponseKind::EndTxn(end_txn::handle(broker.txn(), &request, version).await)
        }
        RequestKind::DescribeTransactions(request) => ResponseKind::DescribeTransactions(
            describe_transactions::handle(broker.txn(), &request),
        ),
        RequestKind::ListTransactions(request) => {
            ResponseKind::ListTransactions(list_transactions::handle(broker.txn(), &request))
        }
        RequestKind::ListOffsets(request) => {
            ResponseKind::ListOffsets(list_offsets::handle(broker.replicas(), &request, version))
        }
        RequestKind::DescribeConfigs(request) => ResponseKind::DescribeConfigs(
            describe_configs::handle(broker.config(), broker.replicas(), &request),
        ),
        RequestKind::OffsetForLeaderEpoch(request) => ResponseKind::OffsetForLeaderEpoch(
            offset_for_leader_epoch::handle(broker.replicas(), &request),
        ),
        RequestKind::OffsetCommit(request) => ResponseKind::OffsetCommit(
            offset_commit::handle(broker.groups(), &broker.image(), &request, version).await,
        ),
        RequestKind::OffsetFetch(request) => ResponseKind::OffsetFetch(
            offset_fetch::handle(broker.groups(), &request, version).await,
        ),
        RequestKind::JoinGroup(request) => {
            let client_id = header.client_id.as_deref().unwrap_or_default();
            ResponseKind::JoinGroup(
                join_group::handle(broker.groups(), (client_id, client_host), &request, version)
                    .await,
            )
        }
        RequestKind::ConsumerGroupHeartbeat(request) => {
            let client_id = header.client_id.as_deref().unwrap_or_default();
            ResponseKind::ConsumerGroupHeartbeat(
                consumer_group_heartbeat::handle(
                    broker.groups(),
                    (client_id, client_host),
                    &request,
                    version,
                )
                .await,
            )
        }
        RequestKind::ConsumerGroupDescribe(request) => ResponseKind::ConsumerGroupDescribe(
            consumer_group_describe::handle(broker.groups(), &broker.image(), &request, version),
        ),
        RequestKind::SyncGroup(request) => {
            ResponseKind::SyncGroup(sync_group::handle(broker.groups(), &request, version).await)
        }
        RequestKind::Heartbeat(request) => {
            ResponseKind::Heartbeat(heartbeat::handle(broker.groups(), &request))
        }
        RequestKind::LeaveGroup(request) => {
            ResponseKind::LeaveGroup(leave_group::handle(broker.groups(), &request, version).await)
        }
        RequestKind::DescribeGroups(request) => ResponseKind::DescribeGroups(
            describe_groups::handle(broker.groups(), &request, version),
        ),
        RequestKind::ListGroups(request) => {
            ResponseKind::ListGroups(list_groups::handle(broker.groups(), &request, version))
        }
        RequestKind::DeleteGroups(request) => {
            ResponseKind::DeleteGroups(delete_groups::handle(broker.groups(), &request).await)
        }
        RequestKind::OffsetDelete(request) => ResponseKind::OffsetDelete(
            offset_delete::handle(broker.groups(), &broker.image(), &request).await,
        ),
        RequestKind::TxnOffsetCommit(request) => ResponseKind::TxnOffsetCommit(
            txn_offset_commit::handle(
                broker.groups(),
                broker.replicas().txn_verifier(),
                &broker.image(),
                &request,
                version,
            )
            .await,
        ),
        RequestKind::WriteTxnMarkers(request) => ResponseKind::WriteTxnMarkers(
            write_txn_markers::handle(broker.replicas(), broker.groups(), request).await,
        ),
        other => {
            // network/framing.rs only lets versions::CLIENT_APIS through, so this is a bug, not bad input.
            tracing::error!(client_id = ?header.client_id, request = ?std::mem::discriminant(&other),
                "request for an API without a handler");
            return Reply::Close("no handler for this API");
        }
    }))
}
