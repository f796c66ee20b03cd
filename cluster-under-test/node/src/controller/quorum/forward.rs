//! Routing of controller requests to the active controller (this node's, or the leader's
//! controller listener), and the `NOT_CONTROLLER` answers of an inactive one.

use super::*;
/// Routes a controller request to the active controller: this node's when it is active,
/// otherwise the leader's controller listener; retries until `FORWARD_DEADLINE`.
pub(super) async fn forward(
    settings: &QuorumSettings,
    clients: &ControllerClients,
    commands: &mpsc::UnboundedSender<CommandBox>,
    leader: &watch::Receiver<Option<NodeId>>,
    request: RequestKind,
) -> Option<ResponseKind> {
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut attempt = 0u64;
    while Instant::now() < deadline {
        attempt += 1;
        let (tx, rx) = oneshot::channel();
        let _ = commands.send(CommandBox(Command::Controller {
            request: request.clone(),
            reply: Box::new(move |result| {
                let _ = tx.send(result);
            }),
        }));
        let hint = match rx.await {
            Ok(Ok(response)) if !is_not_controller(&response) => return Some(response),
            Ok(Ok(_)) => *leader.borrow(),
            Ok(Err(hint)) => hint.or(*leader.borrow()),
            Err(_) => return None,
        };
        let remote = hint
            .filter(|id| *id != settings.node_id)
            .and_then(|id| settings.voter_addresses.get(&id).copied())
            .or_else(|| {
                // No leader known: try the voters in turn.
                let voters: Vec<SocketAddr> = settings
                    .voter_addresses
                    .iter()
                    .filter(|(id, _)| **id != settings.node_id)
                    .map(|(_, address)| *address)
                    .collect();
                (!voters.is_empty() && hint.is_none())
                    .then(|| voters[(attempt as usize) % voters.len()])
            });
        if let Some(address) = remote
            && let Ok(response) = clients.call(address, &request).await
            && !is_not_controller(&response)
        {
            return Some(response);
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    None
}

pub(super) fn is_not_controller(response: &ResponseKind) -> bool {
    let code = ResponseError::NotController.code();
    match response {
        ResponseKind::BrokerRegistration(r) => r.error_code == code,
        ResponseKind::BrokerHeartbeat(r) => r.error_code == code,
        ResponseKind::AlterPartition(r) => r.error_code == code,
        ResponseKind::AllocateProducerIds(r) => r.error_code == code,
        ResponseKind::CreateTopics(r) => r.topics.iter().any(|t| t.error_code == code),
        ResponseKind::CreatePartitions(r) => r.results.iter().any(|t| t.error_code == code),
        ResponseKind::DescribeQuorum(r) => r.topics.iter().any(|t| {
            t.partitions
                .iter()
                .any(|p| p.error_code == ResponseError::NotLeaderOrFollower.code())
        }),
        _ => false,
    }
}

pub(super) fn not_controller(request: &RequestKind) -> Option<ResponseKind> {
    let code = ResponseError::NotController.code();
    Some(match request {
        RequestKind::BrokerRegistration(_) => ResponseKind::BrokerRegistration(
            BrokerRegistrationResponse::default().with_error_code(code).with_broker_epoch(-1),
        ),
        RequestKind::BrokerHeartbeat(_) => ResponseKind::BrokerHeartbeat(
            BrokerHeartbeatResponse::default().with_error_code(code).with_is_fenced(true),
        ),
        RequestKind::AlterPartition(_) => {
            ResponseKind::AlterPartition(AlterPartitionResponse::default().with_error_code(code))
        }
        RequestKind::AllocateProducerIds(_) => ResponseKind::AllocateProducerIds(
            kafka_protocol::messages::AllocateProducerIdsResponse::default()
                .with_error_code(code)
                .with_producer_id_start(kafka_protocol::messages::ProducerId(-1)),
        ),
        RequestKind::CreateTopics(request) => ResponseKind::CreateTopics(
            CreateTopicsResponse::default().with_topics(
                request
                    .topics
                    .iter()
                    .map(|topic| {
                        kafka_protocol::messages::create_topics_response::CreatableTopicResult::default()
                            .with_name(topic.name.clone())
                            .with_num_partitions(-1)
                            .with_replication_factor(-1)
                            .with_error_code(code)
                    })
                    .collect(),
            ),
        ),
        RequestKind::CreatePartitions(request) => ResponseKind::CreatePartitions(
            kafka_protocol::messages::CreatePartitionsResponse::default().with_results(
                request
                    .topics
                    .iter()
                    .map(|topic| {
                        kafka_protocol::messages::create_partitions_response::CreatePartitionsTopicResult::default()
                            .with_name(topic.name.clone())
                            .with_error_code(code)
                    })
                    .collect(),
            ),
        ),
        _ => return None,
    })
}

pub(super) fn api_key_of(request: &RequestKind) -> Option<ApiKey> {
    Some(match request {
        RequestKind::BrokerRegistration(_) => ApiKey::BrokerRegistration,
        RequestKind::BrokerHeartbeat(_) => ApiKey::BrokerHeartbeat,
        RequestKind::AlterPartition(_) => ApiKey::AlterPartition,
        RequestKind::CreateTopics(_) => ApiKey::CreateTopics,
        RequestKind::CreatePartitions(_) => ApiKey::CreatePartitions,
        RequestKind::DescribeQuorum(_) => ApiKey::DescribeQuorum,
        RequestKind::AllocateProducerIds(_) => ApiKey::AllocateProducerIds,
        _ => return None,
    })
}

pub(super) fn controller_api_version(key: ApiKey) -> i16 {
    match key {
        ApiKey::BrokerRegistration => 4,
        ApiKey::BrokerHeartbeat => 1,
        ApiKey::AlterPartition => 3,
        ApiKey::CreateTopics => 7,
        ApiKey::CreatePartitions => 3,
        ApiKey::DescribeQuorum => 1,
        _ => 0,
    }
}
