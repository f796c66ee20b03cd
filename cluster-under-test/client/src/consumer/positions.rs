//! The consumer's positions: resetting them by ListOffsets (`auto.offset.reset`, the
//! isolation level's end), validating them against the leader epoch (OffsetForLeaderEpoch,
//! KIP-320) and the truncation point a diverging log gives.

use kafka_protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
use kafka_protocol::messages::offset_for_leader_epoch_request::{
    OffsetForLeaderPartition, OffsetForLeaderTopic,
};
use kafka_protocol::messages::{
    ApiKey, ListOffsetsRequest, OffsetForLeaderEpochRequest, TopicName,
};
use kafka_protocol::protocol::StrBytes;

use super::{Consumer, SeekTo, Truncation};
use crate::config::AutoOffsetReset;
use crate::error::{Error, Result};
use crate::ids::{LeaderEpoch, Offset, TopicPartition};
use crate::outcome::classify_code;

impl Consumer {
    pub(super) fn out_of_range(&mut self, tp: &TopicPartition) -> Result<()> {
        let policy = self.config.auto_offset_reset;
        let Some(state) = self.partitions.get_mut(tp) else {
            return Ok(());
        };
        let offset = state.position.unwrap_or(Offset(-1));
        match policy {
            AutoOffsetReset::None => Err(Error::OffsetOutOfRange {
                partition: tp.clone(),
                offset,
            }),
            AutoOffsetReset::Earliest | AutoOffsetReset::Latest => {
                tracing::info!(partition = %tp, offset = offset.0, "offset out of range: resetting");
                state.position = None;
                state.reset = Some(if policy == AutoOffsetReset::Earliest {
                    SeekTo::Earliest
                } else {
                    SeekTo::Latest
                });
                Ok(())
            }
        }
    }

    /// Resolves `Earliest`/`Latest` seeks and missing positions with ListOffsets.
    pub(super) async fn reset_positions(&mut self) -> Result<()> {
        let policy = self.config.auto_offset_reset;
        let mut wanted: Vec<(TopicPartition, i64)> = Vec::new();
        for (tp, state) in &self.partitions {
            // A group's committed offset, not the reset policy, decides where it starts.
            if state.position.is_some() || state.awaiting_committed {
                continue;
            }
            let target = match (state.reset, policy) {
                (Some(SeekTo::Earliest), _) | (None, AutoOffsetReset::Earliest) => -2,
                (Some(SeekTo::Latest), _) | (None, AutoOffsetReset::Latest) => -1,
                (Some(SeekTo::Offset(_)), _) => continue,
                (None, AutoOffsetReset::None) => {
                    return Err(Error::OffsetOutOfRange {
                        partition: tp.clone(),
                        offset: Offset(-1),
                    });
                }
            };
            wanted.push((tp.clone(), target));
        }
        for (tp, timestamp) in wanted {
            let Some((leader, epoch)) = self.cluster.with_metadata(|m| m.leader(&tp)) else {
                continue;
            };
            let request = ListOffsetsRequest::default()
                .with_replica_id(kafka_protocol::messages::BrokerId(-1))
                .with_isolation_level(self.config.isolation_level.to_wire())
                .with_topics(vec![
                    ListOffsetsTopic::default()
                        .with_name(TopicName(StrBytes::from_string(tp.topic.to_string())))
                        .with_partitions(vec![
                            ListOffsetsPartition::default()
                                .with_partition_index(tp.partition.0)
                                .with_current_leader_epoch(epoch.0)
                                .with_timestamp(timestamp),
                        ]),
                ]);
            let answer = match self.cluster.connection(leader).await {
                Ok(connection) => {
                    connection
                        .send(ApiKey::ListOffsets, &request, self.config.request_timeout)
                        .await
                }
                Err(error) => Err(error),
            };
            let response = match answer {
                Ok(response) => response,
                Err(error) if error.is_retriable() => {
                    self.cluster.invalidate_leader(&tp);
                    continue;
                }
                Err(error) => return Err(error),
            };
            let Some(partition) = response
                .topics
                .iter()
                .flat_map(|t| t.partitions.iter())
                .next()
            else {
                continue;
            };
            if partition.error_code != 0 {
                if classify_code(partition.error_code).is_some_and(|c| c.retriable) {
                    self.cluster.invalidate_leader(&tp);
                    continue;
                }
                return Err(Error::broker(
                    "ListOffsets",
                    partition.error_code,
                    Some(tp.to_string()),
                ));
            }
            if let Some(state) = self.partitions.get_mut(&tp) {
                state.position = Some(Offset(partition.offset));
                state.reset = None;
                state.validated_epoch = Some(epoch);
            }
        }
        Ok(())
    }

    /// KIP-320 validation after a leader epoch change (see module doc).
    pub(super) async fn validate_positions(&mut self) -> Result<()> {
        let mut to_validate = Vec::new();
        let mut trivially_valid = Vec::new();
        for (tp, state) in &self.partitions {
            let Some((leader, epoch)) = self.cluster.with_metadata(|m| m.leader(tp)) else {
                continue;
            };
            if state.validated_epoch.is_some_and(|v| v >= epoch) {
                continue;
            }
            match (state.position, state.last_record_epoch) {
                (Some(position), Some(last_epoch)) if last_epoch.0 >= 0 => {
                    to_validate.push((tp.clone(), leader, epoch, position, last_epoch));
                }
                _ => {
                    // Nothing consumed yet in a known epoch: nothing to validate against.
                    trivially_valid.push((tp.clone(), epoch));
                }
            }
        }
        for (tp, epoch) in trivially_valid {
            if let Some(state) = self.partitions.get_mut(&tp) {
                state.validated_epoch = Some(epoch);
            }
        }
        for (tp, leader, epoch, position, last_epoch) in to_validate {
            let connection = match self.cluster.connection(leader).await {
                Ok(connection) => connection,
                Err(_) => continue,
            };
            if connection.version(ApiKey::OffsetForLeaderEpoch).is_none() {
                if let Some(state) = self.partitions.get_mut(&tp) {
                    state.validated_epoch = Some(epoch);
                }
                continue;
            }
            let request = OffsetForLeaderEpochRequest::default()
                .with_replica_id(kafka_protocol::messages::BrokerId(-1))
                .with_topics(vec![
                    OffsetForLeaderTopic::default()
                        .with_topic(TopicName(StrBytes::from_string(tp.topic.to_string())))
                        .with_partitions(vec![
                            OffsetForLeaderPartition::default()
                                .with_partition(tp.partition.0)
                                .with_current_leader_epoch(epoch.0)
                                .with_leader_epoch(last_epoch.0),
                        ]),
                ]);
            let Ok(response) = connection
                .send(
                    ApiKey::OffsetForLeaderEpoch,
                    &request,
                    self.config.request_timeout,
                )
                .await
            else {
                continue;
            };
            let Some(answer) = response
                .topics
                .iter()
                .flat_map(|t| t.partitions.iter())
                .next()
            else {
                continue;
            };
            if answer.error_code != 0 {
                self.cluster.invalidate_leader(&tp);
                continue;
            }
            if let Some(divergent) =
                truncation_point(position, last_epoch, answer.leader_epoch, answer.end_offset)
            {
                if self.config.auto_offset_reset == AutoOffsetReset::None {
                    return Err(Error::LogTruncation {
                        partition: tp,
                        position,
                        divergent_offset: divergent,
                    });
                }
                tracing::warn!(partition = %tp, position = position.0, divergent = divergent.0, "log truncation detected");
                self.truncations.push(Truncation {
                    partition: tp.clone(),
                    position,
                    divergent_offset: divergent,
                });
                if let Some(state) = self.partitions.get_mut(&tp) {
                    state.position = Some(divergent);
                }
            }
            if let Some(state) = self.partitions.get_mut(&tp) {
                state.validated_epoch = Some(epoch);
            }
        }
        Ok(())
    }
}

/// Kafka's rule: the position diverged when the leader's end offset for our last epoch is
/// below the position, or the leader knows only an older epoch (then its end offset is the
/// divergence point as well). `None` when the position is consistent.
pub fn truncation_point(
    position: Offset,
    last_epoch: LeaderEpoch,
    leader_epoch: i32,
    end_offset: i64,
) -> Option<Offset> {
    if end_offset < 0 {
        return None; // UNDEFINED_EPOCH_OFFSET: the leader cannot tell.
    }
    if end_offset < position.0 || leader_epoch < last_epoch.0 {
        Some(Offset(end_offset.min(position.0)))
    } else {
        None
    }
}
