//! The value of a `rebalance` op: one consumer-group assignment change a subscribed client
//! saw (the `group` workload writes one `invoke` + `ok` pair per change, right after the op
//! during which the client saw it), so a history shows which partitions each process owned
//! in which generation. Histories without them read as before; older readers keep the op as
//! an unknown `f`.

use serde::{Deserialize, Serialize};

use crate::ids::Key;

/// One assignment change of one group member.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Rebalance {
    /// The generation the change belongs to (-1 for a revocation outside any generation).
    pub generation: i32,
    /// The member id at the change.
    pub member_id: String,
    /// Keys (partitions of the workload's topic) added.
    #[serde(default)]
    pub assigned: Vec<Key>,
    /// Keys taken away.
    #[serde(default)]
    pub revoked: Vec<Key>,
    /// Why, as the client names it (`join`, `rebalance-in-progress`, `member-reset`,
    /// `poll-timeout`, `cooperative-follow-up`, `close`).
    pub cause: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_rebalance_round_trips_through_json() {
        let change = Rebalance {
            generation: 3,
            member_id: "m-1".to_owned(),
            assigned: vec![Key(0), Key(2)],
            revoked: vec![Key(1)],
            cause: "rebalance-in-progress".to_owned(),
        };
        let json = serde_json::to_value(&change).unwrap();
        assert_eq!(json["assigned"], serde_json::json!([0, 2]));
        assert_eq!(serde_json::from_value::<Rebalance>(json).unwrap(), change);
    }
}
