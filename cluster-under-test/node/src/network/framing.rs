//! One client request frame in, at most one response frame out: decoded by the [`codec`]
//! (which owns the robustness rules: nothing there panics on any input), dispatched to the
//! handler of its API, the reply encoded. A frame that does not decode, an unknown API key or
//! an unsupported version of an API other than ApiVersions closes the connection (as Kafka's
//! socket server does); ApiVersions with a version we do not know is answered with
//! `UNSUPPORTED_VERSION` and our version list in a v0 response, so the client can pick a
//! version. The crate's fuzz test throws random and mutated frames at [`handle_frame`].
//!
//! [`codec`]: super::codec

use bytes::{Bytes, BytesMut};
use kafka_protocol::ResponseError;
use kafka_protocol::messages::{ApiKey, ApiVersionsResponse, ResponseKind};

use crate::api::{self as handlers, Reply};
use crate::broker::Broker;
use crate::network::codec::{Decoded, decode_request, encode_response};
use crate::versions;

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
                .with_api_keys(versions::supported_versions());
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
