//! The KIP-848 consumer-group protocol's pure core: records, state, assignors, heartbeat.

pub mod assignor;
pub mod cause;
pub mod reconcile;
pub mod record;
pub mod state;
mod wire;

pub use record::{
    Assignment, ConsumerGroupRecord, CurrentAssignment, MemberState, MemberSubscription,
    TopicMetadata,
};
