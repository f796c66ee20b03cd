//! Newtypes for every id and position that crosses a module boundary: op indices, processes,
//! keys, offsets and values. They serialize as the bare JSON numbers of schema v1; the checkers
//! and the harness use them so an offset can never be passed where a value was meant.

use std::fmt;

use serde::de::{self, Visitor};
use serde::{Deserialize, Deserializer, Serialize, Serializer};

macro_rules! id_newtype {
    ($(#[$doc:meta])* $name:ident($inner:ty)) => {
        $(#[$doc])*
        #[derive(
            Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize,
        )]
        #[serde(transparent)]
        pub struct $name(pub $inner);

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                self.0.fmt(f)
            }
        }
    };
}

id_newtype!(
    /// The `index` of an op line: its position in the history, strictly increasing.
    OpIndex(u64)
);
id_newtype!(
    /// A client process (Jepsen's "process"): one logical thread issuing one op at a time.
    ProcessId(u64)
);
id_newtype!(
    /// A key of the queue workload; each key maps to exactly one topic-partition.
    Key(i64)
);
id_newtype!(
    /// A Kafka offset within the topic-partition of a key. Offsets may be sparse.
    Offset(i64)
);
id_newtype!(
    /// A value sent to a key. Workloads keep values unique per key.
    Value(i64)
);

/// Who issued an op: a numbered client process or the nemesis (fault injector).
///
/// Serialized as a JSON integer for clients and the string `"nemesis"` for the nemesis.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Process {
    /// A client process.
    Client(ProcessId),
    /// The nemesis: faults share the timeline with client ops.
    Nemesis,
}

impl Process {
    /// The client process id, or `None` for the nemesis.
    pub fn client(self) -> Option<ProcessId> {
        match self {
            Process::Client(p) => Some(p),
            Process::Nemesis => None,
        }
    }
}

impl fmt::Display for Process {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Process::Client(p) => p.fmt(f),
            Process::Nemesis => f.write_str("nemesis"),
        }
    }
}

impl Serialize for Process {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self {
            Process::Client(p) => serializer.serialize_u64(p.0),
            Process::Nemesis => serializer.serialize_str("nemesis"),
        }
    }
}

impl<'de> Deserialize<'de> for Process {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct ProcessVisitor;
        impl Visitor<'_> for ProcessVisitor {
            type Value = Process;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a non-negative integer process id or \"nemesis\"")
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<Process, E> {
                Ok(Process::Client(ProcessId(v)))
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<Process, E> {
                u64::try_from(v)
                    .map(|v| Process::Client(ProcessId(v)))
                    .map_err(|_| E::invalid_value(de::Unexpected::Signed(v), &self))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Process, E> {
                if v == "nemesis" {
                    Ok(Process::Nemesis)
                } else {
                    Err(E::invalid_value(de::Unexpected::Str(v), &self))
                }
            }
        }
        deserializer.deserialize_any(ProcessVisitor)
    }
}
