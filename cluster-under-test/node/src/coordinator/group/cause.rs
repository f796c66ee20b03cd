//! Why a group rebalanced, one vocabulary for the classic protocol and KIP-848, in the
//! seed's terms. Every rebalance (and every load of a group by a new coordinator) is logged
//! with `cause=<name>`; the harness's `rebalances.rs` reads those names back from the nodes'
//! logs, so a name here is a contract with it. A classic rebalance carries a [`Cause`]; a
//! KIP-848 one a [`RebalanceCause`](super::consumer_group::RebalanceCause) with the member
//! it concerns, whose [`cause`](super::consumer_group::RebalanceCause::cause) is one of
//! these.

/// Why a rebalance started, in the seed's terms: one vocabulary for both protocols.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cause {
    /// A member's session (heartbeat) clock expired.
    SessionTimeout,
    /// A member left because its `max.poll.interval.ms` expired (its LeaveGroup reason).
    PollTimeout,
    /// A member joined.
    Join,
    /// A member left on purpose.
    Leave,
    /// A static member rejoined under a new member id with other protocols.
    StaticMemberReplaced,
    /// A member's subscription (protocol metadata) changed, or the leader rejoined.
    MetadataChange,
    /// The group was loaded by a new coordinator since its last rebalance.
    CoordinatorMoved,
    /// The record of a generation's assignment could not be written (Kafka's
    /// `resetAndPropagateAssignmentError`): its members got the write's error.
    WriteFailed,
}

impl Cause {
    /// The name used in logs and reports.
    pub fn name(self) -> &'static str {
        match self {
            Cause::SessionTimeout => "session-timeout",
            Cause::PollTimeout => "poll-timeout",
            Cause::Join => "join",
            Cause::Leave => "leave",
            Cause::StaticMemberReplaced => "static-member-replaced",
            Cause::MetadataChange => "metadata-change",
            Cause::CoordinatorMoved => "coordinator-moved",
            Cause::WriteFailed => "write-failed",
        }
    }

    /// Every cause, in the order of the table above.
    pub const ALL: [Cause; 8] = [
        Cause::SessionTimeout,
        Cause::PollTimeout,
        Cause::Join,
        Cause::Leave,
        Cause::StaticMemberReplaced,
        Cause::MetadataChange,
        Cause::CoordinatorMoved,
        Cause::WriteFailed,
    ];

    /// The cause logged as `name`.
    pub fn from_name(name: &str) -> Option<Cause> {
        Cause::ALL.into_iter().find(|cause| cause.name() == name)
    }

    /// The cause a LeaveGroup `reason` names: the Java client's and librdkafka's poll-timeout
    /// reasons are `poll-timeout`, anything else a plain leave.
    pub fn of_leave_reason(reason: Option<&str>) -> Cause {
        let reason = reason.unwrap_or_default().to_ascii_lowercase();
        if reason.contains("poll timeout")
            || reason.contains("max.poll.interval")
            || reason.contains("maximum poll interval")
        {
            Cause::PollTimeout
        } else {
            Cause::Leave
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_distinct_and_read_back() {
        for cause in Cause::ALL {
            assert_eq!(Cause::from_name(cause.name()), Some(cause));
        }
        assert_eq!(Cause::from_name("gc-pause"), None);
    }

    #[test]
    fn a_leave_reason_names_the_poll_clock_or_a_plain_leave() {
        let cases = [
            (
                Some("consumer poll timeout has expired."),
                Cause::PollTimeout,
            ),
            (
                Some("Member left group: max.poll.interval.ms"),
                Cause::PollTimeout,
            ),
            (Some("the consumer is being closed"), Cause::Leave),
            (None, Cause::Leave),
        ];
        for (reason, expected) in cases {
            assert_eq!(Cause::of_leave_reason(reason), expected, "{reason:?}");
        }
    }
}
