//! The metadata cache: brokers, the controller, and every known topic's partitions with their
//! leader, leader epoch, replicas and ISR. Pure data, no I/O: `cluster.rs` fetches Metadata
//! responses and feeds them to [`MetadataCache::apply`].
//!
//! Like Kafka's client (KIP-320), a response whose leader epoch for a partition is *older*
//! than the one cached is ignored for that partition: a lagging broker must not send the
//! client back to a deposed leader.

use std::collections::HashMap;

use kafka_protocol::messages::MetadataResponse;

use crate::ids::{BrokerId, LeaderEpoch, Partition, TopicPartition};

/// One partition as the cluster described it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PartitionMetadata {
    /// The partition index.
    pub partition: Partition,
    /// The leader, `None` while there is none (election in progress, offline).
    pub leader: Option<BrokerId>,
    /// The leader epoch.
    pub leader_epoch: LeaderEpoch,
    /// The assigned replicas.
    pub replicas: Vec<BrokerId>,
    /// The in-sync replicas.
    pub isr: Vec<BrokerId>,
    /// Replicas on offline log directories.
    pub offline_replicas: Vec<BrokerId>,
    /// A per-partition error code (0 when none), e.g. `LEADER_NOT_AVAILABLE`.
    pub error_code: i16,
}

/// One topic as the cluster described it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TopicMetadata {
    /// The topic name.
    pub name: String,
    /// The topic id.
    pub topic_id: uuid::Uuid,
    /// Partitions by index.
    pub partitions: Vec<PartitionMetadata>,
}

/// What the client knows about the cluster.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MetadataCache {
    /// Broker addresses (`host:port`) by id.
    pub brokers: HashMap<BrokerId, String>,
    /// The controller id the brokers report (`None` when unknown).
    pub controller: Option<BrokerId>,
    /// The cluster id.
    pub cluster_id: Option<String>,
    /// Topics by name.
    pub topics: HashMap<String, TopicMetadata>,
    /// Topic-level errors from the last response that mentioned them (e.g.
    /// `UNKNOWN_TOPIC_OR_PARTITION`), by name.
    pub topic_errors: HashMap<String, i16>,
}

impl MetadataCache {
    /// Merges a Metadata response into the cache.
    pub fn apply(&mut self, response: &MetadataResponse) {
        if !response.brokers.is_empty() {
            self.brokers = response
                .brokers
                .iter()
                .map(|b| (BrokerId(b.node_id.0), format!("{}:{}", b.host, b.port)))
                .collect();
        }
        self.controller =
            (response.controller_id.0 >= 0).then_some(BrokerId(response.controller_id.0));
        if let Some(cluster_id) = &response.cluster_id {
            self.cluster_id = Some(cluster_id.to_string());
        }
        for topic in &response.topics {
            let Some(name) = topic.name.as_ref().map(|n| n.0.to_string()) else {
                continue;
            };
            if topic.error_code != 0 {
                self.topic_errors.insert(name.clone(), topic.error_code);
                self.topics.remove(&name);
                continue;
            }
            self.topic_errors.remove(&name);
            let previous = self.topics.remove(&name);
            let mut partitions: Vec<PartitionMetadata> = topic
                .partitions
                .iter()
                .map(|p| {
                    let fresh = PartitionMetadata {
                        partition: Partition(p.partition_index),
                        leader: (p.leader_id.0 >= 0).then_some(BrokerId(p.leader_id.0)),
                        leader_epoch: LeaderEpoch(p.leader_epoch),
                        replicas: p.replica_nodes.iter().map(|b| BrokerId(b.0)).collect(),
                        isr: p.isr_nodes.iter().map(|b| BrokerId(b.0)).collect(),
                        offline_replicas: p
                            .offline_replicas
                            .iter()
                            .map(|b| BrokerId(b.0))
                            .collect(),
                        error_code: p.error_code,
                    };
                    let cached = previous
                        .as_ref()
                        .and_then(|t| t.partitions.iter().find(|c| c.partition == fresh.partition));
                    match cached {
                        // KIP-320: never go back to an older leader epoch.
                        Some(cached)
                            if fresh.leader_epoch.0 >= 0
                                && cached.leader_epoch > fresh.leader_epoch =>
                        {
                            cached.clone()
                        }
                        _ => fresh,
                    }
                })
                .collect();
            partitions.sort_by_key(|p| p.partition);
            self.topics.insert(
                name.clone(),
                TopicMetadata {
                    name,
                    topic_id: topic.topic_id,
                    partitions,
                },
            );
        }
    }

    /// The number of partitions of `topic`, when known.
    pub fn partition_count(&self, topic: &str) -> Option<usize> {
        self.topics.get(topic).map(|t| t.partitions.len())
    }

    /// The partition's metadata, when known.
    pub fn partition(&self, partition: &TopicPartition) -> Option<&PartitionMetadata> {
        self.topics
            .get(&*partition.topic)?
            .partitions
            .iter()
            .find(|p| p.partition == partition.partition)
    }

    /// The partition's current leader and its epoch, when there is one.
    pub fn leader(&self, partition: &TopicPartition) -> Option<(BrokerId, LeaderEpoch)> {
        let p = self.partition(partition)?;
        Some((p.leader?, p.leader_epoch))
    }

    /// The address of `broker`.
    pub fn address(&self, broker: BrokerId) -> Option<&str> {
        self.brokers.get(&broker).map(String::as_str)
    }

    /// Forgets the leader of `partition` (after `NOT_LEADER_OR_FOLLOWER`), so nothing is sent
    /// to it until fresh metadata arrives.
    pub fn invalidate_leader(&mut self, partition: &TopicPartition) {
        if let Some(topic) = self.topics.get_mut(&*partition.topic)
            && let Some(p) = topic
                .partitions
                .iter_mut()
                .find(|p| p.partition == partition.partition)
        {
            p.leader = None;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kafka_protocol::messages::metadata_response::{
        MetadataResponseBroker, MetadataResponsePartition, MetadataResponseTopic,
    };
    use kafka_protocol::messages::{BrokerId as WireBroker, TopicName};
    use kafka_protocol::protocol::StrBytes;

    fn response(leader: i32, epoch: i32) -> MetadataResponse {
        MetadataResponse::default()
            .with_brokers(vec![
                MetadataResponseBroker::default()
                    .with_node_id(WireBroker(1))
                    .with_host(StrBytes::from_static_str("h1"))
                    .with_port(9092),
                MetadataResponseBroker::default()
                    .with_node_id(WireBroker(2))
                    .with_host(StrBytes::from_static_str("h2"))
                    .with_port(9092),
            ])
            .with_controller_id(WireBroker(1))
            .with_topics(vec![
                MetadataResponseTopic::default()
                    .with_name(Some(TopicName(StrBytes::from_static_str("t"))))
                    .with_partitions(vec![
                        MetadataResponsePartition::default()
                            .with_partition_index(0)
                            .with_leader_id(WireBroker(leader))
                            .with_leader_epoch(epoch)
                            .with_isr_nodes(vec![WireBroker(1), WireBroker(2)]),
                    ]),
            ])
    }

    #[test]
    fn leader_and_addresses_come_from_the_response() {
        let mut cache = MetadataCache::default();
        cache.apply(&response(2, 3));
        let tp = TopicPartition::new("t", 0);
        assert_eq!(cache.leader(&tp), Some((BrokerId(2), LeaderEpoch(3))));
        assert_eq!(cache.address(BrokerId(2)), Some("h2:9092"));
        assert_eq!(cache.partition_count("t"), Some(1));
        cache.invalidate_leader(&tp);
        assert_eq!(cache.leader(&tp), None);
    }

    /// KIP-320: metadata from a stale broker (older leader epoch) must not move the client
    /// back to the old leader.
    #[test]
    fn older_leader_epoch_is_ignored() {
        let mut cache = MetadataCache::default();
        cache.apply(&response(2, 5));
        cache.apply(&response(1, 4));
        let tp = TopicPartition::new("t", 0);
        assert_eq!(cache.leader(&tp), Some((BrokerId(2), LeaderEpoch(5))));
        cache.apply(&response(1, 6));
        assert_eq!(cache.leader(&tp), Some((BrokerId(1), LeaderEpoch(6))));
    }

    #[test]
    fn topic_errors_remove_the_topic() {
        let mut cache = MetadataCache::default();
        cache.apply(&response(1, 0));
        let mut gone = response(1, 0);
        gone.topics[0].error_code = 3;
        cache.apply(&gone);
        assert_eq!(cache.partition_count("t"), None);
        assert_eq!(cache.topic_errors.get("t"), Some(&3));
    }
}
