//! The sequential specifications shipped with the engine, one per file.
//!
//! | model | object | partitioned |
//! | --- | --- | --- |
//! | [`register::Register`] | read/write register | no |
//! | [`cas::CasRegister`] | read/write/compare-and-set register (etcd) | no |
//! | [`kv::KvModel`] | string key-value store with get/put/append | by key |
//! | [`kv_map::KvMapModel`] | the same store as one map state | no |
//! | [`log::LogModel`] | one Kafka partition: send and read | no |

pub mod cas;
pub mod kv;
pub mod kv_map;
pub mod log;
pub mod register;
