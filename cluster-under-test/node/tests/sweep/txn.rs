//! The transaction APIs' part of the version sweep: FindCoordinator (a transactional id's
//! coordinator is this node; v0 is a group lookup: this node too, `groups::prepare` having
//! created `__consumer_offsets`), AddPartitionsToTxn and AddOffsetsToTxn of an open
//! transaction, TxnOffsetCommit of the sweep group's offsets in it, EndTxn of one transaction
//! per version, DescribeTransactions and ListTransactions seeing the open one.

use kafka_protocol::messages::{
    AddOffsetsToTxnRequest, AddPartitionsToTxnRequest, ApiKey, DescribeTransactionsRequest,
    EndTxnRequest, FindCoordinatorRequest, GroupId, InitProducerIdRequest, ListTransactionsRequest,
    ProducerId, RequestKind, ResponseKind, TransactionalId, TxnOffsetCommitRequest,
    add_partitions_to_txn_request, txn_offset_commit_request,
};

use super::{Connection, Context, TOPIC, name, text};

/// The transaction the sweep keeps open.
pub const OPEN: &str = "sweep-txn";

/// The transaction EndTxn at `version` ends.
fn ended(version: i16) -> String {
    format!("sweep-end-v{version}")
}

/// Producer ids and epochs of the sweep's transactional ids.
#[derive(Debug, Default)]
pub struct Producers {
    /// `OPEN`'s.
    pub open: (i64, i16),
    /// Each EndTxn version's.
    pub ended: Vec<(i64, i16)>,
}

fn txn_id(id: &str) -> TransactionalId {
    TransactionalId(text(id))
}

/// Waits for the coordinator (creating `__transaction_state`), then opens `OPEN` and one
/// transaction per EndTxn version, each with the sweep's partition added.
pub fn prepare(client: &mut Connection) -> Producers {
    retry(client, "FindCoordinator", |client| {
        match client.call(
            ApiKey::FindCoordinator,
            3,
            &RequestKind::FindCoordinator(
                FindCoordinatorRequest::default()
                    .with_key(text(OPEN))
                    .with_key_type(1),
            ),
        ) {
            Ok(ResponseKind::FindCoordinator(r)) if r.error_code == 0 => Ok(()),
            Ok(ResponseKind::FindCoordinator(r)) => Err(r.error_code),
            other => panic!("FindCoordinator: {other:?}"),
        }
    });
    let open = init(client, OPEN);
    let ended = (0..=5)
        .map(|version| init(client, &ended(version)))
        .collect();
    Producers { open, ended }
}

/// Calls `call` until it succeeds, waiting out the retriable coordinator errors while the
/// topic is created and its partitions load.
fn retry(
    client: &mut Connection,
    what: &str,
    mut call: impl FnMut(&mut Connection) -> Result<(), i16>,
) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    loop {
        match call(client) {
            Ok(()) => return,
            Err(14 | 15 | 16 | 51) if std::time::Instant::now() < deadline => {
                std::thread::sleep(std::time::Duration::from_millis(100));
            }
            Err(code) => panic!("{what}: error {code}"),
        }
    }
}

/// InitProducerId for `id`, then its sweep partition added.
fn init(client: &mut Connection, id: &str) -> (i64, i16) {
    let mut answer = (-1, -1);
    retry(client, "InitProducerId", |client| {
        match client.call(
            ApiKey::InitProducerId,
            5,
            &RequestKind::InitProducerId(
                InitProducerIdRequest::default()
                    .with_transactional_id(Some(txn_id(id)))
                    .with_transaction_timeout_ms(600_000)
                    .with_producer_id(ProducerId(-1))
                    .with_producer_epoch(-1),
            ),
        ) {
            Ok(ResponseKind::InitProducerId(r)) if r.error_code == 0 => {
                answer = (r.producer_id.0, r.producer_epoch);
                Ok(())
            }
            Ok(ResponseKind::InitProducerId(r)) => Err(r.error_code),
            other => panic!("InitProducerId: {other:?}"),
        }
    });
    let added = client.call(ApiKey::AddPartitionsToTxn, 3, &add_request(3, id, answer));
    match added {
        Ok(ResponseKind::AddPartitionsToTxn(r))
            if r.results_by_topic_v3_and_below[0].results_by_partition[0].partition_error_code
                == 0 => {}
        other => panic!("AddPartitionsToTxn v3 for {id}: {other:?}"),
    }
    answer
}

fn add_request(version: i16, id: &str, (producer_id, epoch): (i64, i16)) -> RequestKind {
    let topics = vec![
        add_partitions_to_txn_request::AddPartitionsToTxnTopic::default()
            .with_name(name(TOPIC))
            .with_partitions(vec![0]),
    ];
    RequestKind::AddPartitionsToTxn(if version <= 3 {
        AddPartitionsToTxnRequest::default()
            .with_v3_and_below_transactional_id(txn_id(id))
            .with_v3_and_below_producer_id(ProducerId(producer_id))
            .with_v3_and_below_producer_epoch(epoch)
            .with_v3_and_below_topics(topics)
    } else {
        AddPartitionsToTxnRequest::default().with_transactions(vec![
            add_partitions_to_txn_request::AddPartitionsToTxnTransaction::default()
                .with_transactional_id(txn_id(id))
                .with_producer_id(ProducerId(producer_id))
                .with_producer_epoch(epoch)
                .with_verify_only(version == 5)
                .with_topics(topics),
        ])
    })
}

/// A request of a transaction API at `version`.
pub fn request_for(key: ApiKey, version: i16, context: &Context) -> Option<RequestKind> {
    let (producer_id, epoch) = context.producers.open;
    Some(match key {
        ApiKey::FindCoordinator if version == 0 => RequestKind::FindCoordinator(
            FindCoordinatorRequest::default().with_key(text("sweep-group")),
        ),
        ApiKey::FindCoordinator if version <= 3 => RequestKind::FindCoordinator(
            FindCoordinatorRequest::default()
                .with_key(text(OPEN))
                .with_key_type(1),
        ),
        ApiKey::FindCoordinator => RequestKind::FindCoordinator(
            FindCoordinatorRequest::default()
                .with_coordinator_keys(vec![text(OPEN), text(&ended(0))])
                .with_key_type(1),
        ),
        ApiKey::AddPartitionsToTxn => add_request(version, OPEN, context.producers.open),
        ApiKey::AddOffsetsToTxn => RequestKind::AddOffsetsToTxn(
            AddOffsetsToTxnRequest::default()
                .with_transactional_id(txn_id(OPEN))
                .with_producer_id(ProducerId(producer_id))
                .with_producer_epoch(epoch)
                .with_group_id(GroupId(text("sweep-group"))),
        ),
        ApiKey::TxnOffsetCommit => RequestKind::TxnOffsetCommit(
            TxnOffsetCommitRequest::default()
                .with_transactional_id(txn_id(OPEN))
                .with_group_id(GroupId(text("sweep-group")))
                .with_producer_id(ProducerId(producer_id))
                .with_producer_epoch(epoch)
                .with_generation_id(-1)
                .with_topics(vec![
                    txn_offset_commit_request::TxnOffsetCommitRequestTopic::default()
                        .with_name(name(TOPIC))
                        .with_partitions(vec![
                            txn_offset_commit_request::TxnOffsetCommitRequestPartition::default()
                                .with_partition_index(0)
                                .with_committed_offset(i64::from(version) + 1)
                                .with_committed_leader_epoch(-1),
                        ]),
                ]),
        ),
        ApiKey::EndTxn => {
            let (producer_id, epoch) = context.producers.ended[version as usize];
            RequestKind::EndTxn(
                EndTxnRequest::default()
                    .with_transactional_id(txn_id(&ended(version)))
                    .with_producer_id(ProducerId(producer_id))
                    .with_producer_epoch(epoch)
                    .with_committed(true),
            )
        }
        ApiKey::DescribeTransactions => RequestKind::DescribeTransactions(
            DescribeTransactionsRequest::default()
                .with_transactional_ids(vec![txn_id(OPEN), txn_id("sweep-unknown")]),
        ),
        ApiKey::ListTransactions => RequestKind::ListTransactions(
            ListTransactionsRequest::default()
                .with_state_filters(vec![text("Ongoing"), text("NoSuchState")])
                .with_duration_filter(-1),
        ),
        _ => return None,
    })
}

/// Checks a transaction API's answer at `version`; `None` for other APIs.
pub fn check(
    version: i16,
    response: &ResponseKind,
    context: &Context,
) -> Option<Result<(), String>> {
    let (producer_id, epoch) = context.producers.open;
    let node = context.node_id;
    Some(match response {
        ResponseKind::FindCoordinator(r) if version == 0 => {
            if r.error_code == 0 && r.node_id.0 == node && r.port > 0 {
                Ok(())
            } else {
                Err(format!("a group lookup answered {r:?}"))
            }
        }
        ResponseKind::FindCoordinator(r) if version <= 3 => {
            if r.error_code == 0 && r.node_id.0 == node && r.port > 0 {
                Ok(())
            } else {
                Err(format!("{r:?}"))
            }
        }
        ResponseKind::FindCoordinator(r) => {
            let keys: Vec<&str> = r.coordinators.iter().map(|c| c.key.as_str()).collect();
            if keys == [OPEN, ended(0).as_str()]
                && r.coordinators
                    .iter()
                    .all(|c| c.error_code == 0 && c.node_id.0 == node)
            {
                Ok(())
            } else {
                Err(format!("{r:?}"))
            }
        }
        ResponseKind::AddPartitionsToTxn(r) => {
            let topics = if version <= 3 {
                &r.results_by_topic_v3_and_below
            } else {
                match r.results_by_transaction.first() {
                    Some(t) if t.transactional_id.as_str() == OPEN => &t.topic_results,
                    _ => return Some(Err(format!("{r:?}"))),
                }
            };
            match topics.first().and_then(|t| t.results_by_partition.first()) {
                Some(p) if p.partition_index == 0 && p.partition_error_code == 0 => Ok(()),
                _ => Err(format!("{r:?}")),
            }
        }
        ResponseKind::AddOffsetsToTxn(r) if r.error_code == 0 => Ok(()),
        ResponseKind::TxnOffsetCommit(r) => {
            match r.topics.first().and_then(|t| t.partitions.first()) {
                Some(p) if p.partition_index == 0 && p.error_code == 0 => Ok(()),
                _ => Err(format!("{r:?}")),
            }
        }
        ResponseKind::EndTxn(r) => {
            let (_, ended_epoch) = context.producers.ended[version as usize];
            // v5 is TV2's: the epoch is bumped and answered.
            let expected = if version >= 5 { ended_epoch + 1 } else { -1 };
            if r.error_code == 0 && (version < 5 || r.producer_epoch == expected) {
                Ok(())
            } else {
                Err(format!("{r:?}"))
            }
        }
        ResponseKind::DescribeTransactions(r) => {
            let open = &r.transaction_states[0];
            let unknown = &r.transaction_states[1];
            if open.error_code == 0
                && open.transaction_state.as_str() == "Ongoing"
                && open.producer_id.0 == producer_id
                && open.producer_epoch == epoch
                && open.topics.iter().any(|t| t.topic.as_str() == TOPIC)
                && unknown.error_code == 105
            {
                Ok(())
            } else {
                Err(format!("{r:?}"))
            }
        }
        ResponseKind::ListTransactions(r) => {
            let listed: Vec<&str> = r
                .transaction_states
                .iter()
                .map(|t| t.transactional_id.as_str())
                .collect();
            if r.error_code == 0
                && listed == [OPEN]
                && r.unknown_state_filters.len() == 1
                && r.transaction_states[0].producer_id.0 == producer_id
            {
                Ok(())
            } else {
                Err(format!("{r:?}"))
            }
        }
        ResponseKind::AddOffsetsToTxn(r) => Err(format!("{r:?}")),
        _ => return None,
    })
}
