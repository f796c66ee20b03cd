//! What a KIP-848 decision takes and gives: the heartbeat request's fields, the cluster's
//! topics, the response or Kafka's error response, and the [`Outcome`] (records to append,
//! clock changes, the rebalance cause). Shared by the heartbeat, leave and validation
//! decisions, which import it and not each other's types.

use std::collections::BTreeMap;

use kafka_protocol::ResponseError;

use super::cause::RebalanceCause;
use super::record::{Assignment, ConsumerGroupRecord, TopicMetadata};
use super::timers::TimerOp;

/// The cluster's topics by name, as the metadata image has them.
pub type TopicsImage = BTreeMap<String, TopicMetadata>;

/// The fields of a `ConsumerGroupHeartbeat` request the decision needs.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct HeartbeatRequest {
    /// The request's version: from 1 (Kafka 4.0, KIP-1082) the client names itself.
    pub api_version: i16,
    /// `GroupId`.
    pub group_id: String,
    /// `MemberId`.
    pub member_id: String,
    /// `MemberEpoch`.
    pub member_epoch: i32,
    /// `InstanceId`.
    pub instance_id: Option<String>,
    /// `RackId`.
    pub rack_id: Option<String>,
    /// `RebalanceTimeoutMs` (-1: unchanged).
    pub rebalance_timeout_ms: i32,
    /// `SubscribedTopicNames` (`None`: unchanged).
    pub subscribed_topic_names: Option<Vec<String>>,
    /// `SubscribedTopicRegex`.
    pub subscribed_topic_regex: Option<String>,
    /// `ServerAssignor` (`None`: unchanged).
    pub server_assignor: Option<String>,
    /// `TopicPartitions`: what the member owns (`None`: not reported).
    pub owned: Option<Assignment>,
    /// The request header's client id.
    pub client_id: String,
    /// The connection's client host.
    pub client_host: String,
    /// A fresh id, used only for a version-0 join without a member id.
    pub generated_member_id: String,
}

/// A successful response's fields.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HeartbeatResponse {
    /// `MemberId`.
    pub member_id: String,
    /// `MemberEpoch`.
    pub member_epoch: i32,
    /// `HeartbeatIntervalMs` (0 in a leave's response).
    pub heartbeat_interval_ms: i32,
    /// `Assignment`, when the request was full or the assignment changed.
    pub assignment: Option<Assignment>,
}

/// An error response: the code and Kafka's message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HeartbeatError {
    /// The error code.
    pub error: ResponseError,
    /// The message.
    pub message: String,
}

pub(super) fn fail<T>(
    error: ResponseError,
    message: impl Into<String>,
) -> Result<T, HeartbeatError> {
    Err(HeartbeatError {
        error,
        message: message.into(),
    })
}

/// What a decision produced.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Outcome<R> {
    /// The response to send once the records are committed.
    pub response: R,
    /// The records to append, in order.
    pub records: Vec<ConsumerGroupRecord>,
    /// The clock changes to apply once the records are written.
    pub timers: Vec<TimerOp>,
    /// The rebalance cause, to log and to note on the group.
    pub cause: Option<RebalanceCause>,
}
