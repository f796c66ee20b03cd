//! The Kafka-aware faults `isr-shrink-kill` and `isr-shrink-power-loss`: cut one partition's
//! followers from its leader (pause them on a loopback network), wait while writes go on until
//! the metadata shows the ISR shrunk to the leader alone, record when, then kill the leader or
//! take its power. What happens next is Kafka's own business: with `min.insync.replicas=1`
//! the leader acknowledged writes alone; an unclean election, the leader's lost tail or KIP-966
//! decide what survives.

use std::collections::BTreeSet;
use std::time::Duration;

use logjam_client::Admin;
use logjam_history::{Function, OpType, OpValue, Process};
use logjam_workloads::recorder::Recorder;
use rand::RngExt;
use rand::rngs::StdRng;
use serde_json::json;
use tokio::time::Instant;

use crate::lab::Lab;
use crate::nemesis::Ending;

/// How long writes go on against the ISR of one before the leader is taken down: what the
/// leader acknowledges alone in that window is what `min.insync.replicas=1` puts at risk.
pub(crate) const HOLD_AFTER_SHRINK: Duration = Duration::from_secs(5);

/// The node settings the shrink waits on, with Kafka's defaults.
#[derive(Debug, Clone, Copy)]
pub(crate) struct ShrinkTiming {
    /// `replica.lag.time.max.ms`: a cut follower leaves the ISR between this and 1.5 times it.
    pub(crate) replica_lag_ms: u64,
    /// `broker.session.timeout.ms`: a paused follower is fenced (and leaves the ISR) after it.
    pub(crate) session_ms: u64,
}

impl ShrinkTiming {
    /// From the node settings given (`key`, `value`), Kafka's defaults otherwise.
    pub(crate) fn from_settings(settings: &[(String, String)]) -> ShrinkTiming {
        let get = |key: &str, default: u64| {
            settings
                .iter()
                .rev()
                .find(|(k, _)| k == key)
                .and_then(|(_, v)| v.parse().ok())
                .unwrap_or(default)
        };
        ShrinkTiming {
            replica_lag_ms: get("replica.lag.time.max.ms", 30_000),
            session_ms: get("broker.session.timeout.ms", 9_000),
        }
    }

    /// How long to wait for the ISR to shrink: the longest Kafka may take (1.5 times the lag
    /// limit, as the leader checks every half of it; or the session for a pause), plus 10 s for
    /// the AlterPartition and the metadata to show it. The whole fault takes up to this plus
    /// [`HOLD_AFTER_SHRINK`].
    pub(crate) fn wait(self, cut: bool) -> Duration {
        let ms = if cut {
            self.replica_lag_ms + self.replica_lag_ms / 2
        } else {
            self.session_ms
                .min(self.replica_lag_ms + self.replica_lag_ms / 2)
        };
        Duration::from_millis(ms + 10_000)
    }

    /// The longest Kafka itself should take to shrink the ISR (without the margin of
    /// [`wait`](Self::wait)): what the schedule leaves room for before the run ends.
    pub(crate) fn expected(self, cut: bool) -> Duration {
        self.wait(cut) - Duration::from_secs(10)
    }
}

/// What an injected ISR-shrink fault did, for its undo.
pub(super) struct Shrunk {
    /// The leader, killed or powered off.
    pub(super) leader: usize,
    /// The followers, cut off or paused.
    pub(super) followers: Vec<usize>,
}

/// The leader and followers of `partition` (a random one when `None`) and the partition's
/// index, as node indexes, with its ISR as node indexes.
async fn roles(
    admin: &Admin,
    topic: &str,
    partition: Option<u32>,
    rng: &mut StdRng,
) -> Option<(i32, usize, Vec<usize>, Vec<usize>)> {
    let topics = admin.describe_topics(&[topic]).await.ok()?;
    let partitions = &topics.first()?.partitions;
    let index = match partition {
        Some(partition) => partition as usize,
        None => rng.random_range(0..partitions.len().max(1)),
    };
    let chosen = partitions.get(index)?;
    let leader = chosen.leader?.0;
    let to_index = |id: i32| usize::try_from(id - 1).ok();
    let followers = chosen
        .replicas
        .iter()
        .filter(|replica| replica.0 != leader)
        .filter_map(|replica| to_index(replica.0))
        .collect();
    let isr = chosen
        .isr
        .iter()
        .filter_map(|replica| to_index(replica.0))
        .collect();
    Some((chosen.partition.0, to_index(leader)?, followers, isr))
}

/// Injects the fault on `partition` (a random one when `None`): records an `isr-shrunk` op when
/// the metadata shows the ISR reduced to the leader, and fills `value` with what it did.
/// `Err` when it could not complete (no leader known, the ISR did not shrink in time, the
/// kill failed); the caller puts the lab right and records the fault as failed. `Ok` carries
/// the nodes to put right at the undo.
#[allow(clippy::too_many_arguments)]
pub(super) async fn inject(
    lab: &mut Lab,
    recorder: &Recorder,
    ending: Ending,
    partition: Option<u32>,
    timing: ShrinkTiming,
    rng: &mut StdRng,
    bootstrap: &str,
    topic: &str,
    value: &mut serde_json::Map<String, serde_json::Value>,
    shrunk: &mut Option<Shrunk>,
) -> anyhow::Result<()> {
    let admin = Admin::from_properties([
        ("bootstrap.servers", bootstrap),
        ("request.timeout.ms", "2000"),
    ])?;
    let (index, leader, followers, _) = roles(&admin, topic, partition, rng)
        .await
        .ok_or_else(|| anyhow::anyhow!("no leader known for a partition of {topic}"))?;
    let names: Vec<String> = lab.nodes.iter().map(crate::lab::Node::name).collect();
    let name = |node: usize| names[node].clone();
    value.insert("partition".into(), json!(index));
    value.insert("leader".into(), json!(name(leader)));
    value.insert(
        "followers".into(),
        json!(followers.iter().map(|f| name(*f)).collect::<Vec<_>>()),
    );
    let cut = lab.has_network();
    *shrunk = Some(Shrunk {
        leader,
        followers: followers.clone(),
    });
    if cut {
        let cuts: BTreeSet<(usize, usize)> = followers
            .iter()
            .flat_map(|f| [(leader, *f), (*f, leader)])
            .collect();
        lab.set_cuts(cuts)?;
    } else {
        for follower in &followers {
            lab.pause(*follower)?;
        }
    }
    value.insert("how".into(), json!(if cut { "cut" } else { "pause" }));
    eprintln!(
        "logjam: nemesis isr-shrink: {} {} from leader {} of partition {index}; waiting for the ISR to shrink",
        if cut { "cut" } else { "paused" },
        followers
            .iter()
            .map(|f| name(*f))
            .collect::<Vec<_>>()
            .join(","),
        name(leader)
    );
    let began = Instant::now();
    let deadline = began + timing.wait(cut);
    loop {
        if let Some((_, now_leader, _, isr)) = roles(&admin, topic, Some(index as u32), rng).await {
            if now_leader != leader {
                anyhow::bail!(
                    "partition {index} changed leader to {} before its ISR shrank",
                    name(now_leader)
                );
            }
            if isr == [leader] {
                break;
            }
        }
        if Instant::now() >= deadline {
            anyhow::bail!(
                "the ISR of partition {index} did not shrink to {} within {} s",
                name(leader),
                timing.wait(cut).as_secs()
            );
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    let waited_ms = began.elapsed().as_millis() as u64;
    value.insert("shrink_waited_ms".into(), json!(waited_ms));
    recorder.record(
        Process::Nemesis,
        OpType::Info,
        Function::from_name("isr-shrunk"),
        OpValue::Json(json!({
            "partition": index,
            "leader": name(leader),
            "isr": [name(leader)],
            "waited_ms": waited_ms,
        })),
        None,
    )?;
    eprintln!(
        "logjam: nemesis isr-shrink: ISR of partition {index} is {} alone after {:.1} s; \
         writes go on for {} s",
        name(leader),
        waited_ms as f64 / 1000.0,
        HOLD_AFTER_SHRINK.as_secs()
    );
    tokio::time::sleep(HOLD_AFTER_SHRINK).await;
    match ending {
        Ending::Kill => lab.kill(leader),
        Ending::PowerLoss => lab.power_loss(leader).map(|loss| {
            value.insert(
                format!("lost-{}", name(leader)),
                json!({"files": loss.files, "bytes": loss.bytes}),
            );
        }),
    }
}

/// Puts the lab right after the fault: heals the cut or resumes the followers.
pub(super) fn release_followers(lab: &mut Lab, shrunk: &Shrunk) -> anyhow::Result<()> {
    if lab.has_network() {
        lab.heal()
    } else {
        for follower in &shrunk.followers {
            if lab.nodes[*follower].is_running() {
                lab.resume(*follower)?;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_wait_covers_kafkas_shrink_time_and_reads_the_settings() {
        let defaults = ShrinkTiming::from_settings(&[]);
        assert_eq!(defaults.wait(true), Duration::from_millis(55_000));
        assert_eq!(defaults.wait(false), Duration::from_millis(19_000));
        let set = ShrinkTiming::from_settings(&[(
            "replica.lag.time.max.ms".to_owned(),
            "2000".to_owned(),
        )]);
        assert_eq!(set.wait(true), Duration::from_millis(13_000));
        assert_eq!(set.wait(false), Duration::from_millis(13_000));
    }
}
