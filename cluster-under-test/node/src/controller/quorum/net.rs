//! The quorum's sockets: Kafka framing, outbound connections to the other voters (Raft
//! requests out, responses stepped in), the controller listener (Raft requests in, responses
//! out; controller APIs to the controller), and one-shot controller calls.

use super::*;

use crate::network::codec::{decode_allowed_request, read_frame};
use crate::network::{ClientError, NodeClient};

/// One [`NodeClient`] per controller listener this node talks to (forwarding, registration,
/// heartbeats, DescribeQuorum), shared by the tasks of the quorum thread.
#[derive(Clone, Debug, Default)]
pub(super) struct ControllerClients(Arc<Mutex<HashMap<SocketAddr, Arc<NodeClient>>>>);

impl ControllerClients {
    fn get(&self, address: SocketAddr) -> Arc<NodeClient> {
        let mut clients = self.0.lock().unwrap_or_else(|p| p.into_inner());
        Arc::clone(clients.entry(address).or_insert_with(|| {
            Arc::new(NodeClient::new(
                address.ip().to_string(),
                address.port(),
                "logjam-controller-client",
                CONNECT_TIMEOUT,
                MAX_FRAME_BYTES,
            ))
        }))
    }

    /// One request/response exchange with another node's controller listener.
    pub(super) async fn call(
        &self,
        address: SocketAddr,
        request: &RequestKind,
    ) -> Result<ResponseKind, ClientError> {
        let key = api_key_of(request).ok_or_else(|| {
            ClientError::Codec(ApiKey::ApiVersions, "not a controller API".into())
        })?;
        self.get(address)
            .request(
                request,
                key,
                controller_api_version(key),
                Duration::from_secs(5),
            )
            .await
    }
}

/// Sends Raft requests to one peer through a [`NodeClient`], in the order the Raft node
/// produced them; each response is stepped into the node when it arrives. The client notices
/// a connection the peer closed (it was killed or restarted) and reconnects for the next
/// request, so no request goes into a dead socket; a request that gets no response is
/// reported here (and the Raft node's own timers retry).
pub(super) async fn peer_task(
    peer: NodeId,
    address: SocketAddr,
    cluster_id: String,
    request_timeout: Duration,
    mut requests: mpsc::UnboundedReceiver<Envelope>,
    commands: mpsc::UnboundedSender<CommandBox>,
) {
    let client = NodeClient::new(
        address.ip().to_string(),
        address.port(),
        "logjam-quorum",
        CONNECT_TIMEOUT,
        MAX_FRAME_BYTES,
    );
    while let Some(envelope) = requests.recv().await {
        let Some((key, body)) = request_to_wire(&envelope.message, &cluster_id) else {
            continue;
        };
        let in_flight = match client.send(&body, key, version_of(key)).await {
            Ok(in_flight) => in_flight,
            Err(error) => {
                tracing::debug!(%peer, ?key, %error, "raft request not sent");
                continue;
            }
        };
        let commands = commands.clone();
        tokio::spawn(async move {
            match in_flight.response(request_timeout).await {
                Ok(body) => {
                    if let Some(message) = response_from_wire(body) {
                        let _ = commands.send(CommandBox(Command::Step {
                            envelope: Envelope {
                                from: peer,
                                to: envelope.from,
                                correlation_id: envelope.correlation_id,
                                message,
                            },
                            reply_to: None,
                        }));
                    }
                }
                Err(error) => tracing::debug!(%peer, ?key, %error, "raft request unanswered"),
            }
        });
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
    while let Some(frame) = read_frame(&mut reader, MAX_FRAME_BYTES).await {
        let Some((key, version, header, body)) =
            decode_allowed_request(frame, crate::versions::CONTROLLER_APIS)
        else {
            return;
        };
        let correlation_id = header.correlation_id;
        match body {
            RequestKind::ApiVersions(_) => {
                let versions = crate::versions::advertised(crate::versions::CONTROLLER_APIS);
                let body = ResponseKind::ApiVersions(
                    ApiVersionsResponse::default().with_api_keys(versions),
                );
                if let Some(frame) =
                    encode_response(key, version, correlation_id, &body).map(BytesMut::freeze)
                {
                    let _ = frames_tx.send(frame);
                }
            }
            RequestKind::DescribeQuorum(_) => {
                let (tx, rx) = oneshot::channel();
                let _ = commands.send(CommandBox(Command::Describe(tx)));
                let description = rx.await.ok().flatten();
                let body = ResponseKind::DescribeQuorum(describe_quorum_response(description));
                if let Some(frame) =
                    encode_response(key, version, correlation_id, &body).map(BytesMut::freeze)
                {
                    let _ = frames_tx.send(frame);
                }
            }
            RequestKind::BrokerRegistration(_)
            | RequestKind::BrokerHeartbeat(_)
            | RequestKind::AlterPartition(_)
            | RequestKind::AllocateProducerIds(_)
            | RequestKind::CreateTopics(_)
            | RequestKind::CreatePartitions(_) => {
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
                    if let Some(frame) = body.and_then(|body| {
                        encode_response(key, version, correlation_id, &body).map(BytesMut::freeze)
                    }) {
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
