//! [`MetadataRecord`]: one change to the cluster metadata, modelled on Kafka's metadata record
//! schemas (`RegisterBrokerRecord`, `FenceBrokerRecord`, `UnfenceBrokerRecord`, `TopicRecord`
//! with its `ConfigRecord`s folded in, `PartitionRecord`, `PartitionChangeRecord`,
//! `ProducerIdsRecord`, `NoOpRecord`), and the JSON codec of a record list.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use uuid::Uuid;

use crate::metadata::{BrokerEpoch, BrokerId};

/// KIP-704's `LeaderRecoveryState`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, Default)]
pub enum LeaderRecoveryState {
    /// 0: the leader holds every committed record.
    #[default]
    Recovered,
    /// 1: an unclean election made this leader; the ISR must stay at size 1.
    Recovering,
}

impl LeaderRecoveryState {
    /// The wire value (`int8`).
    pub fn code(self) -> i8 {
        match self {
            LeaderRecoveryState::Recovered => 0,
            LeaderRecoveryState::Recovering => 1,
        }
    }

    /// From the wire value; `None` for anything else.
    pub fn from_code(code: i8) -> Option<LeaderRecoveryState> {
        match code {
            0 => Some(LeaderRecoveryState::Recovered),
            1 => Some(LeaderRecoveryState::Recovering),
            _ => None,
        }
    }
}

/// `PartitionRecord`: a partition as created (or as a snapshot holds it).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PartitionRecord {
    /// `TopicId`.
    pub topic_id: Uuid,
    /// `PartitionId`.
    pub partition: i32,
    /// `Replicas`, in assignment order.
    pub replicas: Vec<BrokerId>,
    /// `Isr`.
    pub isr: Vec<BrokerId>,
    /// `EligibleLeaderReplicas` (KIP-966).
    pub elr: Vec<BrokerId>,
    /// `LastKnownElr` (KIP-966).
    pub last_known_elr: Vec<BrokerId>,
    /// `Leader` ([`BrokerId::NONE`] when leaderless).
    pub leader: BrokerId,
    /// `LeaderEpoch`.
    pub leader_epoch: i32,
    /// `PartitionEpoch`.
    pub partition_epoch: i32,
    /// `LeaderRecoveryState`.
    pub leader_recovery_state: LeaderRecoveryState,
}

/// `PartitionChangeRecord`: only the fields that change are set. Replaying it always bumps the
/// partition epoch, and bumps the leader epoch when `leader` is set (a leader change).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct PartitionChangeRecord {
    /// `TopicId`.
    pub topic_id: Uuid,
    /// `PartitionId`.
    pub partition: i32,
    /// `Leader`: the new leader (possibly [`BrokerId::NONE`]); `None` means unchanged.
    pub leader: Option<BrokerId>,
    /// `Isr`, when it changes.
    pub isr: Option<Vec<BrokerId>>,
    /// `EligibleLeaderReplicas`, when it changes.
    pub elr: Option<Vec<BrokerId>>,
    /// `LastKnownElr`, when it changes.
    pub last_known_elr: Option<Vec<BrokerId>>,
    /// `LeaderRecoveryState`, when it changes.
    pub leader_recovery_state: Option<LeaderRecoveryState>,
}

/// One metadata record.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type")]
pub enum MetadataRecord {
    /// `RegisterBrokerRecord`: a broker (re-)registered; it starts fenced.
    RegisterBroker {
        /// `BrokerId`.
        broker_id: BrokerId,
        /// `BrokerEpoch`.
        broker_epoch: BrokerEpoch,
        /// `IncarnationId`: fresh for every process start.
        incarnation_id: Uuid,
        /// Advertised host of the client listener.
        host: String,
        /// Advertised port of the client listener.
        port: u16,
        /// `Rack`.
        rack: Option<String>,
    },
    /// `FenceBrokerRecord` (Kafka now uses `BrokerRegistrationChangeRecord`; same meaning).
    FenceBroker {
        /// `Id`.
        broker_id: BrokerId,
        /// `Epoch`.
        broker_epoch: BrokerEpoch,
    },
    /// `UnfenceBrokerRecord`.
    UnfenceBroker {
        /// `Id`.
        broker_id: BrokerId,
        /// `Epoch`.
        broker_epoch: BrokerEpoch,
    },
    /// `TopicRecord` plus its topic-level `ConfigRecord`s.
    Topic {
        /// `Name`.
        name: String,
        /// `TopicId`.
        topic_id: Uuid,
        /// Topic configuration overrides.
        configs: BTreeMap<String, String>,
    },
    /// `PartitionRecord`.
    Partition(PartitionRecord),
    /// `PartitionChangeRecord`.
    PartitionChange(PartitionChangeRecord),
    /// `ProducerIdsRecord`: the next block of producer ids starts at `next_producer_id`.
    ProducerIds {
        /// `BrokerId` the block went to.
        broker_id: BrokerId,
        /// `BrokerEpoch` of that broker.
        broker_epoch: BrokerEpoch,
        /// `NextProducerId`.
        next_producer_id: i64,
    },
    /// `NoOpRecord`: written by an idle active controller (`metadata.max.idle.interval.ms`).
    NoOp,
}

/// A Raft entry that does not hold a record list.
#[derive(Debug, thiserror::Error)]
#[error("metadata entry of {length} bytes does not decode: {source}")]
pub struct RecordCodecError {
    /// Size of the payload.
    pub length: usize,
    /// The JSON error.
    pub source: serde_json::Error,
}

/// Encodes the records of one controller operation as one entry payload.
pub fn encode_records(records: &[MetadataRecord]) -> Vec<u8> {
    serde_json::to_vec(records).expect("metadata records serialize")
}

/// Decodes one entry payload.
///
/// # Errors
/// [`RecordCodecError`] for bytes that are not a record list.
pub fn decode_records(payload: &[u8]) -> Result<Vec<MetadataRecord>, RecordCodecError> {
    serde_json::from_slice(payload).map_err(|source| RecordCodecError {
        length: payload.len(),
        source,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_round_trip() {
        let records = vec![
            MetadataRecord::NoOp,
            MetadataRecord::FenceBroker {
                broker_id: BrokerId(2),
                broker_epoch: BrokerEpoch(7),
            },
            MetadataRecord::PartitionChange(PartitionChangeRecord {
                topic_id: Uuid::nil(),
                partition: 3,
                leader: Some(BrokerId::NONE),
                ..PartitionChangeRecord::default()
            }),
        ];
        assert_eq!(decode_records(&encode_records(&records)).unwrap(), records);
        assert!(decode_records(b"{").is_err());
    }
}
