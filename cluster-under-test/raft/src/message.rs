//! [`Message`] and [`Envelope`]: every replica-to-replica message, addressed. The node turns an
//! envelope into one Kafka request or response (header correlation id included) and back.

use crate::{
    CorrelationId, NodeId,
    rpc::{
        begin_quorum_epoch::{BeginQuorumEpochRequest, BeginQuorumEpochResponse},
        end_quorum_epoch::{EndQuorumEpochRequest, EndQuorumEpochResponse},
        fetch::{FetchRequest, FetchResponse},
        fetch_snapshot::{FetchSnapshotRequest, FetchSnapshotResponse},
        vote::{VoteRequest, VoteResponse},
    },
};

/// One KRaft RPC body.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Message {
    /// Vote request (52).
    Vote(VoteRequest),
    /// Vote response (52).
    VoteResponse(VoteResponse),
    /// BeginQuorumEpoch request (53).
    BeginQuorumEpoch(BeginQuorumEpochRequest),
    /// BeginQuorumEpoch response (53).
    BeginQuorumEpochResponse(BeginQuorumEpochResponse),
    /// EndQuorumEpoch request (54).
    EndQuorumEpoch(EndQuorumEpochRequest),
    /// EndQuorumEpoch response (54).
    EndQuorumEpochResponse(EndQuorumEpochResponse),
    /// Fetch request (1).
    Fetch(FetchRequest),
    /// Fetch response (1).
    FetchResponse(FetchResponse),
    /// FetchSnapshot request (59).
    FetchSnapshot(FetchSnapshotRequest),
    /// FetchSnapshot response (59).
    FetchSnapshotResponse(FetchSnapshotResponse),
}

impl Message {
    /// Whether this is a request (the receiver answers with the same correlation id).
    #[must_use]
    pub fn is_request(&self) -> bool {
        matches!(
            self,
            Message::Vote(_)
                | Message::BeginQuorumEpoch(_)
                | Message::EndQuorumEpoch(_)
                | Message::Fetch(_)
                | Message::FetchSnapshot(_)
        )
    }

    /// Kafka's API key for this message.
    #[must_use]
    pub fn api_key(&self) -> i16 {
        match self {
            Message::Fetch(_) | Message::FetchResponse(_) => 1,
            Message::Vote(_) | Message::VoteResponse(_) => 52,
            Message::BeginQuorumEpoch(_) | Message::BeginQuorumEpochResponse(_) => 53,
            Message::EndQuorumEpoch(_) | Message::EndQuorumEpochResponse(_) => 54,
            Message::FetchSnapshot(_) | Message::FetchSnapshotResponse(_) => 59,
        }
    }
}

/// A message with its addressing, as it leaves one node and enters another.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Envelope {
    /// Sender.
    pub from: NodeId,
    /// Receiver.
    pub to: NodeId,
    /// The Kafka header correlation id: fresh for a request, echoed by its response.
    pub correlation_id: CorrelationId,
    /// The RPC body.
    pub message: Message,
}
