//! The Kafka wire codec, in one place: request frames to headers and bodies (decoded with
//! `kafka-protocol`, after the API key and version are checked against what a listener
//! serves), responses and the node's own requests to frames, and the length-prefixed frame
//! reader. Used by the client listener ([`super::framing`]), the controller listener and
//! [`crate::network::NodeClient`].
//!
//! This is the only place that turns untrusted bytes into requests: nothing here may panic on
//! any input, and the decoder runs under `catch_unwind` as a second line of defence.

use std::panic::AssertUnwindSafe;

use bytes::{Buf, BufMut, Bytes, BytesMut};
use kafka_protocol::messages::{ApiKey, RequestHeader, RequestKind, ResponseHeader, ResponseKind};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::protocol::{Decodable, Encodable};
use tokio::io::AsyncReadExt;

use crate::versions::{self, Served};

/// A client request frame, decoded.
pub(crate) enum Decoded {
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
pub(crate) fn decode_request(frame: Bytes) -> Option<Decoded> {
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
    if !versions::serves(versions::CLIENT_APIS, key, version) {
        if key == ApiKey::ApiVersions {
            return Some(Decoded::UnsupportedApiVersions { correlation_id });
        }
        return Some(Decoded::Unsupported);
    }
    let (header, body) = decode_body(frame, key, version)?;
    Some(Decoded::Request {
        key,
        version,
        header: Box::new(header),
        body: Box::new(body),
    })
}

/// The header and body of a request frame whose key and version were checked; `None` when
/// they do not decode. The decoder runs under `catch_unwind`, a second line of defence: a
/// panic in it is logged and the frame treated as malformed.
fn decode_body(frame: Bytes, key: ApiKey, version: i16) -> Option<(RequestHeader, RequestKind)> {
    let decoded = std::panic::catch_unwind(AssertUnwindSafe(move || {
        let mut buf = frame;
        let header = RequestHeader::decode(&mut buf, key.request_header_version(version)).ok()?;
        let body = RequestKind::decode(key, &mut buf, version).ok()?;
        Some((header, body))
    }));
    decoded.unwrap_or_else(|_| {
        tracing::warn!(
            ?key,
            version,
            "the request decoder panicked; closing the connection"
        );
        None
    })
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
    let (header, body) = decode_body(frame, key, version)?;
    Some((key, version, header, body))
}
