//! The records of `__consumer_offsets` in Kafka's own format (each key and value prefixed by
//! its version, as Kafka's `MessageUtil` writes them), so a Kafka tool reading this topic sees
//! what Kafka would have written. Pure codec.
//!
//! - `OffsetCommitKey` (key version 0 or 1): `group string, topic string, partition int32`.
//!   `OffsetCommitValue` v3: `offset int64, leaderEpoch int32, metadata string,
//!   commitTimestamp int64` (v1 adds `expireTimestamp` after `commitTimestamp` and has no
//!   leader epoch; v0 neither; both decoded).
//! - `GroupMetadataKey` (key version 2): `group string`. `GroupMetadataValue` v3:
//!   `protocolType string, generation int32, protocol string?, leader string?,
//!   currentStateTimestamp int64, members [memberId string, groupInstanceId string?,
//!   clientId string, clientHost string, rebalanceTimeout int32, sessionTimeout int32,
//!   subscription bytes, assignment bytes]`.
//!
//! A null value is a tombstone (a deleted offset or group).

use bytes::{Buf, BufMut, Bytes, BytesMut};

/// What a `__consumer_offsets` key names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GroupKey {
    /// The committed offset of (group, topic, partition).
    Offset {
        /// The group id.
        group: String,
        /// The topic.
        topic: String,
        /// The partition.
        partition: i32,
    },
    /// A group's metadata.
    Group(String),
}

/// One `OffsetCommitValue`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OffsetValue {
    /// The next offset to consume.
    pub offset: i64,
    /// The leader epoch of the last consumed record, or -1.
    pub leader_epoch: i32,
    /// The client's metadata string.
    pub metadata: String,
    /// When it was committed (ms).
    pub commit_timestamp: i64,
}

/// One member of a `GroupMetadataValue`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemberValue {
    /// `memberId`.
    pub member_id: String,
    /// `groupInstanceId` (static membership).
    pub group_instance_id: Option<String>,
    /// `clientId`.
    pub client_id: String,
    /// `clientHost`.
    pub client_host: String,
    /// `rebalanceTimeout` (ms).
    pub rebalance_timeout_ms: i32,
    /// `sessionTimeout` (ms).
    pub session_timeout_ms: i32,
    /// The member's metadata for the chosen protocol.
    pub subscription: Bytes,
    /// What the leader assigned it.
    pub assignment: Bytes,
}

/// One `GroupMetadataValue`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupValue {
    /// `protocolType` ("consumer" for consumers; empty for a simple group).
    pub protocol_type: String,
    /// The generation.
    pub generation: i32,
    /// The chosen protocol (assignor).
    pub protocol: Option<String>,
    /// The leader's member id.
    pub leader: Option<String>,
    /// When the group reached this state (ms).
    pub current_state_timestamp: i64,
    /// The members of this generation.
    pub members: Vec<MemberValue>,
}

/// Encodes the key of an offset.
pub fn encode_offset_key(group: &str, topic: &str, partition: i32) -> Bytes {
    let mut buf = BytesMut::new();
    buf.put_i16(1);
    put_string(&mut buf, group);
    put_string(&mut buf, topic);
    buf.put_i32(partition);
    buf.freeze()
}

/// Encodes the key of a group's metadata.
pub fn encode_group_key(group: &str) -> Bytes {
    let mut buf = BytesMut::new();
    buf.put_i16(2);
    put_string(&mut buf, group);
    buf.freeze()
}

/// Decodes a key.
///
/// # Errors
/// A message for a truncated key or an unknown key version.
pub fn decode_key(bytes: &Bytes) -> Result<GroupKey, String> {
    let mut buf = bytes.clone();
    let version = get_i16(&mut buf)?;
    let key = match version {
        0 | 1 => GroupKey::Offset {
            group: get_string(&mut buf)?,
            topic: get_string(&mut buf)?,
            partition: get_i32(&mut buf)?,
        },
        2 => GroupKey::Group(get_string(&mut buf)?),
        other => return Err(format!("unknown __consumer_offsets key version {other}")),
    };
    if buf.has_remaining() {
        return Err("trailing bytes after a __consumer_offsets key".to_owned());
    }
    Ok(key)
}

/// Encodes an `OffsetCommitValue` v3.
pub fn encode_offset_value(value: &OffsetValue) -> Bytes {
    let mut buf = BytesMut::new();
    buf.put_i16(3);
    buf.put_i64(value.offset);
    buf.put_i32(value.leader_epoch);
    put_string(&mut buf, &value.metadata);
    buf.put_i64(value.commit_timestamp);
    buf.freeze()
}

/// Decodes an `OffsetCommitValue` v0, v1 or v3.
///
/// # Errors
/// A message for a truncated value or an unknown version.
pub fn decode_offset_value(bytes: &Bytes) -> Result<OffsetValue, String> {
    let mut buf = bytes.clone();
    let version = get_i16(&mut buf)?;
    let offset = get_i64(&mut buf)?;
    let leader_epoch = if version >= 3 { get_i32(&mut buf)? } else { -1 };
    let metadata = get_string(&mut buf)?;
    let commit_timestamp = get_i64(&mut buf)?;
    match version {
        0 | 3 => {}
        1 => {
            get_i64(&mut buf)?;
        }
        other => return Err(format!("unknown OffsetCommitValue version {other}")),
    }
    Ok(OffsetValue {
        offset,
        leader_epoch,
        metadata,
        commit_timestamp,
    })
}

/// Encodes a `GroupMetadataValue` v3.
pub fn encode_group_value(value: &GroupValue) -> Bytes {
    let mut buf = BytesMut::new();
    buf.put_i16(3);
    put_string(&mut buf, &value.protocol_type);
    buf.put_i32(value.generation);
    put_nullable(&mut buf, value.protocol.as_deref());
    put_nullable(&mut buf, value.leader.as_deref());
    buf.put_i64(value.current_state_timestamp);
    buf.put_i32(value.members.len() as i32);
    for member in &value.members {
        put_string(&mut buf, &member.member_id);
        put_nullable(&mut buf, member.group_instance_id.as_deref());
        put_string(&mut buf, &member.client_id);
        put_string(&mut buf, &member.client_host);
        buf.put_i32(member.rebalance_timeout_ms);
        buf.put_i32(member.session_timeout_ms);
        put_bytes(&mut buf, &member.subscription);
        put_bytes(&mut buf, &member.assignment);
    }
    buf.freeze()
}

/// Decodes a `GroupMetadataValue` v3.
///
/// # Errors
/// A message for a truncated value or a version other than 3.
pub fn decode_group_value(bytes: &Bytes) -> Result<GroupValue, String> {
    let mut buf = bytes.clone();
    let version = get_i16(&mut buf)?;
    if version != 3 {
        return Err(format!("unsupported GroupMetadataValue version {version}"));
    }
    let protocol_type = get_string(&mut buf)?;
    let generation = get_i32(&mut buf)?;
    let protocol = get_nullable(&mut buf)?;
    let leader = get_nullable(&mut buf)?;
    let current_state_timestamp = get_i64(&mut buf)?;
    let count = get_i32(&mut buf)?;
    let mut members = Vec::new();
    for _ in 0..count.max(0) {
        members.push(MemberValue {
            member_id: get_string(&mut buf)?,
            group_instance_id: get_nullable(&mut buf)?,
            client_id: get_string(&mut buf)?,
            client_host: get_string(&mut buf)?,
            rebalance_timeout_ms: get_i32(&mut buf)?,
            session_timeout_ms: get_i32(&mut buf)?,
            subscription: get_bytes(&mut buf)?,
            assignment: get_bytes(&mut buf)?,
        });
    }
    Ok(GroupValue {
        protocol_type,
        generation,
        protocol,
        leader,
        current_state_timestamp,
        members,
    })
}

fn put_string(buf: &mut BytesMut, text: &str) {
    buf.put_i16(text.len() as i16);
    buf.put_slice(text.as_bytes());
}

fn put_nullable(buf: &mut BytesMut, text: Option<&str>) {
    match text {
        None => buf.put_i16(-1),
        Some(text) => put_string(buf, text),
    }
}

fn put_bytes(buf: &mut BytesMut, bytes: &[u8]) {
    buf.put_i32(bytes.len() as i32);
    buf.put_slice(bytes);
}

fn need(buf: &Bytes, len: usize) -> Result<(), String> {
    if buf.remaining() < len {
        return Err("truncated __consumer_offsets record".to_owned());
    }
    Ok(())
}

fn get_i16(buf: &mut Bytes) -> Result<i16, String> {
    need(buf, 2)?;
    Ok(buf.get_i16())
}

fn get_i32(buf: &mut Bytes) -> Result<i32, String> {
    need(buf, 4)?;
    Ok(buf.get_i32())
}

fn get_i64(buf: &mut Bytes) -> Result<i64, String> {
    need(buf, 8)?;
    Ok(buf.get_i64())
}

fn get_nullable(buf: &mut Bytes) -> Result<Option<String>, String> {
    let len = get_i16(buf)?;
    if len < 0 {
        return Ok(None);
    }
    let len = len as usize;
    need(buf, len)?;
    let raw = buf.split_to(len);
    String::from_utf8(raw.to_vec())
        .map(Some)
        .map_err(|_| "a __consumer_offsets string is not UTF-8".to_owned())
}

fn get_string(buf: &mut Bytes) -> Result<String, String> {
    get_nullable(buf)?.ok_or_else(|| "a null string where Kafka requires one".to_owned())
}

fn get_bytes(buf: &mut Bytes) -> Result<Bytes, String> {
    let len = get_i32(buf)?;
    if len < 0 {
        return Ok(Bytes::new());
    }
    need(buf, len as usize)?;
    Ok(buf.split_to(len as usize))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn offset_records_have_kafkas_bytes() {
        let key = encode_offset_key("g", "t", 3);
        assert_eq!(&key[..], b"\x00\x01\x00\x01g\x00\x01t\x00\x00\x00\x03");
        assert_eq!(
            decode_key(&key).unwrap(),
            GroupKey::Offset {
                group: "g".into(),
                topic: "t".into(),
                partition: 3
            }
        );
        let value = OffsetValue {
            offset: 42,
            leader_epoch: 7,
            metadata: "m".into(),
            commit_timestamp: 1000,
        };
        let bytes = encode_offset_value(&value);
        assert_eq!(
            &bytes[..],
            b"\x00\x03\0\0\0\0\0\0\0\x2a\0\0\0\x07\x00\x01m\0\0\0\0\0\0\x03\xe8"
        );
        assert_eq!(decode_offset_value(&bytes).unwrap(), value);
        // v1 (with an expire timestamp, no leader epoch), as older Kafkas wrote it.
        let v1 = Bytes::from_static(
            b"\x00\x01\0\0\0\0\0\0\0\x05\x00\x00\0\0\0\0\0\0\0\x01\0\0\0\0\0\0\0\x02",
        );
        assert_eq!(
            decode_offset_value(&v1).unwrap(),
            OffsetValue {
                offset: 5,
                leader_epoch: -1,
                metadata: String::new(),
                commit_timestamp: 1
            }
        );
    }

    #[test]
    fn group_records_round_trip_with_kafkas_layout() {
        let key = encode_group_key("grp");
        assert_eq!(&key[..], b"\x00\x02\x00\x03grp");
        assert_eq!(decode_key(&key).unwrap(), GroupKey::Group("grp".into()));
        let value = GroupValue {
            protocol_type: "consumer".into(),
            generation: 2,
            protocol: Some("range".into()),
            leader: Some("m1".into()),
            current_state_timestamp: 9,
            members: vec![MemberValue {
                member_id: "m1".into(),
                group_instance_id: None,
                client_id: "c".into(),
                client_host: "/h".into(),
                rebalance_timeout_ms: 300_000,
                session_timeout_ms: 45_000,
                subscription: Bytes::from_static(b"sub"),
                assignment: Bytes::from_static(b"as"),
            }],
        };
        let bytes = encode_group_value(&value);
        assert_eq!(&bytes[..12], b"\x00\x03\x00\x08consumer");
        assert_eq!(decode_group_value(&bytes).unwrap(), value);
        assert!(decode_group_value(&bytes.slice(..bytes.len() - 1)).is_err());
        assert!(decode_key(&Bytes::from_static(b"\x00\x09")).is_err());
        assert!(decode_key(&Bytes::from_static(b"\x00\x02\x00\x05ab")).is_err());
    }
}
