//! TxnOffsetCommit (apiKey 28), v0–v5: a transactional producer commits a group's offsets
//! inside its transaction (`sendOffsetsToTransaction`). The group coordinator writes them to
//! the group's `__consumer_offsets` partition as a batch of the producer's transaction; they
//! are committed (visible to OffsetFetch) only when the transaction's COMMIT marker reaches
//! that partition, and dropped by an ABORT. Before the write the partition is verified with
//! the transaction coordinator (KIP-890: verify-only under TV1, added under TV2 for v5+), as
//! the produce path verifies.
//!
//! Errors, per partition as Kafka answers them: `INVALID_GROUP_ID`,
//! `UNKNOWN_TOPIC_OR_PARTITION`, `OFFSET_METADATA_TOO_LARGE`, and the group's for every
//! partition: `NOT_COORDINATOR`, `COORDINATOR_LOAD_IN_PROGRESS`, `COORDINATOR_NOT_AVAILABLE`,
//! KIP-447's `ILLEGAL_GENERATION`, `UNKNOWN_MEMBER_ID`, `FENCED_INSTANCE_ID` (v3+ carry the
//! member), `INVALID_PRODUCER_EPOCH`/`PRODUCER_FENCED`, `INVALID_TXN_STATE`,
//! `TRANSACTION_ABORTABLE`.

use kafka_protocol::ResponseError;
use kafka_protocol::messages::txn_offset_commit_response::{
    TxnOffsetCommitResponsePartition, TxnOffsetCommitResponseTopic,
};
use kafka_protocol::messages::{TxnOffsetCommitRequest, TxnOffsetCommitResponse};

use crate::api::offset_commit::{PartitionCommit, check_partitions};
use crate::coordinator::group::view::CommitMember;
use crate::coordinator::group::{GroupCoordinator, TOPIC};
use crate::metadata::MetadataImage;
use crate::replica::txn_verify::{TxnVerifier, Verification};

/// Answers one TxnOffsetCommit request.
pub async fn handle(
    groups: &GroupCoordinator,
    verifier: &TxnVerifier,
    image: &MetadataImage,
    request: &TxnOffsetCommitRequest,
    version: i16,
) -> TxnOffsetCommitResponse {
    let (errors, accepted) = check_partitions(
        &request.group_id,
        image,
        request.topics.iter().map(|topic| {
            let partitions = topic.partitions.iter().map(|p| PartitionCommit {
                index: p.partition_index,
                offset: p.committed_offset,
                leader_epoch: p.committed_leader_epoch,
                metadata: p.committed_metadata.as_deref(),
            });
            (topic.name.as_str(), partitions.collect())
        }),
    );
    let group_error = if accepted.is_empty() {
        None
    } else {
        let member = CommitMember {
            generation_id: request.generation_id,
            member_id: &request.member_id,
            group_instance_id: request.group_instance_id.as_deref(),
        };
        let check = Verification {
            transactional_id: request.transactional_id.0.as_str(),
            producer_id: request.producer_id.0,
            producer_epoch: request.producer_epoch,
            topic: TOPIC,
            partition: groups.partition_of(&request.group_id),
            produce_version: -1,
        };
        let verify = verifier
            .checks_txn_offsets(version)
            .then(|| verifier.verify_txn_offsets(image, &check, version));
        groups
            .commit_txn_offsets(
                &request.group_id,
                (request.producer_id.0, request.producer_epoch),
                &member,
                &accepted,
                verify,
            )
            .await
            .err()
            .map(|error| {
                // TRANSACTION_ABORTABLE is v5's (KIP-890); older clients know INVALID_TXN_STATE.
                if error == ResponseError::TransactionAbortable && version < 5 {
                    ResponseError::InvalidTxnState
                } else {
                    error
                }
            })
    };
    if let Some(error) = group_error {
        tracing::debug!(group = %request.group_id.as_str(), ?error, "TxnOffsetCommit refused");
    }
    let topics = request
        .topics
        .iter()
        .zip(errors)
        .map(|(topic, topic_errors)| {
            TxnOffsetCommitResponseTopic::default()
                .with_name(topic.name.clone())
                .with_partitions(
                    topic
                        .partitions
                        .iter()
                        .zip(topic_errors)
                        .map(|(partition, error)| {
                            TxnOffsetCommitResponsePartition::default()
                                .with_partition_index(partition.partition_index)
                                .with_error_code(error.or(group_error).map_or(0, |e| e.code()))
                        })
                        .collect(),
                )
        })
        .collect();
    TxnOffsetCommitResponse::default().with_topics(topics)
}
