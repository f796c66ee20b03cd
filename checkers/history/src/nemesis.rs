//! The values of the ops the nemesis process writes: a fault or its undo ([`NemesisValue`])
//! and the leader watcher's `leader-change` ([`LeadershipChange`]). The harness writes them and
//! the harness's metrics and the checkers read them, so the schema lives here with the rest
//! of the history format.

use serde::{Deserialize, Serialize};

/// The `f` of the leader watcher's ops.
pub const LEADER_CHANGE: &str = "leader-change";

/// The value of a fault or undo op (`kill`, `restart`, `partition`, `heal`, `power-loss`,
/// ...): which nodes it targeted and what it did to them.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct NemesisValue {
    /// The nodes targeted, by name.
    #[serde(default)]
    pub targets: Vec<String>,
    /// For an undo: the nodes it started again.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub started: Vec<String>,
    /// For a partition: the groups of nodes that can still talk within themselves.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub groups: Vec<Vec<String>>,
    /// For a partition: the node pairs cut apart.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub cuts: Vec<[String; 2]>,
    /// For `corrupt`: what was damaged (file, offset, kind), as the lab describes it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub damage: Option<serde_json::Value>,
    /// Anything else, e.g. `power-loss`'s `lost-<node>: {"files", "bytes"}`.
    #[serde(flatten)]
    pub extra: serde_json::Map<String, serde_json::Value>,
}

/// The value of a `leader-change` op: a change of a partition's leader, epoch or ISR that the
/// run's leader watcher saw in the cluster's metadata.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LeadershipChange {
    /// The partition.
    pub partition: i64,
    /// The new leader (`None`: the partition has no leader, it is offline).
    pub leader: Option<String>,
    /// The new leader epoch.
    pub epoch: i64,
    /// The new ISR.
    pub isr: Vec<String>,
    /// The leader before the change.
    pub previous_leader: Option<String>,
    /// The ISR before the change.
    pub previous_isr: Vec<String>,
    /// True when the new leader was outside the previous ISR: an unclean election (or one
    /// the watcher saw only part of).
    pub unclean: bool,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nemesis_values_round_trip_and_keep_unknown_fields() {
        let text = r#"{"targets":["n1","n2"],"groups":[["n1"],["n2","n3"]],"cuts":[["n1","n2"]],"lost-n1":{"files":2,"bytes":40}}"#;
        let value: NemesisValue = serde_json::from_str(text).unwrap();
        assert_eq!(value.targets, ["n1", "n2"]);
        assert_eq!(value.cuts, [["n1".to_owned(), "n2".to_owned()]]);
        assert_eq!(value.extra["lost-n1"]["bytes"], 40);
        let back: serde_json::Value = serde_json::to_value(&value).unwrap();
        assert_eq!(
            back,
            serde_json::from_str::<serde_json::Value>(text).unwrap()
        );
    }

    #[test]
    fn a_leader_change_round_trips() {
        let change = LeadershipChange {
            partition: 0,
            leader: None,
            epoch: 3,
            isr: vec![],
            previous_leader: Some("n1".to_owned()),
            previous_isr: vec!["n1".to_owned()],
            unclean: false,
        };
        let json = serde_json::to_string(&change).unwrap();
        assert_eq!(
            serde_json::from_str::<LeadershipChange>(&json).unwrap(),
            change
        );
    }
}
