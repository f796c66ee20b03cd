//! The shared async shell under the producer, consumer and admin: bootstrap from any listed
//! node, one [`Connection`] per broker, and the [`MetadataCache`] refreshed on demand (after
//! `NOT_LEADER_OR_FOLLOWER`, `UNKNOWN_TOPIC_OR_PARTITION`, disconnects) and when it is older
//! than `metadata.max.age.ms`.
//!
//! It owns no retry policy: callers decide when to refresh and how long to wait.

use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use kafka_protocol::messages::{ApiKey, MetadataRequest, TopicName};
use kafka_protocol::protocol::StrBytes;

use crate::connection::Connection;
use crate::error::{Error, Result};
use crate::ids::BrokerId;
use crate::metadata::MetadataCache;

/// Settings the shell needs from any client's configuration.
#[derive(Debug, Clone)]
pub struct ClusterSettings {
    /// `bootstrap.servers`.
    pub bootstrap_servers: Vec<String>,
    /// `client.id`.
    pub client_id: String,
    /// `request.timeout.ms`.
    pub request_timeout: Duration,
    /// Whether Metadata requests may auto-create topics (producer and consumer: yes).
    pub allow_auto_topic_creation: bool,
}

struct State {
    metadata: MetadataCache,
    /// Topics the client cares about; metadata requests ask for these.
    topics: BTreeSet<String>,
    connections: HashMap<BrokerId, Arc<Connection>>,
    bootstrap: Option<Arc<Connection>>,
    /// Rotates through bootstrap servers so one dead node does not block every attempt.
    next_bootstrap: usize,
    refreshed_at: Option<Instant>,
}

/// Connections and metadata, shared by one client's tasks.
pub struct Cluster {
    settings: ClusterSettings,
    state: Mutex<State>,
    /// Serialises refreshes so a burst of errors triggers one Metadata request, not many.
    refresh: tokio::sync::Mutex<()>,
}

impl std::fmt::Debug for Cluster {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Cluster")
            .field("bootstrap_servers", &self.settings.bootstrap_servers)
            .finish_non_exhaustive()
    }
}

impl Cluster {
    /// A cluster handle; connects lazily.
    pub fn new(settings: ClusterSettings) -> Cluster {
        Cluster {
            settings,
            state: Mutex::new(State {
                metadata: MetadataCache::default(),
                topics: BTreeSet::new(),
                connections: HashMap::new(),
                bootstrap: None,
                next_bootstrap: 0,
                refreshed_at: None,
            }),
            refresh: tokio::sync::Mutex::new(()),
        }
    }

    /// The settings.
    pub fn settings(&self) -> &ClusterSettings {
        &self.settings
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().expect("cluster state lock")
    }

    /// A copy of the metadata cache.
    pub fn metadata(&self) -> MetadataCache {
        self.lock().metadata.clone()
    }

    /// Reads the cache without copying it.
    pub fn with_metadata<T>(&self, f: impl FnOnce(&MetadataCache) -> T) -> T {
        f(&self.lock().metadata)
    }

    /// Forgets a partition's leader until the next refresh.
    pub fn invalidate_leader(&self, partition: &crate::ids::TopicPartition) {
        self.lock().metadata.invalidate_leader(partition);
    }

    /// Closes and forgets the connection to `broker` (it stopped answering); the next use
    /// opens a new one.
    pub fn disconnect(&self, broker: BrokerId) {
        if let Some(connection) = self.lock().connections.remove(&broker) {
            connection.close();
        }
    }

    /// Adds topics to those the metadata requests ask for.
    pub fn track_topics<'a>(&self, topics: impl IntoIterator<Item = &'a str>) {
        let mut state = self.lock();
        for topic in topics {
            state.topics.insert(topic.to_owned());
        }
    }

    /// When the metadata was last refreshed.
    pub fn refreshed_at(&self) -> Option<Instant> {
        self.lock().refreshed_at
    }

    /// A connection to `broker`, opened if needed.
    ///
    /// # Errors
    /// The broker is unknown to the metadata, or the connection fails.
    pub async fn connection(&self, broker: BrokerId) -> Result<Arc<Connection>> {
        let address = {
            let state = self.lock();
            if let Some(connection) = state.connections.get(&broker)
                && !connection.is_closed()
            {
                return Ok(connection.clone());
            }
            state.metadata.address(broker).map(str::to_owned)
        };
        let Some(address) = address else {
            return Err(Error::Transport {
                address: format!("broker {broker}"),
                api: "connect",
                failure: crate::outcome::TransportFailure::ConnectFailed,
            });
        };
        let connection = Arc::new(
            Connection::connect(
                &address,
                &self.settings.client_id,
                self.settings.request_timeout,
            )
            .await?,
        );
        let mut state = self.lock();
        // Another task may have connected meanwhile; keep the first live one.
        if let Some(existing) = state.connections.get(&broker)
            && !existing.is_closed()
        {
            return Ok(existing.clone());
        }
        state.connections.insert(broker, connection.clone());
        Ok(connection)
    }

    /// Any live connection: an open broker connection, else a bootstrap server (tried in
    /// turn, so any one reachable node is enough).
    ///
    /// # Errors
    /// No broker and no bootstrap server accepts a connection.
    pub async fn any_connection(&self) -> Result<Arc<Connection>> {
        let start = {
            let state = self.lock();
            if let Some(connection) = state.connections.values().find(|c| !c.is_closed()) {
                return Ok(connection.clone());
            }
            if let Some(connection) = state.bootstrap.as_ref().filter(|c| !c.is_closed()) {
                return Ok(connection.clone());
            }
            state.next_bootstrap
        };
        let servers = &self.settings.bootstrap_servers;
        let mut last_error = None;
        for attempt in 0..servers.len() {
            let address = &servers[(start + attempt) % servers.len()];
            match Connection::connect(
                address,
                &self.settings.client_id,
                self.settings.request_timeout,
            )
            .await
            {
                Ok(connection) => {
                    let connection = Arc::new(connection);
                    let mut state = self.lock();
                    state.bootstrap = Some(connection.clone());
                    state.next_bootstrap = (start + attempt + 1) % servers.len();
                    return Ok(connection);
                }
                Err(error) => last_error = Some(error),
            }
        }
        Err(last_error.unwrap_or(Error::Closed))
    }

    /// Refreshes metadata for the tracked topics (plus `extra`), from any reachable node.
    ///
    /// # Errors
    /// No node answered.
    pub async fn refresh_metadata(&self, extra: &[&str]) -> Result<()> {
        let _one_at_a_time = self.refresh.lock().await;
        self.track_topics(extra.iter().copied());
        let topics: Vec<String> = self.lock().topics.iter().cloned().collect();
        let request = MetadataRequest::default()
            .with_topics(Some(
                topics
                    .iter()
                    .map(|t| {
                        MetadataRequestTopic::default()
                            .with_name(Some(TopicName(StrBytes::from_string(t.clone()))))
                    })
                    .collect(),
            ))
            .with_allow_auto_topic_creation(self.settings.allow_auto_topic_creation);
        let connection = self.any_connection().await?;
        let response = match connection
            .send(ApiKey::Metadata, &request, self.settings.request_timeout)
            .await
        {
            Ok(response) => response,
            Err(error) => {
                // Try the next node next time.
                connection.close();
                return Err(error);
            }
        };
        let mut state = self.lock();
        state.metadata.apply(&response);
        state.refreshed_at = Some(Instant::now());
        // Drop connections to brokers that left the cluster.
        let known: BTreeSet<BrokerId> = state.metadata.brokers.keys().copied().collect();
        state.connections.retain(|id, _| known.contains(id));
        Ok(())
    }

    /// Refreshes until `ready` holds for the cache or `timeout` passes, backing off `backoff`
    /// between attempts.
    ///
    /// # Errors
    /// [`Error::Timeout`] naming `what`.
    pub async fn await_metadata(
        &self,
        what: &str,
        extra: &[&str],
        timeout: Duration,
        backoff: Duration,
        ready: impl Fn(&MetadataCache) -> bool,
    ) -> Result<()> {
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            if self.with_metadata(&ready) {
                return Ok(());
            }
            let attempt = tokio::time::timeout_at(deadline, self.refresh_metadata(extra)).await;
            if self.with_metadata(&ready) {
                return Ok(());
            }
            if attempt.is_err() || tokio::time::Instant::now() + backoff >= deadline {
                return Err(Error::Timeout {
                    what: what.to_owned(),
                    after: timeout,
                });
            }
            tokio::time::sleep(backoff).await;
        }
    }
}
