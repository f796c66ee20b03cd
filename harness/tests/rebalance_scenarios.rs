//! The rebalance scenarios end to end: a member pool of real processes (`logjam member`) in
//! one classic group on the namespace lab, and the cause the coordinator names for each
//! rebalance. The session clock fires for a member paused past its session timeout and not for
//! its twin with a longer one; the poll clock fires for a member whose batches take longer than
//! max.poll.interval.ms; a killed coordinator's group is loaded by the next one and members take
//! partitions over from the offsets committed before the kill.
//!
//! The runs take a lock under `cargo test`; under nextest the `lab` group bounds them (`support`).

mod support;

use std::path::Path;

/// Runs a shipped scenario; returns its exit code, scenario.json, rebalances.json, the
/// members' events and the output.
fn scenario(
    name: &str,
) -> (
    Option<i32>,
    serde_json::Value,
    serde_json::Value,
    Vec<serde_json::Value>,
    String,
) {
    let (output, results) = support::run_scenario(name, &[]);
    let log = format!(
        "{}\n{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    let run = results.path().join("latest");
    let read = |file: &str| -> serde_json::Value {
        serde_json::from_str(
            &std::fs::read_to_string(run.join(file))
                .unwrap_or_else(|_| panic!("{name} stored {file}\n{log}")),
        )
        .unwrap()
    };
    let events = members(&run);
    (
        output.status.code(),
        read("scenario.json"),
        read("rebalances.json"),
        events,
        log,
    )
}

fn members(run: &Path) -> Vec<serde_json::Value> {
    std::fs::read_to_string(run.join("members.jsonl"))
        .unwrap()
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect()
}

/// The rebalances counted after the group settled, per cause.
fn causes(rebalances: &serde_json::Value) -> serde_json::Map<String, serde_json::Value> {
    rebalances["causes_after_settle"]
        .as_object()
        .unwrap()
        .clone()
}

#[test]
fn a_member_paused_past_its_session_timeout_is_expired_and_its_twin_is_not() {
    let (code, judged, rebalances, events, log) = scenario("rebalance-session-timeout");
    assert_eq!(code, Some(0), "{judged:#}\n{log}");
    assert!(causes(&rebalances)["session-timeout"].as_u64().unwrap() >= 1);
    // The members saw it too: while m1 was paused, another member was assigned m1's partition.
    let first = |member: &str| {
        events
            .iter()
            .find(|e| e["event"] == "rebalance" && e["member"] == member)
            .unwrap_or_else(|| panic!("{member} joined: {events:?}"))["assigned"]
            .clone()
    };
    let m1_partition = first("m1")[0].clone();
    let paused_at = events.iter().find(|e| e["event"] == "paused").unwrap()["at_ms"]
        .as_i64()
        .unwrap();
    let resumed_at = events.iter().find(|e| e["event"] == "resumed").unwrap()["at_ms"]
        .as_i64()
        .unwrap();
    assert!(
        events.iter().any(|e| e["event"] == "rebalance"
            && e["member"] != "m1"
            && (paused_at..resumed_at).contains(&e["at_ms"].as_i64().unwrap())
            && e["assigned"].as_array().unwrap().contains(&m1_partition)),
        "m1's partition {m1_partition} moved to another member during the pause: {events:?}"
    );

    let (code, judged, rebalances, _, log) = scenario("rebalance-session-timeout-longer");
    assert_eq!(code, Some(0), "{judged:#}\n{log}");
    assert!(causes(&rebalances).is_empty(), "{rebalances:#}");
}

#[test]
fn batches_that_outlast_max_poll_interval_fire_the_poll_clock() {
    let (code, judged, rebalances, _, log) = scenario("rebalance-poll-timeout");
    assert_eq!(code, Some(0), "{judged:#}\n{log}");
    let causes = causes(&rebalances);
    assert!(causes["poll-timeout"].as_u64().unwrap() >= 1, "{causes:?}");
    assert!(
        !causes.contains_key("session-timeout"),
        "the heartbeat thread kept every session alive: {causes:?}"
    );
}

#[test]
fn a_killed_coordinators_group_is_loaded_by_the_next_with_its_offsets() {
    let (code, judged, rebalances, _, log) = scenario("rebalance-coordinator-moved");
    assert_eq!(code, Some(0), "{judged:#}\n{log}");
    assert!(
        rebalances["loads_after_settle"].as_u64().unwrap() >= 1,
        "{rebalances:#}"
    );
    let resumed = rebalances["resumed_after_coordinator_fault"]
        .as_array()
        .unwrap();
    assert!(
        !resumed.is_empty(),
        "members took partitions over after the kill"
    );
    let before = rebalances["committed_before_coordinator_fault"]
        .as_object()
        .unwrap();
    assert!(!before.is_empty(), "members had committed before the kill");
    for taken in resumed {
        let partition = taken[1].to_string();
        if let Some(committed) = before.get(&partition) {
            assert!(
                taken[2].as_i64() >= committed.as_i64(),
                "{taken} started below the committed {committed}"
            );
        }
    }
}

#[test]
fn a_partition_added_to_the_topic_is_rebalanced_to_a_member() {
    let (code, judged, rebalances, events, log) = scenario("rebalance-partition-added");
    assert_eq!(code, Some(0), "{judged:#}\n{log}");
    assert!(causes(&rebalances)["metadata-change"].as_u64().unwrap() >= 1);
    let added_at = events
        .iter()
        .find(|e| e["event"] == "partitions-added")
        .unwrap_or_else(|| panic!("the topic grew: {events:?}"))["at_ms"]
        .as_i64()
        .unwrap();
    assert!(
        events.iter().any(|e| e["event"] == "rebalance"
            && e["at_ms"].as_i64().unwrap() > added_at
            && e["assigned"]
                .as_array()
                .unwrap()
                .contains(&serde_json::json!(3))),
        "the new partition 3 was assigned to a member: {events:?}"
    );
}
