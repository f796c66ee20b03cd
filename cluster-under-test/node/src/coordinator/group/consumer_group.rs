//! The KIP-848 consumer-group protocol's pure core: records, state, assignors, heartbeat.
//!
//! Everything here is synchronous and deterministic; clocks come in as `now_ms`. The shell
//! (the group coordinator shard and its runtime, which own `__consumer_offsets`; wired in
//! `group/consumer_members.rs`, `group/shard.rs` and `api/consumer_group_*.rs`) wires it:
//!
//! # Records and replay
//! - A group's records go to the same `__consumer_offsets` partition as its offsets and its
//!   classic metadata: `abs(java_hash_code(group_id)) % offsets.topic.num.partitions`.
//! - The shard's `replay` calls [`ConsumerGroupRecord::decode`]: `Ok(Some(record))` goes to
//!   [`ConsumerGroups::replay`]; `Ok(None)` is another owner's type (offsets 0/1, classic
//!   group 2, regular expressions 16/17 which this core does not write); `Err` stops a load.
//! - Append an outcome's `records` (each [`ConsumerGroupRecord::encode`]) as one batch, so
//!   they commit or fail together, and answer only once the high watermark passes them.
//!
//! # A `ConsumerGroupHeartbeat` (API 68)
//! 1. While the partition loads: `COORDINATOR_LOAD_IN_PROGRESS`; not its leader:
//!    `NOT_COORDINATOR` (the runtime already answers these for other APIs).
//! 2. If a non-empty classic group holds the id: `GROUP_ID_NOT_FOUND` ("Group g is not a
//!    consumer group"). An empty classic group is deleted first (its tombstone in the same
//!    batch), as Kafka's online upgrade does. Classic members joining a consumer group
//!    (Kafka's migration path) are not supported.
//! 3. Build a [`HeartbeatRequest`]: `TopicPartitions` merged into an [`Assignment`];
//!    `client_id` from the request header; `client_host` as Kafka writes it ("/" + peer IP);
//!    `api_version`; and, only for a version-0 join without a member id, a fresh
//!    `generated_member_id` (Kafka: `Uuid.randomUuid().toString()`). Version 1 (Kafka 4.0,
//!    KIP-1082) requires the client's own member id.
//! 4. Call [`heartbeat()`] on the partition's latest state with [`Config`] (parsed from
//!    `group.consumer.*` and checked with [`Config::validate`] at startup) and the
//!    [`TopicsImage`] (name to topic id and partition count from the metadata cache; the
//!    decision recomputes the subscribed topics' metadata on every heartbeat, so a partition
//!    added is seen at each member's next heartbeat).
//! 5. `Err(HeartbeatError)`: answer its code and message (member id null, epoch 0, interval
//!    0); nothing is written. `Ok(outcome)`: apply `outcome.timers` to the partition's
//!    [`Timers`] as part of the decision, whatever becomes of the write (Kafka schedules
//!    its timers inside the operation: a write that times out may still commit, and a clock
//!    for a member that never was is ignored by [`expire`]); append `outcome.records`; once
//!    committed, if `outcome.cause` is set, call [`ConsumerGroups::note_cause`] and log the
//!    group, the cause's [`RebalanceCause::name`] and the new group epoch; then answer
//!    `outcome.response` (assignment `None` means the field is null). A failed append
//!    answers the append's error.
//!
//! # Clocks
//! (Wired as one task ticking every 100 ms over the loaded partitions, as the classic
//! clocks do, rather than one sleeping task per partition.)
//! One task per loaded partition sleeps until [`Timers::next_deadline`], then for each
//! [`Timers::take_expired`] calls [`expire`] on the latest state, unless
//! [`Timers::superseded`] says a heartbeat renewed the session since it fired; a
//! `Some(outcome)` is written and applied as above (a failed write [`Timers::rearm`]s the
//! clock, a renewal winning) (causes `session-timeout` and `poll-timeout`). The clock
//! must be the same monotonic milliseconds passed as `now_ms` to [`heartbeat()`].
//!
//! # Loading and unloading
//! After a load, call [`Timers::on_loaded`] (every member's session restarts from the load,
//! as Kafka does; members still revoking get a fresh revocation deadline). The last cause is
//! not in the log: a group loaded after a coordinator move has none until its next
//! rebalance, and a coordinator move alone does not rebalance in this protocol (the shell
//! may log `coordinator-moved` for the groups it loads). On unload drop state and clocks.
//!
//! # Offsets and describe
//! OffsetCommit v9+ and OffsetFetch v9+ on a consumer group call
//! [`ConsumerGroup::validate_offset_commit`] / [`ConsumerGroup::validate_offset_fetch`].
//! `ConsumerGroupDescribe` (API 69) reads a [`ConsumerGroup`]: [`GroupState::name`],
//! `group_epoch`, `assignment_epoch`, each member's subscription, current assignment and
//! `target`. Advertise both APIs in `versions.rs` only once they are wired (the version
//! sweep test answers every advertised version), and add them to the request fuzzer.
//!
//! # Not done
//! Regular-expression subscriptions (answered `INVALID_REQUEST`), rack-aware assignment,
//! per-group configs, classic members in consumer groups, and Kafka 4.1's metadata hash
//! (this core writes 4.0's `ConsumerGroupPartitionMetadata` instead).

pub mod assignor;
pub mod cause;
pub mod decision;
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

pub use crate::config::group_consumer::Config;
pub use cause::RebalanceCause;
pub use decision::{HeartbeatError, HeartbeatRequest, HeartbeatResponse, Outcome, TopicsImage};
pub use heartbeat::heartbeat;
pub use leave::expire;
pub use record::{
    Assignment, ConsumerGroupRecord, CurrentAssignment, MemberState, MemberSubscription,
    TopicMetadata,
};
pub use state::{ConsumerGroup, ConsumerGroups, GroupState, Member};
pub use timers::{Expiry, TimerOp, Timers};
