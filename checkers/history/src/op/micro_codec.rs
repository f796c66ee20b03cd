//! The JSON encoding of micro-ops (Jepsen's `["send", k, v]`, `["poll", {k: [[o, v]]}]` and
//! the fetch ranges a read_committed poll records), with the checks that refuse a
//! malformed one while it is read (a negative offset, a range whose end is before its start).

use serde::de::{self, DeserializeSeed, MapAccess, SeqAccess, Visitor};
use serde::ser::{SerializeMap, SerializeSeq};
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use super::*;

impl Serialize for MicroOp {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self {
            MicroOp::Send { key, value, offset } => {
                let mut seq = serializer.serialize_seq(Some(3))?;
                seq.serialize_element("send")?;
                seq.serialize_element(key)?;
                match offset {
                    None => seq.serialize_element(value)?,
                    Some(o) => seq.serialize_element(&(o, value))?,
                }
                seq.end()
            }
            MicroOp::Poll { reads: None } => {
                let mut seq = serializer.serialize_seq(Some(1))?;
                seq.serialize_element("poll")?;
                seq.end()
            }
            MicroOp::Poll { reads: Some(reads) } => {
                let fetched = reads.iter().any(|kr| kr.fetch.is_some());
                let mut seq = serializer.serialize_seq(Some(2 + usize::from(fetched)))?;
                seq.serialize_element("poll")?;
                seq.serialize_element(&PollMap(reads))?;
                if fetched {
                    seq.serialize_element(&FetchMap(reads))?;
                }
                seq.end()
            }
        }
    }
}

struct PollMap<'a>(&'a [KeyReads]);

impl Serialize for PollMap<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(Some(self.0.len()))?;
        for kr in self.0 {
            // An integer map key is written as its decimal string, as JSON requires.
            map.serialize_entry(&kr.key.0, &Pairs(&kr.records))?;
        }
        map.end()
    }
}

/// The fetch ranges of a poll, `{"<k>": [from, to, lso, epoch], ...}`.
struct FetchMap<'a>(&'a [KeyReads]);

impl Serialize for FetchMap<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let with: Vec<(&Key, &Fetched)> = self
            .0
            .iter()
            .filter_map(|kr| kr.fetch.as_ref().map(|f| (&kr.key, f)))
            .collect();
        let mut map = serializer.serialize_map(Some(with.len()))?;
        for (key, f) in with {
            map.serialize_entry(&key.0, &(f.from, f.to, f.lso, f.epoch))?;
        }
        map.end()
    }
}

/// A key's records as `[[offset, value], ...]`, written straight from the slice.
struct Pairs<'a>(&'a [Record]);

impl Serialize for Pairs<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut seq = serializer.serialize_seq(Some(self.0.len()))?;
        for record in self.0 {
            seq.serialize_element(&(record.offset, record.value))?;
        }
        seq.end()
    }
}

impl<'de> Deserialize<'de> for MicroOp {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_seq(MicroOpVisitor)
    }
}

struct MicroOpVisitor;

impl<'de> Visitor<'de> for MicroOpVisitor {
    type Value = MicroOp;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a micro-op: [\"send\", key, value], [\"send\", key, [offset, value]], [\"poll\"] or [\"poll\", {key: [[offset, value], ...]}]")
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<MicroOp, A::Error> {
        let tag: std::borrow::Cow<'de, str> = seq
            .next_element()?
            .ok_or_else(|| de::Error::invalid_length(0, &self))?;
        match tag.as_ref() {
            "send" => {
                let key: Key = seq
                    .next_element()?
                    .ok_or_else(|| de::Error::invalid_length(1, &self))?;
                let payload: SendPayload = seq
                    .next_element()?
                    .ok_or_else(|| de::Error::invalid_length(2, &self))?;
                if seq.next_element::<IgnoredAny>()?.is_some() {
                    return Err(de::Error::invalid_length(4, &self));
                }
                if let Some(offset) = payload.offset {
                    check_offset(key, offset)?;
                }
                Ok(MicroOp::Send {
                    key,
                    value: payload.value,
                    offset: payload.offset,
                })
            }
            "poll" => {
                let reads = seq.next_element_seed(PollMapSeed)?;
                let fetches = seq.next_element_seed(FetchMapSeed)?.flatten();
                if seq.next_element::<IgnoredAny>()?.is_some() {
                    return Err(de::Error::invalid_length(4, &self));
                }
                let mut reads = reads.flatten();
                if let Some(fetches) = fetches {
                    let reads = reads.get_or_insert_with(Vec::new);
                    for (key, fetch) in fetches {
                        match reads.iter_mut().find(|kr| kr.key == key) {
                            Some(kr) => kr.fetch = Some(fetch),
                            None => reads.push(KeyReads {
                                key,
                                records: Vec::new(),
                                fetch: Some(fetch),
                            }),
                        }
                    }
                }
                Ok(MicroOp::Poll { reads })
            }
            other => Err(de::Error::unknown_variant(other, &["send", "poll"])),
        }
    }
}

/// Offsets are positions in a partition, never negative: a recorder that wrote Kafka's `-1`
/// ("no offset") where it meant "unknown" must write `null` instead.
fn check_offset<E: de::Error>(key: Key, offset: Offset) -> Result<(), E> {
    if offset.0 < 0 {
        return Err(E::custom(format_args!(
            "offset {offset} of key {key} is negative (offsets are >= 0; an unknown offset is \
             written as a bare value or [null, value])"
        )));
    }
    Ok(())
}

/// The third element of a send: `v`, `[offset, v]` or `[null, v]`.
struct SendPayload {
    value: Value,
    offset: Option<Offset>,
}

impl<'de> Deserialize<'de> for SendPayload {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct PayloadVisitor;
        impl<'de> Visitor<'de> for PayloadVisitor {
            type Value = SendPayload;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("an integer value or [offset|null, value]")
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<SendPayload, E> {
                Ok(SendPayload {
                    value: Value(v),
                    offset: None,
                })
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<SendPayload, E> {
                let v = i64::try_from(v)
                    .map_err(|_| E::invalid_value(de::Unexpected::Unsigned(v), &self))?;
                self.visit_i64(v)
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<SendPayload, A::Error> {
                let offset: Option<Offset> = seq
                    .next_element()?
                    .ok_or_else(|| de::Error::invalid_length(0, &self))?;
                let value: Value = seq
                    .next_element()?
                    .ok_or_else(|| de::Error::invalid_length(1, &self))?;
                if seq.next_element::<IgnoredAny>()?.is_some() {
                    return Err(de::Error::invalid_length(3, &self));
                }
                Ok(SendPayload { value, offset })
            }
        }
        deserializer.deserialize_any(PayloadVisitor)
    }
}

/// Decodes the optional poll result map; `null` means "no result" like an absent element.
struct PollMapSeed;

impl<'de> DeserializeSeed<'de> for PollMapSeed {
    type Value = Option<Vec<KeyReads>>;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Self::Value, D::Error> {
        struct MapVisitor;
        impl<'de> Visitor<'de> for MapVisitor {
            type Value = Option<Vec<KeyReads>>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a map from key (as a string) to [[offset, value], ...]")
            }
            fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
                Ok(None)
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
                let mut reads = Vec::with_capacity(map.size_hint().unwrap_or(1));
                while let Some(key) = map.next_key::<std::borrow::Cow<'de, str>>()? {
                    let key: i64 = key.parse().map_err(|_| {
                        de::Error::invalid_value(de::Unexpected::Str(&key), &"an integer key")
                    })?;
                    let pairs: Vec<(Offset, Value)> = map.next_value()?;
                    for (offset, _) in &pairs {
                        check_offset(Key(key), *offset)?;
                    }
                    reads.push(KeyReads {
                        key: Key(key),
                        records: pairs
                            .into_iter()
                            .map(|(offset, value)| Record { offset, value })
                            .collect(),
                        fetch: None,
                    });
                }
                Ok(Some(reads))
            }
        }
        deserializer.deserialize_any(MapVisitor)
    }
}

/// Decodes the optional fetch map of a poll: `{"<k>": [from, to, lso, epoch], ...}`.
struct FetchMapSeed;

impl<'de> DeserializeSeed<'de> for FetchMapSeed {
    type Value = Option<Vec<(Key, Fetched)>>;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Self::Value, D::Error> {
        struct MapVisitor;
        impl<'de> Visitor<'de> for MapVisitor {
            type Value = Option<Vec<(Key, Fetched)>>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a map from key (as a string) to [from, to, lso, epoch]")
            }
            fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
                Ok(None)
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
                let mut fetches = Vec::with_capacity(map.size_hint().unwrap_or(1));
                while let Some(key) = map.next_key::<std::borrow::Cow<'de, str>>()? {
                    let key: i64 = key.parse().map_err(|_| {
                        de::Error::invalid_value(de::Unexpected::Str(&key), &"an integer key")
                    })?;
                    let (from, to, lso, epoch): (Offset, Offset, Offset, i32) = map.next_value()?;
                    for offset in [from, to, lso] {
                        check_offset(Key(key), offset)?;
                    }
                    if to < from {
                        return Err(de::Error::custom(format_args!(
                            "fetch of key {key} ends at {to} before it starts at {from}"
                        )));
                    }
                    fetches.push((
                        Key(key),
                        Fetched {
                            from,
                            to,
                            lso,
                            epoch,
                        },
                    ));
                }
                Ok(Some(fetches))
            }
        }
        deserializer.deserialize_any(MapVisitor)
    }
}
