//! Transaction-coordinator helpers of the node's integration tests: the requests of a
//! transaction built with `kafka-protocol` alone (InitProducerId, AddPartitionsToTxn, EndTxn,
//! DescribeTransactions, FindCoordinator), the control records of a partition, the layout of
//! a topic, and a five-node rig in which a commit's marker can be held back.

use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use kafka_protocol::messages::add_partitions_to_txn_request::AddPartitionsToTxnTopic;
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::{
    AddPartitionsToTxnRequest, AddPartitionsToTxnResponse, ApiKey, BrokerId,
    DescribeTransactionsRequest, DescribeTransactionsResponse, EndTxnRequest, EndTxnResponse,
    FetchRequest, FetchResponse, FindCoordinatorRequest, FindCoordinatorResponse,
    InitProducerIdRequest, InitProducerIdResponse, ProducerId, TopicName, TransactionalId,
};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::records::RecordBatchDecoder;

use super::{Cluster, connect, exchange, wait_until};

pub const TXN_TOPIC: &str = "__transaction_state";
pub const DATA: &str = "txn-data";

pub fn text(value: &str) -> StrBytes {
    StrBytes::from_string(value.to_owned())
}

/// Java's `String.hashCode`, written out independently of the node's.
pub fn partition_for(id: &str) -> i32 {
    let mut hash: i32 = 0;
    for unit in id.encode_utf16() {
        hash = hash.wrapping_mul(31).wrapping_add(unit as i32);
    }
    (if hash == i32::MIN { 0 } else { hash.abs() }) % 50
}

/// The coordinator of `key` (`key_type` 0: a group, 1: a transactional id) per
/// FindCoordinator v4 asked of `via`, waiting out `COORDINATOR_NOT_AVAILABLE` while the
/// internal topic is created.
pub fn find_coordinator(via: SocketAddr, key_type: i8, key: &str) -> i32 {
    let mut stream = connect(via);
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let response: FindCoordinatorResponse = exchange(
            &mut stream,
            ApiKey::FindCoordinator,
            4,
            &FindCoordinatorRequest::default()
                .with_key_type(key_type)
                .with_coordinator_keys(vec![text(key)]),
        );
        let found = &response.coordinators[0];
        if found.error_code == 0 {
            return found.node_id.0;
        }
        assert_eq!(found.error_code, 15, "{response:?}");
        assert!(Instant::now() < deadline, "no coordinator for {key}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// The coordinator of transactional id `id`, as [`find_coordinator`] finds it.
pub fn find(via: SocketAddr, id: &str) -> i32 {
    find_coordinator(via, 1, id)
}

pub fn init_once(stream: &mut TcpStream, id: &str, timeout_ms: i32) -> InitProducerIdResponse {
    exchange(
        stream,
        ApiKey::InitProducerId,
        4,
        &InitProducerIdRequest::default()
            .with_transactional_id(Some(TransactionalId(text(id))))
            .with_transaction_timeout_ms(timeout_ms)
            .with_producer_id(ProducerId(-1))
            .with_producer_epoch(-1),
    )
}

/// InitProducerId at the coordinator, retried as clients do while it loads the partition it
/// was just made leader of (`COORDINATOR_LOAD_IN_PROGRESS`, or `NOT_COORDINATOR` before it
/// has seen the leadership) and while its first write cannot be replicated yet
/// (`COORDINATOR_NOT_AVAILABLE`).
pub fn init(stream: &mut TcpStream, id: &str, timeout_ms: i32) -> InitProducerIdResponse {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let response = init_once(stream, id, timeout_ms);
        if !matches!(response.error_code, 14..=16) || Instant::now() > deadline {
            return response;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

pub fn add(stream: &mut TcpStream, version: i16, id: &str, pid: i64, epoch: i16) -> i16 {
    let response: AddPartitionsToTxnResponse = exchange(
        stream,
        ApiKey::AddPartitionsToTxn,
        version,
        &AddPartitionsToTxnRequest::default()
            .with_v3_and_below_transactional_id(TransactionalId(text(id)))
            .with_v3_and_below_producer_id(ProducerId(pid))
            .with_v3_and_below_producer_epoch(epoch)
            .with_v3_and_below_topics(vec![
                AddPartitionsToTxnTopic::default()
                    .with_name(TopicName(text(DATA)))
                    .with_partitions(vec![0]),
            ]),
    );
    response.results_by_topic_v3_and_below[0].results_by_partition[0].partition_error_code
}

pub fn end(stream: &mut TcpStream, id: &str, pid: i64, epoch: i16, commit: bool) -> EndTxnResponse {
    exchange(
        stream,
        ApiKey::EndTxn,
        4,
        &EndTxnRequest::default()
            .with_transactional_id(TransactionalId(text(id)))
            .with_producer_id(ProducerId(pid))
            .with_producer_epoch(epoch)
            .with_committed(commit),
    )
}

pub fn describe(stream: &mut TcpStream, id: &str) -> (i16, String, i64, i16) {
    let response: DescribeTransactionsResponse = exchange(
        stream,
        ApiKey::DescribeTransactions,
        0,
        &DescribeTransactionsRequest::default()
            .with_transactional_ids(vec![TransactionalId(text(id))]),
    );
    let state = &response.transaction_states[0];
    (
        state.error_code,
        state.transaction_state.to_string(),
        state.producer_id.0,
        state.producer_epoch,
    )
}

/// The log end offset of the id's `__transaction_state` partition, asked of its leader.
pub fn txn_log_end(stream: &mut TcpStream, index: i32) -> i64 {
    super::partition::latest_offset(stream, TXN_TOPIC, index)
}

/// AddPartitionsToTxn v3 of partition `partition` of `topic`: its error code.
pub fn add_partition(
    stream: &mut TcpStream,
    id: &str,
    (pid, epoch): (i64, i16),
    topic: &str,
    partition: i32,
) -> i16 {
    let response: AddPartitionsToTxnResponse = exchange(
        stream,
        ApiKey::AddPartitionsToTxn,
        3,
        &AddPartitionsToTxnRequest::default()
            .with_v3_and_below_transactional_id(TransactionalId(text(id)))
            .with_v3_and_below_producer_id(ProducerId(pid))
            .with_v3_and_below_producer_epoch(epoch)
            .with_v3_and_below_topics(vec![
                AddPartitionsToTxnTopic::default()
                    .with_name(TopicName(text(topic)))
                    .with_partitions(vec![partition]),
            ]),
    );
    response.results_by_topic_v3_and_below[0].results_by_partition[0].partition_error_code
}

/// The control records (transaction markers) of `partition` of `topic`, read from its leader
/// at `address` as a read_uncommitted consumer; the partition's error while the node is not
/// (yet again) its leader.
pub fn markers(address: SocketAddr, topic: &str, partition: i32) -> Result<usize, i16> {
    let request = FetchRequest::default()
        .with_replica_id(BrokerId(-1))
        .with_max_wait_ms(0)
        .with_max_bytes(1 << 20)
        .with_topics(vec![
            FetchTopic::default()
                .with_topic(TopicName(text(topic)))
                .with_partitions(vec![
                    FetchPartition::default()
                        .with_partition(partition)
                        .with_partition_max_bytes(1 << 20),
                ]),
        ]);
    let response: FetchResponse = exchange(&mut connect(address), ApiKey::Fetch, 12, &request);
    let data = &response.responses[0].partitions[0];
    if data.error_code != 0 {
        return Err(data.error_code);
    }
    let mut bytes = data.records.clone().unwrap_or_default();
    Ok(RecordBatchDecoder::decode_all(&mut bytes)
        .unwrap()
        .iter()
        .flat_map(|set| &set.records)
        .filter(|record| record.control)
        .count())
}

/// (leader, replicas, isr) of every partition of `topic`, by index, as the node at `via` sees
/// it. Five debug nodes creating 50 transaction-log partitions on two cores: a node may close
/// its listener for a moment (it re-registers) or miss an answer; ask again, for up to 30 s.
pub fn layout(via: SocketAddr, topic: &str) -> Vec<(i32, Vec<i32>, Vec<i32>)> {
    let metadata = (0..120)
        .find_map(|_| {
            super::metadata(via).or_else(|| {
                std::thread::sleep(Duration::from_millis(250));
                None
            })
        })
        .expect("the node answers Metadata");
    let mut partitions: Vec<_> = metadata
        .topics
        .iter()
        .find(|t| t.name.as_ref().map(|n| n.as_str()) == Some(topic))
        .map(|t| t.partitions.clone())
        .unwrap_or_default();
    partitions.sort_by_key(|p| p.partition_index);
    partitions
        .iter()
        .map(|p| {
            let mut isr: Vec<i32> = p.isr_nodes.iter().map(|b| b.0).collect();
            isr.sort_unstable();
            (
                p.leader_id.0,
                p.replica_nodes.iter().map(|b| b.0).collect(),
                isr,
            )
        })
        .collect()
}

/// Five nodes where a commit's marker can be held back: a transactional id, its coordinator
/// C, a replica A of its `__transaction_state` partition, and a one-replica data partition
/// led by a node M outside that partition's replicas (so pausing M holds the COMMIT marker and
/// nothing else of the transaction). Neither C, A nor M is the active controller. Node ids
/// are 1-based.
pub struct CommitRig {
    pub cluster: Cluster,
    pub id: String,
    pub coordinator: i32,
    pub replica: i32,
    pub data_partition: i32,
    pub data_leader: i32,
    /// The producer id and epoch InitProducerId gave `id`.
    pub producer: (i64, i16),
    /// A connection to the coordinator, with the data partition added to the open
    /// transaction.
    pub stream: TcpStream,
}

impl CommitRig {
    /// Starts the cluster in `root` with `settings`, waits until every partition is led and
    /// in sync, picks the id and nodes, and opens a transaction on the data partition.
    pub fn start(root: &std::path::Path, settings: &str) -> CommitRig {
        let cluster = Cluster::start(root, 5, settings);
        let first = cluster.nodes[0].address;
        assert_eq!(super::create_topics(first, &[(DATA, 5, 1)]), vec![0]);
        let (controller, _) = cluster.wait_for_leader(&[0, 1, 2, 3, 4], 0, Duration::from_secs(30));
        let controller = controller as i32 + 1;
        find(first, "completion-0");
        wait_until(
            "every partition led and fully in sync",
            Duration::from_secs(60),
            || {
                let txn = layout(first, TXN_TOPIC);
                let data = layout(first, DATA);
                txn.len() == 50
                    && data.len() == 5
                    && txn
                        .iter()
                        .chain(&data)
                        .all(|(l, r, isr)| *l >= 1 && r.len() == isr.len())
            },
        );
        let txn = layout(first, TXN_TOPIC);
        let data = layout(first, DATA);
        let (id, coordinator, replica, data_partition, data_leader) = (0..)
            .map(|i| format!("completion-{i}"))
            .find_map(|id| {
                let (c, replicas, _) = &txn[partition_for(&id) as usize];
                if *c == controller {
                    return None;
                }
                let a = *replicas.iter().find(|n| **n != *c && **n != controller)?;
                let (p, (m, _, _)) = data
                    .iter()
                    .enumerate()
                    .find(|(_, (m, _, _))| !replicas.contains(m) && *m != controller)?;
                Some((id, *c, a, p as i32, *m))
            })
            .unwrap();
        let mut stream = connect(cluster.nodes[(coordinator - 1) as usize].address);
        let init = init(&mut stream, &id, 60_000);
        assert_eq!(init.error_code, 0, "{init:?}");
        let producer = (init.producer_id.0, init.producer_epoch);
        assert_eq!(
            add_partition(&mut stream, &id, producer, DATA, data_partition),
            0
        );
        CommitRig {
            cluster,
            id,
            coordinator,
            replica,
            data_partition,
            data_leader,
            producer,
            stream,
        }
    }

    /// The address of node `node` (1-based).
    pub fn at(&self, node: i32) -> SocketAddr {
        self.cluster.nodes[(node - 1) as usize].address
    }
}
