//! [`MetadataImage`]: the state every broker and controller rebuilds by replaying committed
//! metadata records in log order. Replay is deterministic and total: a record that refers to
//! something unknown is ignored (logged), never a panic, because a log written by a buggy
//! version must not make every node crash-loop.

use std::collections::{BTreeMap, HashMap};

use serde::{Deserialize, Serialize};
use uuid::Uuid;

use crate::metadata::{
    BrokerEpoch, BrokerId, LeaderRecoveryState, MetadataRecord, PartitionChangeRecord,
    PartitionRecord,
};

/// A registered broker.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct BrokerRegistration {
    /// `node.id`.
    pub broker_id: BrokerId,
    /// The epoch of the current registration.
    pub broker_epoch: BrokerEpoch,
    /// The process incarnation that registered.
    pub incarnation_id: Uuid,
    /// Advertised client host.
    pub host: String,
    /// Advertised client port.
    pub port: u16,
    /// Rack, if any.
    pub rack: Option<String>,
    /// Fenced brokers lead nothing and sit in no ISR (except as the last member standing).
    pub fenced: bool,
}

/// The replication state of one partition, as `PartitionRegistration` holds it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PartitionState {
    /// Replicas in assignment order.
    pub replicas: Vec<BrokerId>,
    /// In-sync replicas.
    pub isr: Vec<BrokerId>,
    /// Eligible leader replicas (KIP-966).
    pub elr: Vec<BrokerId>,
    /// Last known ELR (KIP-966).
    pub last_known_elr: Vec<BrokerId>,
    /// The leader, or [`BrokerId::NONE`].
    pub leader: BrokerId,
    /// Bumped on every leader change.
    pub leader_epoch: i32,
    /// Bumped on every change.
    pub partition_epoch: i32,
    /// KIP-704.
    pub leader_recovery_state: LeaderRecoveryState,
}

/// One topic.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TopicImage {
    /// Name.
    pub name: String,
    /// Topic id.
    pub id: Uuid,
    /// Topic-level config overrides.
    pub configs: BTreeMap<String, String>,
    /// Partitions by index.
    pub partitions: BTreeMap<i32, PartitionState>,
}

/// The whole cluster metadata at some offset of the metadata log.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct MetadataImage {
    /// Exclusive end of the metadata log replayed into this image.
    pub offset: u64,
    /// Registered brokers.
    pub brokers: BTreeMap<BrokerId, BrokerRegistration>,
    /// Topics by name.
    pub topics: BTreeMap<String, TopicImage>,
    /// Topic names by id.
    #[serde(skip)]
    topic_names: HashMap<Uuid, String>,
    /// The first producer id not yet handed out.
    pub next_producer_id: i64,
}

impl MetadataImage {
    /// An empty image.
    pub fn new() -> MetadataImage {
        MetadataImage::default()
    }

    /// Serializes the image for a snapshot.
    pub fn to_snapshot(&self) -> Vec<u8> {
        serde_json::to_vec(self).expect("image serializes")
    }

    /// Loads a snapshot written by [`MetadataImage::to_snapshot`].
    ///
    /// # Errors
    /// The JSON error for bytes that are not an image.
    pub fn from_snapshot(bytes: &[u8]) -> Result<MetadataImage, serde_json::Error> {
        let mut image: MetadataImage = serde_json::from_slice(bytes)?;
        image.topic_names = image
            .topics
            .values()
            .map(|topic| (topic.id, topic.name.clone()))
            .collect();
        Ok(image)
    }

    /// The topic with this id.
    pub fn topic_by_id(&self, id: Uuid) -> Option<&TopicImage> {
        self.topic_names
            .get(&id)
            .and_then(|name| self.topics.get(name))
    }

    /// The partition `index` of topic `id`.
    pub fn partition(&self, id: Uuid, index: i32) -> Option<&PartitionState> {
        self.topic_by_id(id)
            .and_then(|topic| topic.partitions.get(&index))
    }

    /// Whether `broker` is registered and unfenced.
    pub fn is_unfenced(&self, broker: BrokerId) -> bool {
        self.brokers
            .get(&broker)
            .is_some_and(|registration| !registration.fenced)
    }

    /// Replays one committed record.
    pub fn apply(&mut self, record: &MetadataRecord) {
        match record {
            MetadataRecord::RegisterBroker {
                broker_id,
                broker_epoch,
                incarnation_id,
                host,
                port,
                rack,
            } => {
                self.brokers.insert(
                    *broker_id,
                    BrokerRegistration {
                        broker_id: *broker_id,
                        broker_epoch: *broker_epoch,
                        incarnation_id: *incarnation_id,
                        host: host.clone(),
                        port: *port,
                        rack: rack.clone(),
                        fenced: true,
                    },
                );
            }
            MetadataRecord::FenceBroker {
                broker_id,
                broker_epoch,
            }
            | MetadataRecord::UnfenceBroker {
                broker_id,
                broker_epoch,
            } => {
                let fenced = matches!(record, MetadataRecord::FenceBroker { .. });
                match self.brokers.get_mut(broker_id) {
                    Some(registration) if registration.broker_epoch == *broker_epoch => {
                        registration.fenced = fenced;
                    }
                    _ => {
                        tracing::warn!(%broker_id, ?broker_epoch, "fence change for an unknown registration")
                    }
                }
            }
            MetadataRecord::Topic {
                name,
                topic_id,
                configs,
            } => {
                self.topic_names.insert(*topic_id, name.clone());
                self.topics.insert(
                    name.clone(),
                    TopicImage {
                        name: name.clone(),
                        id: *topic_id,
                        configs: configs.clone(),
                        partitions: BTreeMap::new(),
                    },
                );
            }
            MetadataRecord::Partition(partition) => self.apply_partition(partition),
            MetadataRecord::PartitionChange(change) => self.apply_partition_change(change),
            MetadataRecord::ProducerIds {
                next_producer_id, ..
            } => self.next_producer_id = self.next_producer_id.max(*next_producer_id),
            MetadataRecord::NoOp => {}
        }
    }

    fn topic_mut(&mut self, id: Uuid) -> Option<&mut TopicImage> {
        let name = self.topic_names.get(&id)?;
        self.topics.get_mut(name)
    }

    fn apply_partition(&mut self, record: &PartitionRecord) {
        let Some(topic) = self.topic_mut(record.topic_id) else {
            tracing::warn!(topic_id = %record.topic_id, "partition of an unknown topic");
            return;
        };
        topic.partitions.insert(
            record.partition,
            PartitionState {
                replicas: record.replicas.clone(),
                isr: record.isr.clone(),
                elr: record.elr.clone(),
                last_known_elr: record.last_known_elr.clone(),
                leader: record.leader,
                leader_epoch: record.leader_epoch,
                partition_epoch: record.partition_epoch,
                leader_recovery_state: record.leader_recovery_state,
            },
        );
    }

    fn apply_partition_change(&mut self, change: &PartitionChangeRecord) {
        let Some(state) = self
            .topic_mut(change.topic_id)
            .and_then(|topic| topic.partitions.get_mut(&change.partition))
        else {
            tracing::warn!(topic_id = %change.topic_id, partition = change.partition, "change of an unknown partition");
            return;
        };
        state.apply_change(change);
    }
}

impl PartitionState {
    /// Applies a change record: fields that are set replace the old ones; the partition epoch
    /// always bumps, the leader epoch bumps on a leader change.
    pub fn apply_change(&mut self, change: &PartitionChangeRecord) {
        if let Some(isr) = &change.isr {
            self.isr = isr.clone();
        }
        if let Some(elr) = &change.elr {
            self.elr = elr.clone();
        }
        if let Some(last_known_elr) = &change.last_known_elr {
            self.last_known_elr = last_known_elr.clone();
        }
        if let Some(state) = change.leader_recovery_state {
            self.leader_recovery_state = state;
        }
        if let Some(leader) = change.leader {
            self.leader = leader;
            self.leader_epoch += 1;
        }
        self.partition_epoch += 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn register(id: i32, epoch: i64) -> MetadataRecord {
        MetadataRecord::RegisterBroker {
            broker_id: BrokerId(id),
            broker_epoch: BrokerEpoch(epoch),
            incarnation_id: Uuid::nil(),
            host: "h".into(),
            port: 1,
            rack: None,
        }
    }

    #[test]
    fn brokers_register_fenced_and_unfence_only_for_their_epoch() {
        let mut image = MetadataImage::new();
        image.apply(&register(1, 5));
        assert!(!image.is_unfenced(BrokerId(1)));
        image.apply(&MetadataRecord::UnfenceBroker {
            broker_id: BrokerId(1),
            broker_epoch: BrokerEpoch(4),
        });
        assert!(!image.is_unfenced(BrokerId(1)), "stale epoch ignored");
        image.apply(&MetadataRecord::UnfenceBroker {
            broker_id: BrokerId(1),
            broker_epoch: BrokerEpoch(5),
        });
        assert!(image.is_unfenced(BrokerId(1)));
    }

    #[test]
    fn partition_change_bumps_epochs_and_snapshot_round_trips() {
        let mut image = MetadataImage::new();
        let id = Uuid::from_u128(9);
        image.apply(&MetadataRecord::Topic {
            name: "t".into(),
            topic_id: id,
            configs: BTreeMap::new(),
        });
        image.apply(&MetadataRecord::Partition(PartitionRecord {
            topic_id: id,
            partition: 0,
            replicas: vec![BrokerId(1), BrokerId(2)],
            isr: vec![BrokerId(1), BrokerId(2)],
            elr: vec![],
            last_known_elr: vec![],
            leader: BrokerId(1),
            leader_epoch: 0,
            partition_epoch: 0,
            leader_recovery_state: LeaderRecoveryState::Recovered,
        }));
        image.apply(&MetadataRecord::PartitionChange(PartitionChangeRecord {
            topic_id: id,
            partition: 0,
            isr: Some(vec![BrokerId(2)]),
            ..PartitionChangeRecord::default()
        }));
        let state = image.partition(id, 0).unwrap();
        assert_eq!((state.leader_epoch, state.partition_epoch), (0, 1));
        image.apply(&MetadataRecord::PartitionChange(PartitionChangeRecord {
            topic_id: id,
            partition: 0,
            leader: Some(BrokerId(2)),
            ..PartitionChangeRecord::default()
        }));
        let state = image.partition(id, 0).unwrap();
        assert_eq!(
            (state.leader, state.leader_epoch, state.partition_epoch),
            (BrokerId(2), 1, 2)
        );
        let copy = MetadataImage::from_snapshot(&image.to_snapshot()).unwrap();
        assert_eq!(copy.partition(id, 0), image.partition(id, 0));
    }
}
