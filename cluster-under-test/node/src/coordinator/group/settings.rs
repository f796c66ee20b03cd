//! The group coordinator's settings, read from the node's configuration: the classic
//! protocol's (`group.*.session.timeout.ms`, `group.initial.rebalance.delay.ms`), the
//! `__consumer_offsets` topic's, the canaries it honours, and the new consumer protocol's
//! (`group.consumer.*`: `config/group_consumer.rs`, checked when the configuration is read).

use crate::canary::Canary;
use crate::config::Config;
use crate::coordinator::group::classic::Limits;
use crate::coordinator::group::consumer_group;

/// The node settings of the group coordinator.
#[derive(Debug, Clone)]
pub struct GroupSettings {
    /// `offsets.topic.num.partitions`.
    pub partitions: i32,
    /// `offsets.topic.replication.factor` (default 3; FindCoordinator is
    /// `COORDINATOR_NOT_AVAILABLE` until that many brokers are live).
    pub replication_factor: i16,
    /// The `skip-offset-fence` canary.
    pub skip_offset_fence: bool,
    /// The `double-assign` canary.
    pub double_assign: bool,
    /// `group.min.session.timeout.ms`, `group.max.session.timeout.ms`,
    /// `group.initial.rebalance.delay.ms`.
    pub limits: Limits,
    /// The new consumer protocol's settings (`group.consumer.*`).
    pub consumer: consumer_group::Config,
}

impl GroupSettings {
    /// The settings of `config`.
    pub fn from_config(config: &Config) -> GroupSettings {
        GroupSettings {
            partitions: config.int("offsets.topic.num.partitions").clamp(1, 10_000) as i32,
            replication_factor: config
                .int("offsets.topic.replication.factor")
                .clamp(1, i64::from(i16::MAX)) as i16,
            skip_offset_fence: config.canaries.is_on(Canary::SkipOffsetFence),
            double_assign: config.canaries.is_on(Canary::DoubleAssign),
            limits: Limits {
                min_session_timeout_ms: config.int("group.min.session.timeout.ms") as i32,
                max_session_timeout_ms: config.int("group.max.session.timeout.ms") as i32,
                initial_rebalance_delay_ms: config.int("group.initial.rebalance.delay.ms").max(0)
                    as i32,
            },
            consumer: consumer_group::Config::from_raw(&config.raw),
        }
    }
}
