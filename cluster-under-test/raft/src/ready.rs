//! [`Ready`]: everything one or more calls on a [`crate::RaftNode`] asked the driver to do, in
//! the order the driver must do it. This ordering is the crate's durability contract.

use crate::{Entry, Envelope, LogOp, Offset, QuorumState, Role, Snapshot};

/// Commands out of the state machine, accumulated since the last
/// [`crate::RaftNode::take_ready`].
///
/// The driver must handle the fields **in this order**:
///
/// 1. [`quorum_state`](Ready::quorum_state): write and fsync the `quorum-state` file
///    (tmp, fsync, rename), *before* anything below. A vote or an epoch bump that is sent but
///    not durable can be cast twice after a crash.
/// 2. [`log_ops`](Ready::log_ops): apply to the metadata log in order and fsync. Responses in
///    `messages` (a Fetch offset, a granted vote compared against the log) assume it.
/// 3. [`messages`](Ready::messages): send; any may be lost, none needs a retry from the driver.
/// 4. [`load_snapshot`](Ready::load_snapshot) then [`apply`](Ready::apply): hand to the state
///    machine, which must first reset to the snapshot, then apply the entries in order.
///
/// The remaining fields are information.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Ready {
    /// The election state to persist, if it changed.
    pub quorum_state: Option<QuorumState>,
    /// Durable log changes, in order.
    pub log_ops: Vec<LogOp>,
    /// Messages to send once steps 1 and 2 are durable.
    pub messages: Vec<Envelope>,
    /// The state machine must reset to this snapshot before applying `apply`.
    pub load_snapshot: Option<Snapshot>,
    /// Newly committed entries (below the high watermark), contiguous, in offset order.
    /// Includes control records; the state machine skips those it does not care about.
    pub apply: Vec<Entry>,
    /// The high watermark, if it moved.
    pub high_watermark: Option<Offset>,
    /// The role, if it changed (the driver starts or stops controller duties on `Leader`).
    pub role: Option<Role>,
    /// `metadata.log.max.record.bytes.between.snapshots` was crossed: the driver should call
    /// [`crate::RaftNode::create_snapshot`] at an offset up to this one.
    pub snapshot_suggested: Option<Offset>,
}

impl Ready {
    /// Whether there is nothing to do.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        *self == Ready::default()
    }
}
