//! Raft entries as Kafka record batches (magic 2), the form they take in Fetch responses and in
//! the metadata log file: one record per entry, `offset` = entry offset,
//! `partitionLeaderEpoch` = entry epoch. The `LEADER_CHANGE` control record is a control
//! record whose key is Kafka's control key (version 0, type 2) and whose value is JSON
//! `{leader_id, granting_voters}`. Data entries carry the metadata payload as the value.

use bytes::{Buf, Bytes, BytesMut};
use indexmap::IndexMap;
use kafka_protocol::records::{
    Compression, Record, RecordBatchDecoder, RecordBatchEncoder, RecordEncodeOptions, TimestampType,
};
use logjam_raft::{Entry, EntryKind, Epoch, NodeId, Offset};
use serde::{Deserialize, Serialize};

/// Kafka's control record type of `LEADER_CHANGE`.
const LEADER_CHANGE_KEY: [u8; 4] = [0, 0, 0, 2];

#[derive(Serialize, Deserialize)]
struct LeaderChange {
    leader_id: u32,
    granting_voters: Vec<u32>,
}

/// Bytes that are not record batches of entries.
#[derive(Debug, thiserror::Error)]
#[error("malformed metadata record batch: {reason}")]
pub struct EntryCodecError {
    /// What was wrong.
    pub reason: String,
}

/// Encodes entries (consecutive offsets) as record batches.
pub fn encode_entries(entries: &[Entry]) -> Bytes {
    if entries.is_empty() {
        return Bytes::new();
    }
    let records: Vec<Record> = entries
        .iter()
        .map(|entry| {
            let (control, key, value) = match &entry.kind {
                EntryKind::LeaderChange {
                    leader_id,
                    granting_voters,
                } => (
                    true,
                    Some(Bytes::from_static(&LEADER_CHANGE_KEY)),
                    serde_json::to_vec(&LeaderChange {
                        leader_id: leader_id.0,
                        granting_voters: granting_voters.iter().map(|v| v.0).collect(),
                    })
                    .expect("serializes"),
                ),
                EntryKind::Data(payload) => (false, None, payload.clone()),
            };
            Record {
                transactional: false,
                control,
                delete_horizon: false,
                partition_leader_epoch: entry.epoch.0 as i32,
                producer_id: -1,
                producer_epoch: -1,
                timestamp_type: TimestampType::Creation,
                offset: entry.offset.0 as i64,
                sequence: -1,
                timestamp: 0,
                key,
                value: Some(Bytes::from(value)),
                headers: IndexMap::new(),
            }
        })
        .collect();
    let mut buf = BytesMut::new();
    RecordBatchEncoder::encode(
        &mut buf,
        &records,
        &RecordEncodeOptions {
            version: 2,
            compression: Compression::None,
        },
    )
    .expect("record batches encode");
    buf.freeze()
}

/// Decodes whole record batches back into entries. Stops at a torn or corrupt batch and
/// returns what came before it plus the number of bytes that decoded cleanly (the metadata
/// log file is truncated there on recovery).
pub fn decode_entries_prefix(mut bytes: Bytes) -> (Vec<Entry>, usize) {
    let mut entries = Vec::new();
    let mut consumed = 0usize;
    while bytes.remaining() >= 12 {
        let length = i32::from_be_bytes(bytes[8..12].try_into().expect("4 bytes"));
        let Ok(length) = usize::try_from(length) else {
            break;
        };
        let total = 12 + length;
        if bytes.remaining() < total {
            break;
        }
        let mut batch = bytes.slice(..total);
        let decoded = std::panic::catch_unwind(move || RecordBatchDecoder::decode(&mut batch));
        let Ok(Ok(set)) = decoded else {
            break;
        };
        let mut batch_entries = Vec::new();
        let mut valid = true;
        for record in set.records {
            match record_to_entry(record) {
                Some(entry) => batch_entries.push(entry),
                None => valid = false,
            }
        }
        if !valid {
            break;
        }
        entries.extend(batch_entries);
        bytes.advance(total);
        consumed += total;
    }
    (entries, consumed)
}

/// Decodes record batches that must be whole and valid (a Fetch response).
///
/// # Errors
/// [`EntryCodecError`] when any byte is left over.
pub fn decode_entries(bytes: Bytes) -> Result<Vec<Entry>, EntryCodecError> {
    let total = bytes.len();
    let (entries, consumed) = decode_entries_prefix(bytes);
    if consumed != total {
        return Err(EntryCodecError {
            reason: format!("{} of {total} bytes decode", consumed),
        });
    }
    Ok(entries)
}

fn record_to_entry(record: Record) -> Option<Entry> {
    let offset = Offset(u64::try_from(record.offset).ok()?);
    let epoch = Epoch(u32::try_from(record.partition_leader_epoch).ok()?);
    let value = record.value.unwrap_or_default();
    let kind = if record.control {
        let change: LeaderChange = serde_json::from_slice(&value).ok()?;
        EntryKind::LeaderChange {
            leader_id: NodeId(change.leader_id),
            granting_voters: change.granting_voters.into_iter().map(NodeId).collect(),
        }
    } else {
        EntryKind::Data(value.to_vec())
    };
    Some(Entry {
        offset,
        epoch,
        kind,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_round_trip_and_torn_tail_is_cut() {
        let entries = vec![
            Entry {
                offset: Offset(0),
                epoch: Epoch(1),
                kind: EntryKind::LeaderChange {
                    leader_id: NodeId(1),
                    granting_voters: vec![NodeId(1), NodeId(2)],
                },
            },
            Entry {
                offset: Offset(1),
                epoch: Epoch(1),
                kind: EntryKind::Data(b"[]".to_vec()),
            },
            Entry {
                offset: Offset(2),
                epoch: Epoch(2),
                kind: EntryKind::Data(b"x".to_vec()),
            },
        ];
        let bytes = encode_entries(&entries);
        assert_eq!(decode_entries(bytes.clone()).unwrap(), entries);
        let torn = bytes.slice(..bytes.len() - 3);
        let (prefix, consumed) = decode_entries_prefix(torn);
        assert!(prefix.len() < entries.len() && consumed < bytes.len());
        assert_eq!(prefix[..], entries[..prefix.len()]);
    }
}
