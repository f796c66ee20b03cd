//! The version sweep's connection to a listener: one request frame out at the version asked
//! (with the header version it implies), its answer decoded at that version with nothing left
//! over, and a reconnect after the node closes the connection, so the sweep reports every
//! failure rather than the first.

use std::io::Write;
use std::net::{SocketAddr, TcpStream};

use bytes::{Buf, BufMut, BytesMut};
use kafka_protocol::messages::{ApiKey, RequestHeader, RequestKind, ResponseHeader, ResponseKind};
use kafka_protocol::protocol::{Decodable, Encodable};

use super::{common, text};

/// One connection to a listener, reopened after the node closes it so the sweep goes on and
/// reports every failure, not only the first.
pub struct Connection {
    address: SocketAddr,
    stream: TcpStream,
    correlation_id: i32,
}

impl Connection {
    pub fn open(address: SocketAddr) -> Connection {
        Connection {
            address,
            stream: common::connect(address),
            correlation_id: 0,
        }
    }

    /// Sends `body` as `key` at `version` and decodes the answer at that version.
    pub fn call(
        &mut self,
        key: ApiKey,
        version: i16,
        body: &RequestKind,
    ) -> Result<ResponseKind, String> {
        self.correlation_id += 1;
        let correlation_id = self.correlation_id;
        let mut buf = BytesMut::new();
        buf.put_i32(0);
        RequestHeader::default()
            .with_request_api_key(key as i16)
            .with_request_api_version(version)
            .with_correlation_id(correlation_id)
            .with_client_id(Some(text("logjam-sweep")))
            .encode(&mut buf, key.request_header_version(version))
            .map_err(|error| format!("the test cannot encode the header: {error}"))?;
        body.encode(&mut buf, version).map_err(|error| {
            format!("no request of this version can be encoded (so none decoded): {error}")
        })?;
        let length = i32::try_from(buf.len() - 4).unwrap();
        buf[..4].copy_from_slice(&length.to_be_bytes());
        let answered = self
            .stream
            .write_all(&buf)
            .ok()
            .and_then(|()| common::read_frame(&mut self.stream));
        let Some(mut frame) = answered else {
            self.stream = common::connect(self.address);
            return Err("connection closed without a response".to_owned());
        };
        let header = ResponseHeader::decode(&mut frame, key.response_header_version(version))
            .map_err(|error| format!("response header does not decode: {error}"))?;
        if header.correlation_id != correlation_id {
            return Err(format!(
                "correlation id {} answered for {correlation_id}",
                header.correlation_id
            ));
        }
        let response = ResponseKind::decode(key, &mut frame, version)
            .map_err(|error| format!("response does not decode at this version: {error}"))?;
        if frame.remaining() != 0 {
            return Err(format!(
                "{} bytes left after the response",
                frame.remaining()
            ));
        }
        Ok(response)
    }
}
