//! CreatePartitions on the active controller (Kafka's `ReplicationControlManager
//! .createPartitions`): a topic's partition count only grows; the new partitions take the
//! topic's replication factor, placed round-robin over the unfenced brokers or as the request
//! assigns them, and are written as PartitionRecords of the same topic id. Each topic is decided
//! on its own; `validate_only` writes nothing.

use std::collections::{BTreeSet, HashSet};

use kafka_protocol::ResponseError;
use kafka_protocol::messages::create_partitions_request::CreatePartitionsTopic;
use kafka_protocol::messages::create_partitions_response::CreatePartitionsTopicResult;
use kafka_protocol::messages::{CreatePartitionsRequest, CreatePartitionsResponse};
use kafka_protocol::protocol::StrBytes;

use super::{Decision, QuorumController};
use crate::metadata::{BrokerId, LeaderRecoveryState, MetadataRecord, PartitionRecord};
use crate::topics::MAX_PARTITIONS_PER_TOPIC;

/// Why a topic's partitions were not created: Kafka's error and message.
type Refusal = (ResponseError, String);

impl QuorumController {
    /// CreatePartitions: per topic, validation, placement and records.
    pub fn create_partitions(
        &mut self,
        request: &CreatePartitionsRequest,
    ) -> Decision<CreatePartitionsResponse> {
        let mut seen = HashSet::new();
        let duplicated: HashSet<String> = request
            .topics
            .iter()
            .map(|topic| topic.name.to_string())
            .filter(|name| !seen.insert(name.clone()))
            .collect();
        let mut records = Vec::new();
        let mut results = Vec::new();
        for topic in &request.topics {
            let outcome = if duplicated.contains(topic.name.as_str()) {
                Err((
                    ResponseError::InvalidRequest,
                    "Duplicate topic name.".to_owned(),
                ))
            } else {
                self.plan_partitions(topic)
            };
            let result = CreatePartitionsTopicResult::default().with_name(topic.name.clone());
            match outcome {
                Ok(planned) => {
                    if !request.validate_only {
                        self.replay(&planned);
                        records.extend(planned);
                    }
                    results.push(result);
                }
                Err((error, message)) => results.push(
                    result
                        .with_error_code(error.code())
                        .with_error_message(Some(StrBytes::from_string(message))),
                ),
            }
        }
        Decision {
            records,
            response: CreatePartitionsResponse::default().with_results(results),
        }
    }

    fn plan_partitions(
        &self,
        topic: &CreatePartitionsTopic,
    ) -> Result<Vec<MetadataRecord>, Refusal> {
        let name = topic.name.to_string();
        let Some(image) = self.image.topics.get(&name) else {
            return Err((
                ResponseError::UnknownTopicOrPartition,
                format!("Topic '{name}' does not exist."),
            ));
        };
        let current = i32::try_from(image.partitions.len()).unwrap_or(i32::MAX);
        let invalid = |message: String| Err((ResponseError::InvalidPartitions, message));
        if topic.count == current {
            return invalid(format!("Topic already has {current} partition(s)."));
        }
        if topic.count < current {
            return invalid(format!(
                "The topic {name} currently has {current} partition(s); {} would not be an \
                 increase.",
                topic.count
            ));
        }
        if topic.count > MAX_PARTITIONS_PER_TOPIC {
            return invalid(format!(
                "{} partitions exceed the limit of {MAX_PARTITIONS_PER_TOPIC} per topic.",
                topic.count
            ));
        }
        let added = topic.count - current;
        let factor = image
            .partitions
            .values()
            .next()
            .map_or(1, |partition| partition.replicas.len());
        let assignments = match &topic.assignments {
            Some(assignments) => self.check_assignments(assignments, added, factor)?,
            None => {
                let unfenced: Vec<BrokerId> = self
                    .image
                    .brokers
                    .values()
                    .filter(|broker| !broker.fenced)
                    .map(|broker| broker.broker_id)
                    .collect();
                if unfenced.len() < factor {
                    return Err((
                        ResponseError::InvalidReplicationFactor,
                        format!(
                            "Unable to replicate the partition {factor} time(s): The target \
                             replication factor of {factor} cannot be reached because only {} \
                             broker(s) are registered and unfenced.",
                            unfenced.len()
                        ),
                    ));
                }
                let start = usize::try_from(current).unwrap_or(0);
                super::place_replicas(&unfenced, added, factor, start)
            }
        };
        Ok(assignments
            .into_iter()
            .zip(current..)
            .map(|(replicas, partition)| {
                let leader = replicas
                    .iter()
                    .copied()
                    .find(|b| self.image.is_unfenced(*b))
                    .unwrap_or(BrokerId::NONE);
                let isr: Vec<BrokerId> = replicas
                    .iter()
                    .copied()
                    .filter(|b| self.image.is_unfenced(*b))
                    .collect();
                MetadataRecord::Partition(PartitionRecord {
                    topic_id: image.id,
                    partition,
                    isr: if isr.is_empty() {
                        replicas.clone()
                    } else {
                        isr
                    },
                    replicas,
                    elr: Vec::new(),
                    last_known_elr: Vec::new(),
                    leader,
                    leader_epoch: 0,
                    partition_epoch: 0,
                    leader_recovery_state: LeaderRecoveryState::Recovered,
                })
            })
            .collect())
    }

    /// A manual assignment: one entry per new partition, each with the topic's replication
    /// factor of distinct registered brokers.
    fn check_assignments(
        &self,
        assignments: &[kafka_protocol::messages::create_partitions_request::CreatePartitionsAssignment],
        added: i32,
        factor: usize,
    ) -> Result<Vec<Vec<BrokerId>>, Refusal> {
        let invalid = |message: String| Err((ResponseError::InvalidReplicaAssignment, message));
        if usize::try_from(added).ok() != Some(assignments.len()) {
            return invalid(format!(
                "Attempted to add {added} additional partition(s), but only {} assignment(s) \
                 were specified.",
                assignments.len()
            ));
        }
        let mut placed = Vec::new();
        for assignment in assignments {
            let replicas: Vec<BrokerId> = assignment
                .broker_ids
                .iter()
                .map(|id| BrokerId(id.0))
                .collect();
            if replicas.len() != factor {
                return invalid(format!(
                    "The manual partition assignment includes a partition with {} replica(s), \
                     but this is not consistent with previous partitions, which have {factor} \
                     replica(s).",
                    replicas.len()
                ));
            }
            let distinct: BTreeSet<BrokerId> = replicas.iter().copied().collect();
            if distinct.len() != replicas.len() {
                return invalid("The manual partition assignment names a broker twice.".into());
            }
            if let Some(unknown) = replicas
                .iter()
                .find(|id| !self.image.brokers.contains_key(id))
            {
                return invalid(format!(
                    "The manual partition assignment includes broker {}, but no such broker \
                     is registered.",
                    unknown.0
                ));
            }
            placed.push(replicas);
        }
        Ok(placed)
    }
}

#[cfg(test)]
mod tests {
    use kafka_protocol::messages::create_partitions_request::CreatePartitionsAssignment;
    use kafka_protocol::messages::create_topics_request::CreatableTopic;
    use kafka_protocol::messages::{CreateTopicsRequest, TopicName};

    use super::super::tests::{controller, heartbeat, register};
    use super::*;

    fn name(text: &'static str) -> TopicName {
        TopicName(StrBytes::from_static_str(text))
    }

    /// Three unfenced brokers and topic `t` with 2 partitions of RF 2.
    fn cluster() -> QuorumController {
        let mut c = controller();
        for id in 1..=3 {
            let epoch = register(&mut c, id, 10, 0);
            assert!(!heartbeat(&mut c, id, epoch, 10, 100).is_fenced);
        }
        let created = c.create_topics(&CreateTopicsRequest::default().with_topics(vec![
            CreatableTopic::default()
                .with_name(name("t"))
                .with_num_partitions(2)
                .with_replication_factor(2),
        ]));
        assert_eq!(created.response.topics[0].error_code, 0);
        c
    }

    fn grow(count: i32, assignments: Option<Vec<&[i32]>>) -> CreatePartitionsTopic {
        CreatePartitionsTopic::default()
            .with_name(name("t"))
            .with_count(count)
            .with_assignments(assignments.map(|list| {
                list.into_iter()
                    .map(|ids| {
                        CreatePartitionsAssignment::default().with_broker_ids(
                            ids.iter()
                                .map(|&id| kafka_protocol::messages::BrokerId(id))
                                .collect(),
                        )
                    })
                    .collect()
            }))
    }

    #[test]
    fn partitions_only_grow_with_the_topics_replication_factor() {
        let table: Vec<(&str, CreatePartitionsTopic, Option<ResponseError>)> = vec![
            (
                "same count",
                grow(2, None),
                Some(ResponseError::InvalidPartitions),
            ),
            (
                "fewer",
                grow(1, None),
                Some(ResponseError::InvalidPartitions),
            ),
            (
                "past the limit",
                grow(10_001, None),
                Some(ResponseError::InvalidPartitions),
            ),
            (
                "assignments for too few partitions",
                grow(4, Some(vec![&[1, 2]])),
                Some(ResponseError::InvalidReplicaAssignment),
            ),
            (
                "a replica count unlike the topic's",
                grow(3, Some(vec![&[1, 2, 3]])),
                Some(ResponseError::InvalidReplicaAssignment),
            ),
            (
                "a broker twice",
                grow(3, Some(vec![&[1, 1]])),
                Some(ResponseError::InvalidReplicaAssignment),
            ),
            (
                "an unknown broker",
                grow(3, Some(vec![&[1, 9]])),
                Some(ResponseError::InvalidReplicaAssignment),
            ),
            ("placed", grow(4, None), None),
            ("assigned", grow(3, Some(vec![&[3, 1]])), None),
        ];
        for (case, topic, expected) in table {
            let mut c = cluster();
            let decision = c.create_partitions(
                &CreatePartitionsRequest::default().with_topics(vec![topic.clone()]),
            );
            let code = decision.response.results[0].error_code;
            assert_eq!(code, expected.map_or(0, |e| e.code()), "{case}");
            if expected.is_some() {
                assert!(decision.records.is_empty(), "{case}: nothing written");
                assert!(
                    decision.response.results[0].error_message.is_some(),
                    "{case}"
                );
                continue;
            }
            let added: Vec<(i32, Vec<BrokerId>, BrokerId)> = decision
                .records
                .iter()
                .map(|record| match record {
                    MetadataRecord::Partition(p) => (p.partition, p.replicas.clone(), p.leader),
                    other => panic!("{case}: {other:?}"),
                })
                .collect();
            assert_eq!(added.len(), (topic.count - 2) as usize, "{case}");
            for (index, (partition, replicas, leader)) in added.iter().enumerate() {
                assert_eq!(*partition, 2 + index as i32, "{case}: indexes follow on");
                assert_eq!(replicas.len(), 2, "{case}: the topic's replication factor");
                assert_eq!(*leader, replicas[0], "{case}: the first replica leads");
            }
            if case == "assigned" {
                assert_eq!(added[0].1, [BrokerId(3), BrokerId(1)]);
            }
            assert_eq!(c.image.topics["t"].partitions.len(), topic.count as usize);
        }
    }

    #[test]
    fn unknown_duplicate_and_validate_only_topics() {
        let mut c = cluster();
        let decision = c.create_partitions(&CreatePartitionsRequest::default().with_topics(vec![
            CreatePartitionsTopic::default()
                .with_name(name("nope"))
                .with_count(3)
                .with_assignments(None),
            grow(3, None),
            grow(4, None),
        ]));
        let codes: Vec<i16> = decision
            .response
            .results
            .iter()
            .map(|r| r.error_code)
            .collect();
        assert_eq!(
            codes,
            [
                ResponseError::UnknownTopicOrPartition.code(),
                ResponseError::InvalidRequest.code(),
                ResponseError::InvalidRequest.code(),
            ]
        );
        let decision = c.create_partitions(
            &CreatePartitionsRequest::default()
                .with_topics(vec![grow(5, None)])
                .with_validate_only(true),
        );
        assert_eq!(decision.response.results[0].error_code, 0);
        assert!(decision.records.is_empty());
        assert_eq!(
            c.image.topics["t"].partitions.len(),
            2,
            "validate_only changes nothing"
        );
    }
}
