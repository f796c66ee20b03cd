//! Why a KIP-848 group rebalanced, in the seed's terms, so the shell can log each rebalance
//! with the clock or the act behind it. A cause is attached to the outcome that bumps the
//! group epoch (or, for a static member's replacement, that swaps its member id without a
//! bump, as Kafka does) and kept on the group as its last cause. Its kind is one of the
//! group coordinator's [`Cause`]s, the vocabulary shared with the classic protocol.

use crate::coordinator::group::cause::Cause;

/// The cause of a rebalance (or of a membership event Kafka does not rebalance for).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RebalanceCause {
    /// A member joined (epoch 0 with a new member id, or a new static instance).
    Join {
        /// The member.
        member_id: String,
    },
    /// A member left on purpose (epoch -1). `ConsumerGroupHeartbeat` carries no reason, so a
    /// Java client leaving because `max.poll.interval.ms` expired looks the same here: only
    /// the client's own history can say `poll-timeout` for that case.
    Leave {
        /// The member.
        member_id: String,
    },
    /// No heartbeat within `group.consumer.session.timeout.ms`: the heartbeat clock.
    SessionTimeout {
        /// The member.
        member_id: String,
    },
    /// The member did not revoke within its `RebalanceTimeoutMs`, which the Java client sets
    /// to `max.poll.interval.ms`: the poll clock, as the coordinator sees it.
    PollTimeout {
        /// The member.
        member_id: String,
    },
    /// A static member came back under a new member id and took over the old one's
    /// assignment; Kafka does not bump the group epoch for it.
    StaticMemberReplaced {
        /// The instance id.
        instance_id: String,
        /// The member id it had.
        old_member_id: String,
        /// The member id it has now.
        new_member_id: String,
    },
    /// A member changed its subscription or assignor, or a subscribed topic's metadata
    /// (partition count, creation, deletion) changed.
    MetadataChange {
        /// What changed, for the log.
        detail: String,
    },
}

impl RebalanceCause {
    /// Which [`Cause`] it is (the shared vocabulary of both protocols).
    pub fn cause(&self) -> Cause {
        match self {
            RebalanceCause::Join { .. } => Cause::Join,
            RebalanceCause::Leave { .. } => Cause::Leave,
            RebalanceCause::SessionTimeout { .. } => Cause::SessionTimeout,
            RebalanceCause::PollTimeout { .. } => Cause::PollTimeout,
            RebalanceCause::StaticMemberReplaced { .. } => Cause::StaticMemberReplaced,
            RebalanceCause::MetadataChange { .. } => Cause::MetadataChange,
        }
    }

    /// The cause's name in the seed's terms ([`Cause::name`]).
    pub fn name(&self) -> &'static str {
        self.cause().name()
    }

    /// Whether Kafka bumps the group epoch for it.
    pub fn bumps_group_epoch(&self) -> bool {
        !matches!(self, RebalanceCause::StaticMemberReplaced { .. })
    }
}
