//! The data of the classic group's decisions (`classic.rs`): the group [`Limits`], a [`Member`], JoinGroup's request and reply, and the [`Effects`] a call
//! releases. Pure.

use bytes::Bytes;
use kafka_protocol::ResponseError;

use crate::coordinator::group::cause::Cause;
use crate::coordinator::group::record::GroupValue;

/// The group settings the decisions need.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// `group.min.session.timeout.ms` (6 s).
    pub min_session_timeout_ms: i32,
    /// `group.max.session.timeout.ms` (30 min).
    pub max_session_timeout_ms: i32,
    /// `group.initial.rebalance.delay.ms` (3 s).
    pub initial_rebalance_delay_ms: i32,
}

/// One member.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Member {
    /// Its member id.
    pub member_id: String,
    /// Its `group.instance.id`, if static.
    pub instance_id: Option<String>,
    /// `client.id`.
    pub client_id: String,
    /// The client's host.
    pub client_host: String,
    /// `max.poll.interval.ms` as JoinGroup sends it.
    pub rebalance_timeout_ms: i32,
    /// `session.timeout.ms`.
    pub session_timeout_ms: i32,
    /// The protocols it supports, in preference order, with their metadata.
    pub protocols: Vec<(String, Bytes)>,
    /// What the leader assigned it this generation.
    pub assignment: Bytes,
    /// It waits for the join phase to end.
    pub awaiting_join: bool,
    /// It waits for the leader's assignment.
    pub awaiting_sync: bool,
    /// Its last sign of life (ms).
    pub last_heartbeat_ms: i64,
}

/// The longest member id the coordinator hands out (and accepts: JoinGroup refuses a longer
/// one as INVALID_REQUEST).
pub const MAX_MEMBER_ID_BYTES: usize = 1024;

/// What a JoinGroup carries.
#[derive(Debug, Clone)]
pub struct JoinRequest {
    /// `MemberId` ("" for a new member).
    pub member_id: String,
    /// `GroupInstanceId`.
    pub instance_id: Option<String>,
    /// `ProtocolType`.
    pub protocol_type: String,
    /// `Protocols`.
    pub protocols: Vec<(String, Bytes)>,
    /// `SessionTimeoutMs`.
    pub session_timeout_ms: i32,
    /// `RebalanceTimeoutMs` (v0: the session timeout).
    pub rebalance_timeout_ms: i32,
    /// The client id and host of the connection.
    pub client_id: String,
    /// The client host.
    pub client_host: String,
    /// The request version (v4+ require a known member id).
    pub version: i16,
    /// A fresh suffix for a member id (the shell's uuid).
    pub fresh_id: String,
}

impl JoinRequest {
    /// The member id a new member gets: its instance id (else its client id), a dash and the
    /// fresh suffix, as Kafka forms them, the prefix cut so the id is at most
    /// [`MAX_MEMBER_ID_BYTES`]: a client id may be up to 32 767 bytes, and an id longer than
    /// the INT16 strings of the JoinGroup answer and the group's record could not be written.
    pub fn new_member_id(&self) -> String {
        let prefix = self.instance_id.as_deref().unwrap_or(&self.client_id);
        let room = MAX_MEMBER_ID_BYTES.saturating_sub(self.fresh_id.len() + 1);
        let mut cut = prefix.len().min(room);
        while !prefix.is_char_boundary(cut) {
            cut -= 1;
        }
        format!("{}-{}", &prefix[..cut], self.fresh_id)
    }

    /// The member id this request joins as.
    pub fn joining_id(&self) -> String {
        if self.member_id.is_empty() {
            self.new_member_id()
        } else {
            self.member_id.clone()
        }
    }
}

/// A JoinGroup answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JoinReply {
    /// The error, if any.
    pub error: Option<ResponseError>,
    /// The generation.
    pub generation: i32,
    /// The chosen protocol.
    pub protocol: Option<String>,
    /// The protocol type.
    pub protocol_type: Option<String>,
    /// The leader's member id.
    pub leader: String,
    /// The member's id.
    pub member_id: String,
    /// For the leader: every member with its instance id and metadata.
    pub members: Vec<(String, Option<String>, Bytes)>,
    /// The leader need not assign (a static leader's rejoin, v9+).
    pub skip_assignment: bool,
}

impl JoinReply {
    /// An error answer.
    pub fn error(error: ResponseError, member_id: &str) -> JoinReply {
        JoinReply {
            error: Some(error),
            generation: -1,
            protocol: None,
            protocol_type: None,
            leader: String::new(),
            member_id: member_id.to_owned(),
            members: Vec::new(),
            skip_assignment: false,
        }
    }
}

/// A SyncGroup answer: the member's assignment or an error.
pub type SyncReply = Result<Bytes, ResponseError>;

/// What a call or a tick releases: delayed answers, the metadata to write, the rebalance it
/// started.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Effects {
    /// JoinGroup answers to members waiting for them.
    pub joins: Vec<(String, JoinReply)>,
    /// SyncGroup answers to members waiting for them.
    pub syncs: Vec<(String, SyncReply)>,
    /// Group metadata to write (a new generation assigned, or the group emptied).
    pub persist: Option<GroupValue>,
    /// A rebalance started, and why.
    pub rebalance: Option<Cause>,
    /// `persist` is the assignment of this generation: the members waiting in SyncGroup are
    /// answered by [`ClassicGroup::assignment_written`](super::ClassicGroup::assignment_written)
    /// once its write is acknowledged (or fails).
    pub assignment: Option<i32>,
}
