//! The broker's current block of producer ids (Kafka's `ProducerIdsBlock` in
//! `RPCProducerIdManager`): InitProducerId hands ids out of it one at a time; when it is
//! used up, `coordinator/producer_id_manager.rs` asks the active controller for the next block with
//! AllocateProducerIds (the controller records it as a `ProducerIdsRecord`, see
//! `controller/control.rs`). Pure: no I/O, the async fetch of a block lives in the broker.

use logjam_storage::ProducerId;

/// A contiguous range of producer ids owned by this broker.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ProducerIdBlock {
    /// The next id to hand out.
    next: i64,
    /// One past the last id of the block.
    end: i64,
}

impl ProducerIdBlock {
    /// The block of `len` ids starting at `start`, as AllocateProducerIds answered it.
    pub fn new(start: i64, len: i32) -> ProducerIdBlock {
        ProducerIdBlock {
            next: start,
            end: start.saturating_add(i64::from(len.max(0))),
        }
    }

    /// Takes the next id, or `None` when the block is used up (or was never fetched).
    pub fn claim(&mut self) -> Option<ProducerId> {
        (self.next < self.end).then(|| {
            let id = self.next;
            self.next += 1;
            ProducerId(id)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_block_hands_out_each_id_once_then_runs_dry() {
        let mut block = ProducerIdBlock::new(1000, 3);
        let ids: Vec<_> = std::iter::from_fn(|| block.claim()).collect();
        assert_eq!(
            ids,
            vec![ProducerId(1000), ProducerId(1001), ProducerId(1002)]
        );
        assert_eq!(block.claim(), None);
        assert_eq!(ProducerIdBlock::default().claim(), None);
    }
}
