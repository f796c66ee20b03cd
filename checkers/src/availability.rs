//! Partitions the cluster left without a leader after the heal: the harness records an
//! `unavailable` nemesis op naming them when its post-heal wait for leaders runs out; since when
//! each was offline comes from the leader watcher's last `leader-change` to no leader (else the
//! op's own time). A finding about the cluster, not a harness failure.

use logjam_history::{LEADER_CHANGE, LeadershipChange, NemesisEvent};
use serde::Serialize;

/// The `f` of the harness's op naming partitions still offline after the heal.
pub const UNAVAILABLE: &str = "unavailable";

/// One partition still without a leader when the run ended.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Unavailable {
    /// The partition of the watched topic.
    pub partition: i64,
    /// Since when it has had no leader, ns since start: the last leader change to none, or
    /// when the harness gave up waiting if the watcher saw none.
    pub since_ns: u64,
    /// Whether `since_ns` comes from a leader change the watcher saw.
    pub since_seen: bool,
}

/// The partitions the `unavailable` ops name, with since when each had no leader.
pub fn unavailable(nemesis: &[NemesisEvent]) -> Vec<Unavailable> {
    let mut found: Vec<Unavailable> = Vec::new();
    for op in nemesis.iter().filter(|n| n.f.as_str() == UNAVAILABLE) {
        let partitions = op
            .value
            .get("partitions")
            .and_then(|p| p.as_array())
            .cloned()
            .unwrap_or_default();
        for partition in partitions.iter().filter_map(serde_json::Value::as_i64) {
            let went_offline = nemesis
                .iter()
                .filter(|n| n.f.as_str() == LEADER_CHANGE && n.time_ns <= op.time_ns)
                .filter_map(|n| {
                    let change: LeadershipChange = serde_json::from_value(n.value.clone()).ok()?;
                    (change.partition == partition).then_some((n.time_ns, change.leader))
                })
                .max_by_key(|(time, _)| *time)
                .and_then(|(time, leader)| leader.is_none().then_some(time));
            if found.iter().any(|u| u.partition == partition) {
                continue;
            }
            found.push(Unavailable {
                partition,
                since_ns: went_offline.unwrap_or(op.time_ns),
                since_seen: went_offline.is_some(),
            });
        }
    }
    found.sort_by_key(|u| u.partition);
    found
}

#[cfg(test)]
mod tests {
    use logjam_history::{Function, OpIndex};
    use serde_json::json;

    use super::*;

    fn op(time: u64, f: &str, value: serde_json::Value) -> NemesisEvent {
        NemesisEvent {
            index: OpIndex(time),
            invoke_index: None,
            start_time_ns: time,
            time_ns: time,
            f: Function::from_name(f),
            targets: Vec::new(),
            value,
        }
    }

    fn change(time: u64, partition: i64, leader: Option<&str>) -> NemesisEvent {
        op(
            time,
            LEADER_CHANGE,
            json!({"partition": partition, "leader": leader, "epoch": 1, "isr": [],
                   "previous_leader": "n4", "previous_isr": ["n4"], "unclean": false}),
        )
    }

    #[test]
    fn offline_partitions_with_the_time_they_lost_their_leader() {
        let history = [
            change(10, 0, None),
            change(20, 0, Some("n5")),
            change(30, 0, None),
            change(15, 1, None),
            op(100, UNAVAILABLE, json!({"partitions": [0, 2]})),
        ];
        assert_eq!(
            unavailable(&history),
            vec![
                Unavailable {
                    partition: 0,
                    since_ns: 30,
                    since_seen: true
                },
                Unavailable {
                    partition: 2,
                    since_ns: 100,
                    since_seen: false
                },
            ]
        );
        assert!(unavailable(&history[..4]).is_empty(), "no op, no finding");
    }
}
