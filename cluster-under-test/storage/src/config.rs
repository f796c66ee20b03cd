//! `LogConfig`: the per-log settings, named after Kafka's properties and defaulting to Kafka's
//! defaults (`docs/kafka-semantics.md` §7.5, §7.6). Parsing `server.properties` is the node's job.

use crate::batch::TimestampType;

/// Settings of one partition log. `Default` matches Apache Kafka 4.x.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogConfig {
    /// `log.segment.bytes`: roll to a new segment before the active one would exceed this.
    pub segment_bytes: usize,
    /// `log.index.interval.bytes`: add a sparse offset-index entry after this many bytes.
    pub index_interval_bytes: usize,
    /// `log.index.size.max.bytes` (`segment.index.bytes`): a segment rolls when its offset index
    /// holds this many bytes of 8-byte entries.
    pub segment_index_bytes: usize,
    /// `log.flush.interval.messages`: fsync once this many messages are unflushed.
    /// Kafka's default `i64::MAX` means "never".
    pub flush_interval_messages: i64,
    /// `log.flush.interval.ms`: fsync when the last flush is older than this. `None` (Kafka's
    /// default) means never.
    pub flush_interval_ms: Option<i64>,
    /// `message.max.bytes`: largest accepted batch, log overhead included.
    pub max_message_bytes: usize,
    /// `log.message.timestamp.type`: `CreateTime` keeps producer timestamps, `LogAppendTime`
    /// stamps the broker clock into every appended batch.
    pub message_timestamp_type: TimestampType,
    /// `log.message.timestamp.after.max.ms`: reject batches whose max timestamp is further than
    /// this ahead of the broker clock (`CreateTime` only). Kafka 4.0 default: one hour.
    pub message_timestamp_after_max_ms: i64,
}

impl Default for LogConfig {
    fn default() -> Self {
        LogConfig {
            segment_bytes: 1_073_741_824,
            index_interval_bytes: 4096,
            segment_index_bytes: 10_485_760,
            flush_interval_messages: i64::MAX,
            flush_interval_ms: None,
            max_message_bytes: 1_048_588,
            message_timestamp_type: TimestampType::CreateTime,
            message_timestamp_after_max_ms: 3_600_000,
        }
    }
}

impl LogConfig {
    /// How many entries fit in one segment's offset index before the segment must roll.
    pub fn max_index_entries(&self) -> usize {
        (self.segment_index_bytes / crate::index::ENTRY_BYTES).max(1)
    }
}
