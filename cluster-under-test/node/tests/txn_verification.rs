//! KIP-890 part 1 on the produce path, with the real coordinator over the wire: a
//! transactional batch that would open a transaction on a partition is verified with the
//! producer's coordinator first. Under `transaction.version=1` a partition never added is
//! refused (`INVALID_TXN_STATE`, nothing written), but a delayed Produce from a finished
//! transaction lands in the producer's next one when that one added the partition too: the
//! class of bug behind KAFKA-17754. Under `transaction.version=2` the epoch is bumped at every
//! EndTxn, so the same delayed Produce is refused (`INVALID_PRODUCER_EPOCH`) and partitions
//! are added implicitly by the leader's verification. On a cluster, an ABORT marker that
//! lands while a verification is in flight voids it (the verification guard).

mod common;

use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use common::partition::{create_topic, partition_state, topic_name};
use common::{Cluster, NodeProcess, connect, exchange, wait_until};
use indexmap::IndexMap;
use kafka_protocol::messages::add_partitions_to_txn_request::AddPartitionsToTxnTopic;
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::records::{
    Compression, Record, RecordBatchEncoder, RecordEncodeOptions, TimestampType,
};

const TOPIC: &str = "verified";
const ID: &str = "logjam-verify";

fn txn_id() -> TransactionalId {
    txn_id_of(ID)
}

fn txn_id_of(id: &str) -> TransactionalId {
    TransactionalId(StrBytes::from_string(id.to_owned()))
}

fn txn_batch(pid: i64, epoch: i16, sequence: i32, value: &str) -> Bytes {
    let record = Record {
        transactional: true,
        control: false,
        delete_horizon: false,
        partition_leader_epoch: -1,
        producer_id: pid,
        producer_epoch: epoch,
        timestamp_type: TimestampType::Creation,
        offset: 0,
        sequence,
        timestamp: 1_700_000_000_000,
        key: None,
        value: Some(Bytes::from(value.to_owned())),
        headers: IndexMap::new(),
    };
    let mut buf = BytesMut::new();
    let options = RecordEncodeOptions {
        version: 2,
        compression: Compression::None,
    };
    RecordBatchEncoder::encode(&mut buf, &[record], &options).unwrap();
    buf.freeze()
}

/// A transactional Produce (acks=all) naming the transactional id: base offset or error code.
fn produce(address: SocketAddr, version: i16, records: Bytes) -> Result<i64, i16> {
    produce_as(address, ID, version, records)
}

/// [`produce`] by the producer of transactional id `id`.
fn produce_as(address: SocketAddr, id: &str, version: i16, records: Bytes) -> Result<i64, i16> {
    let request = ProduceRequest::default()
        .with_transactional_id(Some(txn_id_of(id)))
        .with_acks(-1)
        .with_timeout_ms(10_000)
        .with_topic_data(vec![
            TopicProduceData::default()
                .with_name(topic_name(TOPIC))
                .with_partition_data(vec![
                    PartitionProduceData::default()
                        .with_index(0)
                        .with_records(Some(records)),
                ]),
        ]);
    let response: ProduceResponse =
        exchange(&mut connect(address), ApiKey::Produce, version, &request);
    let partition = &response.responses[0].partition_responses[0];
    match partition.error_code {
        0 => Ok(partition.base_offset),
        code => Err(code),
    }
}

/// InitProducerId with the transactional id, retried while `__transaction_state` is created
/// and loaded: (producer id, epoch).
fn init(stream: &mut TcpStream) -> (i64, i16) {
    init_as(stream, ID)
}

/// [`init`] for transactional id `id`.
fn init_as(stream: &mut TcpStream, id: &str) -> (i64, i16) {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let response: InitProducerIdResponse = exchange(
            stream,
            ApiKey::InitProducerId,
            4,
            &InitProducerIdRequest::default()
                .with_transactional_id(Some(txn_id_of(id)))
                .with_transaction_timeout_ms(60_000)
                .with_producer_id(ProducerId(-1))
                .with_producer_epoch(-1),
        );
        if response.error_code == 0 {
            return (response.producer_id.0, response.producer_epoch);
        }
        assert!(
            // NOT_COORDINATOR too: the coordinator may not have applied its election yet.
            [14, 15, 16, 51].contains(&response.error_code) && Instant::now() < deadline,
            "{response:?}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// The client's AddPartitionsToTxn v3 for partition 0: its error code.
fn add_partition(stream: &mut TcpStream, pid: i64, epoch: i16) -> i16 {
    add_partition_as(stream, ID, pid, epoch)
}

/// [`add_partition`] for transactional id `id`.
fn add_partition_as(stream: &mut TcpStream, id: &str, pid: i64, epoch: i16) -> i16 {
    let response: AddPartitionsToTxnResponse = exchange(
        stream,
        ApiKey::AddPartitionsToTxn,
        3,
        &AddPartitionsToTxnRequest::default()
            .with_v3_and_below_transactional_id(txn_id_of(id))
            .with_v3_and_below_producer_id(ProducerId(pid))
            .with_v3_and_below_producer_epoch(epoch)
            .with_v3_and_below_topics(vec![
                AddPartitionsToTxnTopic::default()
                    .with_name(topic_name(TOPIC))
                    .with_partitions(vec![0]),
            ]),
    );
    response.results_by_topic_v3_and_below[0].results_by_partition[0].partition_error_code
}

/// EndTxn commit at `version`: the epoch the producer goes on with.
fn commit(stream: &mut TcpStream, version: i16, pid: i64, epoch: i16) -> i16 {
    let response: EndTxnResponse = exchange(
        stream,
        ApiKey::EndTxn,
        version,
        &EndTxnRequest::default()
            .with_transactional_id(txn_id())
            .with_producer_id(ProducerId(pid))
            .with_producer_epoch(epoch)
            .with_committed(true),
    );
    assert_eq!(response.error_code, 0, "{response:?}");
    if version >= 5 {
        response.producer_epoch
    } else {
        epoch
    }
}

/// (high watermark, last stable offset) of partition 0.
fn offsets(address: SocketAddr) -> (i64, i64) {
    let request = FetchRequest::default()
        .with_replica_id(BrokerId(-1))
        .with_max_wait_ms(0)
        .with_max_bytes(1 << 20)
        .with_isolation_level(1)
        .with_topics(vec![
            FetchTopic::default()
                .with_topic(topic_name(TOPIC))
                .with_partitions(vec![
                    FetchPartition::default()
                        .with_partition(0)
                        .with_partition_max_bytes(1 << 20),
                ]),
        ]);
    let response: FetchResponse = exchange(&mut connect(address), ApiKey::Fetch, 12, &request);
    let data = &response.responses[0].partitions[0];
    (data.high_watermark, data.last_stable_offset)
}

fn node(transaction_version: i16) -> (tempfile::TempDir, NodeProcess) {
    let dir = tempfile::tempdir().unwrap();
    let node = NodeProcess::start(
        dir.path(),
        &format!("transaction.version={transaction_version}"),
    );
    create_topic(node.address, TOPIC, 1, 1, &[]);
    wait_until("a leader", Duration::from_secs(20), || {
        partition_state(node.address, TOPIC).is_some_and(|(l, _)| l == 1)
    });
    (dir, node)
}

/// Goal: show the KAFKA-17754 class of bug where TV1 has it. Method: one node with
/// `transaction.version=1`; an unadded partition is refused; transaction 1 writes seq 0 and
/// commits; transaction 2 adds the partition; the delayed seq 1 of transaction 1 arrives and
/// is appended inside transaction 2.
#[test]
fn tv1_verifies_added_partitions_but_lets_a_delayed_produce_into_the_next_transaction() {
    let (_dir, node) = node(1);
    let mut stream = connect(node.address);
    let (pid, epoch) = init(&mut stream);
    assert_eq!(
        produce(node.address, 9, txn_batch(pid, epoch, 0, "unadded")),
        Err(48)
    );
    assert_eq!(offsets(node.address).0, 0, "nothing written");

    assert_eq!(add_partition(&mut stream, pid, epoch), 0);
    assert_eq!(
        produce(node.address, 9, txn_batch(pid, epoch, 0, "txn1-a")),
        Ok(0)
    );
    let delayed = txn_batch(pid, epoch, 1, "txn1-b (delayed)");
    assert_eq!(
        commit(&mut stream, 4, pid, epoch),
        epoch,
        "TV1 keeps the epoch"
    );
    wait_until("the commit marker", Duration::from_secs(20), || {
        offsets(node.address) == (2, 2)
    });

    // The marker is written before CompleteCommit is: until then the coordinator answers
    // CONCURRENT_TRANSACTIONS (51), which a client retries.
    let mut added = -1;
    wait_until("transaction 1 completes", Duration::from_secs(20), || {
        added = add_partition(&mut stream, pid, epoch);
        added != 51
    });
    assert_eq!(added, 0);
    assert_eq!(
        produce(node.address, 9, delayed),
        Ok(2),
        "the delayed batch of transaction 1 is verified into transaction 2"
    );
}

/// Goal: the same delayed Produce is refused under TV2 (KIP-890 part 2), and partitions are
/// added by the leader's verification. Method: one node with `transaction.version=2`; Produce
/// v12 without AddPartitionsToTxn is appended; EndTxn v5 commits and bumps the epoch; the
/// delayed batch at the old epoch is `INVALID_PRODUCER_EPOCH` and nothing is written.
#[test]
fn tv2_adds_partitions_implicitly_and_refuses_a_delayed_produce_from_a_finished_transaction() {
    let (_dir, node) = node(2);
    let mut stream = connect(node.address);
    let (pid, epoch) = init(&mut stream);
    assert_eq!(
        produce(node.address, 12, txn_batch(pid, epoch, 0, "txn1-a")),
        Ok(0)
    );
    let delayed = txn_batch(pid, epoch, 1, "txn1-b (delayed)");
    let bumped = commit(&mut stream, 5, pid, epoch);
    assert!(
        bumped > epoch,
        "TV2 bumps the epoch at EndTxn: {epoch} -> {bumped}"
    );
    wait_until("the commit marker", Duration::from_secs(20), || {
        offsets(node.address) == (2, 2)
    });

    assert_eq!(produce(node.address, 12, delayed), Err(47));
    assert_eq!(offsets(node.address), (2, 2), "nothing written");
    // The producer's next transaction, at the bumped epoch, is added and written.
    assert_eq!(
        produce(node.address, 12, txn_batch(pid, bumped, 0, "txn2-a")),
        Ok(2)
    );
}

/// Goal (liveness): a producer whose old transaction hangs on a partition (open there, unknown
/// to its coordinator) can go on at a newer epoch once its coordinator verifies the partition.
/// Method: one node, TV2 with `transaction.partition.verification.enable=false`; Produce v11
/// (not verified: no implicit add before v12) opens a transaction the coordinator never
/// learns of; InitProducerId bumps the epoch (the coordinator ends nothing: the partition is
/// in none of its transactions). Produce v12 at the new epoch is verified (the open one is
/// older), joins the hanging transaction, and the new transaction's COMMIT marker ends both.
/// Without the verification the batch would be refused (`CONCURRENT_TRANSACTIONS`, answered
/// `NOT_ENOUGH_REPLICAS`) at every retry, for good.
#[test]
fn tv2_a_hanging_older_transaction_does_not_block_the_producer_for_good() {
    let dir = tempfile::tempdir().unwrap();
    let node = NodeProcess::start(
        dir.path(),
        "transaction.version=2\ntransaction.partition.verification.enable=false",
    );
    create_topic(node.address, TOPIC, 1, 1, &[]);
    wait_until("a leader", Duration::from_secs(20), || {
        partition_state(node.address, TOPIC).is_some_and(|(l, _)| l == 1)
    });
    let mut stream = connect(node.address);
    let (pid, old) = init(&mut stream);
    assert_eq!(
        produce(node.address, 11, txn_batch(pid, old, 0, "hanging")),
        Ok(0)
    );
    let (same_pid, epoch) = init(&mut stream);
    assert_eq!((same_pid, epoch > old), (pid, true), "{old} -> {epoch}");
    assert_eq!(
        offsets(node.address),
        (1, 0),
        "the hanging transaction holds the LSO"
    );

    assert_eq!(
        produce(node.address, 12, txn_batch(pid, epoch, 0, "next")),
        Ok(1),
        "verified, not refused for the hanging transaction"
    );
    commit(&mut stream, 5, pid, epoch);
    wait_until("the commit marker", Duration::from_secs(20), || {
        offsets(node.address) == (3, 3)
    });
}

/// The coordinator of transactional id `id`, as `via` answers FindCoordinator (waiting while
/// `__transaction_state` is created).
fn coordinator_of(via: SocketAddr, id: &str) -> i32 {
    let mut found = -1;
    wait_until(
        &format!("the coordinator of {id}"),
        Duration::from_secs(60),
        || {
            let response: FindCoordinatorResponse = exchange(
                &mut connect(via),
                ApiKey::FindCoordinator,
                4,
                &FindCoordinatorRequest::default()
                    .with_key_type(1)
                    .with_coordinator_keys(vec![StrBytes::from_string(id.to_owned())]),
            );
            found = response.coordinators[0].node_id.0;
            response.coordinators[0].error_code == 0
        },
    );
    found
}

/// WriteTxnMarkers v1: an ABORT marker for `pid` at `epoch` on partition 0, as a coordinator
/// sends it; the partition's error code.
fn abort_marker(address: SocketAddr, pid: i64, epoch: i16) -> i16 {
    let request = WriteTxnMarkersRequest::default().with_markers(vec![
        write_txn_markers_request::WritableTxnMarker::default()
            .with_producer_id(ProducerId(pid))
            .with_producer_epoch(epoch)
            .with_transaction_result(false)
            .with_coordinator_epoch(0)
            .with_topics(vec![
                write_txn_markers_request::WritableTxnMarkerTopic::default()
                    .with_name(topic_name(TOPIC))
                    .with_partition_indexes(vec![0]),
            ]),
    ]);
    let response: WriteTxnMarkersResponse =
        exchange(&mut connect(address), ApiKey::WriteTxnMarkers, 1, &request);
    response.markers[0].topics[0].partitions[0].error_code
}

/// Goal (issue #13): the KIP-890 verification guard on a real cluster. A Produce whose
/// verification started before an ABORT marker for its producer landed carries a void
/// verification, even though the coordinator then answers that the partition is in the
/// transaction: the append is refused with `INVALID_TXN_STATE` (Kafka's
/// `UnifiedLog.analyzeAndValidateProducerState`) and nothing is written. Method: 3 nodes,
/// TV1, verification on, a one-replica partition; the coordinator of the id is neither the
/// partition's leader nor the active controller; the partition is added (AddPartitionsToTxn
/// v3); the coordinator is paused (SIGSTOP) so the leader's verify-only AddPartitionsToTxn
/// waits on it; the Produce is sent; an ABORT marker for the producer is written on the
/// leader; the coordinator resumes and confirms the partition; the Produce is refused, the
/// log holds only the marker. The same Produce sent again (a fresh verification) is
/// appended, so the refusal came from the voided guard and not from the pause.
#[test]
fn an_abort_marker_voids_a_verification_in_flight() {
    let root = tempfile::tempdir().unwrap();
    let cluster = Cluster::start(
        root.path(),
        3,
        "transaction.version=1\nbroker.session.timeout.ms=30000",
    );
    let first = cluster.nodes[0].address;
    // One replica: the marker commits on the leader alone, so it needs nothing of the
    // paused coordinator (a follower in the ISR would hold it until it dropped out).
    create_topic(first, TOPIC, 1, 1, &[]);
    let mut leader = -1;
    wait_until("a partition leader", Duration::from_secs(30), || {
        partition_state(first, TOPIC).is_some_and(|(l, isr)| {
            leader = l;
            l >= 1 && isr == vec![l]
        })
    });
    let (controller, _) = cluster.wait_for_leader(&[0, 1, 2], 0, Duration::from_secs(30));
    let controller = controller as i32 + 1;
    let target = (1..=3)
        .find(|node| *node != leader && *node != controller)
        .unwrap();
    // Creates __transaction_state, then waits until every partition of it is on all three
    // nodes, so its coordinators stay where FindCoordinator says.
    coordinator_of(first, "guard-0");
    wait_until(
        "__transaction_state fully replicated",
        Duration::from_secs(60),
        || {
            common::metadata(first).is_some_and(|metadata| {
                metadata.topics.iter().any(|topic| {
                    topic.name.as_ref().map(|n| n.as_str()) == Some("__transaction_state")
                        && topic
                            .partitions
                            .iter()
                            .all(|p| p.isr_nodes.len() == 3 && p.leader_id.0 >= 1)
                })
            })
        },
    );
    let id = (0..)
        .map(|i| format!("guard-{i}"))
        .find(|id| coordinator_of(first, id) == target)
        .unwrap();
    let coordinator = &cluster.nodes[(target - 1) as usize];
    let leader_address = cluster.nodes[(leader - 1) as usize].address;
    let mut stream = connect(coordinator.address);
    let (pid, epoch) = init_as(&mut stream, &id);
    assert_eq!(add_partition_as(&mut stream, &id, pid, epoch), 0);

    coordinator.pause();
    let delayed = {
        let id = id.clone();
        std::thread::spawn(move || {
            produce_as(
                leader_address,
                &id,
                9,
                txn_batch(pid, epoch, 0, "verified, then void"),
            )
        })
    };
    // The leader has taken its guard and is waiting on the paused coordinator. (Too short a
    // wait would let the marker land first and the Produce be appended: the test fails, it
    // cannot pass wrongly.)
    std::thread::sleep(Duration::from_millis(1500));
    assert_eq!(abort_marker(leader_address, pid, epoch), 0);
    coordinator.resume();
    assert_eq!(delayed.join().unwrap(), Err(48), "the voided verification");
    assert_eq!(
        offsets(leader_address),
        (1, 1),
        "only the marker is written"
    );

    assert_eq!(
        produce_as(
            leader_address,
            &id,
            9,
            txn_batch(pid, epoch, 0, "verified again")
        ),
        Ok(1),
        "a fresh verification is appended"
    );
}

/// Goal (issue #13): under TV2 a fenced producer's EndTxn(abort) at its old epoch is
/// `PRODUCER_FENCED`, as Kafka's `endTransaction` answers an epoch that is neither the
/// current one nor a retry's (one below it), and not `INVALID_TXN_STATE`. Method: one node
/// with `transaction.version=2`; producer A opens a transaction with Produce v12; a second
/// InitProducerId for the same id fences it (the coordinator aborts with two bumps); A's
/// EndTxn v5 abort at its epoch is answered 90 and nothing more is written.
#[test]
fn tv2_a_fenced_producers_abort_is_producer_fenced() {
    let (_dir, node) = node(2);
    let mut stream = connect(node.address);
    let (pid, epoch) = init(&mut stream);
    assert_eq!(
        produce(node.address, 12, txn_batch(pid, epoch, 0, "zombie")),
        Ok(0)
    );
    let (new_pid, new_epoch) = init(&mut stream);
    assert_eq!(new_pid, pid);
    assert!(new_epoch > epoch + 1, "fenced: {epoch} -> {new_epoch}");
    wait_until("the fence's ABORT marker", Duration::from_secs(20), || {
        offsets(node.address) == (2, 2)
    });
    let response: EndTxnResponse = exchange(
        &mut stream,
        ApiKey::EndTxn,
        5,
        &EndTxnRequest::default()
            .with_transactional_id(txn_id())
            .with_producer_id(ProducerId(pid))
            .with_producer_epoch(epoch)
            .with_committed(false),
    );
    assert_eq!(response.error_code, 90, "{response:?}");
    assert_eq!(offsets(node.address), (2, 2), "nothing written");
}
