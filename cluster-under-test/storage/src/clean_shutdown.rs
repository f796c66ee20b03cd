//! The `.kafka_cleanshutdown` file's content (Kafka's `CleanShutdownFileHandler`): a clean
//! shutdown writes it last, holding the broker epoch of the incarnation that shut down as
//! `{"version":0,"brokerEpoch":N}`. Its presence at the next open means the logs need no
//! recovery scan; its epoch is what the broker sends as `PreviousBrokerEpoch` in
//! BrokerRegistration, so the controller can tell a clean restart from a crash (KIP-966).

/// Name of the marker file a clean shutdown leaves in the log dir.
pub const CLEAN_SHUTDOWN_MARKER: &str = ".kafka_cleanshutdown";

/// The only content version Kafka writes.
const VERSION: i64 = 0;

/// The file's bytes for `broker_epoch` (-1 when the node had no broker registration).
pub fn encode(broker_epoch: i64) -> Vec<u8> {
    format!("{{\"version\":{VERSION},\"brokerEpoch\":{broker_epoch}}}").into_bytes()
}

/// The broker epoch in a marker's bytes; `None` when they are not a version-0 object with an
/// integer `brokerEpoch` (an empty marker from an older build, or damage). Like Kafka, a
/// marker whose epoch cannot be read still proves the logs were flushed; only the epoch is
/// unknown, which the controller then treats as an unclean shutdown.
pub fn decode(bytes: &[u8]) -> Option<i64> {
    let text = std::str::from_utf8(bytes).ok()?.trim();
    let body = text.strip_prefix('{')?.strip_suffix('}')?;
    let mut version = None;
    let mut broker_epoch = None;
    for field in body.split(',') {
        let (key, value) = field.split_once(':')?;
        let value: i64 = value.trim().parse().ok()?;
        match key.trim() {
            "\"version\"" => version = Some(value),
            "\"brokerEpoch\"" => broker_epoch = Some(value),
            _ => {}
        }
    }
    (version == Some(VERSION)).then_some(broker_epoch).flatten()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_and_matches_kafkas_layout() {
        assert_eq!(encode(42), br#"{"version":0,"brokerEpoch":42}"#);
        for epoch in [-1, 0, 42, i64::MAX] {
            assert_eq!(decode(&encode(epoch)), Some(epoch));
        }
        assert_eq!(
            decode(b" { \"brokerEpoch\" : 7 , \"version\" : 0 }\n"),
            Some(7)
        );
    }

    #[test]
    fn unreadable_content_has_no_epoch() {
        for bytes in [
            &b""[..],
            b"{}",
            b"{\"version\":0}",
            b"{\"version\":1,\"brokerEpoch\":5}",
            b"{\"version\":0,\"brokerEpoch\":\"5\"}",
            b"version=0",
            b"\xff\xfe",
        ] {
            assert_eq!(decode(bytes), None, "{bytes:?}");
        }
    }
}
