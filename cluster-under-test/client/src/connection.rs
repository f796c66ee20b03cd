//! One TCP connection to one broker: correlation ids, pipelining, ApiVersions negotiation,
//! request timeouts.
//!
//! Requests are written in order by a writer task and answered in order by the broker; a
//! reader task matches each response to the oldest pending request by correlation id, so many
//! requests can be in flight at once (the producer's `max.in.flight.requests.per.connection`
//! is enforced by the sender, not here). When either half fails the connection is dead: every
//! pending request fails with [`TransportFailure::DisconnectedAfterWrite`] (indefinite), every
//! queued one with [`TransportFailure::DisconnectedBeforeWrite`] (definite). A request that
//! gets no answer within its timeout closes the connection, as Kafka's `NetworkClient` does.
//!
//! This module knows nothing about metadata or which broker leads what (`cluster.rs`).

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicI32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::{Buf, BufMut, Bytes, BytesMut};
use kafka_protocol::messages::{
    ApiKey, ApiVersionsRequest, ApiVersionsResponse, RequestHeader, ResponseHeader,
};
use kafka_protocol::protocol::{Decodable, Encodable, HeaderVersion, Request, StrBytes};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::sync::{Notify, mpsc, oneshot};

use crate::error::{Error, Result};
use crate::outcome::TransportFailure;

/// The highest version of each API this client speaks. Produce and Fetch stop below the
/// versions that address topics by id only (13), which our requests do not fill in.
pub const VERSION_CEILINGS: &[(ApiKey, i16)] = &[
    // v12 is v11 on the wire; it tells the leader that a transactional producer uses
    // transactions V2 (implicit AddPartitionsToTxn), so only such producers send it
    // (`Connection::send_capped`), as Kafka's Java client does.
    (ApiKey::Produce, 12),
    (ApiKey::Fetch, 12),
    (ApiKey::ListOffsets, 8),
    (ApiKey::Metadata, 12),
    (ApiKey::ApiVersions, 3),
    (ApiKey::CreateTopics, 7),
    (ApiKey::CreatePartitions, 3),
    (ApiKey::InitProducerId, 4),
    (ApiKey::OffsetForLeaderEpoch, 4),
    (ApiKey::DescribeQuorum, 2),
    (ApiKey::FindCoordinator, 4),
    (ApiKey::JoinGroup, 9),
    (ApiKey::SyncGroup, 5),
    (ApiKey::Heartbeat, 4),
    (ApiKey::LeaveGroup, 5),
    // v9: the member epoch of a KIP-848 member (Kafka refuses its commits below v9).
    (ApiKey::OffsetCommit, 9),
    (ApiKey::OffsetFetch, 7),
    (ApiKey::AddPartitionsToTxn, 3),
    (ApiKey::AddOffsetsToTxn, 4),
    (ApiKey::TxnOffsetCommit, 5),
    (ApiKey::EndTxn, 5),
    (ApiKey::ConsumerGroupHeartbeat, 1),
];

/// The Produce version for everything but a transactions-V2 producer.
pub const PRODUCE_VERSION_BEFORE_TRANSACTION_V2: i16 = 11;

/// Frames larger than this from a broker are a protocol violation (Kafka's default
/// `socket.request.max.bytes` is 100 MiB; responses are bounded by fetch sizes).
const MAX_RESPONSE_BYTES: usize = 256 * 1024 * 1024;

/// The version both sides speak for `key`, given the broker's advertised range; `None` when
/// the ranges do not overlap or we do not use the API.
pub fn negotiate_version(key: ApiKey, broker_min: i16, broker_max: i16) -> Option<i16> {
    let ceiling = VERSION_CEILINGS
        .iter()
        .find(|(k, _)| *k == key)
        .map(|(_, v)| *v)?;
    let ours = key.valid_versions();
    let version = ceiling.min(broker_max).min(ours.max);
    (version >= broker_min.max(ours.min)).then_some(version)
}

/// What the reader delivers for one request.
type Reply = std::result::Result<Bytes, TransportFailure>;

struct Outgoing {
    frame: BytesMut,
    correlation_id: i32,
    /// `None` for requests without a response (acks=0 produce).
    reply: Option<oneshot::Sender<Reply>>,
    /// Told once the frame is fully written (or failed to be).
    written: oneshot::Sender<std::result::Result<(), TransportFailure>>,
}

#[derive(Default)]
struct Pending {
    /// Requests written (or being written) and awaiting their response, oldest first.
    queue: VecDeque<(i32, oneshot::Sender<Reply>)>,
    /// Once set, nothing new may be queued: the reader is gone.
    closed: bool,
}

/// A pipelined connection to one broker, shared by the tasks that use it.
pub struct Connection {
    address: String,
    client_id: StrBytes,
    outgoing: mpsc::UnboundedSender<Outgoing>,
    pending: Arc<Mutex<Pending>>,
    /// Wakes the reader so it stops (close requested, writer failed).
    shutdown: Arc<Notify>,
    next_correlation_id: AtomicI32,
    /// Negotiated version per API key.
    versions: HashMap<i16, i16>,
    /// Cluster-wide finalized features from ApiVersions v3+ (`transaction.version`, ...).
    finalized_features: HashMap<String, i16>,
}

impl std::fmt::Debug for Connection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Connection")
            .field("address", &self.address)
            .finish_non_exhaustive()
    }
}

impl Connection {
    /// Connects to `address` and negotiates API versions.
    ///
    /// # Errors
    /// [`Error::Transport`] with `ConnectFailed` when the TCP connection or the ApiVersions
    /// exchange fails within `timeout`.
    pub async fn connect(address: &str, client_id: &str, timeout: Duration) -> Result<Connection> {
        let failed = |api| Error::Transport {
            address: address.to_owned(),
            api,
            failure: TransportFailure::ConnectFailed,
        };
        let stream = tokio::time::timeout(timeout, TcpStream::connect(address))
            .await
            .map_err(|_| failed("connect"))?
            .map_err(|_| failed("connect"))?;
        let _ = stream.set_nodelay(true);
        let (read, write) = stream.into_split();
        let (outgoing, receiver) = mpsc::unbounded_channel();
        let pending = Arc::new(Mutex::new(Pending::default()));
        let shutdown = Arc::new(Notify::new());
        tokio::spawn(write_loop(
            write,
            receiver,
            pending.clone(),
            shutdown.clone(),
        ));
        tokio::spawn(read_loop(read, pending.clone(), shutdown.clone()));
        let mut connection = Connection {
            address: address.to_owned(),
            client_id: StrBytes::from_string(client_id.to_owned()),
            outgoing,
            pending,
            shutdown,
            next_correlation_id: AtomicI32::new(0),
            versions: HashMap::new(),
            finalized_features: HashMap::new(),
        };
        let request = ApiVersionsRequest::default()
            .with_client_software_name(StrBytes::from_static_str("logjam-client"))
            .with_client_software_version(StrBytes::from_static_str(env!("CARGO_PKG_VERSION")));
        let mut response: ApiVersionsResponse = connection
            .exchange(ApiKey::ApiVersions, 3, &request, timeout)
            .await
            .map_err(|_| failed("ApiVersions"))?;
        if response.error_code == kafka_protocol::ResponseError::UnsupportedVersion.code() {
            response = connection
                .exchange(
                    ApiKey::ApiVersions,
                    0,
                    &ApiVersionsRequest::default(),
                    timeout,
                )
                .await
                .map_err(|_| failed("ApiVersions"))?;
        }
        if response.finalized_features_epoch >= 0 {
            for feature in &response.finalized_features {
                connection
                    .finalized_features
                    .insert(feature.name.to_string(), feature.max_version_level);
            }
        }
        for api in &response.api_keys {
            let Ok(key) = ApiKey::try_from(api.api_key) else {
                continue;
            };
            if let Some(version) = negotiate_version(key, api.min_version, api.max_version) {
                connection.versions.insert(api.api_key, version);
            }
        }
        Ok(connection)
    }

    /// `host:port` of the broker.
    pub fn address(&self) -> &str {
        &self.address
    }

    /// The negotiated version of `key`, `None` when the broker does not serve it.
    pub fn version(&self, key: ApiKey) -> Option<i16> {
        self.versions.get(&(key as i16)).copied()
    }

    /// The finalized level of a cluster feature (e.g. `transaction.version`), as this broker
    /// reported it at connect; `None` when not finalized or not reported.
    pub fn finalized_feature(&self, name: &str) -> Option<i16> {
        self.finalized_features.get(name).copied()
    }

    /// Like [`Connection::send`], at most at version `max_version` (Kafka's clients cap
    /// Produce, EndTxn and TxnOffsetCommit below their transactions-V2 versions unless V2 is
    /// in use).
    ///
    /// # Errors
    /// As [`Connection::send`].
    pub async fn send_capped<R>(
        &self,
        key: ApiKey,
        request: &R,
        max_version: i16,
        timeout: Duration,
    ) -> Result<R::Response>
    where
        R: Request,
    {
        let version = self.require(key)?.min(max_version);
        self.exchange(key, version, request, timeout).await
    }

    /// Whether the connection has failed or was closed.
    pub fn is_closed(&self) -> bool {
        self.pending.lock().expect("pending lock").closed || self.outgoing.is_closed()
    }

    /// Closes the connection; pending requests fail as disconnected after write.
    pub fn close(&self) {
        self.shutdown.notify_one();
    }

    /// Sends `request` at the negotiated version and awaits its response.
    ///
    /// # Errors
    /// [`Error::UnsupportedApi`] when the broker does not serve the API; [`Error::Transport`]
    /// on disconnects and timeouts (the connection is closed after a timeout);
    /// [`Error::Protocol`] when the response does not decode.
    pub async fn send<R>(&self, key: ApiKey, request: &R, timeout: Duration) -> Result<R::Response>
    where
        R: Request,
    {
        let version = self.require(key)?;
        self.exchange(key, version, request, timeout).await
    }

    /// Sends `request` that gets no response (acks=0 produce); returns once it is written.
    ///
    /// # Errors
    /// As [`Connection::send`].
    pub async fn send_without_response<R: Request>(
        &self,
        key: ApiKey,
        request: &R,
        max_version: i16,
        timeout: Duration,
    ) -> Result<()> {
        let version = self.require(key)?.min(max_version);
        let (frame, correlation_id) = self.encode(key, version, request)?;
        let (written_tx, written_rx) = oneshot::channel();
        self.submit(Outgoing {
            frame,
            correlation_id,
            reply: None,
            written: written_tx,
        });
        let api = api_name(key);
        match tokio::time::timeout(timeout, written_rx).await {
            Ok(Ok(Ok(()))) => Ok(()),
            Ok(Ok(Err(failure))) => Err(self.transport(api, failure)),
            Ok(Err(_)) => Err(self.transport(api, TransportFailure::DisconnectedBeforeWrite)),
            Err(_) => {
                self.close();
                Err(self.transport(api, TransportFailure::RequestTimedOut))
            }
        }
    }

    fn require(&self, key: ApiKey) -> Result<i16> {
        self.version(key).ok_or_else(|| Error::UnsupportedApi {
            address: self.address.clone(),
            api: api_name(key),
        })
    }

    fn transport(&self, api: &'static str, failure: TransportFailure) -> Error {
        Error::Transport {
            address: self.address.clone(),
            api,
            failure,
        }
    }

    fn encode<R: Encodable + HeaderVersion>(
        &self,
        key: ApiKey,
        version: i16,
        request: &R,
    ) -> Result<(BytesMut, i32)> {
        let correlation_id = self.next_correlation_id.fetch_add(1, Ordering::Relaxed);
        let mut frame = BytesMut::new();
        frame.put_i32(0);
        let header = RequestHeader::default()
            .with_request_api_key(key as i16)
            .with_request_api_version(version)
            .with_correlation_id(correlation_id)
            .with_client_id(Some(self.client_id.clone()));
        header
            .encode(&mut frame, R::header_version(version))
            .and_then(|()| request.encode(&mut frame, version))
            .map_err(|error| Error::Protocol {
                address: self.address.clone(),
                detail: format!("cannot encode {} v{version}: {error}", api_name(key)),
            })?;
        let length = i32::try_from(frame.len() - 4).expect("request frames are below 2 GiB");
        frame[..4].copy_from_slice(&length.to_be_bytes());
        Ok((frame, correlation_id))
    }

    fn submit(&self, outgoing: Outgoing) {
        // A closed channel drops `outgoing`, whose dropped `written` sender reads as
        // "disconnected before write" on the other side.
        let _ = self.outgoing.send(outgoing);
    }

    async fn exchange<R>(
        &self,
        key: ApiKey,
        version: i16,
        request: &R,
        timeout: Duration,
    ) -> Result<R::Response>
    where
        R: Encodable + HeaderVersion + Request,
    {
        let api = api_name(key);
        let (frame, correlation_id) = self.encode(key, version, request)?;
        let (reply_tx, reply_rx) = oneshot::channel();
        let (written_tx, written_rx) = oneshot::channel();
        self.submit(Outgoing {
            frame,
            correlation_id,
            reply: Some(reply_tx),
            written: written_tx,
        });
        let outcome = tokio::time::timeout(timeout, async {
            // Whether the frame left: decides definite versus indefinite on failure.
            let written = matches!(written_rx.await, Ok(Ok(())));
            match reply_rx.await {
                Ok(reply) => reply,
                Err(_) if written => Err(TransportFailure::DisconnectedAfterWrite),
                Err(_) => Err(TransportFailure::DisconnectedBeforeWrite),
            }
        })
        .await;
        let mut body = match outcome {
            Ok(Ok(body)) => body,
            Ok(Err(failure)) => return Err(self.transport(api, failure)),
            Err(_) => {
                self.close();
                return Err(self.transport(api, TransportFailure::RequestTimedOut));
            }
        };
        let malformed = |detail: String| Error::Protocol {
            address: self.address.clone(),
            detail,
        };
        let header = ResponseHeader::decode(&mut body, R::Response::header_version(version))
            .map_err(|e| malformed(format!("{api} response header: {e}")))?;
        if header.correlation_id != correlation_id {
            self.close();
            return Err(malformed(format!(
                "{api}: correlation id {} answers request {correlation_id}",
                header.correlation_id
            )));
        }
        R::Response::decode(&mut body, version)
            .map_err(|e| malformed(format!("{api} v{version} response: {e}")))
    }
}

impl Drop for Connection {
    fn drop(&mut self) {
        self.shutdown.notify_one();
    }
}

/// The API's name for messages.
pub fn api_name(key: ApiKey) -> &'static str {
    match key {
        ApiKey::Produce => "Produce",
        ApiKey::Fetch => "Fetch",
        ApiKey::ListOffsets => "ListOffsets",
        ApiKey::Metadata => "Metadata",
        ApiKey::ApiVersions => "ApiVersions",
        ApiKey::CreateTopics => "CreateTopics",
        ApiKey::CreatePartitions => "CreatePartitions",
        ApiKey::InitProducerId => "InitProducerId",
        ApiKey::OffsetForLeaderEpoch => "OffsetForLeaderEpoch",
        ApiKey::DescribeQuorum => "DescribeQuorum",
        ApiKey::FindCoordinator => "FindCoordinator",
        ApiKey::AddPartitionsToTxn => "AddPartitionsToTxn",
        ApiKey::AddOffsetsToTxn => "AddOffsetsToTxn",
        ApiKey::TxnOffsetCommit => "TxnOffsetCommit",
        ApiKey::EndTxn => "EndTxn",
        ApiKey::ConsumerGroupHeartbeat => "ConsumerGroupHeartbeat",
        _ => "another API",
    }
}

async fn write_loop(
    mut write: OwnedWriteHalf,
    mut receiver: mpsc::UnboundedReceiver<Outgoing>,
    pending: Arc<Mutex<Pending>>,
    shutdown: Arc<Notify>,
) {
    while let Some(outgoing) = receiver.recv().await {
        if let Some(reply) = outgoing.reply {
            let mut state = pending.lock().expect("pending lock");
            if state.closed {
                let _ = reply.send(Err(TransportFailure::DisconnectedBeforeWrite));
                let _ = outgoing
                    .written
                    .send(Err(TransportFailure::DisconnectedBeforeWrite));
                continue;
            }
            // Queued before writing so the reader can never see a response it cannot match.
            state.queue.push_back((outgoing.correlation_id, reply));
        }
        match write.write_all(&outgoing.frame).await {
            Ok(()) => {
                let _ = outgoing.written.send(Ok(()));
            }
            Err(error) => {
                tracing::debug!(%error, "connection write failed");
                // An incomplete frame is never processed by the broker: definite.
                let mut state = pending.lock().expect("pending lock");
                if let Some(index) = state
                    .queue
                    .iter()
                    .position(|(id, _)| *id == outgoing.correlation_id)
                    && let Some((_, reply)) = state.queue.remove(index)
                {
                    let _ = reply.send(Err(TransportFailure::DisconnectedBeforeWrite));
                }
                let _ = outgoing
                    .written
                    .send(Err(TransportFailure::DisconnectedBeforeWrite));
                drop(state);
                shutdown.notify_one();
                break;
            }
        }
    }
    // Fail whatever is still queued: none of it was written.
    receiver.close();
    while let Ok(outgoing) = receiver.try_recv() {
        if let Some(reply) = outgoing.reply {
            let _ = reply.send(Err(TransportFailure::DisconnectedBeforeWrite));
        }
        let _ = outgoing
            .written
            .send(Err(TransportFailure::DisconnectedBeforeWrite));
    }
    let _ = write.shutdown().await;
}

/// The read buffer's size; one grown past [`READ_BUFFER_KEEP`] for a large frame (a fetch of
/// up to a MiB a partition) is replaced once empty, so hundreds of open consumers do not each
/// keep their largest answer's allocation for the connection's life.
const READ_BUFFER: usize = 64 * 1024;
const READ_BUFFER_KEEP: usize = 256 * 1024;

async fn read_loop(mut read: OwnedReadHalf, pending: Arc<Mutex<Pending>>, shutdown: Arc<Notify>) {
    let mut buffer = BytesMut::with_capacity(READ_BUFFER);
    loop {
        if buffer.is_empty() && buffer.capacity() > READ_BUFFER_KEEP {
            buffer = BytesMut::with_capacity(READ_BUFFER);
        }
        // Deliver every complete frame in the buffer.
        while buffer.len() >= 4 {
            let length = (&buffer[..4]).get_i32();
            let Ok(length) = usize::try_from(length) else {
                return fail_pending(&pending);
            };
            if length > MAX_RESPONSE_BYTES {
                return fail_pending(&pending);
            }
            if buffer.len() < 4 + length {
                buffer.reserve(4 + length - buffer.len());
                break;
            }
            buffer.advance(4);
            let frame = buffer.split_to(length).freeze();
            let next = pending.lock().expect("pending lock").queue.pop_front();
            match next {
                Some((_, reply)) => {
                    // The correlation id is checked by the requester, which knows the header
                    // version needed to decode it.
                    let _ = reply.send(Ok(frame));
                }
                None => return fail_pending(&pending),
            }
        }
        tokio::select! {
            read = read.read_buf(&mut buffer) => match read {
                Ok(0) | Err(_) => return fail_pending(&pending),
                Ok(_) => {}
            },
            () = shutdown.notified() => return fail_pending(&pending),
        }
    }
}

fn fail_pending(pending: &Mutex<Pending>) {
    let mut state = pending.lock().expect("pending lock");
    state.closed = true;
    for (_, reply) in state.queue.drain(..) {
        let _ = reply.send(Err(TransportFailure::DisconnectedAfterWrite));
    }
}

#[cfg(test)]
mod tests;
