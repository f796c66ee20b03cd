//! The broker's registration and heartbeats (Kafka's `BrokerLifecycleManager`), including
//! controlled shutdown.

use super::*;
/// How the broker lifecycle task reports to, and is told by, the rest of the node.
pub(super) struct LifecycleHooks {
    /// Where the registration status is published.
    pub(super) status: watch::Sender<BrokerStatus>,
    /// Called once, the first time the broker is unfenced.
    pub(super) on_unfenced: Box<dyn FnOnce() + Send>,
    /// Set to start a controlled shutdown.
    pub(super) shutting_down: Arc<ShutdownSignal>,
}

/// The broker's side of registration and heartbeats (Kafka's `BrokerLifecycleManager`):
/// register with a fresh incarnation id and the previous incarnation's broker epoch when it
/// shut down cleanly (`PreviousBrokerEpoch`, KIP-966), heartbeat every `broker.heartbeat.interval.ms`
/// (more often while fenced, to be unfenced soon after catching up), re-register when the
/// controller no longer knows this broker epoch.
pub(super) async fn broker_lifecycle(
    settings: QuorumSettings,
    clients: ControllerClients,
    broker: BrokerLifecycleSettings,
    commands: mpsc::UnboundedSender<CommandBox>,
    image: watch::Receiver<Arc<MetadataImage>>,
    leader_rx: watch::Receiver<Option<NodeId>>,
    hooks: LifecycleHooks,
) {
    let LifecycleHooks {
        status,
        on_unfenced,
        shutting_down,
    } = hooks;
    let mut on_unfenced = Some(on_unfenced);
    let incarnation = Uuid::new_v4();
    let interval = Duration::from_millis(broker.heartbeat_interval_ms);
    loop {
        let request = RequestKind::BrokerRegistration(
            BrokerRegistrationRequest::default()
                .with_broker_id(WireBrokerId(settings.node_id.0 as i32))
                .with_cluster_id(StrBytes::from_string(settings.cluster_id.clone()))
                .with_incarnation_id(incarnation)
                .with_listeners(vec![
                    RegistrationListener::default()
                        .with_name(StrBytes::from_static_str("PLAINTEXT"))
                        .with_host(StrBytes::from_string(broker.host.clone()))
                        .with_port(broker.port),
                ])
                .with_previous_broker_epoch(broker.previous_broker_epoch),
        );
        let epoch = match forward(&settings, &clients, &commands, &leader_rx, request).await {
            Some(ResponseKind::BrokerRegistration(response)) if response.error_code == 0 => {
                response.broker_epoch
            }
            other => {
                tracing::debug!(?other, "broker registration not accepted yet");
                tokio::time::sleep(interval.min(Duration::from_millis(500))).await;
                continue;
            }
        };
        tracing::info!(broker_epoch = epoch, "registered with the controller");
        status.send_replace(BrokerStatus {
            broker_epoch: Some(epoch),
            fenced: true,
            shut_down: false,
        });
        loop {
            let offset = image.borrow().offset as i64 - 1;
            let request = RequestKind::BrokerHeartbeat(
                BrokerHeartbeatRequest::default()
                    .with_broker_id(WireBrokerId(settings.node_id.0 as i32))
                    .with_broker_epoch(epoch)
                    .with_current_metadata_offset(offset)
                    .with_want_shut_down(
                        shutting_down
                            .requested
                            .load(std::sync::atomic::Ordering::SeqCst),
                    ),
            );
            let mut shut_down = false;
            let fenced = match forward(&settings, &clients, &commands, &leader_rx, request).await {
                Some(ResponseKind::BrokerHeartbeat(response)) if response.error_code == 0 => {
                    shut_down = response.should_shut_down;
                    response.is_fenced
                }
                Some(ResponseKind::BrokerHeartbeat(response))
                    if response.error_code == ResponseError::StaleBrokerEpoch.code()
                        || response.error_code == ResponseError::BrokerIdNotRegistered.code() =>
                {
                    tracing::warn!(
                        "the controller no longer knows this broker epoch; re-registering"
                    );
                    break;
                }
                _ => status.borrow().fenced,
            };
            let previous = status.send_replace(BrokerStatus {
                broker_epoch: Some(epoch),
                fenced,
                shut_down,
            });
            if shut_down {
                tracing::info!("controlled shutdown complete");
                return;
            }
            if previous.fenced != fenced {
                tracing::info!(fenced, "broker fencing changed");
            }
            if !fenced && let Some(callback) = on_unfenced.take() {
                callback();
            }
            let wait = if fenced {
                interval.min(Duration::from_millis(200))
            } else {
                interval
            };
            tokio::select! {
                () = tokio::time::sleep(wait) => {}
                () = shutting_down.wake.notified() => {}
            }
        }
    }
}
