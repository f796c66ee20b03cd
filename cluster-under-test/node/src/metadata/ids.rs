//! Newtypes for the broker identifiers that cross module boundaries: [`BrokerId`] (`node.id`
//! of a broker) and [`BrokerEpoch`] (the offset of its registration record).

use serde::{Deserialize, Serialize};

/// A broker's `node.id`. `BrokerId::NONE` (-1) is Kafka's "no leader".
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct BrokerId(pub i32);

impl BrokerId {
    /// Kafka's `-1`: no leader.
    pub const NONE: BrokerId = BrokerId(-1);

    /// Whether this is a real broker id (not [`BrokerId::NONE`]).
    pub fn is_some(self) -> bool {
        self.0 >= 0
    }
}

/// A broker epoch: the metadata offset at which the controller registered the broker
/// (Kafka's `offsetControl.nextWriteOffset()` at registration).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct BrokerEpoch(pub i64);

impl std::fmt::Display for BrokerId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "broker{}", self.0)
    }
}
