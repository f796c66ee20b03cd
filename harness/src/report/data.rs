//! What a run page says besides its plots, read from `run.json` and `report.json` as plain
//! JSON: the verdict, seed, replay command, the settings that differ from Kafka's defaults,
//! every anomaly kind with its witnesses, and the durability table. Anomalies are read
//! generically (kind, count, explanation, the op indexes of each witness, any other field as
//! JSON) so kinds the checkers add later show up without a change here. Pure.

use std::collections::BTreeSet;

use serde_json::Value;

/// Kafka 4's defaults of the settings a run may change (`kafka-semantics.md`), for the
/// "differs from Kafka's defaults" table. `replication.factor` stands for the broker's
/// `default.replication.factor`.
const KAFKA_DEFAULTS: &[(&str, &str)] = &[
    ("acks", "all"),
    ("enable.idempotence", "true"),
    ("linger.ms", "5"),
    ("batch.size", "16384"),
    ("retries", "2147483647"),
    ("delivery.timeout.ms", "120000"),
    ("request.timeout.ms", "30000"),
    ("max.in.flight.requests.per.connection", "5"),
    ("min.insync.replicas", "1"),
    ("unclean.leader.election.enable", "false"),
    ("replication.factor", "1"),
    ("log.flush.interval.messages", "9223372036854775807"),
];

/// A setting and Kafka's default for it (`None`: not one logjam knows).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Setting {
    /// The key.
    pub key: String,
    /// The run's value.
    pub value: String,
    /// Kafka's default.
    pub default: Option<String>,
}

/// One witnessed case of an anomaly, as report.json gives it.
#[derive(Debug, Clone, PartialEq)]
pub struct Witness {
    /// What happened, in words.
    pub explanation: String,
    /// The key, when it has one.
    pub key: Option<String>,
    /// The op indexes it names (its `ops`, then any cycle's `from`/`to`), in first-named order.
    pub ops: Vec<u64>,
    /// Every other field, as `name: compact JSON`.
    pub details: Vec<(String, String)>,
}

/// All cases of one kind.
#[derive(Debug, Clone, PartialEq)]
pub struct AnomalyKindView {
    /// Its name (`lost-write`, `G1c`, ...).
    pub kind: String,
    /// Cases found.
    pub count: u64,
    /// True when the policy forbids it.
    pub bad: bool,
    /// The witnesses report.json keeps (perhaps fewer than `count`).
    pub witnesses: Vec<Witness>,
}

/// One partition's line of the durability table.
#[derive(Debug, Clone, PartialEq)]
pub struct DurabilityRow {
    /// The key (one partition).
    pub key: String,
    /// Acknowledged writes.
    pub acknowledged: u64,
    /// Lost.
    pub lost: u64,
    /// Unconfirmed.
    pub unconfirmed: u64,
    /// Lost offsets as `first–last` ranges.
    pub offsets: Vec<String>,
    /// Op indexes of the lost writes.
    pub lost_ops: Vec<u64>,
    /// Every other field (an attribution, when the checkers give one), as JSON.
    pub details: Vec<(String, String)>,
}

/// The run page's text parts.
#[derive(Debug, Clone, PartialEq)]
pub struct RunSummary {
    /// `valid`, `invalid`, `unknown`.
    pub verdict: String,
    /// The checker's reason.
    pub reason: String,
    /// The workload.
    pub workload: String,
    /// The seed.
    pub seed: String,
    /// When it started.
    pub started: String,
    /// How to run it again.
    pub replay: String,
    /// The faults asked for.
    pub nemesis: Vec<String>,
    /// Nodes, time limit, rate, concurrency, keys: `name: value`.
    pub shape: Vec<(String, String)>,
    /// The settings the run was given, those equal to Kafka's default left out.
    pub settings: Vec<Setting>,
    /// Every anomaly kind found.
    pub anomalies: Vec<AnomalyKindView>,
    /// Acknowledged, lost, unconfirmed over the run.
    pub durability_totals: (u64, u64, u64),
    /// Per partition with something lost or unconfirmed.
    pub durability: Vec<DurabilityRow>,
    /// Checker warnings.
    pub warnings: Vec<String>,
}

impl RunSummary {
    /// Reads the two files' JSON; missing fields read as empty.
    pub fn from_json(run: &Value, report: &Value) -> RunSummary {
        let text = |value: &Value, key: &str| value.get(key).map(compact).unwrap_or_default();
        let mut settings = Vec::new();
        for group in ["node_settings", "client_settings"] {
            if let Some(map) = run.get(group).and_then(Value::as_object) {
                for (key, value) in map {
                    settings.push((key.clone(), compact(value)));
                }
            }
        }
        if let Some(factor) = run.get("replication_factor") {
            settings.push(("replication.factor".to_owned(), compact(factor)));
        }
        let settings = settings
            .into_iter()
            .filter_map(|(key, value)| {
                let default = KAFKA_DEFAULTS
                    .iter()
                    .find(|(name, _)| *name == key)
                    .map(|(_, d)| (*d).to_owned());
                let same = default
                    .as_deref()
                    .is_some_and(|d| d == value || (key == "acks" && value == "-1"));
                (!same).then_some(Setting {
                    key,
                    value,
                    default,
                })
            })
            .collect();
        let shape = [
            ("nodes", "nodes"),
            ("controllers", "controllers"),
            ("time limit (s)", "time_limit_s"),
            ("rate (ops/s)", "rate"),
            ("concurrency", "concurrency"),
            ("keys", "keys"),
            ("fault interval (s)", "nemesis_interval_s"),
            ("network", "network"),
        ]
        .iter()
        .filter_map(|(label, key)| run.get(*key).map(|v| ((*label).to_owned(), compact(v))))
        .collect();
        let durability = report.get("durability").cloned().unwrap_or_default();
        let number = |value: &Value, key: &str| value.get(key).and_then(Value::as_u64).unwrap_or(0);
        RunSummary {
            verdict: text(report, "verdict"),
            reason: text(report, "reason"),
            workload: text(run, "workload"),
            seed: text(run, "seed"),
            started: text(run, "started"),
            replay: text(run, "replay"),
            nemesis: strings(run.get("nemesis")),
            shape,
            settings,
            anomalies: anomalies(report),
            durability_totals: (
                number(&durability, "acknowledged"),
                number(&durability, "lost"),
                number(&durability, "unconfirmed"),
            ),
            durability: durability_rows(&durability),
            warnings: strings(report.get("warnings")),
        }
    }

    /// Every op index an anomaly or a lost write names.
    pub fn named_ops(&self) -> BTreeSet<u64> {
        let witnessed = self
            .anomalies
            .iter()
            .flat_map(|kind| kind.witnesses.iter().flat_map(|w| w.ops.iter().copied()));
        let lost = self
            .durability
            .iter()
            .flat_map(|row| row.lost_ops.iter().copied());
        witnessed.chain(lost).collect()
    }
}

fn anomalies(report: &Value) -> Vec<AnomalyKindView> {
    let bad: BTreeSet<String> = strings(report.get("bad_kinds")).into_iter().collect();
    let Some(groups) = report.get("anomalies").and_then(Value::as_object) else {
        return Vec::new();
    };
    let mut kinds: Vec<AnomalyKindView> = groups
        .iter()
        .map(|(kind, group)| AnomalyKindView {
            kind: kind.clone(),
            count: group.get("count").and_then(Value::as_u64).unwrap_or(0),
            bad: bad.contains(kind),
            witnesses: group
                .get("witnesses")
                .and_then(Value::as_array)
                .map(|list| list.iter().map(witness).collect())
                .unwrap_or_default(),
        })
        .collect();
    // Forbidden kinds first; report order within.
    kinds.sort_by_key(|kind| !kind.bad);
    kinds
}

fn witness(value: &Value) -> Witness {
    let mut ops = Vec::new();
    let mut add = |index: Option<u64>| {
        if let Some(index) = index
            && !ops.contains(&index)
        {
            ops.push(index);
        }
    };
    for op in value
        .get("ops")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        add(op
            .get("index")
            .and_then(Value::as_u64)
            .or_else(|| op.as_u64()));
    }
    for step in value
        .get("cycle")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        add(step.get("from").and_then(Value::as_u64));
        add(step.get("to").and_then(Value::as_u64));
    }
    let details = value
        .as_object()
        .into_iter()
        .flatten()
        .filter(|(name, _)| !["kind", "key", "ops", "explanation"].contains(&name.as_str()))
        .map(|(name, field)| (name.clone(), field.to_string()))
        .collect();
    Witness {
        explanation: value.get("explanation").map(compact).unwrap_or_default(),
        key: value.get("key").map(compact),
        ops,
        details,
    }
}

fn durability_rows(durability: &Value) -> Vec<DurabilityRow> {
    let known = [
        "key",
        "acknowledged",
        "lost_count",
        "unconfirmed",
        "offset_ranges",
        "lost",
    ];
    durability
        .get("partitions")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .map(|row| {
            let number = |key: &str| row.get(key).and_then(Value::as_u64).unwrap_or(0);
            let offsets = row
                .get("offset_ranges")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .map(|range| {
                    let (first, last) = (range.get("first"), range.get("last"));
                    match (first, last) {
                        (Some(first), Some(last)) if first == last => first.to_string(),
                        (Some(first), Some(last)) => format!("{first}–{last}"),
                        _ => range.to_string(),
                    }
                })
                .collect();
            let lost_ops = row
                .get("lost")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .filter_map(|lost| lost.get("op").and_then(Value::as_u64))
                .collect();
            DurabilityRow {
                key: row.get("key").map(compact).unwrap_or_default(),
                acknowledged: number("acknowledged"),
                lost: number("lost_count"),
                unconfirmed: number("unconfirmed"),
                offsets,
                lost_ops,
                details: row
                    .as_object()
                    .into_iter()
                    .flatten()
                    .filter(|(name, _)| !known.contains(&name.as_str()))
                    .map(|(name, field)| (name.clone(), field.to_string()))
                    .collect(),
            }
        })
        .collect()
}

fn strings(value: Option<&Value>) -> Vec<String> {
    value
        .and_then(Value::as_array)
        .map(|list| list.iter().map(compact).collect())
        .unwrap_or_default()
}

/// A string as itself, anything else as compact JSON.
pub fn compact(value: &Value) -> String {
    match value {
        Value::String(text) => text.clone(),
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn unknown_anomaly_kinds_and_fields_are_kept() {
        let report = json!({
            "verdict": "invalid",
            "reason": "1 bad",
            "bad_kinds": ["brand-new-kind"],
            "anomalies": {
                "duplicate": {"count": 1, "truncated": false, "witnesses": [
                    {"kind": "duplicate", "key": 2, "ops": [{"index": 7}, {"index": 9}],
                     "explanation": "value 5 at two offsets", "offsets": [3, 4]}]},
                "brand-new-kind": {"count": 3, "truncated": true, "witnesses": [
                    {"kind": "brand-new-kind", "ops": [{"index": 11}],
                     "cycle": [{"from": 11, "to": 12}], "explanation": "new",
                     "blame": {"node": "n2"}}]}
            },
            "durability": {"acknowledged": 10, "lost": 2, "unconfirmed": 1, "partitions": [
                {"key": 0, "acknowledged": 10, "lost_count": 2, "unconfirmed": 1,
                 "offset_ranges": [{"first": 4, "last": 5, "count": 2}],
                 "lost": [{"op": 21}, {"op": 23}], "attribution": "unclean election"}]}
        });
        let run = json!({"seed": 9, "node_settings": {"min.insync.replicas": "2",
            "unclean.leader.election.enable": "false"}, "client_settings": {"acks": "1"},
            "replication_factor": 3, "nemesis": ["kill"]});
        let summary = RunSummary::from_json(&run, &report);
        assert_eq!(summary.anomalies[0].kind, "brand-new-kind");
        assert!(summary.anomalies[0].bad);
        let new = &summary.anomalies[0].witnesses[0];
        assert_eq!(new.ops, vec![11, 12]);
        assert!(
            new.details
                .iter()
                .any(|(k, v)| k == "blame" && v.contains("n2"))
        );
        assert_eq!(summary.anomalies[1].witnesses[0].key.as_deref(), Some("2"));
        let row = &summary.durability[0];
        assert_eq!(row.offsets, vec!["4–5"]);
        assert_eq!(
            row.details,
            vec![("attribution".into(), "\"unclean election\"".into())]
        );
        assert_eq!(summary.named_ops(), BTreeSet::from([7, 9, 11, 12, 21, 23]));
        // The default unclean setting is left out; the others say what Kafka would do.
        let keys: Vec<_> = summary.settings.iter().map(|s| s.key.as_str()).collect();
        assert_eq!(
            keys,
            vec!["min.insync.replicas", "acks", "replication.factor"]
        );
        assert_eq!(summary.settings[1].default.as_deref(), Some("all"));
    }

    #[test]
    fn an_empty_report_reads_as_nothing_found() {
        let summary = RunSummary::from_json(&json!({}), &json!({}));
        assert!(summary.anomalies.is_empty() && summary.durability.is_empty());
        assert_eq!(summary.durability_totals, (0, 0, 0));
    }
}
