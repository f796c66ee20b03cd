//! The heartbeat task of a stable member: a Heartbeat every `heartbeat.interval.ms`, and the
//! poll clock checked on the same beat (Java's heartbeat thread): when `max.poll.interval.ms`
//! has passed since the last poll, a dynamic member leaves with Java's reason string (a static
//! member does not, as in Java) and the next poll rejoins. The task stops at the first answer
//! that needs the consumer (rejoin, reset, coordinator moved, fenced) and leaves it in
//! [`Beat`] for the next poll.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use kafka_protocol::messages::leave_group_request::MemberIdentity;
use kafka_protocol::messages::{ApiKey, GroupId, HeartbeatRequest, LeaveGroupRequest};
use kafka_protocol::protocol::StrBytes;
use tokio::time::Instant;

use super::membership::{POLL_TIMEOUT_REASON, Reaction, poll_expired, reaction};
use crate::connection::Connection;
use crate::error::Error;

/// What the heartbeat task found, for the next poll.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    /// REBALANCE_IN_PROGRESS: rejoin.
    Rejoin,
    /// UNKNOWN_MEMBER_ID / ILLEGAL_GENERATION: the member was dropped (e.g. session expiry).
    Reset,
    /// The poll clock expired and the member left.
    PollTimeout,
    /// The coordinator moved or stopped answering.
    Rediscover,
    /// FENCED_INSTANCE_ID.
    Fatal(Error),
}

/// State shared between the consumer and its heartbeat task.
#[derive(Debug)]
pub struct Beat {
    /// When `poll` was last called.
    pub last_poll: Instant,
    /// Set by the task when it stopped.
    pub outcome: Option<Outcome>,
    /// Until then the task sends nothing and checks nothing, as in a paused process
    /// ([`crate::consumer::Consumer::pause_heartbeats`]).
    pub paused_until: Option<Instant>,
}

impl crate::consumer::Consumer {
    /// Fault injection: the member behaves as if its process were paused (a GC pause, a
    /// SIGSTOP) for `duration`: its heartbeat task sends nothing and checks no clock until
    /// then, so a pause longer than `session.timeout.ms` gets the member removed by the
    /// coordinator while it believes itself a member. The caller pauses its own work for as
    /// long. Afterwards the heartbeats resume and learn what the group decided meanwhile. No
    /// effect on a consumer that is not subscribed.
    pub fn pause_heartbeats(&self, duration: std::time::Duration) {
        if let Some(group) = self.group.as_ref() {
            group.beat.lock().expect("beat").paused_until = Some(Instant::now() + duration);
        }
    }
}

/// Who is beating: fixed for one generation.
#[derive(Debug, Clone)]
pub struct Identity {
    /// `group.id`.
    pub group_id: String,
    /// Member id.
    pub member_id: String,
    /// Generation.
    pub generation: i32,
    /// `group.instance.id`.
    pub instance_id: Option<String>,
}

/// Sends LeaveGroup for `identity` with `reason`; errors are only logged (leaving is best
/// effort: the session timeout removes the member anyway).
pub async fn leave(connection: &Connection, identity: &Identity, reason: &str, timeout: Duration) {
    let version = connection.version(ApiKey::LeaveGroup).unwrap_or(0);
    let group_id = GroupId(StrBytes::from_string(identity.group_id.clone()));
    let request = if version >= 3 {
        LeaveGroupRequest::default()
            .with_group_id(group_id)
            .with_members(vec![
                MemberIdentity::default()
                    .with_member_id(StrBytes::from_string(identity.member_id.clone()))
                    .with_group_instance_id(identity.instance_id.clone().map(StrBytes::from_string))
                    .with_reason(Some(StrBytes::from_string(reason.to_owned()))),
            ])
    } else {
        LeaveGroupRequest::default()
            .with_group_id(group_id)
            .with_member_id(StrBytes::from_string(identity.member_id.clone()))
    };
    match connection.send(ApiKey::LeaveGroup, &request, timeout).await {
        Ok(response) if response.error_code != 0 => {
            tracing::debug!(code = response.error_code, "LeaveGroup answered an error")
        }
        Ok(_) => tracing::info!(member = %identity.member_id, reason, "left the group"),
        Err(error) => tracing::debug!(%error, "LeaveGroup failed"),
    }
}

/// The task: beats until something needs the consumer, then records it in `beat`.
pub async fn run(
    connection: Arc<Connection>,
    identity: Identity,
    interval: Duration,
    max_poll_interval: Duration,
    request_timeout: Duration,
    beat: Arc<Mutex<Beat>>,
) {
    let request = HeartbeatRequest::default()
        .with_group_id(GroupId(StrBytes::from_string(identity.group_id.clone())))
        .with_generation_id(identity.generation)
        .with_member_id(StrBytes::from_string(identity.member_id.clone()))
        .with_group_instance_id(identity.instance_id.clone().map(StrBytes::from_string));
    let outcome = loop {
        tokio::time::sleep(interval).await;
        let (since, paused_until) = {
            let beat = beat.lock().expect("beat");
            (beat.last_poll.elapsed(), beat.paused_until)
        };
        if let Some(until) = paused_until
            && Instant::now() < until
        {
            continue;
        }
        if poll_expired(since, max_poll_interval) {
            tracing::warn!(member = %identity.member_id, ?since, "{POLL_TIMEOUT_REASON}");
            if identity.instance_id.is_none() {
                leave(&connection, &identity, POLL_TIMEOUT_REASON, request_timeout).await;
            }
            break Outcome::PollTimeout;
        }
        let code = match connection
            .send(ApiKey::Heartbeat, &request, request_timeout)
            .await
        {
            Ok(response) => response.error_code,
            Err(error) => {
                tracing::debug!(%error, "heartbeat failed");
                break Outcome::Rediscover;
            }
        };
        match reaction(code) {
            Reaction::Ok | Reaction::Retry => {}
            Reaction::Rejoin => break Outcome::Rejoin,
            Reaction::ResetAndRejoin => break Outcome::Reset,
            Reaction::Rediscover => break Outcome::Rediscover,
            Reaction::Fatal => {
                break Outcome::Fatal(Error::broker(
                    "Heartbeat",
                    code,
                    Some(identity.group_id.clone()),
                ));
            }
            Reaction::Fail => tracing::debug!(code, "heartbeat answered an error"),
        }
    };
    beat.lock().expect("beat").outcome = Some(outcome);
}
