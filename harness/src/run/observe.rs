//! The observe phase of a run: what the harness watches while the workload runs. The leader
//! watcher (every change of a partition's leader, epoch or ISR, as `leader-change` nemesis
//! ops), the progress line, and the harness's own cost (ops completed, CPU used).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use logjam_client::Admin;
use logjam_history::{Function, OpType, OpValue, Process};
use logjam_workloads::recorder::Recorder;

use logjam_history::{LEADER_CHANGE, LeadershipChange};

/// What the watcher last saw of one partition.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Leadership {
    leader: Option<i32>,
    epoch: i32,
    isr: Vec<i32>,
}

/// Records every change of a partition's leader, leader epoch or ISR that the cluster's
/// metadata shows (polled every 250 ms) as a `leader-change` op of the nemesis process, so
/// the history says which election made a write vanish. `unclean` marks a new leader that
/// was not in the ISR last seen: an unclean election, or one the watcher saw only part of.
pub(super) async fn watch_leaders(bootstrap: String, topic: String, recorder: Arc<Recorder>) {
    let Ok(admin) = Admin::from_properties([
        ("bootstrap.servers", bootstrap.as_str()),
        ("request.timeout.ms", "1000"),
    ]) else {
        return;
    };
    let name = |id: i32| format!("n{id}");
    let mut last: BTreeMap<i32, Leadership> = BTreeMap::new();
    loop {
        tokio::time::sleep(Duration::from_millis(250)).await;
        let Ok(topics) = admin.describe_topics(&[topic.as_str()]).await else {
            continue;
        };
        let Some(described) = topics.first() else {
            continue;
        };
        for partition in &described.partitions {
            let now = Leadership {
                leader: partition
                    .leader
                    .map(|leader| leader.0)
                    .filter(|id| *id >= 0),
                epoch: partition.leader_epoch.0,
                isr: partition.isr.iter().map(|id| id.0).collect(),
            };
            let key = partition.partition.0;
            let Some(before) = last.insert(key, now.clone()) else {
                continue;
            };
            if before == now {
                continue;
            }
            let unclean = now.leader.is_some_and(|leader| {
                before.leader != Some(leader) && !before.isr.contains(&leader)
            });
            let change = LeadershipChange {
                partition: key.into(),
                leader: now.leader.map(name),
                epoch: now.epoch.into(),
                isr: now.isr.iter().copied().map(name).collect(),
                previous_leader: before.leader.map(name),
                previous_isr: before.isr.iter().copied().map(name).collect(),
                unclean,
            };
            let Ok(value) = serde_json::to_value(&change) else {
                return;
            };
            if recorder
                .record(
                    Process::Nemesis,
                    OpType::Info,
                    Function::from_name(LEADER_CHANGE),
                    OpValue::Json(value),
                    None,
                )
                .is_err()
            {
                return;
            }
        }
    }
}

/// What the harness itself did during the workload phase: operations completed (ok, fail or
/// info) and the CPU it used (its own threads: clients, recorder, nemesis, and the lazy
/// disks' FUSE servers when mounted; not the nodes), as a share of one core.
#[derive(Debug, Clone, Copy, serde::Serialize)]
pub(super) struct WorkloadStats {
    pub(super) seconds: f64,
    pub(super) ops: u64,
    pub(super) ops_per_second: f64,
    pub(super) harness_cpu_seconds: f64,
    pub(super) harness_cpu_share: f64,
}

/// CPU seconds used by this process and by its reaped children.
pub(super) fn cpu_seconds() -> (f64, f64) {
    use nix::sys::resource::{UsageWho, getrusage};
    let seconds = |who| {
        getrusage(who).map_or(0.0, |usage| {
            let (user, system) = (usage.user_time(), usage.system_time());
            user.tv_sec() as f64
                + user.tv_usec() as f64 / 1e6
                + system.tv_sec() as f64
                + system.tv_usec() as f64 / 1e6
        })
    };
    (
        seconds(UsageWho::RUSAGE_SELF),
        seconds(UsageWho::RUSAGE_CHILDREN),
    )
}
