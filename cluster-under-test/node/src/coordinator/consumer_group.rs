//! The KIP-848 consumer-group protocol's pure core: records, state, assignors, heartbeat.

pub mod assignor;
pub mod record;
mod wire;

pub use record::{
    Assignment, ConsumerGroupRecord, CurrentAssignment, MemberState, MemberSubscription,
    TopicMetadata,
};
