//! The leader's checks of producer batches before an append: framing, magic, CRC, record
//! count, codec, `message.max.bytes`, the timestamp bound and `log.segment.bytes` for the whole
//! append.

use super::*;

/// Checks the whole append against `log.segment.bytes` (Kafka's `RECORD_LIST_TOO_LARGE`).
pub(super) fn check_append_size(append_bytes: usize, config: &LogConfig) -> Result<()> {
    if append_bytes > config.segment_bytes {
        return Err(Error::RecordListTooLarge {
            append_bytes,
            segment_bytes: config.segment_bytes,
        });
    }
    Ok(())
}

/// Validates every producer batch in `batches`; returns each batch's position and header.
pub(super) fn validate_producer_batches(
    batches: &[u8],
    config: &LogConfig,
    now_ms: i64,
) -> Result<Vec<(usize, BatchHeader)>> {
    let mut validated = Vec::new();
    for (batch_index, item) in batch::batches(batches).enumerate() {
        let (position, header) = item.map_err(|defect| Error::InvalidBatch {
            batch_index,
            defect,
        })?;
        batch::check_producer_batch(&header).map_err(|defect| Error::InvalidBatch {
            batch_index,
            defect,
        })?;
        if header.size_bytes() > config.max_message_bytes {
            return Err(Error::MessageTooLarge {
                batch_index,
                batch_bytes: header.size_bytes(),
                max_message_bytes: config.max_message_bytes,
            });
        }
        let create_time = config.message_timestamp_type == TimestampType::CreateTime;
        if create_time
            && header.max_timestamp_ms.saturating_sub(now_ms)
                > config.message_timestamp_after_max_ms
        {
            return Err(Error::InvalidTimestamp {
                batch_index,
                max_timestamp_ms: header.max_timestamp_ms,
                now_ms,
                after_max_ms: config.message_timestamp_after_max_ms,
            });
        }
        validated.push((position, header));
    }
    if validated.is_empty() {
        return Err(Error::EmptyAppend);
    }
    check_append_size(batches.len(), config)?;
    Ok(validated)
}
