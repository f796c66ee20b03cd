//! Which partition of an internal topic holds a key (a transactional id, a group id): Kafka's
//! `partitionFor`, `Utils.abs(key.hashCode()) % partitions`, with Java's `String.hashCode`.
//! A pure leaf: the coordinators and the replica layer's KIP-890 verification (which must
//! find a transactional id's coordinator) both route with it.

/// Java's `String.hashCode` (over UTF-16 code units).
pub fn java_string_hash(text: &str) -> i32 {
    text.encode_utf16().fold(0i32, |hash, unit| {
        hash.wrapping_mul(31).wrapping_add(i32::from(unit))
    })
}

/// The partition of `key` among `partitions` (Kafka's `Utils.abs` maps `i32::MIN` to 0).
pub fn partition_for(key: &str, partitions: i32) -> i32 {
    let hash = java_string_hash(key);
    let abs = if hash == i32::MIN { 0 } else { hash.abs() };
    abs % partitions.max(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn partitions_are_kafkas() {
        // Kafka: Utils.abs("my-txn".hashCode()) % 50.
        assert_eq!(java_string_hash("my-txn"), -1_061_187_895);
        assert_eq!(partition_for("my-txn", 50), 45);
        assert_eq!(partition_for("", 50), 0);
        // Non-ASCII is hashed over UTF-16 units, as Java does ("é" is one unit, U+00E9).
        assert_eq!(java_string_hash("é"), 0xE9);
        // A surrogate pair is two units: 31 * 0xD83D + 0xDE00.
        assert_eq!(java_string_hash("😀"), 31 * 0xD83D + 0xDE00);
    }
}
