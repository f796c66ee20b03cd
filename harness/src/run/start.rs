//! The start phase of a run: which `--set` keys go to the nodes and which to the clients, the
//! harness's own client timeouts (short, as Jepsen's Kafka client, so ops end within a fault
//! window instead of outliving it), and waiting until the cluster serves the workload's
//! topics.
//!
//! # Client timeouts
//!
//! Kafka's defaults (`request.timeout.ms` 30 s, `delivery.timeout.ms` 120 s) keep a send to a
//! dead, paused or cut-off leader open for up to two minutes, far longer than a fault window
//! (5 s by default): the history then shows almost nothing happening while faults are in
//! force. Harness runs use `request.timeout.ms=3000` and `delivery.timeout.ms=10000`, Jepsen's
//! choice for its Kafka test: one request to an unresponsive broker is given up after 3 s
//! (then the client refreshes its metadata and retries against whichever leader it learns),
//! and a record gets 10 s in all, room for about three attempts across a leader election,
//! before its send ends `info`. Kafka requires `delivery.timeout.ms >= linger.ms +
//! request.timeout.ms` (10000 >= 5 + 3000 with Kafka 4's `linger.ms`); when a user's
//! `linger.ms` or `request.timeout.ms` would break that, the harness's default delivery
//! timeout is raised to their sum rather than failing the run. The idempotent producer's rules
//! (acks=all, retries > 0, at most 5 in flight) do not involve timeouts, so idempotence stays
//! on; what the shorter delivery timeout changes is that a batch expiring in flight ends
//! `info` sooner (the producer cannot know whether it was written), so a run has more
//! indeterminate sends and fewer slow acknowledgements. Consumers get the same
//! `request.timeout.ms`. `--set` any of these keys (e.g. Kafka's own 30000 and 120000)
//! replaces the harness's value.

use std::time::Duration;

use anyhow::{Context, bail};
use logjam_client::{Admin, NewTopic};
use logjam_workloads::workload::TopicSpec;
use tokio::time::Instant;

use crate::lab;

/// Client-side properties `--set` may carry; every other key goes to the nodes.
const CLIENT_KEYS: &[&str] = &[
    "acks",
    "enable.idempotence",
    "linger.ms",
    "batch.size",
    "retries",
    "delivery.timeout.ms",
    "request.timeout.ms",
    "max.in.flight.requests.per.connection",
    "transaction.timeout.ms",
    "session.timeout.ms",
    "heartbeat.interval.ms",
    "group.protocol",
    "group.remote.assignor",
    // logjam-client's own: false models a transactional client from before KIP-360.
    "logjam.kip360",
    EOS_MODE_KEY,
    TXN_MODE_KEY,
];

/// Of [`CLIENT_KEYS`], those only a group's consumers take.
const CONSUMER_ONLY_KEYS: &[&str] = &[
    "session.timeout.ms",
    "heartbeat.interval.ms",
    "group.protocol",
    "group.remote.assignor",
];

/// `--set logjam.eos=<options>`, comma-separated: `offsets-outside-transaction` (the eos
/// workload's pipeline commits its offsets with a plain commit after the output transaction:
/// the common mistake), `no-crashes` (no pipeline process crashes as its commit returns),
/// `member-per-process` (every harness process is its own group member: constant churn),
/// `zombie` (a few pipeline members pause mid-transaction, heartbeats too, for
/// `session.timeout.ms` + 4 s, and then try to commit), `offsets-without-group-metadata`
/// (offsets go to the transaction with the group id alone, the pre-KIP-447 call: no
/// generation fence).
/// A workload setting: no client or node sees it.
pub(super) const EOS_MODE_KEY: &str = "logjam.eos";

/// `--set logjam.txn=<options>`, comma-separated: `abandon` (a few of the txn workload's
/// processes die mid-transaction, after their sends and before EndTxn, and never come back:
/// the coordinator aborts what they left open after `transaction.timeout.ms`, and until then
/// every read_committed reader of those partitions stops at the LSO). A workload setting: no
/// client or node sees it.
pub(super) const TXN_MODE_KEY: &str = "logjam.txn";

/// The harness's client timeouts (see the module doc), applied unless `--set` gives the key.
pub(crate) const CLIENT_DEFAULTS: &[(&str, &str)] = &[
    ("request.timeout.ms", "3000"),
    ("delivery.timeout.ms", "10000"),
];

/// Kafka 4's `linger.ms` default, for the delivery-timeout floor.
const KAFKA_LINGER_MS: u64 = 5;

/// Kafka properties as key/value pairs, in the order given.
pub(super) type Properties = Vec<(String, String)>;

/// The settings `--set` gave, split by who takes them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Settings {
    /// Node properties.
    pub(super) node: Properties,
    /// Client properties the user gave.
    pub(super) client: Properties,
    /// The harness's defaults applied on top (keys the user did not give).
    pub(super) client_defaults: Properties,
    /// `replication.factor`, if given.
    pub(super) replication_factor: Option<i16>,
}

impl Settings {
    /// The producer's properties: the user's, then the harness's defaults.
    pub(super) fn producer(&self) -> Properties {
        self.client
            .iter()
            .chain(&self.client_defaults)
            .filter(|(key, _)| key != EOS_MODE_KEY && key != TXN_MODE_KEY)
            .filter(|(key, _)| !CONSUMER_ONLY_KEYS.contains(&key.as_str()))
            .cloned()
            .collect()
    }

    /// True when `--set logjam.eos=...` lists `option` (comma-separated).
    pub(super) fn eos_option(&self, option: &str) -> bool {
        self.mode_option(EOS_MODE_KEY, option)
    }

    /// True when `--set logjam.txn=...` lists `option` (comma-separated).
    pub(super) fn txn_option(&self, option: &str) -> bool {
        self.mode_option(TXN_MODE_KEY, option)
    }

    fn mode_option(&self, mode_key: &str, option: &str) -> bool {
        self.client
            .iter()
            .filter(|(key, _)| key == mode_key)
            .any(|(_, value)| value.split(',').any(|v| v.trim() == option))
    }

    /// The consumer's share of them: `request.timeout.ms`, and for a group's consumers
    /// `session.timeout.ms`, `heartbeat.interval.ms`, `group.protocol` and
    /// `group.remote.assignor`.
    pub(super) fn consumer(&self) -> Properties {
        self.client
            .iter()
            .chain(&self.client_defaults)
            .filter(|(key, _)| {
                key == "request.timeout.ms" || CONSUMER_ONLY_KEYS.contains(&key.as_str())
            })
            .cloned()
            .collect()
    }

    /// The consumers' `session.timeout.ms` (Kafka 4's 45 s unless `--set`).
    pub(super) fn session_timeout(&self) -> Duration {
        self.consumer()
            .iter()
            .find(|(key, _)| key == "session.timeout.ms")
            .and_then(|(_, value)| value.parse::<u64>().ok())
            .map_or(Duration::from_secs(45), Duration::from_millis)
    }

    /// The effective `delivery.timeout.ms` (Kafka's rule raises a smaller one to
    /// `linger.ms + request.timeout.ms`), which bounds how long a send can stay open.
    pub(super) fn delivery_timeout(&self) -> Duration {
        let get = |key: &str, default: u64| {
            self.producer()
                .iter()
                .find(|(k, _)| k == key)
                .and_then(|(_, value)| value.parse::<u64>().ok())
                .unwrap_or(default)
        };
        let floor = get("linger.ms", KAFKA_LINGER_MS) + get("request.timeout.ms", 30_000);
        Duration::from_millis(get("delivery.timeout.ms", 120_000).max(floor))
    }
}

/// The options `logjam.eos` and `logjam.txn` know: a misspelt one is an error naming the
/// key, not a run that silently tests something else.
fn check_mode_options(key: &str, value: &str) -> anyhow::Result<()> {
    let known: &[&str] = match key {
        EOS_MODE_KEY => &[
            "offsets-outside-transaction",
            "no-crashes",
            "member-per-process",
            "zombie",
            "offsets-without-group-metadata",
        ],
        TXN_MODE_KEY => &["abandon"],
        _ => return Ok(()),
    };
    for option in value.split(',').map(str::trim).filter(|o| !o.is_empty()) {
        if !known.contains(&option) {
            bail!(
                "--set {key}={value}: unknown option `{option}` (known: {})",
                known.join(", ")
            );
        }
    }
    Ok(())
}

/// Splits `--set key=value` into node properties, client properties and the replication
/// factor, and adds the harness's client timeouts for the keys the user did not give.
pub(super) fn split_settings(settings: &[String]) -> anyhow::Result<Settings> {
    let mut node = Vec::new();
    let mut client = Vec::new();
    let mut replication_factor = None;
    for setting in settings {
        let (key, value) = lab::parse_setting(setting)?;
        if key == "replication.factor" {
            replication_factor = Some(
                value
                    .parse()
                    .with_context(|| format!("--set replication.factor={value}: not a number"))?,
            );
        } else if CLIENT_KEYS.contains(&key.as_str()) {
            check_mode_options(&key, &value)?;
            client.push((key, value));
        } else {
            node.push((key, value));
        }
    }
    let given = |key: &str| client.iter().any(|(k, _)| k == key);
    let number = |key: &str, default: u64| {
        client
            .iter()
            .rev()
            .find(|(k, _)| k == key)
            .and_then(|(_, value)| value.parse::<u64>().ok())
            .unwrap_or(default)
    };
    let mut client_defaults = Vec::new();
    for (key, value) in CLIENT_DEFAULTS {
        if given(key) {
            continue;
        }
        let value = if *key == "delivery.timeout.ms" {
            // Kafka's floor, from the user's linger and request timeout (or ours).
            let request = number("request.timeout.ms", 3000);
            let floor = number("linger.ms", KAFKA_LINGER_MS) + request;
            value.parse::<u64>().unwrap_or(0).max(floor).to_string()
        } else {
            (*value).to_owned()
        };
        client_defaults.push(((*key).to_owned(), value));
    }
    let delivery_given = given("delivery.timeout.ms");
    let settings = Settings {
        node,
        client,
        client_defaults,
        replication_factor,
    };
    if delivery_given {
        // Kafka refuses such a producer; say so now rather than in every send's error.
        let effective = settings.producer();
        let get = |key: &str, default: u64| {
            effective
                .iter()
                .rev()
                .find(|(k, _)| k == key)
                .and_then(|(_, value)| value.parse::<u64>().ok())
                .unwrap_or(default)
        };
        let floor = get("linger.ms", KAFKA_LINGER_MS) + get("request.timeout.ms", 30_000);
        let delivery = get("delivery.timeout.ms", 120_000);
        if delivery < floor {
            bail!(
                "--set delivery.timeout.ms={delivery}: Kafka requires at least linger.ms + \
                 request.timeout.ms = {floor} (the harness's request.timeout.ms is 3000 unless \
                 you set it)"
            );
        }
    }
    Ok(settings)
}

/// Waits until every broker serves clients (a node opens its client listener only once the
/// quorum has a leader and the broker is registered and unfenced), creates the topics
/// (idempotently) and waits until every partition has a leader.
pub(super) async fn wait_until_ready(
    bootstrap: &str,
    topics: &[TopicSpec],
    replication_factor: i16,
) -> anyhow::Result<()> {
    let leaderless = wait_for_leaders(bootstrap, topics, replication_factor).await?;
    if !leaderless.is_empty() {
        bail!(
            "the cluster did not become ready within 60 s: partitions without a leader: {leaderless:?}"
        );
    }
    Ok(())
}

/// As [`wait_until_ready`], but partitions still without a leader after 60 s are returned
/// (`(topic, partition)`) rather than an error: after the heal, an offline partition is what
/// the cluster did, a finding. Brokers that never serve are still an error.
pub(super) async fn wait_for_leaders(
    bootstrap: &str,
    topics: &[TopicSpec],
    replication_factor: i16,
) -> anyhow::Result<Vec<(String, i32)>> {
    let deadline = Instant::now() + Duration::from_secs(60);
    for address in bootstrap.split(',') {
        while tokio::net::TcpStream::connect(address).await.is_err() {
            if Instant::now() > deadline {
                bail!("the broker at {address} did not start serving within 60 s");
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
    let admin = Admin::from_properties([("bootstrap.servers", bootstrap)])?;
    let names: Vec<&str> = topics.iter().map(|topic| topic.name.as_str()).collect();
    let new: Vec<NewTopic> = topics
        .iter()
        .map(|topic| NewTopic::new(&topic.name, topic.partitions as i32, replication_factor))
        .collect();
    let mut last_problem = String::from("no answer yet");
    let mut leaderless: Option<Vec<(String, i32)>> = None;
    while Instant::now() < deadline {
        // Already existing is fine (a second readiness wait after healing); any other failure
        // shows in the describe below. A topic may have grown (`add-partitions`): at least
        // its partitions, each with a leader.
        let _ = admin.create_topics(&new).await;
        match admin.describe_topics(&names).await {
            Ok(described)
                if topics.iter().all(|spec| {
                    described.iter().any(|t| {
                        t.name == spec.name
                            && t.partitions.len() >= spec.partitions as usize
                            && t.partitions
                                .iter()
                                .all(|p| p.leader.is_some_and(|leader| leader.0 >= 0))
                    })
                }) =>
            {
                return Ok(Vec::new());
            }
            Ok(described) => {
                last_problem = "partitions without a leader".to_owned();
                let complete = topics.iter().all(|spec| {
                    described.iter().any(|t| {
                        t.name == spec.name && t.partitions.len() >= spec.partitions as usize
                    })
                });
                leaderless = complete.then(|| {
                    described
                        .iter()
                        .flat_map(|t| {
                            t.partitions
                                .iter()
                                .filter(|p| p.leader.is_none_or(|leader| leader.0 < 0))
                                .map(|p| (t.name.clone(), p.partition.0))
                        })
                        .collect()
                });
            }
            Err(error) => last_problem = error.to_string(),
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    match leaderless {
        Some(leaderless) if !leaderless.is_empty() => Ok(leaderless),
        _ => bail!("the cluster did not become ready within 60 s: {last_problem}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pairs(list: &[(&str, &str)]) -> Properties {
        list.iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    #[test]
    fn settings_are_split_between_nodes_and_clients() {
        let settings = split_settings(&[
            "acks=1".into(),
            "min.insync.replicas=2".into(),
            "replication.factor=1".into(),
        ])
        .unwrap();
        assert_eq!(settings.node, pairs(&[("min.insync.replicas", "2")]));
        assert_eq!(settings.client, pairs(&[("acks", "1")]));
        assert_eq!(settings.replication_factor, Some(1));
        assert!(split_settings(&["acks".into()]).is_err());
    }

    #[test]
    fn group_timeouts_go_to_consumers_only() {
        let settings = split_settings(&[
            "session.timeout.ms=6000".into(),
            "heartbeat.interval.ms=1000".into(),
            "group.protocol=consumer".into(),
            "group.remote.assignor=range".into(),
            "acks=all".into(),
        ])
        .unwrap();
        assert!(settings.node.is_empty());
        let consumer = settings.consumer();
        for (key, value) in [
            ("session.timeout.ms", "6000"),
            ("heartbeat.interval.ms", "1000"),
            ("group.protocol", "consumer"),
            ("group.remote.assignor", "range"),
        ] {
            assert!(consumer.contains(&(key.into(), value.into())), "{key}");
            assert!(
                settings.producer().iter().all(|(k, _)| k != key),
                "{key} is a consumer's"
            );
        }
        assert!(consumer.iter().all(|(k, _)| k != "acks"));
        assert_eq!(settings.session_timeout(), Duration::from_secs(6));
        assert_eq!(
            split_settings(&[]).unwrap().session_timeout(),
            Duration::from_secs(45),
            "Kafka 4's default"
        );
    }

    #[test]
    fn workload_modes_are_the_harness_s_and_misspelt_options_are_refused() {
        let settings = split_settings(&[
            "logjam.txn=abandon".into(),
            "logjam.eos=no-crashes,member-per-process".into(),
        ])
        .unwrap();
        assert!(settings.txn_option("abandon"));
        assert!(settings.eos_option("member-per-process"));
        assert!(!settings.eos_option("offsets-outside-transaction"));
        assert!(
            settings.node.is_empty()
                && settings
                    .producer()
                    .iter()
                    .all(|(k, _)| !k.starts_with("logjam.")),
            "neither nodes nor clients see a workload mode"
        );
        let error = split_settings(&["logjam.txn=abandonn".into()])
            .unwrap_err()
            .to_string();
        assert!(
            error.contains("logjam.txn") && error.contains("abandonn") && error.contains("abandon"),
            "{error}"
        );
    }

    #[test]
    fn short_client_timeouts_unless_the_user_sets_them() {
        let settings = split_settings(&[]).unwrap();
        assert_eq!(
            settings.client_defaults,
            pairs(&[
                ("request.timeout.ms", "3000"),
                ("delivery.timeout.ms", "10000")
            ])
        );
        assert_eq!(settings.delivery_timeout(), Duration::from_secs(10));
        assert_eq!(
            settings.consumer(),
            pairs(&[("request.timeout.ms", "3000")])
        );
        // Kafka's own defaults restored.
        let kafka = split_settings(&[
            "request.timeout.ms=30000".into(),
            "delivery.timeout.ms=120000".into(),
        ])
        .unwrap();
        assert!(kafka.client_defaults.is_empty());
        assert_eq!(kafka.delivery_timeout(), Duration::from_secs(120));
        // A longer request timeout raises the default delivery timeout to Kafka's floor.
        let long =
            split_settings(&["request.timeout.ms=20000".into(), "linger.ms=100".into()]).unwrap();
        assert_eq!(
            long.client_defaults,
            pairs(&[("delivery.timeout.ms", "20100")])
        );
        assert_eq!(long.delivery_timeout(), Duration::from_millis(20_100));
        // A delivery timeout below Kafka's floor is refused up front.
        let error = split_settings(&["delivery.timeout.ms=2000".into()]).unwrap_err();
        assert!(error.to_string().contains("at least"), "{error}");
        assert!(split_settings(&["delivery.timeout.ms=5000".into()]).is_ok());
    }
}
