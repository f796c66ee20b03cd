//! Consumer groups, classic protocol: the assignors ([`assignor`]) and the ConsumerProtocol
//! payloads ([`protocol`]) the leader and members exchange through JoinGroup and SyncGroup.

pub mod assignor;
pub mod protocol;
