//! The KIP-848 consumer-group protocol's pure core: records, state, assignors, heartbeat.

pub mod assignor;
pub mod cause;
pub mod config;
pub mod heartbeat;
pub mod leave;
mod offsets;
pub mod reconcile;
pub mod record;
mod scratch;
pub mod state;
pub mod timers;
mod validate;
mod wire;

pub use cause::RebalanceCause;
pub use config::Config;
pub use heartbeat::{
    HeartbeatError, HeartbeatRequest, HeartbeatResponse, Outcome, TopicsImage, heartbeat,
};
pub use leave::expire;
pub use record::{
    Assignment, ConsumerGroupRecord, CurrentAssignment, MemberState, MemberSubscription,
    TopicMetadata,
};
pub use state::{ConsumerGroup, ConsumerGroups, GroupState, Member};
pub use timers::{Expiry, TimerOp, Timers};
