//! ApiVersions: the list of APIs and versions this node serves.
//!
//! Versions the node does not know never reach here: `network/framing.rs` answers them with
//! `UNSUPPORTED_VERSION` in a v0 response, as Kafka does.

use kafka_protocol::messages::{ApiVersionsRequest, ApiVersionsResponse};

use crate::network::framing::supported_versions;

/// Answers with every supported API and its version range.
pub fn handle(_request: &ApiVersionsRequest, _version: i16) -> ApiVersionsResponse {
    ApiVersionsResponse::default()
        .with_api_keys(supported_versions())
        .with_finalized_features_epoch(-1)
}
