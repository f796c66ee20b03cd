//! The admin client: create topics (partitions, replication factor, configs), describe topics
//! (leader, ISR, replicas, leader epoch, from Metadata), describe the KRaft quorum
//! (`DescribeQuorum` on `__cluster_metadata-0`), grow a topic's partitions, and find a group's
//! coordinator.
//!
//! Each call is bounded by `default.api.timeout.ms` and retries retriable errors (for example
//! `NOT_CONTROLLER` while the quorum elects) after `retry.backoff.ms`.

use std::sync::Arc;
use std::time::Duration;

use kafka_protocol::messages::create_partitions_request::CreatePartitionsTopic;
use kafka_protocol::messages::create_topics_request::{CreatableTopic, CreatableTopicConfig};
use kafka_protocol::messages::describe_quorum_request::{PartitionData, TopicData};
use kafka_protocol::messages::{
    ApiKey, CreatePartitionsRequest, CreateTopicsRequest, DescribeQuorumRequest, TopicName,
};
use kafka_protocol::protocol::StrBytes;

use crate::cluster::{Cluster, ClusterSettings};
use crate::config::AdminConfig;
use crate::consumer::group::discovery::ask_group_coordinator;
use crate::error::{Error, Result};
use crate::ids::{BrokerId, LeaderEpoch, Offset};
use crate::metadata::TopicMetadata;

/// A topic to create.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewTopic {
    /// The name.
    pub name: String,
    /// Number of partitions.
    pub partitions: i32,
    /// Replication factor.
    pub replication_factor: i16,
    /// Topic configs (`min.insync.replicas`, `unclean.leader.election.enable`, ...).
    pub configs: Vec<(String, String)>,
}

impl NewTopic {
    /// A topic with no config overrides.
    pub fn new(name: impl Into<String>, partitions: i32, replication_factor: i16) -> NewTopic {
        NewTopic {
            name: name.into(),
            partitions,
            replication_factor,
            configs: Vec::new(),
        }
    }

    /// Adds a config override.
    pub fn with_config(mut self, key: impl Into<String>, value: impl Into<String>) -> NewTopic {
        self.configs.push((key.into(), value.into()));
        self
    }
}

/// One replica in the quorum description.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QuorumReplica {
    /// The replica's node id.
    pub node: BrokerId,
    /// Its metadata log end offset as the leader knows it.
    pub log_end_offset: Offset,
}

/// The KRaft quorum as its leader describes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QuorumInfo {
    /// The leader's node id.
    pub leader: BrokerId,
    /// The leader's epoch.
    pub leader_epoch: LeaderEpoch,
    /// The metadata log's high watermark.
    pub high_watermark: Offset,
    /// Voters.
    pub voters: Vec<QuorumReplica>,
    /// Observers (brokers that are not voters).
    pub observers: Vec<QuorumReplica>,
}

/// Admin operations.
#[derive(Debug)]
pub struct Admin {
    config: AdminConfig,
    cluster: Arc<Cluster>,
}

impl Admin {
    /// An admin client from Kafka properties.
    ///
    /// # Errors
    /// Invalid configuration.
    pub fn from_properties<'a>(
        properties: impl IntoIterator<Item = (&'a str, &'a str)>,
    ) -> Result<Admin> {
        Ok(Admin::new(AdminConfig::from_properties(properties)?))
    }

    /// An admin client.
    pub fn new(config: AdminConfig) -> Admin {
        let cluster = Arc::new(Cluster::new(ClusterSettings {
            bootstrap_servers: config.bootstrap_servers.clone(),
            client_id: config.client_id.clone(),
            request_timeout: config.request_timeout,
            allow_auto_topic_creation: false,
        }));
        Admin { config, cluster }
    }

    async fn with_retries<T, F, Fut>(&self, what: &str, mut attempt: F) -> Result<T>
    where
        F: FnMut() -> Fut,
        Fut: std::future::Future<Output = Result<T>>,
    {
        let deadline = tokio::time::Instant::now() + self.config.default_api_timeout;
        loop {
            match tokio::time::timeout_at(deadline, attempt()).await {
                Ok(Ok(value)) => return Ok(value),
                Ok(Err(error))
                    if error.is_retriable()
                        && tokio::time::Instant::now() + self.config.retry_backoff < deadline =>
                {
                    tracing::debug!(%error, what, "admin call retried");
                    tokio::time::sleep(self.config.retry_backoff).await;
                }
                Ok(Err(error)) => return Err(error),
                Err(_) => {
                    return Err(Error::Timeout {
                        what: what.to_owned(),
                        after: self.config.default_api_timeout,
                    });
                }
            }
        }
    }

    /// Creates topics; returns each topic's own outcome (`TOPIC_ALREADY_EXISTS` etc. per
    /// topic). The outer error is for the request as a whole.
    ///
    /// # Errors
    /// No broker reachable within `default.api.timeout.ms`.
    pub async fn create_topics(&self, topics: &[NewTopic]) -> Result<Vec<(String, Result<()>)>> {
        let request = CreateTopicsRequest::default()
            .with_timeout_ms(
                i32::try_from(self.config.request_timeout.as_millis()).unwrap_or(i32::MAX),
            )
            .with_topics(
                topics
                    .iter()
                    .map(|t| {
                        CreatableTopic::default()
                            .with_name(TopicName(StrBytes::from_string(t.name.clone())))
                            .with_num_partitions(t.partitions)
                            .with_replication_factor(t.replication_factor)
                            .with_configs(
                                t.configs
                                    .iter()
                                    .map(|(k, v)| {
                                        CreatableTopicConfig::default()
                                            .with_name(StrBytes::from_string(k.clone()))
                                            .with_value(Some(StrBytes::from_string(v.clone())))
                                    })
                                    .collect(),
                            )
                    })
                    .collect(),
            );
        let response = self
            .with_retries("CreateTopics", || async {
                let connection = self.cluster.any_connection().await?;
                let response = connection
                    .send(ApiKey::CreateTopics, &request, self.config.request_timeout)
                    .await?;
                // NOT_CONTROLLER for every topic: ask again (another node may be active).
                if let Some(code) = response
                    .topics
                    .iter()
                    .map(|t| t.error_code)
                    .find(|c| *c == 41)
                {
                    return Err(Error::broker("CreateTopics", code, None));
                }
                Ok(response)
            })
            .await?;
        Ok(response
            .topics
            .into_iter()
            .map(|t| {
                let name = t.name.0.to_string();
                let outcome = match t.error_code {
                    0 => Ok(()),
                    code => Err(Error::broker("CreateTopics", code, Some(name.clone()))),
                };
                (name, outcome)
            })
            .collect())
    }

    /// Grows `topic` to `total` partitions (CreatePartitions; the broker places the new ones).
    ///
    /// # Errors
    /// The topic's Kafka error (INVALID_PARTITIONS when `total` is no increase,
    /// UNKNOWN_TOPIC_OR_PARTITION, ...), or none answered within `default.api.timeout.ms`.
    pub async fn create_partitions(&self, topic: &str, total: i32) -> Result<()> {
        let request = CreatePartitionsRequest::default()
            .with_timeout_ms(
                i32::try_from(self.config.request_timeout.as_millis()).unwrap_or(i32::MAX),
            )
            .with_topics(vec![
                CreatePartitionsTopic::default()
                    .with_name(TopicName(StrBytes::from_string(topic.to_owned())))
                    .with_count(total)
                    .with_assignments(None),
            ]);
        self.with_retries("CreatePartitions", || async {
            let connection = self.cluster.any_connection().await?;
            let response = connection
                .send(
                    ApiKey::CreatePartitions,
                    &request,
                    self.config.request_timeout,
                )
                .await?;
            match response.results.first().map_or(-1, |r| r.error_code) {
                0 => Ok(()),
                code => Err(Error::broker(
                    "CreatePartitions",
                    code,
                    Some(topic.to_owned()),
                )),
            }
        })
        .await
    }

    /// Describes topics: partitions with leader, leader epoch, replicas and ISR.
    ///
    /// # Errors
    /// A topic is unknown (its Kafka error code), or no broker answered.
    pub async fn describe_topics(&self, names: &[&str]) -> Result<Vec<TopicMetadata>> {
        // Unknown topics are answered, not retried (Kafka's describeTopics does the same).
        self.with_retries("Metadata", || self.cluster.refresh_metadata(names))
            .await?;
        self.cluster.with_metadata(|m| {
            names
                .iter()
                .map(|name| match m.topics.get(*name) {
                    Some(topic) => Ok(topic.clone()),
                    None => Err(Error::broker(
                        "Metadata",
                        m.topic_errors.get(*name).copied().unwrap_or(3),
                        Some((*name).to_owned()),
                    )),
                })
                .collect()
        })
    }

    /// Describes the KRaft quorum.
    ///
    /// # Errors
    /// [`Error::UnsupportedApi`] when the node does not serve DescribeQuorum; Kafka errors.
    pub async fn describe_quorum(&self) -> Result<QuorumInfo> {
        let request = DescribeQuorumRequest::default().with_topics(vec![
            TopicData::default()
                .with_topic_name(TopicName(StrBytes::from_static_str("__cluster_metadata")))
                .with_partitions(vec![PartitionData::default().with_partition_index(0)]),
        ]);
        self.with_retries("DescribeQuorum", || async {
            let connection = self.cluster.any_connection().await?;
            let response = connection
                .send(
                    ApiKey::DescribeQuorum,
                    &request,
                    self.config.request_timeout,
                )
                .await?;
            if response.error_code != 0 {
                return Err(Error::broker("DescribeQuorum", response.error_code, None));
            }
            let partition = response
                .topics
                .first()
                .and_then(|t| t.partitions.first())
                .ok_or_else(|| Error::Protocol {
                    address: connection.address().to_owned(),
                    detail: "DescribeQuorum answer without partitions".to_owned(),
                })?;
            if partition.error_code != 0 {
                return Err(Error::broker("DescribeQuorum", partition.error_code, None));
            }
            let replicas =
                |list: &[kafka_protocol::messages::describe_quorum_response::ReplicaState]| {
                    list.iter()
                        .map(|r| QuorumReplica {
                            node: BrokerId(r.replica_id.0),
                            log_end_offset: Offset(r.log_end_offset),
                        })
                        .collect()
                };
            Ok(QuorumInfo {
                leader: BrokerId(partition.leader_id.0),
                leader_epoch: LeaderEpoch(partition.leader_epoch),
                high_watermark: Offset(partition.high_watermark),
                voters: replicas(&partition.current_voters),
                observers: replicas(&partition.observers),
            })
        })
        .await
    }

    /// The broker coordinating consumer group `group` (FindCoordinator, key type group);
    /// COORDINATOR_NOT_AVAILABLE and the other retriable answers are retried.
    ///
    /// # Errors
    /// A non-retriable Kafka error, or none answered within `default.api.timeout.ms`.
    pub async fn group_coordinator(&self, group: &str) -> Result<BrokerId> {
        self.with_retries("FindCoordinator", || async {
            let connection = self.cluster.any_connection().await?;
            let (code, node) =
                ask_group_coordinator(&connection, group, self.config.request_timeout).await?;
            if code != 0 {
                return Err(Error::broker(
                    "FindCoordinator",
                    code,
                    Some(group.to_owned()),
                ));
            }
            Ok(node)
        })
        .await
    }

    /// The admin's request timeout (for callers composing their own waits).
    pub fn request_timeout(&self) -> Duration {
        self.config.request_timeout
    }
}
