//! Consumer groups, classic protocol: the assignors ([`assignor`]), the ConsumerProtocol
//! payloads the leader and members exchange through JoinGroup and SyncGroup ([`protocol`]),
//! the pure membership decisions and rebalance events ([`membership`]), and the tokio shell:
//! join/sync and the public group API on [`crate::Consumer`] ([`coordinator`], [`commits`]), the
//! heartbeat task with the poll clock ([`heartbeat`]) and committed offsets ([`offsets`]).
//! KIP-848 (`group.protocol=consumer`): the member's decisions ([`kip848`]) and its heartbeat
//! task and reconciliation ([`kip848_shell`]), sharing commits and close with the classic
//! protocol.

pub mod assignor;
pub mod commits;
pub mod coordinator;
pub mod discovery;
pub mod heartbeat;
pub mod kip848;
pub mod kip848_shell;
pub mod membership;
pub mod offsets;
pub mod protocol;

pub use coordinator::RebalanceListener;
pub use membership::{RebalanceCause, RebalanceEvent};
