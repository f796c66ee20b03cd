//! The wall clock Kafka stamps into logs and records (a leaf: the replica layer, the
//! coordinators and the API handlers read it here).

use std::time::{SystemTime, UNIX_EPOCH};

/// Milliseconds since the Unix epoch, the clock Kafka stamps into logs.
pub fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |elapsed| elapsed.as_millis() as i64)
}
