//! ApiVersions: the list of APIs and versions this node serves, and (v3+) the cluster's
//! `transaction.version` feature as Kafka 4.0 reports it: supported 0..=2, finalized at the
//! node's `transaction.version` setting. Clients switch to transactions V2 (KIP-890 part 2:
//! EndTxn v5 bumping the epoch, Produce v12 adding partitions) when it is finalized at 2.
//!
//! Versions the node does not know never reach here: `network/framing.rs` answers them with
//! `UNSUPPORTED_VERSION` in a v0 response, as Kafka does.

use kafka_protocol::messages::api_versions_response::{FinalizedFeatureKey, SupportedFeatureKey};
use kafka_protocol::messages::{ApiVersionsRequest, ApiVersionsResponse};
use kafka_protocol::protocol::StrBytes;

use crate::versions::supported_versions;

/// The feature clients read to choose the transaction protocol.
const TRANSACTION_VERSION: &str = "transaction.version";

/// Answers with every supported API and its version range, and the `transaction.version`
/// feature finalized at `transaction_version`.
pub fn handle(
    _request: &ApiVersionsRequest,
    _version: i16,
    transaction_version: i16,
) -> ApiVersionsResponse {
    ApiVersionsResponse::default()
        .with_api_keys(supported_versions())
        .with_supported_features(vec![
            SupportedFeatureKey::default()
                .with_name(StrBytes::from_static_str(TRANSACTION_VERSION))
                .with_min_version(0)
                .with_max_version(2),
        ])
        // One epoch for the node's life: the level is a static setting here.
        .with_finalized_features_epoch(0)
        .with_finalized_features(vec![
            FinalizedFeatureKey::default()
                .with_name(StrBytes::from_static_str(TRANSACTION_VERSION))
                .with_min_version_level(transaction_version)
                .with_max_version_level(transaction_version),
        ])
}
