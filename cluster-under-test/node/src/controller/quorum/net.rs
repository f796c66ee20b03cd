//! The quorum's sockets: Kafka framing, outbound connections to the other voters (Raft
//! requests out, responses stepped in), the controller listener (Raft requests in, responses
//! out; controller APIs to the controller), and one-shot controller calls.

use super::*;
/// One request/response exchange on a fresh connection to another node's controller listener.
pub async fn call(address: SocketAddr, request: &RequestKind) -> Option<ResponseKind> {
    let key = api_key_of(request)?;
    let version = controller_api_version(key);
    let exchange = async {
        let mut stream = TcpStream::connect(address).await.ok()?;
        stream.set_nodelay(true).ok()?;
        let frame = encode_request(key, version, 1, request)?;
        stream.write_all(&frame).await.ok()?;
        let mut response = read_frame(&mut stream).await?;
        ResponseHeader::decode(&mut response, key.response_header_version(version)).ok()?;
        ResponseKind::decode(key, &mut response, version).ok()
    };
    tokio::time::timeout(Duration::from_secs(5), exchange)
        .await
        .ok()?
}

pub(super) fn encode_request(
    key: ApiKey,
    version: i16,
    correlation_id: i32,
    body: &RequestKind,
) -> Option<Bytes> {
    let mut buf = BytesMut::new();
    buf.put_i32(0);
    RequestHeader::default()
        .with_request_api_key(key as i16)
        .with_request_api_version(version)
        .with_correlation_id(correlation_id)
        .with_client_id(Some(StrBytes::from_static_str("logjam-quorum")))
        .encode(&mut buf, key.request_header_version(version))
        .ok()?;
    body.encode(&mut buf, version).ok()?;
    let length = i32::try_from(buf.len() - 4).ok()?;
    buf[..4].copy_from_slice(&length.to_be_bytes());
    Some(buf.freeze())
}

pub(super) fn encode_response(
    key: ApiKey,
    version: i16,
    correlation_id: i32,
    body: &ResponseKind,
) -> Option<Bytes> {
    let mut buf = BytesMut::new();
    buf.put_i32(0);
    ResponseHeader::default()
        .with_correlation_id(correlation_id)
        .encode(&mut buf, key.response_header_version(version))
        .ok()?;
    body.encode(&mut buf, version).ok()?;
    let length = i32::try_from(buf.len() - 4).ok()?;
    buf[..4].copy_from_slice(&length.to_be_bytes());
    Some(buf.freeze())
}

pub(super) async fn read_frame<R: AsyncReadExt + Unpin>(reader: &mut R) -> Option<Bytes> {
    let size = usize::try_from(reader.read_i32().await.ok()?).ok()?;
    if size > MAX_FRAME_BYTES {
        return None;
    }
    let mut frame = vec![0u8; size];
    reader.read_exact(&mut frame).await.ok()?;
    Some(Bytes::from(frame))
}

/// Requests sent on an outbound connection and not answered yet: correlation id → (API,
/// version, the local node that sent it).
pub(super) type InFlight = Arc<Mutex<HashMap<i32, (ApiKey, i16, NodeId)>>>;

/// Sends Raft requests to one peer over one connection, reconnecting as needed; responses
/// are read by a companion task and stepped into the node.
pub(super) async fn peer_task(
    peer: NodeId,
    address: SocketAddr,
    cluster_id: String,
    mut requests: mpsc::UnboundedReceiver<Envelope>,
    commands: mpsc::UnboundedSender<CommandBox>,
) {
    let mut writer: Option<tokio::net::tcp::OwnedWriteHalf> = None;
    let in_flight: InFlight = Arc::default();
    while let Some(envelope) = requests.recv().await {
        let Some((key, body)) = request_to_wire(&envelope.message, &cluster_id) else {
            continue;
        };
        let version = version_of(key);
        let correlation_id = envelope.correlation_id.0 as i32;
        let Some(frame) = encode_request(key, version, correlation_id, &body) else {
            continue;
        };
        if writer.is_none() {
            match tokio::time::timeout(CONNECT_TIMEOUT, TcpStream::connect(address)).await {
                Ok(Ok(stream)) => {
                    let _ = stream.set_nodelay(true);
                    let (reader, write_half) = stream.into_split();
                    writer = Some(write_half);
                    tokio::spawn(peer_reader(
                        peer,
                        reader,
                        Arc::clone(&in_flight),
                        commands.clone(),
                    ));
                }
                _ => continue,
            }
        }
        in_flight
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(correlation_id, (key, version, envelope.from));
        if let Some(write_half) = writer.as_mut()
            && write_half.write_all(&frame).await.is_err()
        {
            writer = None;
        }
    }
}

pub(super) async fn peer_reader(
    peer: NodeId,
    mut reader: tokio::net::tcp::OwnedReadHalf,
    in_flight: InFlight,
    commands: mpsc::UnboundedSender<CommandBox>,
) {
    while let Some(mut frame) = read_frame(&mut reader).await {
        if frame.remaining() < 4 {
            return;
        }
        let correlation_id = i32::from_be_bytes(frame[..4].try_into().expect("4 bytes"));
        let Some((key, version, me)) = in_flight
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(&correlation_id)
        else {
            continue;
        };
        if ResponseHeader::decode(&mut frame, key.response_header_version(version)).is_err() {
            return;
        }
        let Ok(body) = ResponseKind::decode(key, &mut frame, version) else {
            return;
        };
        if let Some(message) = response_from_wire(body) {
            let _ = commands.send(CommandBox(Command::Step {
                envelope: Envelope {
                    from: peer,
                    to: me,
                    correlation_id: CorrelationId(correlation_id as u32),
                    message,
                },
                reply_to: None,
            }));
        }
    }
}

pub(super) async fn accept_loop(
    listener: TcpListener,
    commands: mpsc::UnboundedSender<CommandBox>,
    me: NodeId,
) {
    loop {
        match listener.accept().await {
            Ok((stream, _)) => {
                tokio::spawn(controller_connection(stream, commands.clone(), me));
            }
            Err(error) => {
                tracing::warn!(%error, "controller accept failed");
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
    }
}

/// One connection on the controller listener: KRaft RPCs go to the Raft node; controller APIs
/// to the controller (answered `NOT_CONTROLLER` unless this node is active); anything else
/// closes the connection, as Kafka's controller listener rejects client APIs.
pub(super) async fn controller_connection(
    stream: TcpStream,
    commands: mpsc::UnboundedSender<CommandBox>,
    me: NodeId,
) {
    let _ = stream.set_nodelay(true);
    let (mut reader, mut writer) = stream.into_split();
    let (frames_tx, mut frames_rx) = mpsc::unbounded_channel::<Bytes>();
    tokio::spawn(async move {
        while let Some(frame) = frames_rx.recv().await {
            if writer.write_all(&frame).await.is_err() {
                return;
            }
        }
    });
    while let Some(frame) = read_frame(&mut reader).await {
        if frame.len() < 8 {
            return;
        }
        let api_key = i16::from_be_bytes([frame[0], frame[1]]);
        let version = i16::from_be_bytes([frame[2], frame[3]]);
        let Ok(key) = ApiKey::try_from(api_key) else {
            return;
        };
        // The APIs and versions of `versions::CONTROLLER_APIS` only.
        if !crate::versions::serves(crate::versions::CONTROLLER_APIS, key, version) {
            return;
        }
        let decoded = std::panic::catch_unwind(move || {
            let mut buf = frame;
            let header =
                RequestHeader::decode(&mut buf, key.request_header_version(version)).ok()?;
            let body = RequestKind::decode(key, &mut buf, version).ok()?;
            Some((header, body))
        });
        let Ok(Some((header, body))) = decoded else {
            return;
        };
        let correlation_id = header.correlation_id;
        match body {
            RequestKind::ApiVersions(_) => {
                let versions = crate::versions::advertised(crate::versions::CONTROLLER_APIS);
                let body = ResponseKind::ApiVersions(
                    ApiVersionsResponse::default().with_api_keys(versions),
                );
                if let Some(frame) = encode_response(key, version, correlation_id, &body) {
                    let _ = frames_tx.send(frame);
                }
            }
            RequestKind::DescribeQuorum(_) => {
                let (tx, rx) = oneshot::channel();
                let _ = commands.send(CommandBox(Command::Describe(tx)));
                let description = rx.await.ok().flatten();
                let body = ResponseKind::DescribeQuorum(describe_quorum_response(description));
                if let Some(frame) = encode_response(key, version, correlation_id, &body) {
                    let _ = frames_tx.send(frame);
                }
            }
            RequestKind::BrokerRegistration(_)
            | RequestKind::BrokerHeartbeat(_)
            | RequestKind::AlterPartition(_)
            | RequestKind::AllocateProducerIds(_)
            | RequestKind::CreateTopics(_) => {
                let fallback = not_controller(&body);
                let commands = commands.clone();
                let frames_tx = frames_tx.clone();
                tokio::spawn(async move {
                    let (tx, rx) = oneshot::channel();
                    let _ = commands.send(CommandBox(Command::Controller {
                        request: body,
                        reply: Box::new(move |result| {
                            let _ = tx.send(result);
                        }),
                    }));
                    let body = match rx.await {
                        Ok(Ok(response)) => Some(response),
                        _ => fallback,
                    };
                    if let Some(frame) =
                        body.and_then(|body| encode_response(key, version, correlation_id, &body))
                    {
                        let _ = frames_tx.send(frame);
                    }
                });
            }
            other => {
                let Some((from, message)) = request_from_wire(other, me) else {
                    return;
                };
                let _ = commands.send(CommandBox(Command::Step {
                    envelope: Envelope {
                        from,
                        to: me,
                        correlation_id: CorrelationId(correlation_id as u32),
                        message,
                    },
                    reply_to: Some((frames_tx.clone(), key, version)),
                }));
            }
        }
    }
}

/// DescribeQuorum's response from the leader's description, or `NOT_LEADER_OR_FOLLOWER`.
pub fn describe_quorum_response(description: Option<QuorumDescription>) -> DescribeQuorumResponse {
    let partition = match description {
        None => QuorumPartition::default()
            .with_error_code(ResponseError::NotLeaderOrFollower.code())
            .with_leader_id(WireBrokerId(-1))
            .with_leader_epoch(-1)
            .with_high_watermark(-1),
        Some(description) => {
            let replica = |r: &logjam_raft::rpc::describe_quorum::ReplicaDescription| {
                ReplicaState::default()
                    .with_replica_id(WireBrokerId(r.replica_id.0 as i32))
                    .with_log_end_offset(r.log_end_offset.map_or(-1, |o| o.0 as i64))
                    .with_last_fetch_timestamp(r.last_fetch_timestamp_ms.map_or(-1, |t| t as i64))
                    .with_last_caught_up_timestamp(
                        r.last_caught_up_timestamp_ms.map_or(-1, |t| t as i64),
                    )
            };
            QuorumPartition::default()
                .with_leader_id(WireBrokerId(description.leader_id.0 as i32))
                .with_leader_epoch(description.leader_epoch.0 as i32)
                .with_high_watermark(description.high_watermark.0 as i64)
                .with_current_voters(description.current_voters.iter().map(replica).collect())
                .with_observers(description.observers.iter().map(replica).collect())
        }
    };
    DescribeQuorumResponse::default().with_topics(vec![
        QuorumTopic::default()
            .with_topic_name(TopicName(StrBytes::from_static_str(METADATA_TOPIC)))
            .with_partitions(vec![partition]),
    ])
}
