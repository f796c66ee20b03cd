//! Fuzz target: one request frame (without its length prefix) through the node's request path,
//! `handle_frame`, the function every client connection calls: decoding, version checks and
//! the handler of every client API, against a real node (logs on disk, its own controller)
//! kept across inputs. Any panic is a crash; every 512 inputs the node must still answer
//! ApiVersions and Metadata, or the input that broke it is reported.

#![no_main]

use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use kafka_protocol::messages::{
    ApiKey, ApiVersionsRequest, MetadataRequest, RequestHeader, ResponseHeader,
};
use kafka_protocol::protocol::{Decodable, Encodable, StrBytes};
use libfuzzer_sys::fuzz_target;
use logjam_node::broker::Broker;
use logjam_node::config::Config;
use logjam_node::network::framing::{FrameOutcome, handle_frame};

/// How long one input may take before the node is considered to be waiting on purpose (a
/// Fetch's max wait, a Produce's acks timeout); a handler that spins is caught by libFuzzer's
/// own `-timeout`.
const PATIENCE: Duration = Duration::from_millis(20);

struct Node {
    _dir: tempfile::TempDir,
    broker: Broker,
    runtime: tokio::runtime::Runtime,
    inputs: AtomicU64,
}

fn node() -> &'static Node {
    static NODE: OnceLock<Node> = OnceLock::new();
    NODE.get_or_init(|| {
        logjam_node::network::server::raise_open_files_limit();
        let dir = tempfile::tempdir().expect("a temporary directory");
        let text = format!(
            "node.id=1\nprocess.roles=broker,controller\nlisteners=PLAINTEXT://127.0.0.1:0\n\
             log.dirs={}\noffsets.topic.replication.factor=1\n\
             transaction.state.log.replication.factor=1\n",
            dir.path().display()
        );
        let config = Config::parse(&text, &[]).expect("the fuzz node's config is valid");
        let broker = Broker::open(config).expect("the fuzz node opens");
        broker
            .create_topic("fuzz", Some(2), None, &[])
            .expect("the fuzz topic is created");
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("a runtime");
        Node {
            _dir: dir,
            broker,
            runtime,
            inputs: AtomicU64::new(0),
        }
    })
}

fn frame<T: Encodable>(key: ApiKey, version: i16, body: &T) -> Bytes {
    let mut buf = BytesMut::new();
    RequestHeader::default()
        .with_request_api_key(key as i16)
        .with_request_api_version(version)
        .with_correlation_id(7)
        .with_client_id(Some(StrBytes::from_static_str("fuzz-check")))
        .encode(&mut buf, key.request_header_version(version))
        .expect("the check's header encodes");
    body.encode(&mut buf, version)
        .expect("the check's body encodes");
    buf.freeze()
}

/// The node still answers a valid ApiVersions and a valid Metadata naming the fuzz topic.
async fn still_serves(broker: &Broker) {
    for (key, version, request) in [
        (
            ApiKey::ApiVersions,
            3,
            frame(ApiKey::ApiVersions, 3, &ApiVersionsRequest::default()),
        ),
        (
            ApiKey::Metadata,
            12,
            frame(ApiKey::Metadata, 12, &MetadataRequest::default()),
        ),
    ] {
        let outcome = tokio::time::timeout(
            Duration::from_secs(5),
            handle_frame(broker, "/127.0.0.1", request),
        )
        .await
        .unwrap_or_else(|_| panic!("{key:?} took over 5 s after the fuzz inputs"));
        let FrameOutcome::Respond(response) = outcome else {
            panic!("{key:?} went unanswered after the fuzz inputs: {outcome:?}");
        };
        let mut response = response.freeze().slice(4..);
        let header = ResponseHeader::decode(&mut response, key.response_header_version(version))
            .expect("the response header decodes");
        assert_eq!(header.correlation_id, 7);
    }
}

fuzz_target!(|data: &[u8]| {
    let node = node();
    let frame = Bytes::copy_from_slice(data);
    node.runtime.block_on(async {
        let _ =
            tokio::time::timeout(PATIENCE, handle_frame(&node.broker, "/127.0.0.1", frame)).await;
        if node.inputs.fetch_add(1, Ordering::Relaxed) % 512 == 0 {
            still_serves(&node.broker).await;
        }
    });
});
