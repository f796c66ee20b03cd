//! Tests of `metrics.rs`.

use super::*;

const HEADER: &str = r#"{"schema_version":1,"workload":"queue","seed":9,"start_time":"2026-01-01T00:00:00Z","nodes":["n1","n2"],"config":{}}"#;

/// One op line: time in ms, process, type, f, value (JSON text).
type Row = (u64, String, &'static str, &'static str, String);

/// Writes a history from `rows`, sorted by time (stable), indices in that order.
fn history(rows: &[Row]) -> String {
    let mut sorted: Vec<&Row> = rows.iter().collect();
    sorted.sort_by_key(|row| row.0);
    let mut text = format!("{HEADER}\n");
    for (index, (ms, process, op_type, f, value)) in sorted.into_iter().enumerate() {
        text.push_str(&format!(
            r#"{{"index":{index},"time":{},"process":{process},"type":"{op_type}","f":"{f}","value":{value}}}"#,
            ms * 1_000_000
        ));
        text.push('\n');
    }
    text
}

fn scan(text: &str) -> HistoryMetrics {
    scan_history(HistoryReader::new(text.as_bytes()).unwrap()).unwrap()
}

/// A send of `value` to `key` by process `p`: invoke at `from` ms, completion at `to` ms.
fn send(p: u64, key: i64, value: i64, from: u64, to: u64, outcome: &'static str) -> [Row; 2] {
    let completion = if outcome == "ok" {
        format!(r#"[["send",{key},[{value},{value}]]]"#)
    } else {
        format!(r#"[["send",{key},[null,{value}]]]"#)
    };
    let invoke = format!(r#"[["send",{key},{value}]]"#);
    [
        (from, p.to_string(), "invoke", "send", invoke),
        (to, p.to_string(), outcome, "send", completion),
    ]
}

fn final_poll(ms: u64) -> Row {
    (
        ms,
        "9".into(),
        "invoke",
        "final-poll",
        r#"[["poll"]]"#.into(),
    )
}

fn leader_change(ms: u64, value: &str) -> Row {
    (
        ms,
        r#""nemesis""#.into(),
        "info",
        "leader-change",
        value.into(),
    )
}

/// An outage opens at the first refused send after an ok and closes at the next ok; the
/// refusals before the key's first ok do not count.
#[test]
fn refused_time_runs_from_the_first_refusal_after_an_ok_to_the_next_ok() {
    let mut ops = Vec::new();
    ops.extend(send(0, 0, 1, 0, 100, "fail")); // before any ok: not counted
    ops.extend(send(0, 0, 2, 200, 1_000, "ok")); // accepting from 1.0 s
    ops.extend(send(0, 0, 3, 1_100, 2_000, "info")); // outage starts at 2.0 s
    ops.extend(send(0, 0, 4, 2_100, 2_500, "fail")); // still refusing
    ops.extend(send(0, 0, 5, 2_600, 3_500, "ok")); // ends at 3.5 s: 1.5 s
    ops.extend(send(1, 1, 1, 0, 500, "ok")); // key 1 never refuses
    ops.push(final_poll(4_000));
    let metrics = scan(&history(&ops));
    let refused = metrics.refused;
    assert_eq!(refused.per_key.get(&0), Some(&1.5));
    assert_eq!(refused.per_key.get(&1), Some(&0.0));
    assert_eq!(refused.max_seconds, 1.5);
    assert_eq!(refused.mean_seconds, 0.75);
    assert!(refused.never_acknowledged.is_empty());
}

/// An outage still open when the workload ends is closed at the first final-poll, and
/// completions after it are ignored; a key that never acknowledged is listed apart.
#[test]
fn an_open_outage_ends_at_the_first_final_poll() {
    let mut ops = Vec::new();
    ops.extend(send(0, 0, 1, 0, 1_000, "ok"));
    ops.extend(send(0, 0, 2, 1_500, 2_000, "fail")); // outage from 2.0 s
    ops.extend(send(1, 2, 1, 0, 3_000, "info")); // key 2: never acknowledged
    ops.push(final_poll(5_000));
    ops.extend(send(2, 0, 3, 5_500, 6_000, "ok")); // after the workload: ignored
    let refused = scan(&history(&ops)).refused;
    assert_eq!(refused.per_key.get(&0), Some(&3.0));
    assert_eq!(refused.max_seconds, 3.0);
    assert_eq!(refused.mean_seconds, 3.0);
    assert_eq!(refused.never_acknowledged, vec![2]);
}

/// Concurrent sends interleave: what matters is the order of completions, whichever
/// process they come from; an ok completion closes the outage even if it was invoked
/// before the refusal.
#[test]
fn outages_follow_completion_order_across_processes() {
    let mut ops = Vec::new();
    ops.extend(send(0, 0, 1, 0, 100, "ok"));
    ops.extend(send(1, 0, 2, 150, 400, "ok")); // invoked before the refusal, completes after
    ops.extend(send(0, 0, 3, 200, 300, "fail")); // outage 0.3 s .. 0.4 s
    let refused = scan(&history(&ops)).refused;
    let key0 = refused.per_key[&0];
    assert!((key0 - 0.1).abs() < 1e-9, "{key0}");
}

#[test]
fn leader_changes_are_counted_and_unclean_ones_kept() {
    let text = history(&[
        leader_change(
            100,
            r#"{"partition":0,"leader":"n2","epoch":5,"isr":["n2"],"previous_leader":"n1","previous_isr":["n1","n2"],"unclean":false}"#,
        ),
        leader_change(
            2_500,
            r#"{"partition":1,"leader":"n3","epoch":7,"isr":["n3"],"previous_leader":"n1","previous_isr":["n1"],"unclean":true}"#,
        ),
        leader_change(
            3_000,
            r#"{"partition":2,"leader":null,"epoch":8,"isr":[],"previous_leader":"n1","previous_isr":["n1"],"unclean":false}"#,
        ),
        (
            3_100,
            r#""nemesis""#.into(),
            "info",
            "kill",
            r#"{"targets":["n1"]}"#.into(),
        ),
        // Another partition's leader does not end partition 2's outage; its own does.
        leader_change(
            4_000,
            r#"{"partition":0,"leader":"n3","epoch":6,"isr":["n3"],"previous_leader":"n2","previous_isr":["n2","n3"],"unclean":false}"#,
        ),
        leader_change(
            4_500,
            r#"{"partition":2,"leader":"n1","epoch":9,"isr":["n1"],"previous_leader":null,"previous_isr":["n1"],"unclean":false}"#,
        ),
    ]);
    let metrics = scan(&text);
    assert_eq!(metrics.leader_changes, 5);
    let unclean = LeaderChange {
        index: 1,
        time_seconds: 2.5,
        change: LeadershipChange {
            partition: 1,
            leader: Some("n3".into()),
            epoch: 7,
            isr: vec!["n3".into()],
            previous_leader: Some("n1".into()),
            previous_isr: vec!["n1".into()],
            unclean: true,
        },
        leaderless_seconds: None,
    };
    assert_eq!(metrics.unclean_elections, vec![unclean.clone()]);
    assert_eq!(
        unclean.describe(),
        "op 1 at 2.5 s: partition 1 elected n3 (epoch 7) outside the ISR [n1] led by n1"
    );
    assert_eq!(metrics.leaderless.len(), 1);
    assert_eq!(
        metrics.leaderless[0].describe(),
        "op 2 at 3.0 s: partition 2 without a leader for 1.5 s (ISR [])"
    );
}

#[test]
fn outcome_reads_a_stored_run() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("run.json"),
        r#"{"seed": 9, "node_settings": {"min.insync.replicas": "2"},
            "client_settings": {"acks": "all"}, "replication_factor": 3}"#,
    )
    .unwrap();
    std::fs::write(
        dir.path().join("report.json"),
        r#"{"verdict": "invalid", "reason": "lost writes", "bad_kinds": ["lost-write"],
            "allowed_kinds": ["unseen"],
            "anomalies": {"lost-write": {"count": 2, "truncated": false, "witnesses": []},
                          "unseen": {"count": 1, "truncated": false, "witnesses": []}},
            "durability": {"final_reads": "final-poll", "acknowledged": 40, "lost": 2,
                           "unconfirmed": 1, "nemesis_events": [], "partitions": [
                {"key": 0, "acknowledged": 30, "lost_count": 2, "unconfirmed": 1,
                 "offset_ranges": [{"first": 4, "last": 5, "count": 2}], "lost": []},
                {"key": 1, "acknowledged": 10, "lost_count": 0, "unconfirmed": 0,
                 "offset_ranges": [], "lost": []}]}}"#,
    )
    .unwrap();
    let mut ops = Vec::new();
    ops.extend(send(0, 0, 1, 0, 1_000, "ok"));
    std::fs::write(dir.path().join("history.jsonl"), history(&ops)).unwrap();

    let outcome = outcome(dir.path()).unwrap();
    assert_eq!(outcome.seed, 9);
    assert_eq!(outcome.verdict, "invalid");
    assert_eq!((outcome.acknowledged, outcome.lost), (40, 2));
    assert_eq!(outcome.settings["acks"], "all");
    assert_eq!(outcome.settings["min.insync.replicas"], "2");
    assert_eq!(outcome.settings["replication.factor"], "3");
    assert_eq!(
        outcome.anomalies["lost-write"],
        AnomalyCount {
            count: 2,
            bad: true
        }
    );
    assert!(!outcome.anomalies["unseen"].bad);
    assert_eq!(outcome.refused.per_key.get(&0), Some(&0.0));
    assert_eq!(
        outcome.lost_by_key,
        vec![LostOnKey {
            key: 0,
            count: 2,
            offsets: vec![OffsetRange { first: 4, last: 5 }]
        }]
    );
}
