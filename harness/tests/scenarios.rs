//! `logjam scenario` end to end on the namespace lab: the unclean-election loss and its
//! disabled twin show their outcomes, and every canary (a deliberate bug switched on in the
//! node) is caught by the checkers with the anomaly its scenario names. Each scenario is a
//! real multi-process cluster under a scripted fault timeline. The producer post's
//! retry-reorder shows reordered and duplicated sends, and its idempotent twin shows none. The
//! transaction canaries are caught by the txn workload's read-committed checker.
//!
//! The runs take a lock under `cargo test`; under nextest the `lab` group bounds them
//! (`support`).

mod support;

/// Runs a shipped scenario and returns its scenario.json, asserting the outcome was shown.
fn shows(name: &str) -> serde_json::Value {
    let (code, judged, log) = scenario(name, &[]);
    assert_eq!(code, Some(0), "{name} showed its expected outcome\n{log}");
    assert_eq!(judged["shown"], true, "{judged:#}");
    judged
}

/// Runs a canary's scenario with the canary switched off: the anomaly must not appear.
fn twin_without_canary_lacks(name: &str, anomaly: &str) {
    let (code, judged, log) = scenario(name, &["--set", "logjam.canaries="]);
    assert_eq!(
        code,
        Some(1),
        "without the canary {name} shows nothing\n{log}"
    );
    let check = judged["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|check| check["expect"] == anomaly)
        .unwrap_or_else(|| panic!("{judged:#}"))
        .clone();
    assert_eq!(check["holds"], false, "{check}");
}

fn scenario(name: &str, extra: &[&str]) -> (Option<i32>, serde_json::Value, String) {
    let (output, results) = support::run_scenario(name, extra);
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    let judged: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(results.path().join("latest/scenario.json"))
            .unwrap_or_else(|_| panic!("{name} stored scenario.json\n{stdout}\n{stderr}")),
    )
    .unwrap();
    (output.status.code(), judged, format!("{stdout}\n{stderr}"))
}

fn evidence(judged: &serde_json::Value, expect: &str) -> String {
    judged["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|check| check["expect"] == expect)
        .map(|check| check["evidence"].as_str().unwrap().to_owned())
        .unwrap_or_else(|| panic!("no check {expect} in {judged:#}"))
}

#[test]
fn unclean_election_loses_acknowledged_writes_and_names_the_election() {
    let judged = shows("unclean-election-loss");
    let lost = evidence(&judged, "lost");
    assert!(
        lost.contains("elected") && lost.contains("outside the ISR"),
        "the report names the election that lost the writes: {lost}"
    );
    assert_eq!(judged["verdict"], "invalid");
}

#[test]
fn with_unclean_election_disabled_nothing_is_lost_and_the_partition_goes_offline() {
    let judged = shows("unclean-election-disabled");
    assert!(evidence(&judged, "no-loss").starts_with("0 "));
    assert!(evidence(&judged, "unavailable").contains("without a leader"));
}

#[test]
fn without_canaries_the_isolated_leader_timeline_loses_nothing() {
    // The timeline the ack, high-watermark and read canaries use, with acks=all.
    shows("leader-isolation-acks-all");
}

#[test]
fn canary_ack_before_replication_is_caught() {
    shows("canary-ack-before-replication");
}

#[test]
fn canary_hw_before_replication_is_caught() {
    shows("canary-hw-before-replication");
}

#[test]
fn canary_read_above_high_watermark_is_caught() {
    shows("canary-read-above-high-watermark");
    // Its clients give up on sends sooner than the shared timeline's, so it has its own twin.
    twin_without_canary_lacks(
        "canary-read-above-high-watermark",
        "anomaly:inconsistent-offsets",
    );
}

#[test]
fn canary_skip_idempotent_dedupe_is_caught() {
    shows("canary-skip-idempotent-dedupe");
    twin_without_canary_lacks("canary-skip-idempotent-dedupe", "anomaly:duplicate");
}

#[test]
fn canary_skip_follower_truncation_is_caught() {
    shows("canary-skip-follower-truncation");
    twin_without_canary_lacks(
        "canary-skip-follower-truncation",
        "anomaly:inconsistent-offsets",
    );
}

#[test]
fn canary_read_committed_ignores_lso_is_caught() {
    // Fault-free: the txn workload's own aborts are what a read past the LSO exposes. Its
    // twin is txn_workload's fault-free runs, valid with the same workload.
    let judged = shows("canary-read-committed-ignores-lso");
    assert!(
        evidence(&judged, "anomaly:read-above-lso").contains("read-above-lso"),
        "{judged:#}"
    );
}

#[test]
fn canary_commit_before_markers_is_caught_and_its_twin_is_not() {
    shows("canary-commit-before-markers");
    // The same leader kills with markers retried: every committed transaction's markers land,
    // and no read_committed reader is held for good.
    twin_without_canary_lacks(
        "canary-commit-before-markers",
        "anomaly:hanging-transaction",
    );
}

#[test]
fn retried_batches_without_idempotence_land_reordered_and_twice() {
    let judged = shows("retry-reorder");
    let retried = evidence(&judged, "retried");
    assert!(!retried.starts_with("0 "), "{retried}");
    assert_eq!(judged["verdict"], "invalid");
}

#[test]
fn the_idempotent_twin_is_retried_yet_neither_reorders_nor_duplicates() {
    let judged = shows("retry-reorder-idempotent");
    assert_eq!(judged["verdict"], "valid");
    let retried = evidence(&judged, "retried");
    assert!(
        !retried.starts_with("0 "),
        "the stalls hit sends in flight: {retried}"
    );
}
