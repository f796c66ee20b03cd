//! Table tests of loss attribution: each mechanism from the events that prove it, and
//! `unattributed` when the history shows nothing.

use logjam_history::{Function, NemesisEvent, OpIndex};
use serde_json::json;

use super::*;

const S: u64 = 1_000_000_000;

fn event(time_s: u64, f: &str, targets: &[&str], value: serde_json::Value) -> NemesisEvent {
    NemesisEvent {
        index: OpIndex(time_s),
        invoke_index: None,
        start_time_ns: time_s * S,
        time_ns: time_s * S,
        f: Function::from_name(f),
        targets: targets.iter().map(|t| (*t).to_owned()).collect(),
        value,
    }
}

fn leader_change(
    time_s: u64,
    leader: Option<&str>,
    isr: &[&str],
    previous: Option<&str>,
    unclean: bool,
) -> NemesisEvent {
    event(
        time_s,
        "leader-change",
        &[],
        json!({
            "partition": 0, "leader": leader, "epoch": time_s, "isr": isr,
            "previous_leader": previous, "previous_isr": [], "unclean": unclean,
        }),
    )
}

#[test]
fn each_mechanism_from_the_events_that_prove_it() {
    let shrink = leader_change(2, Some("n1"), &["n1"], Some("n1"), false);
    let full = leader_change(1, Some("n1"), &["n1", "n2", "n3"], Some("n1"), false);
    let unclean = leader_change(10, Some("n2"), &["n2"], Some("n1"), true);
    let clean = leader_change(10, Some("n2"), &["n2", "n3"], Some("n1"), false);
    let power_n1 = event(8, "power-loss", &["n1"], json!({"targets": ["n1"]}));
    let power_all = event(8, "power-loss", &["n1", "n2", "n3"], json!({}));
    let shrink_power = event(
        8,
        "isr-shrink-power-loss",
        &["n1", "n2", "n3"],
        json!({"leader": "n1"}),
    );
    let reelected = leader_change(12, Some("n1"), &["n1"], None, false);
    // (name, acks, events, ack time s, expected)
    #[allow(clippy::type_complexity)]
    let table: Vec<(&str, Option<&str>, Vec<NemesisEvent>, u64, Mechanism)> = vec![
        ("acks=1", Some("1"), vec![], 5, Mechanism::Acks1),
        (
            "isr of one at ack",
            Some("all"),
            vec![full.clone(), shrink.clone(), unclean.clone()],
            5,
            Mechanism::IsrOfOne,
        ),
        (
            "full isr, then unclean",
            Some("all"),
            vec![full.clone(), unclean.clone()],
            5,
            Mechanism::UncleanElection,
        ),
        (
            "acked before the shrink: not isr-of-one",
            Some("all"),
            vec![full.clone(), shrink.clone(), unclean.clone()],
            1,
            Mechanism::UncleanElection,
        ),
        (
            "power loss of the sole isr member, re-elected",
            Some("all"),
            vec![full.clone(), shrink_power.clone(), reelected.clone()],
            1,
            Mechanism::LastReplicaTruncated,
        ),
        (
            "power loss of every isr member",
            Some("all"),
            vec![full.clone(), power_all.clone()],
            5,
            Mechanism::UnflushedTail,
        ),
        (
            "power loss of one member only",
            Some("all"),
            vec![full.clone(), power_n1.clone()],
            5,
            Mechanism::Unattributed,
        ),
        (
            "clean election after the ack",
            Some("all"),
            vec![full.clone(), clean.clone()],
            5,
            Mechanism::DivergentTruncation,
        ),
        (
            "election before the ack only",
            Some("all"),
            vec![full.clone(), clean.clone()],
            11,
            Mechanism::Unattributed,
        ),
        (
            "nothing in the history",
            None,
            vec![],
            5,
            Mechanism::Unattributed,
        ),
    ];
    for (name, acks, events, ack_s, expected) in table {
        let evidence = Evidence::new(acks, &events);
        assert_eq!(
            evidence.attribute(Some(0), 0, ack_s * S, 60 * S),
            expected,
            "{name}"
        );
    }
}

#[test]
fn another_partitions_events_prove_nothing() {
    let shrink = leader_change(2, Some("n1"), &["n1"], Some("n1"), false);
    let evidence = Evidence::new(Some("all"), &[shrink]);
    assert_eq!(
        evidence.attribute(Some(1), 0, 5 * S, 60 * S),
        Mechanism::Unattributed
    );
    assert_eq!(
        evidence.attribute(None, 0, 5 * S, 60 * S),
        Mechanism::Unattributed
    );
    assert_eq!(
        evidence.attribute(Some(0), 0, 5 * S, 60 * S),
        Mechanism::IsrOfOne
    );
}

#[test]
fn the_nemesis_isr_shrunk_op_shows_the_isr_of_one() {
    let shrunk = event(
        3,
        "isr-shrunk",
        &[],
        json!({"partition": 0, "leader": "n4", "isr": ["n4"]}),
    );
    let evidence = Evidence::new(Some("all"), &[shrunk]);
    assert_eq!(
        evidence.attribute(Some(0), 0, 4 * S, 60 * S),
        Mechanism::IsrOfOne
    );
    assert_eq!(
        evidence.attribute(Some(0), 0, 2 * S, 60 * S),
        Mechanism::Unattributed
    );
    assert_eq!(
        counts([
            Mechanism::IsrOfOne,
            Mechanism::IsrOfOne,
            Mechanism::Unattributed
        ]),
        BTreeMap::from([("isr-of-one".to_owned(), 2), ("unattributed".to_owned(), 1)])
    );
}

#[test]
fn a_write_invoked_after_the_cut_and_acknowledged_before_the_shrink_was_seen_had_an_isr_of_one() {
    // The fault cut n5's followers at 10 s and saw the ISR shrink at 40 s; a leader change to
    // an out-of-sync follower follows at 50 s (unclean election).
    let shrunk = event(
        40,
        "isr-shrunk",
        &[],
        json!({"partition": 0, "leader": "n5", "isr": ["n5"], "waited_ms": 30_000}),
    );
    let unclean = leader_change(50, Some("n4"), &["n4"], Some("n5"), true);
    let evidence = Evidence::new(Some("all"), &[shrunk, unclean]);
    // Invoked after the cut, acknowledged the instant the shrink released it, before the
    // nemesis saw the shrink: only the leader had it.
    assert_eq!(
        evidence.attribute(Some(0), 31 * S, 39 * S, 60 * S),
        Mechanism::IsrOfOne
    );
    // Invoked before the cut: the followers may have had it; the ack proves nothing.
    assert_eq!(
        evidence.attribute(Some(0), 9 * S, 39 * S, 60 * S),
        Mechanism::UncleanElection
    );
    // Another partition's cut proves nothing about this one.
    assert_eq!(
        evidence.attribute(Some(1), 31 * S, 39 * S, 60 * S),
        Mechanism::Unattributed
    );
    // Without the wait recorded (older histories) the cut time is unknown: as before.
    let old = event(
        40,
        "isr-shrunk",
        &[],
        json!({"partition": 0, "leader": "n5", "isr": ["n5"]}),
    );
    let evidence = Evidence::new(
        Some("all"),
        &[
            old,
            leader_change(50, Some("n4"), &["n4"], Some("n5"), true),
        ],
    );
    assert_eq!(
        evidence.attribute(Some(0), 31 * S, 39 * S, 60 * S),
        Mechanism::UncleanElection
    );
}
