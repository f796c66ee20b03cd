//! AddOffsetsToTxn (apiKey 25), v0–v4: adds the group's `__consumer_offsets` partition
//! (`abs(javaHashCode(group)) % offsets.topic.num.partitions`, as Kafka's `partitionFor`) to
//! the open transaction, so its offsets commit or abort with it. While `__consumer_offsets`
//! does not exist the marker sender drops that partition, as Kafka does for a missing topic.

use std::collections::BTreeSet;

use kafka_protocol::ResponseError;
use kafka_protocol::messages::{AddOffsetsToTxnRequest, AddOffsetsToTxnResponse};

use crate::api::end_txn::fenced_code;
use crate::coordinator::internal_topic::partition_for;
use crate::coordinator::txn::TxnCoordinator;

/// The internal topic of committed offsets.
const OFFSETS_TOPIC: &str = "__consumer_offsets";

/// Answers one AddOffsetsToTxn request.
pub async fn handle(
    txn: &TxnCoordinator,
    offsets_partitions: i32,
    request: &AddOffsetsToTxnRequest,
    version: i16,
) -> AddOffsetsToTxnResponse {
    let answered = if request.transactional_id.is_empty() {
        Err(ResponseError::InvalidRequest)
    } else {
        let partition = (
            OFFSETS_TOPIC.to_owned(),
            partition_for(&request.group_id, offsets_partitions),
        );
        txn.add_partitions(
            &request.transactional_id,
            request.producer_id.0,
            request.producer_epoch,
            &BTreeSet::from([partition]),
        )
        .await
    };
    match answered {
        Ok(()) => AddOffsetsToTxnResponse::default(),
        Err(error) => {
            AddOffsetsToTxnResponse::default().with_error_code(fenced_code(error, version, 2))
        }
    }
}
