//! Bad input at the socket: oversized, negative-size, unknown-API, unsupported-version and
//! truncated requests close only their own connection, the node keeps serving fresh ones, and
//! an ApiVersions of an unknown version is answered as Kafka answers it.
//!
//! Kept apart from `fuzz.rs` so the fuzzer's many topics (and their open files) cannot starve
//! these tests of file descriptors.

mod common;

use std::io::Write;

use common::{config, connect, exchange, read_frame, request_frame};
use kafka_protocol::messages::*;
use kafka_protocol::protocol::Decodable;
use logjam_node::broker::Broker;
use logjam_node::network::framing::{FrameOutcome, handle_frame};

#[tokio::test]
async fn socket_level_bad_input_closes_only_that_connection() {
    let dir = tempfile::tempdir().unwrap();
    let node =
        logjam_node::network::server::start(config(dir.path(), 0, "socket.request.max.bytes=1024"))
            .await
            .unwrap();
    let address = node.address();
    tokio::task::spawn_blocking(move || {
        // Oversized: declared larger than socket.request.max.bytes; closed without reading it.
        let mut stream = connect(address);
        stream.write_all(&2048i32.to_be_bytes()).unwrap();
        assert!(
            read_frame(&mut stream).is_none(),
            "oversized request must close the connection"
        );
        // Negative size.
        let mut stream = connect(address);
        stream.write_all(&(-5i32).to_be_bytes()).unwrap();
        assert!(read_frame(&mut stream).is_none());
        // Unknown API key.
        let mut frame = request_frame(ApiKey::ApiVersions, 0, 1, &ApiVersionsRequest::default());
        frame[4..6].copy_from_slice(&999i16.to_be_bytes());
        let mut stream = connect(address);
        stream.write_all(&frame).unwrap();
        assert!(
            read_frame(&mut stream).is_none(),
            "unknown API key must close the connection"
        );
        // Unsupported Produce version (v2 is below Kafka 4's floor): closed, like Kafka.
        let mut frame = request_frame(ApiKey::Produce, 3, 1, &ProduceRequest::default());
        frame[6..8].copy_from_slice(&2i16.to_be_bytes());
        let mut stream = connect(address);
        stream.write_all(&frame).unwrap();
        assert!(read_frame(&mut stream).is_none());
        // Truncated body, then the connection goes away mid-frame.
        let mut stream = connect(address);
        let frame = request_frame(ApiKey::Metadata, 12, 1, &MetadataRequest::default());
        stream.write_all(&frame[..frame.len() - 2]).unwrap();
        drop(stream);

        // After all that, a fresh connection is served normally.
        let mut stream = connect(address);
        let response: ApiVersionsResponse = exchange(
            &mut stream,
            ApiKey::ApiVersions,
            3,
            &ApiVersionsRequest::default(),
        );
        assert_eq!(response.error_code, 0);
        assert!(
            response
                .api_keys
                .iter()
                .any(|api| api.api_key == ApiKey::Produce as i16)
        );
    })
    .await
    .unwrap();
    node.shutdown().await.unwrap();
}

/// Kafka answers an ApiVersions of a version it does not know with UNSUPPORTED_VERSION in a v0
/// response listing what it supports, so the client can retry with a version both know.
#[tokio::test]
async fn unsupported_api_versions_version_is_answered_with_v0() {
    let dir = tempfile::tempdir().unwrap();
    let broker = Broker::open(config(dir.path(), 0, "")).unwrap();
    let mut frame = request_frame(ApiKey::ApiVersions, 3, 77, &ApiVersionsRequest::default());
    frame[6..8].copy_from_slice(&99i16.to_be_bytes());
    let FrameOutcome::Respond(response) =
        handle_frame(&broker, "/127.0.0.1", frame.freeze().slice(4..)).await
    else {
        panic!("ApiVersions must be answered");
    };
    let mut response = response.freeze().slice(4..);
    let header = ResponseHeader::decode(&mut response, 0).unwrap();
    assert_eq!(header.correlation_id, 77);
    let body = ApiVersionsResponse::decode(&mut response, 0).unwrap();
    assert_eq!(
        body.error_code,
        kafka_protocol::ResponseError::UnsupportedVersion.code()
    );
    assert!(
        body.api_keys
            .iter()
            .any(|api| api.api_key == ApiKey::ApiVersions as i16 && api.max_version >= 3)
    );
}
