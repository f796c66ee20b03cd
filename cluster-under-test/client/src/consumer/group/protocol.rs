//! ConsumerProtocol: the subscription a member puts in JoinGroup's metadata and the
//! assignment the leader puts in SyncGroup, each a big-endian `i16` version followed by the
//! message at that version (v0 topics and user data; v1 owned partitions; v2 generation; v3
//! rack). A version newer than ours is read at our newest, as Kafka's `ConsumerProtocol` does
//! (newer versions only append fields).

use bytes::{Buf, BufMut, Bytes, BytesMut};
use kafka_protocol::messages::{
    ConsumerProtocolAssignment, ConsumerProtocolSubscription, TopicName,
    consumer_protocol_assignment, consumer_protocol_subscription,
};
use kafka_protocol::protocol::{Decodable, Encodable, StrBytes};

use crate::ids::TopicPartition;

/// The newest ConsumerProtocol version this client writes.
pub const CONSUMER_PROTOCOL_VERSION: i16 = 3;

/// A member's subscription.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Subscription {
    /// Topics.
    pub topics: Vec<String>,
    /// Partitions owned now.
    pub owned: Vec<TopicPartition>,
    /// The generation they were owned in; -1 when none.
    pub generation: i32,
}

/// Why a ConsumerProtocol payload could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("malformed ConsumerProtocol {what}: {detail}")]
pub struct ProtocolError {
    what: &'static str,
    detail: String,
}

fn group_partitions(partitions: &[TopicPartition]) -> Vec<(String, Vec<i32>)> {
    let mut grouped: Vec<(String, Vec<i32>)> = Vec::new();
    let mut sorted = partitions.to_vec();
    sorted.sort();
    for tp in sorted {
        match grouped.last_mut() {
            Some((topic, list)) if **topic == *tp.topic => list.push(tp.partition.0),
            _ => grouped.push((tp.topic.to_string(), vec![tp.partition.0])),
        }
    }
    grouped
}

fn encode<M: Encodable>(message: &M, version: i16) -> Bytes {
    let mut buf = BytesMut::new();
    buf.put_i16(version);
    message
        .encode(&mut buf, version)
        .expect("encodable message");
    buf.freeze()
}

fn read_version(what: &'static str, data: &mut Bytes) -> Result<i16, ProtocolError> {
    if data.remaining() < 2 {
        return Err(ProtocolError {
            what,
            detail: "shorter than its version".to_owned(),
        });
    }
    let version = data.get_i16();
    if version < 0 {
        return Err(ProtocolError {
            what,
            detail: format!("negative version {version}"),
        });
    }
    Ok(version.min(CONSUMER_PROTOCOL_VERSION))
}

/// Encodes a subscription at `version` (the owned partitions need v1, the generation v2).
pub fn encode_subscription(subscription: &Subscription, version: i16) -> Bytes {
    let message = ConsumerProtocolSubscription::default()
        .with_topics(
            subscription
                .topics
                .iter()
                .map(|t| StrBytes::from_string(t.clone()))
                .collect(),
        )
        .with_owned_partitions(
            group_partitions(&subscription.owned)
                .into_iter()
                .map(|(topic, partitions)| {
                    consumer_protocol_subscription::TopicPartition::default()
                        .with_topic(TopicName(StrBytes::from_string(topic)))
                        .with_partitions(partitions)
                })
                .collect(),
        )
        .with_generation_id(subscription.generation);
    encode(&message, version)
}

/// Decodes a subscription; before v2 the generation is -1.
///
/// # Errors
/// The payload does not decode.
pub fn decode_subscription(mut data: Bytes) -> Result<Subscription, ProtocolError> {
    let version = read_version("subscription", &mut data)?;
    let message =
        ConsumerProtocolSubscription::decode(&mut data, version).map_err(|e| ProtocolError {
            what: "subscription",
            detail: e.to_string(),
        })?;
    Ok(Subscription {
        topics: message.topics.iter().map(|t| t.to_string()).collect(),
        owned: message
            .owned_partitions
            .iter()
            .flat_map(|tp| {
                tp.partitions
                    .iter()
                    .map(|p| TopicPartition::new(tp.topic.0.to_string(), *p))
            })
            .collect(),
        generation: if version >= 2 {
            message.generation_id
        } else {
            -1
        },
    })
}

/// Encodes an assignment.
pub fn encode_assignment(partitions: &[TopicPartition], version: i16) -> Bytes {
    let message = ConsumerProtocolAssignment::default().with_assigned_partitions(
        group_partitions(partitions)
            .into_iter()
            .map(|(topic, partitions)| {
                consumer_protocol_assignment::TopicPartition::default()
                    .with_topic(TopicName(StrBytes::from_string(topic)))
                    .with_partitions(partitions)
            })
            .collect(),
    );
    encode(&message, version)
}

/// Decodes an assignment; an empty payload is an empty assignment (a member the leader gave
/// nothing).
///
/// # Errors
/// The payload does not decode.
pub fn decode_assignment(mut data: Bytes) -> Result<Vec<TopicPartition>, ProtocolError> {
    if data.is_empty() {
        return Ok(Vec::new());
    }
    let version = read_version("assignment", &mut data)?;
    let message =
        ConsumerProtocolAssignment::decode(&mut data, version).map_err(|e| ProtocolError {
            what: "assignment",
            detail: e.to_string(),
        })?;
    let mut partitions: Vec<TopicPartition> = message
        .assigned_partitions
        .iter()
        .flat_map(|tp| {
            tp.partitions
                .iter()
                .map(|p| TopicPartition::new(tp.topic.0.to_string(), *p))
        })
        .collect();
    partitions.sort();
    partitions.dedup();
    Ok(partitions)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn subscriptions_round_trip_at_every_version() {
        let subscription = Subscription {
            topics: vec!["a".to_owned(), "b".to_owned()],
            owned: vec![TopicPartition::new("a", 1), TopicPartition::new("a", 0)],
            generation: 7,
        };
        for version in 0..=3 {
            let decoded = decode_subscription(encode_subscription(&subscription, version)).unwrap();
            assert_eq!(decoded.topics, subscription.topics, "v{version}");
            let owned = if version >= 1 {
                vec![TopicPartition::new("a", 0), TopicPartition::new("a", 1)]
            } else {
                vec![]
            };
            assert_eq!(decoded.owned, owned, "v{version}");
            assert_eq!(
                decoded.generation,
                if version >= 2 { 7 } else { -1 },
                "v{version}"
            );
        }
    }

    /// Java's v0 subscription bytes for topics ["t"] and no user data.
    #[test]
    fn a_v0_subscription_has_javas_layout() {
        let subscription = Subscription {
            topics: vec!["t".to_owned()],
            owned: vec![],
            generation: -1,
        };
        let bytes = encode_subscription(&subscription, 0);
        assert_eq!(
            &bytes[..],
            &[0, 0, 0, 0, 0, 1, 0, 1, b't', 0xff, 0xff, 0xff, 0xff]
        );
    }

    #[test]
    fn assignments_round_trip_and_garbage_is_an_error() {
        let partitions = vec![TopicPartition::new("t", 2), TopicPartition::new("u", 0)];
        assert_eq!(
            decode_assignment(encode_assignment(&partitions, 3)).unwrap(),
            partitions
        );
        assert_eq!(decode_assignment(Bytes::new()).unwrap(), vec![]);
        assert!(decode_assignment(Bytes::from_static(&[0, 0, 0, 0, 0, 9])).is_err());
        assert!(decode_subscription(Bytes::from_static(&[0])).is_err());
        // A future version is read at ours.
        let mut future = encode_assignment(&partitions, 3).to_vec();
        future[1] = 9;
        assert_eq!(decode_assignment(Bytes::from(future)).unwrap(), partitions);
    }
}
