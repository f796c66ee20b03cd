//! The nemesis's member steps: pause, kill, stop and restart members of the run's member pool
//! (`run/members.rs`), undo them, grow the topic (`add-partitions`), and find the pool group's
//! coordinator for the node faults that target it. Each step is recorded as a nemesis op in the history and noted in
//! `members.jsonl`.

use logjam_client::Admin;
use logjam_history::{Function, OpType, OpValue, Process};
use logjam_workloads::recorder::Recorder;
use rand::RngExt;
use rand::rngs::StdRng;
use serde_json::json;

use super::members::{self, MemberPool};
use crate::timeline::{MemberFault, MemberTargets};

/// The members `targets` names, as pool indexes; names beyond the pool are dropped with a
/// message.
fn resolve(pool: &MemberPool, targets: &MemberTargets, rng: &mut StdRng) -> Vec<usize> {
    let count = pool.names().len();
    match targets {
        MemberTargets::All => (0..count).collect(),
        MemberTargets::One if count > 0 => vec![rng.random_range(0..count)],
        MemberTargets::One => Vec::new(),
        MemberTargets::Members(list) => {
            let (known, unknown): (Vec<usize>, Vec<usize>) =
                list.iter().partition(|index| **index < count);
            if !unknown.is_empty() {
                eprintln!("logjam: the pool has {count} member(s); ignoring {unknown:?} (0-based)");
            }
            known
        }
    }
}

/// Carries out one member step; a member that cannot be acted on (not running) is skipped
/// and said, never an error that ends the run.
///
/// # Errors
/// Only when the history cannot be written.
pub(super) async fn apply(
    pool: &mut MemberPool,
    fault: MemberFault,
    targets: &MemberTargets,
    rng: &mut StdRng,
    recorder: &Recorder,
) -> anyhow::Result<()> {
    let chosen = resolve(pool, targets, rng);
    let names = pool.names();
    let mut done = Vec::new();
    for (turn, &index) in chosen.iter().enumerate() {
        if fault == MemberFault::Restart && turn > 0 {
            tokio::time::sleep(members::ROLLING_GAP).await;
        }
        let outcome = match fault {
            MemberFault::Pause => pool.pause(index),
            MemberFault::Kill => pool.kill(index).await,
            MemberFault::Stop => pool.stop(index).await,
            MemberFault::Restart => pool.restart(index).await,
        };
        match outcome {
            Ok(()) => done.push(names[index].clone()),
            Err(error) => eprintln!(
                "logjam: member {} could not be {fault:?}: {}",
                names[index],
                crate::error_text::chain(&error)
            ),
        }
    }
    let name = match fault {
        MemberFault::Pause => "member-pause",
        MemberFault::Kill => "member-kill",
        MemberFault::Stop => "member-stop",
        MemberFault::Restart => "member-restart",
    };
    eprintln!("logjam: nemesis {name} {}", done.join(","));
    recorder.record(
        Process::Nemesis,
        OpType::Info,
        Function::from_name(name),
        OpValue::Json(json!({"members": done})),
        None,
    )?;
    Ok(())
}

/// `member-resume` or `member-start`.
///
/// # Errors
/// A member cannot be spawned again, or the history cannot be written.
pub(super) fn undo(pool: &mut MemberPool, name: &str, recorder: &Recorder) -> anyhow::Result<()> {
    let done = if name == "member-resume" {
        pool.resume_all()
    } else {
        pool.start_stopped()?
    };
    eprintln!("logjam: nemesis {name} {}", done.join(","));
    recorder.record(
        Process::Nemesis,
        OpType::Info,
        Function::from_name(name),
        OpValue::Json(json!({"members": done})),
        None,
    )?;
    Ok(())
}

/// Grows `topic` by `count` partitions; records an `add-partitions` nemesis op (`info` with
/// the counts before and after, or `fail` with the error) and returns the counts.
///
/// # Errors
/// Only when the history cannot be written.
pub(super) async fn add_partitions(
    bootstrap: &str,
    topic: &str,
    count: u32,
    recorder: &Recorder,
) -> anyhow::Result<Option<(i32, i32)>> {
    let grown = async {
        let admin = Admin::from_properties([("bootstrap.servers", bootstrap)])?;
        let described = admin.describe_topics(&[topic]).await?;
        let from = described
            .first()
            .map_or(0, |t| i32::try_from(t.partitions.len()).unwrap_or(i32::MAX));
        let to = from.saturating_add(i32::try_from(count).unwrap_or(i32::MAX));
        admin.create_partitions(topic, to).await?;
        anyhow::Ok((from, to))
    }
    .await;
    let function = Function::from_name("add-partitions");
    match grown {
        Ok((from, to)) => {
            eprintln!("logjam: nemesis add-partitions {topic}: {from} -> {to}");
            recorder.record(
                Process::Nemesis,
                OpType::Info,
                function,
                OpValue::Json(json!({"topic": topic, "from": from, "to": to})),
                None,
            )?;
            Ok(Some((from, to)))
        }
        Err(error) => {
            let said = crate::error_text::chain(&error);
            eprintln!("logjam: nemesis add-partitions could not complete: {said}");
            recorder.record(
                Process::Nemesis,
                OpType::Fail,
                function,
                OpValue::Json(json!({"topic": topic, "add": count})),
                Some(json!(said)),
            )?;
            Ok(None)
        }
    }
}

/// The node index coordinating the pool's group, if the cluster answers (within the role
/// lookup's bounds, so a step runs on time while another has a node paused).
pub(super) async fn coordinator(bootstrap: &str) -> Option<usize> {
    let admin = Admin::from_properties([
        ("bootstrap.servers", bootstrap),
        ("request.timeout.ms", super::faults::ROLE_REQUEST_TIMEOUT_MS),
    ])
    .ok()?;
    let broker = tokio::time::timeout(
        super::faults::ROLE_LOOKUP_TIMEOUT,
        admin.group_coordinator(members::GROUP),
    )
    .await
    .ok()?
    .ok()?;
    usize::try_from(broker.0 - 1).ok()
}
