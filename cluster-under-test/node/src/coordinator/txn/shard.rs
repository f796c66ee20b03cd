//! [`TxnShard`]: the state of one `__transaction_state` partition (Kafka's
//! `TransactionStateManager` cache for that partition), rebuilt by replaying the partition's
//! `TransactionLogKey`/`TransactionLogValue` records, and the records a transition writes.

use std::collections::BTreeMap;
use std::sync::Arc;

use crate::coordinator::shard::{CoordinatorRecord, CoordinatorShard};
use crate::coordinator::txn::metadata::TransactionMetadata;
use crate::coordinator::txn::record;

/// Every transactional id of one partition of `__transaction_state`.
#[derive(Debug, Clone, Default)]
pub struct TxnShard {
    /// Ids in name order (ListTransactions answers in a stable order). Values are shared so
    /// the runtime's copy-on-write of the latest state stays cheap.
    ids: BTreeMap<String, Arc<TransactionMetadata>>,
}

impl TxnShard {
    /// The state of `transactional_id`.
    pub fn get(&self, transactional_id: &str) -> Option<&TransactionMetadata> {
        self.ids.get(transactional_id).map(Arc::as_ref)
    }

    /// Every id with its state.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &TransactionMetadata)> {
        self.ids
            .iter()
            .map(|(id, meta)| (id.as_str(), meta.as_ref()))
    }
}

/// The record that sets `transactional_id` to `meta`.
pub fn record_of(transactional_id: &str, meta: &TransactionMetadata) -> CoordinatorRecord {
    CoordinatorRecord {
        key: Some(record::encode_key(transactional_id)),
        value: Some(record::encode_value(&meta.to_value())),
    }
}

impl CoordinatorShard for TxnShard {
    fn replay(&mut self, record: &CoordinatorRecord) -> Result<(), String> {
        let key = record
            .key
            .as_ref()
            .ok_or_else(|| "a __transaction_state record without a key".to_owned())?;
        let id = record::decode_key(key)?;
        match &record.value {
            None => {
                self.ids.remove(&id);
            }
            Some(value) => {
                let value = record::decode_value(value)?;
                let meta = TransactionMetadata::from_value(&value, self.get(&id))?;
                self.ids.insert(id, Arc::new(meta));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use super::*;
    use crate::coordinator::txn::metadata::TxnState;

    #[test]
    fn replay_keeps_the_last_state_and_the_epoch_before_a_bump() {
        let mut meta = TransactionMetadata {
            producer_id: 5,
            previous_producer_id: -1,
            next_producer_id: -1,
            producer_epoch: 0,
            last_producer_epoch: -1,
            timeout_ms: 1000,
            state: TxnState::Empty,
            partitions: BTreeSet::new(),
            start_ms: -1,
            last_update_ms: 1,
            tv2: true,
        };
        let mut shard = TxnShard::default();
        shard.replay(&record_of("a", &meta)).unwrap();
        meta.producer_epoch = 1;
        shard.replay(&record_of("a", &meta)).unwrap();
        meta.state = TxnState::Ongoing;
        meta.partitions.insert(("t".to_owned(), 2));
        shard.replay(&record_of("a", &meta)).unwrap();
        let got = shard.get("a").unwrap();
        assert_eq!(got.last_producer_epoch, 0);
        meta.last_producer_epoch = 0;
        assert_eq!(got, &meta);
        shard
            .replay(&CoordinatorRecord {
                key: Some(record::encode_key("a")),
                value: None,
            })
            .unwrap();
        assert!(shard.get("a").is_none());
        assert!(
            shard
                .replay(&CoordinatorRecord {
                    key: Some(bytes::Bytes::from_static(b"\x00")),
                    value: None
                })
                .is_err()
        );
    }
}
