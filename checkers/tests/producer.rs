//! The producer checker on hand-written histories, both ways: each case is a producer history
//! written out as JSONL with the `reordered-send` and `duplicate` counts it must show (zero
//! where the history does not prove the anomaly).

use logjam_checkers::{AnomalyKind, Report, Verdict, check_reader};

const HEADER: &str = r#"{"schema_version":1,"workload":"producer","seed":1,"start_time":"2026-01-01T00:00:00Z","nodes":["n1","n2","n3"],"config":{}}"#;

/// One send of a `produce` completion: (seq, key, value, outcome, offset, attempts).
type Send = (u64, i64, i64, &'static str, Option<i64>, u32);

/// A history builder that writes JSONL lines by hand.
struct Lines {
    lines: Vec<String>,
    index: u64,
}

impl Lines {
    fn new() -> Lines {
        Lines {
            lines: vec![HEADER.to_owned()],
            index: 0,
        }
    }

    fn line(&mut self, process: u64, op_type: &str, f: &str, value: &str) {
        let index = self.index;
        self.index += 1;
        self.lines.push(format!(
            r#"{{"index":{index},"time":{},"process":{process},"type":"{op_type}","f":"{f}","value":{value}}}"#,
            index * 1000
        ));
    }

    /// One `produce` op of `process` whose sends ended as given; the op's type follows the
    /// workload's rule (info if any send is info, fail if none acknowledged, else ok).
    fn produce(&mut self, process: u64, sends: &[Send]) -> &mut Lines {
        let invoked: Vec<String> = sends
            .iter()
            .map(|(seq, key, value, ..)| format!(r#"{{"seq":{seq},"key":{key},"value":{value}}}"#))
            .collect();
        self.line(
            process,
            "invoke",
            "produce",
            &format!(r#"{{"sends":[{}]}}"#, invoked.join(",")),
        );
        let done: Vec<String> = sends
            .iter()
            .map(|(seq, key, value, outcome, offset, attempts)| {
                let offset = offset.map_or(String::new(), |o| format!(r#","offset":{o}"#));
                format!(
                    r#"{{"seq":{seq},"key":{key},"value":{value},"outcome":"{outcome}"{offset},"attempts":{attempts},"blocked_us":5,"latency_us":2000}}"#
                )
            })
            .collect();
        let op_type = if sends.iter().any(|s| s.3 == "info") {
            "info"
        } else if sends.iter().all(|s| s.3 == "fail") {
            "fail"
        } else {
            "ok"
        };
        self.line(
            process,
            op_type,
            "produce",
            &format!(r#"{{"sends":[{}]}}"#, done.join(",")),
        );
        self
    }

    /// A final poll of `key` returning `(offset, value)` records.
    fn final_poll(&mut self, key: i64, records: &[(i64, i64)]) -> &mut Lines {
        let records: Vec<String> = records.iter().map(|(o, v)| format!("[{o},{v}]")).collect();
        self.line(99, "invoke", "final-poll", r#"[["poll"]]"#);
        self.line(
            99,
            "ok",
            "final-poll",
            &format!(r#"[["poll",{{"{key}":[{}]}}]]"#, records.join(",")),
        );
        self
    }

    fn check(&self) -> Report {
        let text = self.lines.join("\n") + "\n";
        check_reader(text.as_bytes()).expect("a well-formed history")
    }
}

fn counts(report: &Report) -> (u64, u64) {
    let count = |kind| report.anomalies.get(&kind).map_or(0, |g| g.count);
    (
        count(AnomalyKind::ReorderedSend),
        count(AnomalyKind::Duplicate),
    )
}

#[test]
fn reordered_and_duplicated_sends_are_found_and_only_when_proven() {
    type Case = (&'static str, fn(&mut Lines), (u64, u64));
    let cases: &[Case] = &[
        (
            "in order: later send at a higher offset",
            |h| {
                h.produce(
                    0,
                    &[(0, 0, 1, "ok", Some(3), 1), (1, 0, 2, "ok", Some(4), 1)],
                )
                .final_poll(0, &[(3, 1), (4, 2)]);
            },
            (0, 0),
        ),
        (
            "retried first batch landed after the second: reordered",
            |h| {
                h.produce(
                    0,
                    &[(0, 0, 1, "ok", Some(5), 2), (1, 0, 2, "ok", Some(3), 1)],
                )
                .final_poll(0, &[(3, 2), (5, 1)]);
            },
            (1, 0),
        ),
        (
            "reordered across two ops of one producer",
            |h| {
                h.produce(0, &[(0, 0, 1, "ok", Some(9), 3)])
                    .produce(0, &[(1, 0, 2, "ok", Some(4), 1)])
                    .final_poll(0, &[(4, 2), (9, 1)]);
            },
            (1, 0),
        ),
        (
            "two producers interleave: no order between them",
            |h| {
                h.produce(0, &[(1, 0, 1, "ok", Some(3), 1)])
                    .produce(1, &[(0, 0, 2, "ok", Some(5), 1)])
                    .final_poll(0, &[(3, 1), (5, 2)]);
            },
            (0, 0),
        ),
        (
            "two keys: offsets of different partitions are not comparable",
            |h| {
                h.produce(
                    0,
                    &[(0, 0, 1, "ok", Some(7), 1), (1, 1, 2, "ok", Some(2), 1)],
                )
                .final_poll(0, &[(7, 1)])
                .final_poll(1, &[(2, 2)]);
            },
            (0, 0),
        ),
        (
            "a failed or indeterminate earlier send proves no order",
            |h| {
                h.produce(
                    0,
                    &[
                        (0, 0, 1, "info", None, 3),
                        (1, 0, 2, "fail", None, 1),
                        (2, 0, 3, "ok", Some(0), 1),
                    ],
                )
                .final_poll(0, &[(0, 3)]);
            },
            (0, 0),
        ),
        (
            "one value read at two offsets: duplicate",
            |h| {
                h.produce(0, &[(0, 0, 1, "ok", Some(4), 2)])
                    .final_poll(0, &[(3, 1), (4, 1)]);
            },
            (0, 1),
        ),
        (
            "acknowledged at one offset, read at another only: not proven a duplicate",
            |h| {
                h.produce(0, &[(0, 0, 1, "ok", Some(4), 2)])
                    .final_poll(0, &[(3, 1)]);
            },
            (0, 0),
        ),
        (
            "the same value read twice at the same offset: no duplicate",
            |h| {
                h.produce(0, &[(0, 0, 1, "ok", Some(3), 1)])
                    .final_poll(0, &[(3, 1)])
                    .final_poll(0, &[(3, 1)]);
            },
            (0, 0),
        ),
        (
            "retries both ways: reordered and duplicated",
            |h| {
                h.produce(
                    0,
                    &[
                        (0, 0, 1, "ok", Some(8), 2),
                        (1, 0, 2, "ok", Some(7), 2),
                        (2, 0, 3, "ok", Some(9), 1),
                    ],
                )
                .final_poll(0, &[(5, 1), (6, 2), (7, 2), (8, 1), (9, 3)]);
            },
            (1, 2),
        ),
    ];
    for (name, build, expected) in cases {
        let mut history = Lines::new();
        build(&mut history);
        let report = history.check();
        assert_eq!(counts(&report), *expected, "{name}: {}", report.summary());
        let verdict = if *expected == (0, 0) {
            Verdict::Valid
        } else {
            Verdict::Invalid
        };
        assert_eq!(report.verdict, verdict, "{name}: {}", report.summary());
    }
}

#[test]
fn the_witness_names_both_sends_and_the_summary_the_send_figures() {
    let mut history = Lines::new();
    history
        .produce(
            3,
            &[(0, 0, 11, "ok", Some(6), 2), (1, 0, 12, "ok", Some(5), 1)],
        )
        .final_poll(0, &[(5, 12), (6, 11)]);
    let report = history.check();
    let witness = &report.anomalies[&AnomalyKind::ReorderedSend].witnesses[0];
    assert!(
        witness
            .explanation
            .contains("value 11 (send #0) before value 12 (send #1)")
            && witness.explanation.contains("offsets 6 and 5")
            && witness.explanation.contains("final reads found both"),
        "{}",
        witness.explanation
    );
    let summary = report.summary();
    assert!(
        summary.contains("2 submitted, 2 acknowledged (1 of them retried)")
            && summary.contains("send latency")
            && summary.contains("send() blocked"),
        "{summary}"
    );
    let producer = report.producer().expect("producer figures");
    assert_eq!(producer.ack_latency.count, 2);
    assert!((producer.ack_latency.p50_ms - 2.0).abs() < 1e-9);
}

#[test]
fn nothing_read_and_nothing_reordered_is_unknown_not_valid() {
    let mut history = Lines::new();
    history.produce(0, &[(0, 0, 1, "ok", Some(0), 1)]);
    assert_eq!(history.check().verdict, Verdict::Unknown);
}

#[test]
fn an_unreadable_produce_value_is_a_warning_naming_the_op() {
    let mut history = Lines::new();
    history.line(0, "invoke", "produce", r#"{"sends":[{"seq":0}]}"#);
    history.line(0, "ok", "produce", r#"{"sends":[{"seq":0}]}"#);
    let report = history.check();
    assert!(
        report
            .warnings
            .iter()
            .any(|w| w.contains("op 1") && w.contains("cannot read")),
        "{:?}",
        report.warnings
    );
}
