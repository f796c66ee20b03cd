//! OffsetForLeaderEpoch's part of the version sweep: the sweep topic's partition asked where
//! the current leader epoch ends, fenced with that epoch, at every version: the epoch itself
//! and the log end (the latest epoch ends at the log end, Kafka's `endOffsetFor`).

use kafka_protocol::messages::offset_for_leader_epoch_request::{
    OffsetForLeaderPartition, OffsetForLeaderTopic,
};
use kafka_protocol::messages::{ApiKey, OffsetForLeaderEpochRequest, RequestKind, ResponseKind};

use super::{Context, TOPIC, name};

pub fn request_for(key: ApiKey, context: &Context) -> Option<RequestKind> {
    (key == ApiKey::OffsetForLeaderEpoch).then(|| {
        RequestKind::OffsetForLeaderEpoch(
            OffsetForLeaderEpochRequest::default()
                .with_replica_id(kafka_protocol::messages::BrokerId(-1))
                .with_topics(vec![
                    OffsetForLeaderTopic::default()
                        .with_topic(name(TOPIC))
                        .with_partitions(vec![
                            OffsetForLeaderPartition::default()
                                .with_partition(0)
                                .with_current_leader_epoch(context.leader_epoch)
                                .with_leader_epoch(context.leader_epoch),
                        ]),
                ]),
        )
    })
}

pub fn check(response: &ResponseKind, context: &Context) -> Option<Result<(), String>> {
    let ResponseKind::OffsetForLeaderEpoch(response) = response else {
        return None;
    };
    Some(
        match response.topics.first().and_then(|t| t.partitions.first()) {
            Some(p)
                if p.error_code == 0
                    && p.leader_epoch == context.leader_epoch
                    && p.end_offset == context.log_end =>
            {
                Ok(())
            }
            _ => Err(format!(
                "{response:?} (expected epoch {} ending at {})",
                context.leader_epoch, context.log_end
            )),
        },
    )
}
