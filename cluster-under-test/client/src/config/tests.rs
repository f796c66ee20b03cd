//! Tests of the client configuration: Kafka's property names, defaults and the errors that name
//! the key.

use super::*;

const BOOT: (&str, &str) = ("bootstrap.servers", "127.0.0.1:9092");

#[test]
fn producer_defaults_are_kafka_4s() {
    let config = ProducerConfig::from_properties([BOOT]).unwrap();
    assert_eq!(config.acks, Acks::All);
    assert_eq!(config.linger, Duration::from_millis(5));
    assert_eq!(config.batch_size, 16384);
    assert_eq!(config.buffer_memory, 33_554_432);
    assert_eq!(config.max_block, Duration::from_secs(60));
    assert_eq!(config.request_timeout, Duration::from_secs(30));
    assert_eq!(config.delivery_timeout, Duration::from_secs(120));
    assert_eq!(config.retries, i32::MAX);
    assert_eq!(config.retry_backoff, Duration::from_millis(100));
    assert_eq!(config.max_in_flight_per_connection, 5);
    assert!(config.enable_idempotence && !config.idempotence_explicit);
}

#[test]
fn unknown_keys_are_errors_naming_the_key() {
    let error = ProducerConfig::from_properties([BOOT, ("linger.msec", "5")]).unwrap_err();
    assert_eq!(error.to_string(), "unknown configuration key `linger.msec`");
    let error = ConsumerConfig::from_properties([BOOT, ("group.idd", "g")]).unwrap_err();
    assert!(error.to_string().contains("group.idd"));
    let error = AdminConfig::from_properties([BOOT, ("x", "y")]).unwrap_err();
    assert!(error.to_string().contains("`x`"));
}

#[test]
fn missing_bootstrap_servers_is_an_error() {
    assert_eq!(
        ProducerConfig::from_properties([]).unwrap_err(),
        ConfigError::Missing {
            key: "bootstrap.servers"
        }
    );
}

#[test]
fn default_idempotence_is_silently_disabled_by_a_conflicting_setting() {
    for conflict in [
        ("acks", "1"),
        ("retries", "0"),
        ("max.in.flight.requests.per.connection", "6"),
    ] {
        let config = ProducerConfig::from_properties([BOOT, conflict]).unwrap();
        assert!(!config.enable_idempotence, "{conflict:?}");
    }
}

#[test]
fn explicit_idempotence_with_a_conflicting_setting_is_an_error() {
    for conflict in [
        ("acks", "0"),
        ("retries", "0"),
        ("max.in.flight.requests.per.connection", "6"),
    ] {
        let error =
            ProducerConfig::from_properties([BOOT, ("enable.idempotence", "true"), conflict])
                .unwrap_err();
        assert!(matches!(error, ConfigError::Conflict { key, .. } if key == conflict.0));
    }
}

#[test]
fn delivery_timeout_below_linger_plus_request_timeout() {
    let config = ProducerConfig::from_properties([BOOT, ("request.timeout.ms", "200000")]).unwrap();
    assert_eq!(config.delivery_timeout, Duration::from_millis(200_005));
    let error = ProducerConfig::from_properties([
        BOOT,
        ("request.timeout.ms", "1000"),
        ("delivery.timeout.ms", "500"),
    ])
    .unwrap_err();
    assert!(matches!(
        error,
        ConfigError::Conflict {
            key: "delivery.timeout.ms",
            ..
        }
    ));
}

#[test]
fn transactional_id_needs_idempotence() {
    let config = ProducerConfig::from_properties([
        BOOT,
        ("transactional.id", "tx-1"),
        ("transaction.timeout.ms", "10000"),
    ])
    .unwrap();
    assert_eq!(config.transactional_id.as_deref(), Some("tx-1"));
    assert_eq!(config.transaction_timeout, Duration::from_secs(10));
    assert_eq!(
        ProducerConfig::from_properties([BOOT])
            .unwrap()
            .transaction_timeout,
        Duration::from_secs(60)
    );
    for conflict in [("enable.idempotence", "false"), ("acks", "1")] {
        let error = ProducerConfig::from_properties([BOOT, ("transactional.id", "tx-1"), conflict])
            .unwrap_err();
        assert!(
            matches!(
                error,
                ConfigError::Conflict {
                    key: "transactional.id",
                    ..
                }
            ),
            "{conflict:?}: {error}"
        );
    }
    assert!(ProducerConfig::from_properties([BOOT, ("transactional.id", "")]).is_err());
}

#[test]
fn acks_spellings() {
    assert_eq!(Acks::parse("all"), Some(Acks::All));
    assert_eq!(Acks::parse("-1"), Some(Acks::All));
    assert_eq!(Acks::parse("0"), Some(Acks::None));
    assert_eq!(Acks::parse("2"), None);
    let error = ProducerConfig::from_properties([BOOT, ("acks", "2")]).unwrap_err();
    assert!(matches!(error, ConfigError::InvalidValue { .. }));
}

#[test]
fn isolation_level_defaults_to_read_uncommitted() {
    use crate::consumer::isolation::IsolationLevel;
    let config =
        ConsumerConfig::from_properties([BOOT, ("isolation.level", "read_committed")]).unwrap();
    assert_eq!(config.isolation_level, IsolationLevel::ReadCommitted);
    assert_eq!(
        ConsumerConfig::from_properties([BOOT])
            .unwrap()
            .isolation_level,
        IsolationLevel::ReadUncommitted
    );
    let error =
        ConsumerConfig::from_properties([BOOT, ("isolation.level", "committed")]).unwrap_err();
    assert!(matches!(error, ConfigError::InvalidValue { .. }));
    let config =
        ConsumerConfig::from_properties([BOOT, ("auto.offset.reset", "earliest")]).unwrap();
    assert_eq!(config.auto_offset_reset, AutoOffsetReset::Earliest);
}

#[test]
fn kip360_is_on_unless_turned_off_by_our_own_key() {
    assert!(ProducerConfig::from_properties([BOOT]).unwrap().kip360);
    let legacy = ProducerConfig::from_properties([BOOT, ("logjam.kip360", "false")]).unwrap();
    assert!(!legacy.kip360);
    assert!(matches!(
        ProducerConfig::from_properties([BOOT, ("logjam.kip360", "no")]).unwrap_err(),
        ConfigError::InvalidValue { key, .. } if key == "logjam.kip360"
    ));
}
