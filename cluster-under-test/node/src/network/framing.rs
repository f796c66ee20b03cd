//! The Kafka framing, in one place: one request frame in, at most one response frame out
//! (header parsing, version checks, decoding with `kafka-protocol`, dispatch to the handler of
//! each API, response encoding), and the same framing for the node's own requests to other
//! nodes ([`encode_request`], [`read_frame`], [`encode_response`]) used by
//! [`crate::network::NodeClient`] and the controller listener.
//!
//! This is the only place that turns untrusted bytes into requests, so it owns the robustness
//! rules: a frame that does not decode, an unknown API key or an unsupported version of an API
//! other than ApiVersions closes the connection (as Kafka's socket server does); ApiVersions
//! with a version we do not know is answered with `UNSUPPORTED_VERSION` and our version list in
//! a v0 response, so the client can pick a version. Nothing here may panic on any input: the
//! decoder runs under `catch_unwind` as a second line of defence, and the crate's fuzz test
//! throws random and mutated frames at [`handle_frame`].

use std::panic::AssertUnwindSafe;

use bytes::{Buf, BufMut, Bytes, BytesMut};
use kafka_protocol::ResponseError;
use kafka_protocol::messages::api_versions_response::ApiVersion;
use kafka_protocol::messages::{
    ApiKey, ApiVersionsResponse, RequestHeader, RequestKind, ResponseHeader, ResponseKind,
};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::protocol::{Decodable, Encodable};
use tokio::io::AsyncReadExt;

use crate::api::{self as handlers, Reply};
use crate::broker::Broker;
use crate::versions::{self, Served};

/// What the connection does after a frame.
#[derive(Debug)]
pub enum FrameOutcome {
    /// Write this complete frame (length prefix included).
    Respond(BytesMut),
    /// Say nothing (acks=0 produce).
    NoResponse,
    /// Close the connection; the reason is logged.
    Close(&'static str),
}

/// The APIs this node serves, with the versions it accepts ([`versions::CLIENT_APIS`]).
pub fn supported_versions() -> Vec<ApiVersion> {
    versions::advertised(versions::CLIENT_APIS)
}

fn is_supported(key: ApiKey, version: i16) -> bool {
    versions::serves(versions::CLIENT_APIS, key, version)
}

/// Handles one request frame (without its 4-byte length prefix) from `client_host` (the
/// peer as Kafka shows it: "/" and its IP).
pub async fn handle_frame(broker: &Broker, client_host: &str, frame: Bytes) -> FrameOutcome {
    let Some(request) = decode_request(frame) else {
        return FrameOutcome::Close("malformed request");
    };
    match request {
        Decoded::UnsupportedApiVersions { correlation_id } => {
            // Kafka answers with a v0 response whatever version was asked for.
            let response = ApiVersionsResponse::default()
                .with_error_code(ResponseError::UnsupportedVersion.code())
                .with_api_keys(supported_versions());
            encode_response(
                ApiKey::ApiVersions,
                0,
                correlation_id,
                &ResponseKind::ApiVersions(response),
            )
            .map_or(
                FrameOutcome::Close("response encoding failed"),
                FrameOutcome::Respond,
            )
        }
        Decoded::Unsupported => FrameOutcome::Close("unsupported API key or version"),
        Decoded::Request {
            key,
            version,
            header,
            body,
        } => {
            tracing::trace!(
                ?key,
                version,
                correlation_id = header.correlation_id,
                "request"
            );
            match handlers::dispatch(broker, &header, client_host, version, *body).await {
                Reply::Respond(response) => {
                    encode_response(key, version, header.correlation_id, &response).map_or(
                        FrameOutcome::Close("response encoding failed"),
                        FrameOutcome::Respond,
                    )
                }
                Reply::Silent => FrameOutcome::NoResponse,
                Reply::Close(reason) => FrameOutcome::Close(reason),
            }
        }
    }
}

enum Decoded {
    UnsupportedApiVersions {
        correlation_id: i32,
    },
    Unsupported,
    Request {
        key: ApiKey,
        version: i16,
        header: Box<RequestHeader>,
        body: Box<RequestKind>,
    },
}

/// Parses the header and body; `None` when the frame is malformed.
fn decode_request(frame: Bytes) -> Option<Decoded> {
    if frame.len() < 8 {
        return None;
    }
    let mut peek = &frame[..8];
    let api_key = peek.get_i16();
    let version = peek.get_i16();
    let correlation_id = peek.get_i32();
    let Ok(key) = ApiKey::try_from(api_key) else {
        return Some(Decoded::Unsupported);
    };
    if !is_supported(key, version) {
        if key == ApiKey::ApiVersions {
            return Some(Decoded::UnsupportedApiVersions { correlation_id });
        }
        return Some(Decoded::Unsupported);
    }
    let decoded = std::panic::catch_unwind(AssertUnwindSafe(move || {
        let mut buf = frame;
        let header = RequestHeader::decode(&mut buf, key.request_header_version(version)).ok()?;
        let body = RequestKind::decode(key, &mut buf, version).ok()?;
        Some((header, body))
    }));
    match decoded {
        Ok(Some((header, body))) => Some(Decoded::Request {
            key,
            version,
            header: Box::new(header),
            body: Box::new(body),
        }),
        Ok(None) => None,
        Err(_) => {
            tracing::warn!(
                ?key,
                version,
                "the request decoder panicked; closing the connection"
            );
            None
        }
    }
}

/// Encodes a response frame: length, header, body.
pub fn encode_response(
    key: ApiKey,
    version: i16,
    correlation_id: i32,
    response: &ResponseKind,
) -> Option<BytesMut> {
    let mut buf = BytesMut::with_capacity(256);
    buf.put_i32(0);
    ResponseHeader::default()
        .with_correlation_id(correlation_id)
        .encode(&mut buf, key.response_header_version(version))
        .ok()?;
    if let Err(error) = response.encode(&mut buf, version) {
        tracing::error!(?key, version, %error, "cannot encode response");
        return None;
    }
    let length = i32::try_from(buf.len() - 4).ok()?;
    buf[..4].copy_from_slice(&length.to_be_bytes());
    Some(buf)
}

/// Encodes a request frame: length, header (with `client_id`), body.
pub fn encode_request(
    key: ApiKey,
    version: i16,
    correlation_id: i32,
    client_id: &'static str,
    body: &RequestKind,
) -> Option<Bytes> {
    let mut buf = BytesMut::new();
    buf.put_i32(0);
    RequestHeader::default()
        .with_request_api_key(key as i16)
        .with_request_api_version(version)
        .with_correlation_id(correlation_id)
        .with_client_id(Some(StrBytes::from_static_str(client_id)))
        .encode(&mut buf, key.request_header_version(version))
        .ok()?;
    body.encode(&mut buf, version).ok()?;
    let length = i32::try_from(buf.len() - 4).ok()?;
    buf[..4].copy_from_slice(&length.to_be_bytes());
    Some(buf.freeze())
}

/// Reads one length-prefixed frame (without its prefix); `None` at the end of the stream, on
/// an error, or for a declared size that is negative or above `max_bytes`.
pub async fn read_frame<R: AsyncReadExt + Unpin>(
    reader: &mut R,
    max_bytes: usize,
) -> Option<Bytes> {
    let size = usize::try_from(reader.read_i32().await.ok()?).ok()?;
    if size > max_bytes {
        return None;
    }
    let mut frame = vec![0u8; size];
    reader.read_exact(&mut frame).await.ok()?;
    Some(Bytes::from(frame))
}

/// Decodes a request of one of `allowed` (header and body); `None` when the frame is
/// malformed, names another API or a version outside the API's range. Never panics.
pub fn decode_allowed_request(
    frame: Bytes,
    allowed: &[Served],
) -> Option<(ApiKey, i16, RequestHeader, RequestKind)> {
    if frame.len() < 8 {
        return None;
    }
    let key = ApiKey::try_from(i16::from_be_bytes([frame[0], frame[1]])).ok()?;
    let version = i16::from_be_bytes([frame[2], frame[3]]);
    if !versions::serves(allowed, key, version) {
        return None;
    }
    let decoded = std::panic::catch_unwind(AssertUnwindSafe(move || {
        let mut buf = frame;
        let header = RequestHeader::decode(&mut buf, key.request_header_version(version)).ok()?;
        let body = RequestKind::decode(key, &mut buf, version).ok()?;
        Some((header, body))
    }));
    let (header, body) = decoded.ok().flatten()?;
    Some((key, version, header, body))
}
