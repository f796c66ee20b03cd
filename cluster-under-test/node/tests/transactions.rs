//! The partition side of transactions (kafka-semantics.md §3), through real node processes and
//! `kafka-protocol`-encoded requests over TCP: transactional batches keep the last stable
//! offset (LSO) at the first open transaction; WriteTxnMarkers (as the coordinator sends it)
//! appends COMMIT/ABORT markers on the partition leader, replicated before it answers; Fetch
//! with isolation_level 1 stops at the LSO and lists the aborted transactions, isolation_level 0
//! reads to the high watermark without the list; ListOffsets latest answers the LSO for
//! read_committed. Stale coordinator and producer epochs are fenced with Kafka's codes and write
//! nothing; the producer state survives a leader change (replicated) and a crash (rebuilt).

mod common;

use std::collections::BTreeSet;
use std::net::SocketAddr;
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use common::partition::{
    create_topic, partition_state, produce_records, produce_records_as, topic_name, wait_for_isr,
};
use common::{Cluster, NodeProcess, connect, exchange, wait_until};
use indexmap::IndexMap;
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
use kafka_protocol::messages::write_txn_markers_request::{
    WritableTxnMarker, WritableTxnMarkerTopic,
};
use kafka_protocol::messages::*;
use kafka_protocol::records::{
    Compression, Record, RecordBatchDecoder, RecordBatchEncoder, RecordEncodeOptions, TimestampType,
};

const TOPIC: &str = "txn";

/// A transactional batch of `count` records from `pid` at `epoch`, numbered from `sequence`.
fn txn_batch(pid: i64, epoch: i16, sequence: i32, count: usize) -> Bytes {
    let records: Vec<Record> = (0..count)
        .map(|i| Record {
            transactional: true,
            control: false,
            delete_horizon: false,
            partition_leader_epoch: -1,
            producer_id: pid,
            producer_epoch: epoch,
            timestamp_type: TimestampType::Creation,
            offset: i as i64,
            sequence: sequence + i as i32,
            timestamp: 1_700_000_000_000,
            key: None,
            value: Some(Bytes::from(format!(
                "{pid}:{epoch}:{}",
                sequence + i as i32
            ))),
            headers: IndexMap::new(),
        })
        .collect();
    let mut buf = BytesMut::new();
    let options = RecordEncodeOptions {
        version: 2,
        compression: Compression::None,
    };
    RecordBatchEncoder::encode(&mut buf, &records, &options).unwrap();
    buf.freeze()
}

/// The node settings of these tests: each plays the coordinator's part by sending
/// WriteTxnMarkers itself, so the coordinator is never asked to verify a partition (TV1 with
/// `transaction.partition.verification.enable=false`, where Kafka relies on the client's
/// AddPartitionsToTxn alone).
const PLAYED_COORDINATOR: &str =
    "transaction.version=1\ntransaction.partition.verification.enable=false";

/// InitProducerId for `transactional_id` at whichever of `nodes` coordinates it, retried while
/// `__transaction_state` is created and loaded: (producer id, epoch). A second call for the
/// same id bumps the epoch (the transaction is Empty for the coordinator).
fn init_producer_id(nodes: &[SocketAddr], transactional_id: &str) -> (i64, i16) {
    let request = InitProducerIdRequest::default()
        .with_transactional_id(Some(TransactionalId(
            kafka_protocol::protocol::StrBytes::from_string(transactional_id.to_owned()),
        )))
        .with_transaction_timeout_ms(60_000)
        .with_producer_id(ProducerId(-1))
        .with_producer_epoch(-1);
    let mut answer = None;
    wait_until(
        &format!("InitProducerId for {transactional_id}"),
        Duration::from_secs(60),
        || {
            nodes.iter().any(|address| {
                let response: InitProducerIdResponse =
                    exchange(&mut connect(*address), ApiKey::InitProducerId, 4, &request);
                assert!(
                    [0, 14, 15, 16, 51].contains(&response.error_code),
                    "{response:?}"
                );
                if response.error_code == 0 {
                    answer = Some((response.producer_id.0, response.producer_epoch));
                }
                answer.is_some()
            })
        },
    );
    answer.expect("initialised")
}

/// A transactional Produce of `records` to partition 0 by the producer of `transactional_id`.
fn produce_txn(address: SocketAddr, transactional_id: &str, records: Bytes) -> Result<i64, i16> {
    produce_records_as(address, Some(transactional_id), TOPIC, records, -1, 10_000)
}

/// WriteTxnMarkers v1 with one marker for partition 0 of `topic`: the partition's error code.
fn write_marker(
    address: SocketAddr,
    topic: &str,
    pid: i64,
    epoch: i16,
    commit: bool,
    coordinator_epoch: i32,
) -> i16 {
    let request = WriteTxnMarkersRequest::default().with_markers(vec![
        WritableTxnMarker::default()
            .with_producer_id(ProducerId(pid))
            .with_producer_epoch(epoch)
            .with_transaction_result(commit)
            .with_coordinator_epoch(coordinator_epoch)
            .with_topics(vec![
                WritableTxnMarkerTopic::default()
                    .with_name(topic_name(topic))
                    .with_partition_indexes(vec![0]),
            ]),
    ]);
    let response: WriteTxnMarkersResponse =
        exchange(&mut connect(address), ApiKey::WriteTxnMarkers, 1, &request);
    let marker = &response.markers[0];
    assert_eq!(marker.producer_id.0, pid);
    assert_eq!(marker.topics[0].name.0.as_str(), topic);
    marker.topics[0].partitions[0].error_code
}

/// What a consumer fetch of partition 0 answered.
#[derive(Debug)]
struct Fetched {
    high_watermark: i64,
    last_stable_offset: i64,
    aborted: Option<Vec<(i64, i64)>>,
    /// (offset, producer id, control, value) of every record.
    records: Vec<(i64, i64, bool, Bytes)>,
}

fn fetch(address: SocketAddr, isolation_level: i8) -> Fetched {
    try_fetch(address, isolation_level).unwrap_or_else(|code| panic!("fetch: error {code}"))
}

/// A consumer fetch of partition 0 from offset 0: what it answered, or the partition's error.
fn try_fetch(address: SocketAddr, isolation_level: i8) -> Result<Fetched, i16> {
    let request = FetchRequest::default()
        .with_replica_id(BrokerId(-1))
        .with_max_wait_ms(0)
        .with_min_bytes(0)
        .with_max_bytes(1 << 20)
        .with_isolation_level(isolation_level)
        .with_topics(vec![
            FetchTopic::default()
                .with_topic(topic_name(TOPIC))
                .with_partitions(vec![
                    FetchPartition::default()
                        .with_partition(0)
                        .with_fetch_offset(0)
                        .with_partition_max_bytes(1 << 20),
                ]),
        ]);
    let response: FetchResponse = exchange(&mut connect(address), ApiKey::Fetch, 12, &request);
    let data = &response.responses[0].partitions[0];
    if data.error_code != 0 {
        return Err(data.error_code);
    }
    let mut bytes = data.records.clone().unwrap_or_default();
    let mut records = Vec::new();
    for set in RecordBatchDecoder::decode_all(&mut bytes).unwrap() {
        for record in set.records {
            records.push((
                record.offset,
                record.producer_id,
                record.control,
                record.value.unwrap_or_default(),
            ));
        }
    }
    Ok(Fetched {
        high_watermark: data.high_watermark,
        last_stable_offset: data.last_stable_offset,
        aborted: data.aborted_transactions.as_ref().map(|list| {
            list.iter()
                .map(|txn| (txn.producer_id.0, txn.first_offset))
                .collect()
        }),
        records,
    })
}

/// What a read_committed consumer keeps (the Java consumer's rule): a producer's records are
/// skipped from the first offset of one of its aborted transactions until its next marker;
/// markers are never returned.
fn committed_values(fetched: &Fetched) -> Vec<Bytes> {
    let mut pending: Vec<(i64, i64)> = fetched.aborted.clone().unwrap_or_default();
    let mut aborting = BTreeSet::new();
    let mut kept = Vec::new();
    for (offset, pid, control, value) in &fetched.records {
        if let Some(at) = pending
            .iter()
            .position(|(p, first)| p == pid && first <= offset)
        {
            pending.remove(at);
            aborting.insert(*pid);
        }
        if *control {
            aborting.remove(pid);
        } else if !aborting.contains(pid) {
            kept.push(value.clone());
        }
    }
    kept
}

fn list_latest(address: SocketAddr, isolation_level: i8) -> i64 {
    let request = ListOffsetsRequest::default()
        .with_replica_id(BrokerId(-1))
        .with_isolation_level(isolation_level)
        .with_topics(vec![
            ListOffsetsTopic::default()
                .with_name(topic_name(TOPIC))
                .with_partitions(vec![
                    ListOffsetsPartition::default()
                        .with_partition_index(0)
                        .with_timestamp(-1),
                ]),
        ]);
    let response: ListOffsetsResponse =
        exchange(&mut connect(address), ApiKey::ListOffsets, 7, &request);
    let partition = &response.topics[0].partitions[0];
    assert_eq!(partition.error_code, 0);
    partition.offset
}

/// Goal: markers, the LSO and read_committed as Kafka has them, on an RF 3 partition, and the
/// open transaction kept across a leader change. Method: two producers open transactions;
/// the LSO stays at the first until its ABORT marker, then at the second until its COMMIT;
/// read_committed sees only the committed records, read_uncommitted all of them; a third
/// transaction is left open, the leader killed, and the new leader still holds the LSO there.
#[test]
fn markers_move_the_lso_and_read_committed_skips_aborted_records() {
    let root = tempfile::tempdir().unwrap();
    let mut cluster = Cluster::start(root.path(), 3, PLAYED_COORDINATOR);
    let any = cluster.nodes[0].address;
    create_topic(any, TOPIC, 1, 3, &[]);
    let leader = wait_for_isr(any, TOPIC, &[1, 2, 3], Duration::from_secs(30));
    let address = cluster.nodes[(leader - 1) as usize].address;
    let follower = cluster.nodes[(leader % 3) as usize].address;
    let nodes: Vec<SocketAddr> = cluster.nodes.iter().map(|node| node.address).collect();
    let (p1, p2) = (
        init_producer_id(&nodes, "p1").0,
        init_producer_id(&nodes, "p2").0,
    );

    assert_eq!(produce_txn(address, "p1", txn_batch(p1, 0, 0, 3)), Ok(0));
    assert_eq!(produce_txn(address, "p2", txn_batch(p2, 0, 0, 2)), Ok(3));
    let uncommitted = fetch(address, 0);
    assert_eq!(
        (uncommitted.high_watermark, uncommitted.last_stable_offset),
        (5, 0)
    );
    assert_eq!(
        uncommitted.aborted, None,
        "no aborted list for read_uncommitted"
    );
    assert_eq!(uncommitted.records.len(), 5);
    let committed = fetch(address, 1);
    assert_eq!(committed.last_stable_offset, 0);
    assert_eq!(
        (committed.records.len(), committed.aborted),
        (0, Some(vec![]))
    );
    assert_eq!((list_latest(address, 0), list_latest(address, 1)), (5, 0));
    // A client may not write outside its open transaction, nor write control batches.
    let plain = common::producer_batch(&[b"outside"], p2, 0, 2);
    assert_eq!(produce_records(address, TOPIC, plain, -1, 10_000), Err(48));

    // The coordinator aborts p1's transaction: the marker is on every replica when answered.
    assert_eq!(
        write_marker(follower, TOPIC, p1, 0, false, 0),
        6,
        "not the leader"
    );
    assert_eq!(write_marker(address, "no-such-topic", p1, 0, false, 0), 3);
    assert_eq!(write_marker(address, TOPIC, p1, 0, false, 0), 0);
    let committed = fetch(address, 1);
    assert_eq!(
        (committed.high_watermark, committed.last_stable_offset),
        (6, 3)
    );
    assert_eq!(committed.aborted, Some(vec![(p1, 0)]));
    assert!(committed_values(&committed).is_empty(), "{committed:?}");

    // p2 commits (coordinator epoch 5); an older coordinator and an older epoch are fenced.
    assert_eq!(write_marker(address, TOPIC, p2, 0, true, 5), 0);
    assert_eq!(write_marker(address, TOPIC, p2, 0, true, 4), 52);
    assert_eq!(
        init_producer_id(&nodes, "p1"),
        (p1, 1),
        "the next transaction of p1 at the next epoch"
    );
    assert_eq!(produce_txn(address, "p1", txn_batch(p1, 1, 0, 1)), Ok(7));
    assert_eq!(write_marker(address, TOPIC, p1, 0, false, 0), 47);
    let committed = fetch(address, 1);
    assert_eq!(
        (committed.high_watermark, committed.last_stable_offset),
        (8, 7),
        "nothing written by a refused marker"
    );
    let expected: Vec<Bytes> = vec![format!("{p2}:0:0").into(), format!("{p2}:0:1").into()];
    assert_eq!(committed_values(&committed), expected);
    assert_eq!(committed.aborted, Some(vec![(p1, 0)]));
    assert_eq!(
        fetch(address, 0).records.len(),
        8,
        "read_uncommitted reads p1's open transaction"
    );
    assert_eq!(list_latest(address, 1), 7);

    // p1's transaction at 7 stays open through a leader change: the new leader, which built its
    // producer state while replicating, keeps the LSO there until the marker.
    cluster.nodes[(leader - 1) as usize].kill();
    let mut new_leader = -1;
    wait_until("a new partition leader", Duration::from_secs(30), || {
        partition_state(follower, TOPIC).is_some_and(|(l, _)| {
            new_leader = l;
            l >= 1 && l != leader
        })
    });
    let address = cluster.nodes[(new_leader - 1) as usize].address;
    wait_until(
        "the new leader's high watermark",
        Duration::from_secs(30),
        // NOT_LEADER_OR_FOLLOWER until the new leader has applied its election.
        || try_fetch(address, 1).is_ok_and(|fetched| fetched.high_watermark == 8),
    );
    assert_eq!(fetch(address, 1).last_stable_offset, 7);
    assert_eq!(write_marker(address, TOPIC, p1, 1, true, 1), 0);
    let committed = fetch(address, 1);
    assert_eq!(committed.last_stable_offset, 9);
    assert_eq!(committed_values(&committed).len(), 3);
}

/// Goal: the open transaction and the aborted-transaction index survive a crash. Method: one
/// node; an aborted and an open transaction; SIGKILL and restart; read_committed still stops at
/// the open transaction and still lists the aborted one.
#[test]
fn transactions_survive_a_crash() {
    let dir = tempfile::tempdir().unwrap();
    let mut node = NodeProcess::start(dir.path(), PLAYED_COORDINATOR);
    create_topic(node.address, TOPIC, 1, 1, &[]);
    wait_until("a leader", Duration::from_secs(20), || {
        partition_state(node.address, TOPIC).is_some_and(|(l, _)| l == 1)
    });
    let (p1, p2) = (
        init_producer_id(&[node.address], "p1").0,
        init_producer_id(&[node.address], "p2").0,
    );
    assert_eq!(
        produce_txn(node.address, "p1", txn_batch(p1, 0, 0, 2)),
        Ok(0)
    );
    assert_eq!(write_marker(node.address, TOPIC, p1, 0, false, 0), 0);
    assert_eq!(
        produce_txn(node.address, "p2", txn_batch(p2, 0, 0, 2)),
        Ok(3)
    );
    let before = fetch(node.address, 1);
    assert_eq!(
        (before.last_stable_offset, before.aborted.clone()),
        (3, Some(vec![(p1, 0)]))
    );
    node.restart();
    wait_until(
        "the partition back with its high watermark",
        Duration::from_secs(30),
        || {
            partition_state(node.address, TOPIC).is_some_and(|(l, _)| l == 1)
                && fetch(node.address, 1).high_watermark == 5
        },
    );
    let after = fetch(node.address, 1);
    assert_eq!(
        (after.last_stable_offset, after.aborted),
        (3, Some(vec![(p1, 0)]))
    );
    assert_eq!(write_marker(node.address, TOPIC, p2, 0, true, 0), 0);
    assert_eq!(fetch(node.address, 1).last_stable_offset, 6);
}

/// One node with `canaries`; a transaction left open at 0..=1 and a plain record after it at 2.
/// Returns what a read_committed fetch answered.
fn read_committed_over_an_open_transaction(canaries: &str) -> Fetched {
    let dir = tempfile::tempdir().unwrap();
    let node = NodeProcess::start(
        dir.path(),
        &format!("{PLAYED_COORDINATOR}\nlogjam.canaries={canaries}"),
    );
    create_topic(node.address, TOPIC, 1, 1, &[]);
    wait_until("a leader", Duration::from_secs(20), || {
        partition_state(node.address, TOPIC).is_some_and(|(l, _)| l == 1)
    });
    let open = init_producer_id(&[node.address], "open").0;
    let plain = common::batch(&[b"plain"]);
    assert_eq!(
        produce_txn(node.address, "open", txn_batch(open, 0, 0, 2)),
        Ok(0)
    );
    assert_eq!(
        produce_records(node.address, TOPIC, plain, -1, 10_000),
        Ok(2)
    );
    fetch(node.address, 1)
}

/// Without canaries read_committed stops at the open transaction: nothing is returned.
#[test]
fn read_committed_without_canary_stops_at_the_open_transaction() {
    let fetched = read_committed_over_an_open_transaction("");
    assert_eq!((fetched.high_watermark, fetched.last_stable_offset), (3, 0));
    assert!(fetched.records.is_empty(), "{fetched:?}");
}

/// `read-committed-ignores-lso`: read_committed reads to the high watermark, the open
/// transaction's records (at and above the LSO) included.
#[test]
fn canary_read_committed_ignores_lso_serves_open_transactions() {
    let fetched = read_committed_over_an_open_transaction("read-committed-ignores-lso");
    assert_eq!((fetched.high_watermark, fetched.last_stable_offset), (3, 0));
    let offsets: Vec<i64> = fetched.records.iter().map(|record| record.0).collect();
    assert_eq!(offsets, vec![0, 1, 2], "{fetched:?}");
}

/// A control batch as a client could forge it: one control record with `key` and `value`.
fn control_batch(pid: i64, key: &[u8], value: &[u8]) -> Bytes {
    let record = Record {
        transactional: true,
        control: true,
        delete_horizon: false,
        partition_leader_epoch: -1,
        producer_id: pid,
        producer_epoch: 0,
        timestamp_type: TimestampType::Creation,
        offset: 0,
        sequence: -1,
        timestamp: 1_700_000_000_000,
        key: Some(Bytes::copy_from_slice(key)),
        value: Some(Bytes::copy_from_slice(value)),
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

/// Goal: bad transactional input gets Kafka's codes, writes nothing, and the node keeps
/// serving. Method: one node; control batches from a client (a well-formed COMMIT marker and
/// a malformed one) are `INVALID_RECORD`; a transactional batch without a transactional id is
/// `TRANSACTIONAL_ID_AUTHORIZATION_FAILED`; markers for an unknown partition of a known topic
/// are `UNKNOWN_TOPIC_OR_PARTITION`, with a stale coordinator epoch
/// `TRANSACTION_COORDINATOR_FENCED`; the log end never moves, and a valid produce follows.
#[test]
fn bad_transactional_input_is_refused_and_nothing_is_written() {
    let dir = tempfile::tempdir().unwrap();
    let node = NodeProcess::start(dir.path(), PLAYED_COORDINATOR);
    create_topic(node.address, TOPIC, 1, 1, &[]);
    wait_until("a leader", Duration::from_secs(20), || {
        partition_state(node.address, TOPIC).is_some_and(|(l, _)| l == 1)
    });
    let pid = init_producer_id(&[node.address], "bad").0;
    assert_eq!(
        produce_txn(node.address, "bad", txn_batch(pid, 0, 0, 1)),
        Ok(0)
    );
    assert_eq!(write_marker(node.address, TOPIC, pid, 0, true, 3), 0);
    let end = fetch(node.address, 0).high_watermark;
    assert_eq!(end, 2);

    let forged_commit = control_batch(pid, &[0, 0, 0, 1], &[0, 0, 0, 0, 0, 9]);
    let garbage = control_batch(pid, &[0xff], &[]);
    for (what, batch) in [
        ("forged marker", forged_commit),
        ("garbage control", garbage),
    ] {
        assert_eq!(produce_txn(node.address, "bad", batch), Err(87), "{what}");
    }
    // Transactional records with no transactional id: no coordinator could verify or end
    // that transaction, and Kafka's KafkaApis refuses the whole request, with or without ACLs.
    assert_eq!(
        produce_records(node.address, TOPIC, txn_batch(pid, 0, 1, 1), -1, 10_000),
        Err(53)
    );
    let request = WriteTxnMarkersRequest::default().with_markers(vec![
        WritableTxnMarker::default()
            .with_producer_id(ProducerId(pid))
            .with_producer_epoch(0)
            .with_transaction_result(false)
            .with_coordinator_epoch(3)
            .with_topics(vec![
                WritableTxnMarkerTopic::default()
                    .with_name(topic_name(TOPIC))
                    .with_partition_indexes(vec![7]),
            ]),
    ]);
    let response: WriteTxnMarkersResponse = exchange(
        &mut connect(node.address),
        ApiKey::WriteTxnMarkers,
        1,
        &request,
    );
    assert_eq!(response.markers[0].topics[0].partitions[0].error_code, 3);
    assert_eq!(write_marker(node.address, TOPIC, pid, 0, false, 2), 52);
    assert_eq!(
        fetch(node.address, 0).high_watermark,
        end,
        "nothing written"
    );
    let plain = common::batch(&[b"still serving"]);
    assert_eq!(
        produce_records(node.address, TOPIC, plain, -1, 10_000),
        Ok(end)
    );
}
