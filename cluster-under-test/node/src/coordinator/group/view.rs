//! What the offset checks read of a classic group, pure: its state ([`GroupState`], Kafka's
//! classic group states), a [`GroupView`] of its generation and members, and the group
//! fields a commit carries ([`CommitMember`]). OffsetCommit (`offsets.rs`) and
//! TxnOffsetCommit (`txn_offsets.rs`) are fenced against the same view, which the classic
//! core (`classic.rs`) gives of itself.

use std::collections::HashMap;

/// Kafka's classic group states, as far as the check needs them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GroupState {
    /// No members.
    Empty,
    /// A rebalance is collecting members.
    PreparingRebalance,
    /// The leader's assignment is awaited.
    CompletingRebalance,
    /// Assigned and running.
    Stable,
    /// Removed or migrated.
    Dead,
}

/// What the check reads of a group.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupView {
    /// The state.
    pub state: GroupState,
    /// The current generation.
    pub generation_id: i32,
    /// Member ids.
    pub members: Vec<String>,
    /// Static members: `group.instance.id` → member id.
    pub static_members: HashMap<String, String>,
}

/// The group fields of a TxnOffsetCommit (v3+, KIP-447; earlier versions send none:
/// generation -1, member "", no instance id).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CommitMember<'a> {
    /// `GenerationId`.
    pub generation_id: i32,
    /// `MemberId`.
    pub member_id: &'a str,
    /// `GroupInstanceId`.
    pub group_instance_id: Option<&'a str>,
}
