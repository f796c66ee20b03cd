//! [`NodeClient`]: the one client every node-to-node request goes through (replica fetches,
//! forwarding and registration to the controller, heartbeats, AlterPartition, the quorum's
//! Raft RPCs), as Kafka's `NetworkClient` is for its inter-broker traffic.
//!
//! One connection per client, opened on first use, pipelined (requests are written in call
//! order, responses matched by correlation id). Its reader task watches the connection: when
//! the peer closes it (the peer was killed, or restarted), the connection is marked closed at
//! once, every request waiting on it fails with [`ClientError::Disconnected`], and the next
//! request opens a new connection. A request is never dropped silently: it gets its response,
//! or an error its caller sees. A request written into a connection found closed before the
//! write is retried once on a fresh connection (it cannot have reached the peer); one whose
//! connection closes after the write fails, and the caller decides whether to retry.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use kafka_protocol::messages::{ApiKey, ResponseHeader, ResponseKind};
use kafka_protocol::protocol::Decodable;
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::sync::oneshot;

use crate::network::codec::{encode_request, read_frame};

/// Why a node-to-node request got no response.
#[derive(Debug, Clone, thiserror::Error, PartialEq, Eq)]
pub enum ClientError {
    /// No connection could be opened within the connect timeout.
    #[error("cannot connect to {0}")]
    Connect(String),
    /// The connection closed after the request was written and before its response arrived.
    #[error("the connection to {0} closed before the response")]
    Disconnected(String),
    /// No response within the request's timeout.
    #[error("no response from {0} in time")]
    Timeout(String),
    /// The request could not be encoded, or the response could not be decoded.
    #[error("cannot encode or decode {0:?} with {1}")]
    Codec(ApiKey, String),
}

type Waiter = oneshot::Sender<Result<ResponseKind, ClientError>>;

/// Requests written and not answered yet: correlation id → (API, version, waiter).
type Pending = Arc<Mutex<HashMap<i32, (ApiKey, i16, Waiter)>>>;

/// One open connection: its write half, the requests waiting on it, and whether its reader
/// saw it close.
#[derive(Debug)]
struct Connection {
    writer: tokio::sync::Mutex<OwnedWriteHalf>,
    pending: Pending,
    closed: Arc<AtomicBool>,
    reader: tokio::task::JoinHandle<()>,
}

impl Drop for Connection {
    fn drop(&mut self) {
        self.reader.abort();
    }
}

/// A client for one other node's listener (client or controller).
#[derive(Debug)]
pub struct NodeClient {
    host: String,
    port: u16,
    client_id: &'static str,
    connect_timeout: Duration,
    max_frame_bytes: usize,
    connection: Mutex<Option<Arc<Connection>>>,
    /// Serialises connecting and writing, so requests go out in call order.
    write_order: tokio::sync::Mutex<()>,
    next_correlation_id: AtomicI32,
}

/// A request written and waiting for its response.
#[derive(Debug)]
pub struct InFlight {
    target: String,
    key: ApiKey,
    connection: Arc<Connection>,
    response: oneshot::Receiver<Result<ResponseKind, ClientError>>,
}

impl InFlight {
    /// Waits up to `timeout` for the response. A request that times out closes its
    /// connection (as Kafka's `NetworkClient` does): a peer that stopped answering may be
    /// behind a partition, and a fresh connection recovers at once when it heals where the old
    /// one would wait for TCP's retransmission backoff.
    ///
    /// # Errors
    /// [`ClientError::Disconnected`] or [`ClientError::Timeout`], or a decoding failure.
    pub async fn response(self, timeout: Duration) -> Result<ResponseKind, ClientError> {
        match tokio::time::timeout(timeout, self.response).await {
            Err(_) => {
                self.connection.closed.store(true, Ordering::SeqCst);
                fail_all(&self.connection.pending, &self.target);
                Err(ClientError::Timeout(self.target))
            }
            // The connection was dropped with the client: as good as closed.
            Ok(Err(_)) => Err(ClientError::Disconnected(self.target)),
            Ok(Ok(result)) => result.map_err(|error| match error {
                ClientError::Codec(_, detail) => ClientError::Codec(self.key, detail),
                other => other,
            }),
        }
    }
}

impl NodeClient {
    /// A client for `host:port`; nothing is connected until the first request.
    pub fn new(
        host: impl Into<String>,
        port: u16,
        client_id: &'static str,
        connect_timeout: Duration,
        max_frame_bytes: usize,
    ) -> NodeClient {
        NodeClient {
            host: host.into(),
            port,
            client_id,
            connect_timeout,
            max_frame_bytes,
            connection: Mutex::new(None),
            write_order: tokio::sync::Mutex::new(()),
            next_correlation_id: AtomicI32::new(1),
        }
    }

    /// `host:port`, for messages.
    pub fn target(&self) -> String {
        format!("{}:{}", self.host, self.port)
    }

    /// Whether this client talks to `host:port`.
    pub fn is_for(&self, host: &str, port: u16) -> bool {
        self.host == host && self.port == port
    }

    /// Sends `request` at `version` and waits up to `timeout` for its response.
    ///
    /// # Errors
    /// [`ClientError`]: no connection, the connection closed, no answer in time.
    pub async fn request(
        &self,
        request: &kafka_protocol::messages::RequestKind,
        key: ApiKey,
        version: i16,
        timeout: Duration,
    ) -> Result<ResponseKind, ClientError> {
        let started = tokio::time::Instant::now();
        let in_flight = tokio::time::timeout(timeout, self.send(request, key, version))
            .await
            .map_err(|_| ClientError::Timeout(self.target()))??;
        in_flight
            .response(timeout.saturating_sub(started.elapsed()))
            .await
    }

    /// Writes `request` (connecting first if needed) and returns the handle to wait for its
    /// response. Calls are written in the order they are made.
    ///
    /// # Errors
    /// [`ClientError::Connect`] when no connection could be had, or a codec error.
    pub async fn send(
        &self,
        request: &kafka_protocol::messages::RequestKind,
        key: ApiKey,
        version: i16,
    ) -> Result<InFlight, ClientError> {
        let _order = self.write_order.lock().await;
        let correlation_id = self.next_correlation_id.fetch_add(1, Ordering::Relaxed) & i32::MAX;
        let frame = encode_request(key, version, correlation_id, self.client_id, request)
            .ok_or_else(|| ClientError::Codec(key, format!("version {version}")))?;
        // Two attempts: a connection found closed at write time never saw the request.
        for _ in 0..2 {
            let connection = self.connection().await?;
            let (tx, rx) = oneshot::channel();
            connection
                .pending
                .lock()
                .unwrap_or_else(|poisoned| poisoned.into_inner())
                .insert(correlation_id, (key, version, tx));
            let written = connection.writer.lock().await.write_all(&frame).await;
            if written.is_ok() {
                return Ok(InFlight {
                    target: self.target(),
                    key,
                    connection,
                    response: rx,
                });
            }
            connection
                .pending
                .lock()
                .unwrap_or_else(|poisoned| poisoned.into_inner())
                .remove(&correlation_id);
            self.discard(&connection);
        }
        Err(ClientError::Disconnected(self.target()))
    }

    /// The open connection, or a new one when there is none or its reader saw it close.
    async fn connection(&self) -> Result<Arc<Connection>, ClientError> {
        if let Some(connection) = self
            .connection
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .as_ref()
            .filter(|connection| !connection.closed.load(Ordering::SeqCst))
        {
            return Ok(Arc::clone(connection));
        }
        let stream = tokio::time::timeout(
            self.connect_timeout,
            TcpStream::connect((self.host.as_str(), self.port)),
        )
        .await
        .ok()
        .and_then(Result::ok)
        .ok_or_else(|| ClientError::Connect(self.target()))?;
        let _ = stream.set_nodelay(true);
        let (reader, writer) = stream.into_split();
        let pending: Pending = Arc::default();
        let closed = Arc::new(AtomicBool::new(false));
        let reader = tokio::spawn(read_responses(
            reader,
            Arc::clone(&pending),
            Arc::clone(&closed),
            self.max_frame_bytes,
            self.target(),
        ));
        let connection = Arc::new(Connection {
            writer: tokio::sync::Mutex::new(writer),
            pending,
            closed,
            reader,
        });
        *self
            .connection
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner()) = Some(Arc::clone(&connection));
        Ok(connection)
    }

    /// Forgets `connection` (if it is still the current one), failing what waits on it.
    fn discard(&self, connection: &Arc<Connection>) {
        connection.closed.store(true, Ordering::SeqCst);
        fail_all(&connection.pending, &self.target());
        let mut current = self
            .connection
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        if current
            .as_ref()
            .is_some_and(|open| Arc::ptr_eq(open, connection))
        {
            *current = None;
        }
    }
}

fn fail_all(pending: &Pending, target: &str) {
    let waiters: Vec<_> = pending
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
        .drain()
        .collect();
    for (_, (_, _, waiter)) in waiters {
        let _ = waiter.send(Err(ClientError::Disconnected(target.to_owned())));
    }
}

/// Reads responses until the connection closes or sends something unreadable; then marks it
/// closed (so no further request is written into it) and fails every request still waiting.
async fn read_responses(
    mut reader: OwnedReadHalf,
    pending: Pending,
    closed: Arc<AtomicBool>,
    max_frame_bytes: usize,
    target: String,
) {
    while let Some(mut frame) = read_frame(&mut reader, max_frame_bytes).await {
        if frame.len() < 4 {
            break;
        }
        let correlation_id = i32::from_be_bytes([frame[0], frame[1], frame[2], frame[3]]);
        let Some((key, version, waiter)) = pending
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .remove(&correlation_id)
        else {
            // The caller gave up waiting (timeout); its late answer has nobody to go to.
            continue;
        };
        let _ = waiter.send(decode_response(&mut frame, key, version));
    }
    closed.store(true, Ordering::SeqCst);
    tracing::debug!(%target, "node connection closed");
    fail_all(&pending, &target);
}

fn decode_response(
    frame: &mut Bytes,
    key: ApiKey,
    version: i16,
) -> Result<ResponseKind, ClientError> {
    ResponseHeader::decode(frame, key.response_header_version(version))
        .and_then(|_| ResponseKind::decode(key, frame, version))
        .map_err(|error| ClientError::Codec(key, error.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use kafka_protocol::messages::{ApiVersionsRequest, ApiVersionsResponse, RequestKind};
    use tokio::net::TcpListener;

    use crate::network::codec::encode_response;

    fn api_versions() -> RequestKind {
        RequestKind::ApiVersions(ApiVersionsRequest::default())
    }

    /// A peer that answers the first request of each connection, then closes it (as a killed
    /// node's kernel does), or with `answer == false` closes without answering.
    async fn peer(listener: TcpListener, answer: bool, accepted: Arc<AtomicI32>) {
        loop {
            let Ok((stream, _)) = listener.accept().await else {
                return;
            };
            accepted.fetch_add(1, Ordering::SeqCst);
            let (mut reader, mut writer) = stream.into_split();
            let Some(frame) = read_frame(&mut reader, 1 << 20).await else {
                continue;
            };
            if answer {
                let correlation_id = i32::from_be_bytes([frame[4], frame[5], frame[6], frame[7]]);
                let response = encode_response(
                    ApiKey::ApiVersions,
                    3,
                    correlation_id,
                    &ResponseKind::ApiVersions(ApiVersionsResponse::default()),
                )
                .unwrap();
                writer.write_all(&response).await.unwrap();
            }
            // Dropping both halves closes the connection.
        }
    }

    #[tokio::test]
    async fn a_connection_the_peer_closed_is_replaced_before_the_next_request() {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = listener.local_addr().unwrap();
        let accepted = Arc::new(AtomicI32::new(0));
        tokio::spawn(peer(listener, true, Arc::clone(&accepted)));
        let client = NodeClient::new(
            "127.0.0.1",
            address.port(),
            "test",
            Duration::from_secs(1),
            1 << 20,
        );
        for round in 1..=3 {
            let response = client
                .request(
                    &api_versions(),
                    ApiKey::ApiVersions,
                    3,
                    Duration::from_secs(5),
                )
                .await;
            assert!(
                matches!(response, Ok(ResponseKind::ApiVersions(_))),
                "request {round} on a connection the peer had closed: {response:?}"
            );
            // Let the reader see the close, as a voter's does long before its next request.
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        assert_eq!(
            accepted.load(Ordering::SeqCst),
            3,
            "one new connection per request"
        );
    }

    #[tokio::test]
    async fn a_request_whose_connection_closes_fails_instead_of_vanishing() {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = listener.local_addr().unwrap();
        tokio::spawn(peer(listener, false, Arc::default()));
        let client = NodeClient::new(
            "127.0.0.1",
            address.port(),
            "test",
            Duration::from_secs(1),
            1 << 20,
        );
        let started = std::time::Instant::now();
        let response = client
            .request(
                &api_versions(),
                ApiKey::ApiVersions,
                3,
                Duration::from_secs(30),
            )
            .await;
        assert!(
            matches!(response, Err(ClientError::Disconnected(_))),
            "got {response:?}"
        );
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "the failure is reported when the connection closes, not at the timeout"
        );
    }
}
