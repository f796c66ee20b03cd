//! [`ProducerIdManager`]: InitProducerId's handle (Kafka's `RPCProducerIdManager`): hands out
//! ids from this broker's block ([`ProducerIdBlock`]) and asks the active controller for the
//! next block (AllocateProducerIds) when it is used up.

use std::sync::Arc;
use std::time::Duration;

use kafka_protocol::ResponseError;
use kafka_protocol::messages::{AllocateProducerIdsRequest, RequestKind, ResponseKind};

use crate::controller::Quorum;
use crate::coordinator::producer_ids::ProducerIdBlock;
use logjam_storage::ProducerId;

/// How long a broker waits for the controller's AllocateProducerIds answer.
const PRODUCER_ID_BLOCK_TIMEOUT: Duration = Duration::from_secs(5);

/// Producer ids for this broker.
#[derive(Debug)]
pub struct ProducerIdManager {
    node_id: i32,
    quorum: Arc<Quorum>,
    /// The block ids are handed out of. An async mutex: it is held while AllocateProducerIds
    /// is in flight, so one block is fetched at a time.
    block: tokio::sync::Mutex<ProducerIdBlock>,
}

impl ProducerIdManager {
    /// A manager for broker `node_id`, asking the controller through `quorum`.
    pub fn new(node_id: i32, quorum: Arc<Quorum>) -> ProducerIdManager {
        ProducerIdManager {
            node_id,
            quorum,
            block: tokio::sync::Mutex::new(ProducerIdBlock::default()),
        }
    }

    /// A fresh producer id for a non-transactional InitProducerId.
    ///
    /// # Errors
    /// `COORDINATOR_LOAD_IN_PROGRESS` (retriable, as Kafka's `RPCProducerIdManager` answers)
    /// when no block could be had from the controller.
    pub async fn next_producer_id(&self) -> Result<ProducerId, ResponseError> {
        let mut block = self.block.lock().await;
        if let Some(id) = block.claim() {
            return Ok(id);
        }
        let request = AllocateProducerIdsRequest::default()
            .with_broker_id(kafka_protocol::messages::BrokerId(self.node_id))
            .with_broker_epoch(self.quorum.status().broker_epoch.unwrap_or(-1));
        let answer = self
            .quorum
            .forward(
                RequestKind::AllocateProducerIds(request),
                PRODUCER_ID_BLOCK_TIMEOUT,
            )
            .await;
        match answer {
            Some(ResponseKind::AllocateProducerIds(response)) if response.error_code == 0 => {
                *block =
                    ProducerIdBlock::new(response.producer_id_start.0, response.producer_id_len);
                tracing::info!(
                    start = response.producer_id_start.0,
                    len = response.producer_id_len,
                    "new producer id block"
                );
                block
                    .claim()
                    .ok_or(ResponseError::CoordinatorLoadInProgress)
            }
            other => {
                tracing::warn!(answer = ?other, "no producer id block from the controller");
                Err(ResponseError::CoordinatorLoadInProgress)
            }
        }
    }
}
