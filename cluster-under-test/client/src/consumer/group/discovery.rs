//! Finding a group's coordinator: FindCoordinator (v4+ batched keys, older single key)
//! retried while the coordinator loads, is not available or moved, and the consumer's cached
//! coordinator connection. Used by the classic join, commits and offset fetches, and the
//! KIP-848 heartbeat task alike.

use std::sync::Arc;
use std::time::Duration;

use kafka_protocol::messages::{ApiKey, FindCoordinatorRequest};
use kafka_protocol::protocol::StrBytes;

use crate::cluster::Cluster;
use crate::connection::Connection;
use crate::consumer::Consumer;
use crate::error::{Error, Result};
use crate::ids::BrokerId;

impl Consumer {
    /// A connection to the group's coordinator, found again when the cached one is gone.
    pub(super) async fn group_coordinator(&mut self) -> Result<Arc<Connection>> {
        let group = self.group.as_mut().ok_or(Error::Closed)?;
        if let Some(broker) = group.coordinator {
            match self.cluster.connection(broker).await {
                Ok(connection) => return Ok(connection),
                Err(_) => group.coordinator = None,
            }
        }
        let broker = find_coordinator(
            &self.cluster,
            &group.group_id,
            self.config.request_timeout,
            self.config.retry_backoff,
        )
        .await?;
        let connection = self.cluster.connection(broker).await?;
        group.coordinator = Some(broker);
        Ok(connection)
    }
}

/// FindCoordinator for `group_id` until a broker is named: COORDINATOR_LOAD_IN_PROGRESS,
/// COORDINATOR_NOT_AVAILABLE and NOT_COORDINATOR are retried after `backoff`; any other
/// error fails.
pub(super) async fn find_coordinator(
    cluster: &Cluster,
    group_id: &str,
    timeout: Duration,
    backoff: Duration,
) -> Result<BrokerId> {
    loop {
        cluster.refresh_metadata(&[]).await?;
        let connection = cluster.any_connection().await?;
        let (code, node) = ask_group_coordinator(&connection, group_id, timeout).await?;
        if code == 0 {
            return Ok(node);
        }
        if !matches!(code, 14..=16) {
            return Err(Error::broker(
                "FindCoordinator",
                code,
                Some(group_id.to_owned()),
            ));
        }
        tokio::time::sleep(backoff).await;
    }
}

/// One FindCoordinator (key type group) through `connection`, batched keys from v4 on:
/// the answer's error code and the broker it names.
pub(crate) async fn ask_group_coordinator(
    connection: &Connection,
    group_id: &str,
    timeout: Duration,
) -> Result<(i16, BrokerId)> {
    let key = StrBytes::from_string(group_id.to_owned());
    let version = connection.version(ApiKey::FindCoordinator).unwrap_or(0);
    let request = if version >= 4 {
        FindCoordinatorRequest::default().with_coordinator_keys(vec![key])
    } else {
        FindCoordinatorRequest::default().with_key(key)
    };
    let response = connection
        .send(ApiKey::FindCoordinator, &request, timeout)
        .await?;
    Ok(match response.coordinators.first() {
        Some(c) if version >= 4 => (c.error_code, BrokerId(c.node_id.0)),
        _ => (response.error_code, BrokerId(response.node_id.0)),
    })
}
