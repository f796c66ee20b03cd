//! The property file's parsing and validation: defaults, unknown keys and invalid values named
//! with their line, and the checks across keys.

use super::*;

const MINIMAL: &str = "node.id=1\nprocess.roles=broker,controller\n";

#[test]
fn kafka_defaults_apply_when_unset() {
    let config = Config::parse(MINIMAL, &[]).unwrap();
    assert_eq!(config.min_insync_replicas, 1);
    assert!(!config.unclean_leader_election_enable);
    assert_eq!(config.log_flush_interval_messages, i64::MAX as u64);
    assert_eq!(config.log_flush_interval_ms, None);
    assert_eq!(config.log_segment_bytes, 1 << 30);
    assert_eq!(config.socket_request_max_bytes, 104_857_600);
    assert_eq!(config.listen_address.port(), 9092);
    assert_eq!(config.log_dirs, vec![PathBuf::from("/tmp/kafka-logs")]);
}

#[test]
fn unknown_key_is_named_with_its_line() {
    let error = Config::parse("node.id=1\n\nmin.insync.replica=2\n", &[]).unwrap_err();
    let message = error.to_string();
    assert!(
        message.contains("line 3") && message.contains("min.insync.replica"),
        "{message}"
    );
}

#[test]
fn invalid_values_are_named() {
    for (text, key) in [
        ("min.insync.replicas=two", "min.insync.replicas"),
        ("min.insync.replicas=0", "min.insync.replicas"),
        (
            "unclean.leader.election.enable=yes",
            "unclean.leader.election.enable",
        ),
        ("node.id=99999999999", "node.id"),
        ("process.roles=leader", "process.roles"),
        (
            "log.message.timestamp.type=AppendTime",
            "log.message.timestamp.type",
        ),
        ("listeners=localhost:9092", "listeners"),
        // The new consumer protocol's bounds, checked together.
        (
            "group.consumer.session.timeout.ms=3000",
            "group.consumer.session.timeout.ms",
        ),
        (
            "group.consumer.assignors=sticky",
            "group.consumer.assignors",
        ),
    ] {
        let error = Config::parse(&format!("{MINIMAL}{text}\n"), &[]).unwrap_err();
        assert!(error.to_string().contains(key), "{text}: {error}");
    }
}

#[test]
fn missing_required_key_is_named() {
    let error = Config::parse("process.roles=broker\n", &[]).unwrap_err();
    assert!(error.to_string().contains("node.id"), "{error}");
}

#[test]
fn overrides_win_and_comments_are_skipped() {
    let text = format!("# comment\n! also a comment\n{MINIMAL}log.dirs = /a, /b\n");
    let config = Config::parse(&text, &["log.flush.interval.messages=1".into()]).unwrap();
    assert_eq!(
        config.log_dirs,
        vec![PathBuf::from("/a"), PathBuf::from("/b")]
    );
    assert_eq!(config.log_flush_interval_messages, 1);
}

#[test]
fn no_canary_by_default() {
    let config = Config::parse(MINIMAL, &[]).unwrap();
    assert!(config.canaries.is_empty());
    assert_eq!(config.raw[CANARIES_KEY], "");
}

#[test]
fn canaries_are_parsed_and_unknown_names_named_with_key_line_and_known_names() {
    let text =
        format!("{MINIMAL}logjam.canaries = skip-idempotent-dedupe, hw-before-replication\n");
    let config = Config::parse(&text, &[]).unwrap();
    assert!(config.canaries.is_on(Canary::SkipIdempotentDedupe));
    assert!(config.canaries.is_on(Canary::HwBeforeReplication));
    assert!(!config.canaries.is_on(Canary::ReadAboveHighWatermark));
    let text = format!("{MINIMAL}\nlogjam.canaries=hw-before-replication,no-such-bug\n");
    let message = Config::parse(&text, &[]).unwrap_err().to_string();
    assert!(
        message.contains("line 4")
            && message.contains("logjam.canaries")
            && message.contains("no-such-bug"),
        "{message}"
    );
    for canary in Canary::ALL {
        assert!(message.contains(canary.name()), "{message}");
    }
    let message = Config::parse(MINIMAL, &["logjam.canaries=x".into()])
        .unwrap_err()
        .to_string();
    assert!(
        message.contains("line 0") && message.contains("logjam.canaries"),
        "{message}"
    );
}

#[test]
fn listeners_and_advertised_listeners() {
    let text = format!(
        "{MINIMAL}listeners=PLAINTEXT://10.77.0.1:19092\n\
         advertised.listeners=PLAINTEXT://n1:19092\n"
    );
    let config = Config::parse(&text, &[]).unwrap();
    assert_eq!(config.listen_address, "10.77.0.1:19092".parse().unwrap());
    assert_eq!(
        (config.advertised_host.as_str(), config.advertised_port),
        ("n1", 19092)
    );
}
