//! FindCoordinator (apiKey 10), v0–v6: where a transactional id's coordinator is (the leader
//! of its `__transaction_state` partition, creating the topic on first use and answering
//! `COORDINATOR_NOT_AVAILABLE` meanwhile, as Kafka does). v4+ batch keys in
//! `CoordinatorKeys` and answer per key. A group's coordinator is the leader of its
//! `__consumer_offsets` partition (the topic created on first use in the same way). Share
//! keys answer `COORDINATOR_NOT_AVAILABLE` (no share coordinator). An empty transactional id,
//! or an unknown key type, is `INVALID_REQUEST`; an empty group id `INVALID_REQUEST` too
//! (Kafka's `FindCoordinator` refuses it: the coordinator of "" means nothing).

use kafka_protocol::ResponseError;
use kafka_protocol::messages::find_coordinator_response::Coordinator;
use kafka_protocol::messages::{BrokerId, FindCoordinatorRequest, FindCoordinatorResponse};
use kafka_protocol::protocol::StrBytes;

use crate::coordinator::group::GroupCoordinator;
use crate::coordinator::txn::TxnCoordinator;

/// Kafka's `CoordinatorType`.
const GROUP: i8 = 0;
const TRANSACTION: i8 = 1;
const SHARE: i8 = 2;

/// Answers one FindCoordinator request.
pub async fn handle(
    txn: &TxnCoordinator,
    groups: &GroupCoordinator,
    request: &FindCoordinatorRequest,
    version: i16,
) -> FindCoordinatorResponse {
    let key_type = if version == 0 {
        GROUP
    } else {
        request.key_type
    };
    if version >= 4 {
        let mut coordinators = Vec::with_capacity(request.coordinator_keys.len());
        for key in &request.coordinator_keys {
            coordinators.push(coordinator(
                lookup(txn, groups, key_type, key).await,
                key.clone(),
            ));
        }
        return FindCoordinatorResponse::default().with_coordinators(coordinators);
    }
    let found = coordinator(
        lookup(txn, groups, key_type, &request.key).await,
        request.key.clone(),
    );
    FindCoordinatorResponse::default()
        .with_error_code(found.error_code)
        .with_error_message(found.error_message)
        .with_node_id(found.node_id)
        .with_host(found.host)
        .with_port(found.port)
}

async fn lookup(
    txn: &TxnCoordinator,
    groups: &GroupCoordinator,
    key_type: i8,
    key: &str,
) -> Result<(i32, String, u16), ResponseError> {
    match key_type {
        TRANSACTION if key.is_empty() => Err(ResponseError::InvalidRequest),
        TRANSACTION => txn
            .find(key)
            .await
            .map(|found| (found.node_id, found.host, found.port)),
        GROUP if key.is_empty() => Err(ResponseError::InvalidRequest),
        GROUP => groups
            .find(key)
            .await
            .map(|found| (found.node_id, found.host, found.port)),
        SHARE => Err(ResponseError::CoordinatorNotAvailable),
        _ => Err(ResponseError::InvalidRequest),
    }
}

fn coordinator(found: Result<(i32, String, u16), ResponseError>, key: StrBytes) -> Coordinator {
    match found {
        Ok((node_id, host, port)) => Coordinator::default()
            .with_key(key)
            .with_node_id(BrokerId(node_id))
            .with_host(StrBytes::from_string(host))
            .with_port(i32::from(port)),
        Err(error) => Coordinator::default()
            .with_key(key)
            .with_node_id(BrokerId(-1))
            .with_host(StrBytes::from_static_str(""))
            .with_port(-1)
            .with_error_code(error.code())
            .with_error_message(Some(StrBytes::from_static_str(error_message(error)))),
    }
}

fn error_message(error: ResponseError) -> &'static str {
    match error {
        ResponseError::CoordinatorNotAvailable => "The coordinator is not available.",
        ResponseError::InvalidRequest => "Invalid coordinator key or key type.",
        _ => "",
    }
}
