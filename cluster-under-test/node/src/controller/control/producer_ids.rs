//! Producer-id control (Kafka's `ProducerIdControlManager`): consecutive blocks of producer
//! ids for the brokers' InitProducerId, recorded as `ProducerIdsRecord`s.

use kafka_protocol::ResponseError;
use kafka_protocol::messages::{AllocateProducerIdsRequest, AllocateProducerIdsResponse};

use crate::metadata::{BrokerEpoch, BrokerId, MetadataRecord};

use super::{Decision, QuorumController};

impl QuorumController {
    /// AllocateProducerIds: hands the requesting broker the next block of
    /// [`PRODUCER_ID_BLOCK_SIZE`] producer ids (`ProducerIdControlManager`).
    pub fn allocate_producer_ids(
        &mut self,
        request: &AllocateProducerIdsRequest,
    ) -> Decision<AllocateProducerIdsResponse> {
        let broker_id = BrokerId(request.broker_id.0);
        let registration = self.image.brokers.get(&broker_id);
        if registration.is_none_or(|r| r.broker_epoch.0 != request.broker_epoch) {
            return Decision {
                records: Vec::new(),
                response: AllocateProducerIdsResponse::default()
                    .with_error_code(ResponseError::StaleBrokerEpoch.code())
                    .with_producer_id_start(kafka_protocol::messages::ProducerId(-1)),
            };
        }
        let start = self.image.next_producer_id;
        let records = vec![MetadataRecord::ProducerIds {
            broker_id,
            broker_epoch: BrokerEpoch(request.broker_epoch),
            next_producer_id: start + i64::from(PRODUCER_ID_BLOCK_SIZE),
        }];
        self.replay(&records);
        Decision {
            records,
            response: AllocateProducerIdsResponse::default()
                .with_producer_id_start(kafka_protocol::messages::ProducerId(start))
                .with_producer_id_len(PRODUCER_ID_BLOCK_SIZE),
        }
    }
}

/// Producer ids per AllocateProducerIds block (Kafka's `ProducerIdsBlock.PRODUCER_ID_BLOCK_SIZE`).
pub const PRODUCER_ID_BLOCK_SIZE: i32 = 1000;
