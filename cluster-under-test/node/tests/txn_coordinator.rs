//! The transaction coordinator on a 3-node cluster of `logjam-node` processes, over the wire
//! (requests built with `kafka-protocol` alone): `__transaction_state` created on first use
//! with Kafka's settings, the coordinator of an id being the leader of its partition
//! (`abs(javaHashCode(id)) % 50`), InitProducerId bumping the epoch and fencing, Kafka's error
//! codes for bad input with nothing written, a transaction past its timeout aborted with an
//! epoch bump, EndTxn's state surviving the coordinator's death (the next leader loads it),
//! and the completion retried alone while `__transaction_state` is below its min.isr.

mod common;

use std::net::SocketAddr;
use std::time::Duration;

use kafka_protocol::messages::add_partitions_to_txn_request::AddPartitionsToTxnTopic;
use kafka_protocol::messages::{
    AddPartitionsToTxnRequest, AddPartitionsToTxnResponse, ApiKey, ProducerId, TopicName,
    TransactionalId,
};

use common::txn::{
    CommitRig, DATA, TXN_TOPIC, add, describe, end, find, init, init_once, layout, markers,
    partition_for, text, txn_log_end,
};
use common::{Cluster, connect, exchange, wait_until};

/// The two tests start three and five nodes: together on two cores a node of the larger
/// cluster misses its answers for seconds (both tests failed that way, run side by side).
static ONE_CLUSTER_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn one_cluster_at_a_time() -> std::sync::MutexGuard<'static, ()> {
    ONE_CLUSTER_AT_A_TIME
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

#[test]
fn coordinator_lifecycle_fencing_bad_input_and_failover() {
    let _alone = one_cluster_at_a_time();
    let root = tempfile::tempdir().unwrap();
    let mut cluster = Cluster::start(
        root.path(),
        3,
        "broker.heartbeat.interval.ms=500\nbroker.session.timeout.ms=3000",
    );
    let first = cluster.nodes[0].address;
    assert_eq!(common::create_topics(first, &[(DATA, 1, 3)]), vec![0]);
    let id = "logjam-txn-1";
    let coordinator = find(first, id);

    // The topic, as Kafka creates it: 50 partitions, 3 replicas, min.insync.replicas 2.
    let metadata = common::metadata(first).unwrap();
    let topic = metadata
        .topics
        .iter()
        .find(|t| t.name.as_ref().map(|n| n.as_str()) == Some(TXN_TOPIC))
        .expect("__transaction_state exists");
    assert_eq!(topic.partitions.len(), 50);
    assert!(topic.partitions.iter().all(|p| p.replica_nodes.len() == 3));
    assert!(
        topic.is_internal,
        "Metadata marks __transaction_state internal"
    );
    let index = partition_for(id);
    let leader = topic
        .partitions
        .iter()
        .find(|p| p.partition_index == index)
        .unwrap()
        .leader_id
        .0;
    assert_eq!(
        coordinator, leader,
        "the coordinator is the leader of partition {index}"
    );

    let addresses: Vec<SocketAddr> = cluster.nodes.iter().map(|n| n.address).collect();
    let at = |node: i32| addresses[(node - 1) as usize];
    let mut other = connect(at(coordinator % 3 + 1));
    assert_eq!(
        init_once(&mut other, id, 60_000).error_code,
        16,
        "NOT_COORDINATOR elsewhere"
    );

    let mut stream = connect(at(coordinator));
    let first_init = init(&mut stream, id, 60_000);
    assert_eq!(first_init.error_code, 0, "{first_init:?}");
    assert_eq!(first_init.producer_epoch, 0);
    let pid = first_init.producer_id.0;
    // A second producer of the id: same producer id, next epoch; the first is fenced.
    let second = init(&mut stream, id, 60_000);
    assert_eq!(
        (
            second.error_code,
            second.producer_id.0,
            second.producer_epoch
        ),
        (0, pid, 1)
    );
    assert_eq!(
        add(&mut stream, 3, id, pid, 0),
        90,
        "PRODUCER_FENCED for the zombie"
    );
    assert_eq!(
        add(&mut stream, 1, id, pid, 0),
        47,
        "INVALID_PRODUCER_EPOCH before v2"
    );

    // Bad input: Kafka's codes, and nothing written to the coordinator's log.
    let before = txn_log_end(&mut stream, index);
    assert_eq!(
        init(&mut stream, id, 900_001).error_code,
        50,
        "INVALID_TRANSACTION_TIMEOUT"
    );
    assert_eq!(init(&mut stream, id, 0).error_code, 50);
    assert_eq!(
        init_once(&mut stream, &"x".repeat(40_000), 60_000).error_code,
        42,
        "INVALID_REQUEST: an id whose length does not fit the log key's INT16"
    );
    assert_eq!(
        end(&mut stream, id, pid, 1, true).error_code,
        48,
        "INVALID_TXN_STATE: none open"
    );
    assert_eq!(
        end(&mut stream, id, pid + 1, 1, true).error_code,
        49,
        "INVALID_PRODUCER_ID_MAPPING"
    );
    assert_eq!(add(&mut stream, 3, id, pid + 1, 1), 49);
    assert_eq!(add(&mut stream, 3, "never-initialised", pid, 1), 49);
    let unknown: AddPartitionsToTxnResponse = exchange(
        &mut stream,
        ApiKey::AddPartitionsToTxn,
        3,
        &AddPartitionsToTxnRequest::default()
            .with_v3_and_below_transactional_id(TransactionalId(text(id)))
            .with_v3_and_below_producer_id(ProducerId(pid))
            .with_v3_and_below_producer_epoch(1)
            .with_v3_and_below_topics(vec![
                AddPartitionsToTxnTopic::default()
                    .with_name(TopicName(text(DATA)))
                    .with_partitions(vec![0]),
                AddPartitionsToTxnTopic::default()
                    .with_name(TopicName(text("no-such-topic")))
                    .with_partitions(vec![0]),
            ]),
    );
    let codes: Vec<i16> = unknown
        .results_by_topic_v3_and_below
        .iter()
        .map(|t| t.results_by_partition[0].partition_error_code)
        .collect();
    assert_eq!(
        codes,
        vec![3, 55],
        "UNKNOWN_TOPIC_OR_PARTITION, OPERATION_NOT_ATTEMPTED"
    );
    assert_eq!(describe(&mut stream, "never-initialised").0, 105);
    assert_eq!(
        txn_log_end(&mut stream, index),
        before,
        "bad input wrote nothing"
    );

    // A transaction: added, committed; the answer comes once PrepareCommit is replicated.
    assert_eq!(add(&mut stream, 3, id, pid, 1), 0);
    assert_eq!(describe(&mut stream, id), (0, "Ongoing".to_owned(), pid, 1));
    let ended = end(&mut stream, id, pid, 1, true);
    assert_eq!(ended.error_code, 0, "{ended:?}");
    let (_, state, _, _) = describe(&mut stream, id);
    assert!(
        state == "PrepareCommit" || state == "CompleteCommit",
        "after EndTxn(commit): {state}"
    );
    // Its retry is not an error while markers are written, nor after.
    let retried = end(&mut stream, id, pid, 1, true).error_code;
    assert!(retried == 51 || retried == 0, "retried EndTxn: {retried}");
    // The abort of a committing transaction waits while its markers are written
    // (CONCURRENT_TRANSACTIONS, before any epoch or outcome check, as Kafka 4.0 since
    // KAFKA-18464) and is refused once the commit is complete.
    let mut refused = 51;
    wait_until(
        "the abort refused after the commit completed",
        Duration::from_secs(30),
        || {
            refused = end(&mut stream, id, pid, 1, false).error_code;
            refused != 51
        },
    );
    assert_eq!(refused, 48, "the abort of a committed transaction");

    // A transaction open past its timeout is aborted with an epoch bump, fencing its producer;
    // under transaction.version 2 (the default) the abort bumps once more, as Kafka's fence
    // then TV2 abort do, so the fenced epoch is not the one a TV2 EndTxn retry carries.
    let expiring = "logjam-txn-expiring";
    let mut at_its_coordinator = connect(at(find(first, expiring)));
    let opened = init(&mut at_its_coordinator, expiring, 1_000);
    assert_eq!(opened.error_code, 0, "{opened:?}");
    let (expiring_pid, expiring_epoch) = (opened.producer_id.0, opened.producer_epoch);
    assert_eq!(
        add(
            &mut at_its_coordinator,
            3,
            expiring,
            expiring_pid,
            expiring_epoch
        ),
        0
    );
    wait_until(
        "the expired transaction is aborted",
        Duration::from_secs(30),
        || {
            let (code, state, producer, epoch) = describe(&mut at_its_coordinator, expiring);
            code == 0
                && (state == "PrepareAbort" || state == "CompleteAbort")
                && (producer, epoch) == (expiring_pid, expiring_epoch + 2)
        },
    );
    // While the abort's markers are written its EndTxn waits (51); then it is fenced.
    let mut fenced = 51;
    wait_until(
        "the expired producer's EndTxn answered other than CONCURRENT_TRANSACTIONS",
        Duration::from_secs(30),
        || {
            fenced = end(
                &mut at_its_coordinator,
                expiring,
                expiring_pid,
                expiring_epoch,
                true,
            )
            .error_code;
            fenced != 51
        },
    );
    assert_eq!(fenced, 90, "the expired producer is fenced");

    // The coordinator dies: the next leader of the partition loads the id's state.
    cluster.nodes[(coordinator - 1) as usize].kill();
    let survivor = cluster.nodes[(coordinator % 3) as usize].address;
    // The new leader serves its committed state: the PrepareCommit record was replicated to
    // the ISR before EndTxn answered, so it is there once the new high watermark covers it.
    let mut last = None;
    wait_until(
        "a new coordinator serves the committed EndTxn",
        Duration::from_secs(60),
        || {
            let Some(metadata) = common::metadata(survivor) else {
                return false;
            };
            let Some(leader) = metadata
                .topics
                .iter()
                .find(|t| t.name.as_ref().map(|n| n.as_str()) == Some(TXN_TOPIC))
                .and_then(|t| t.partitions.iter().find(|p| p.partition_index == index))
                .map(|p| p.leader_id.0)
                .filter(|leader| *leader > 0 && *leader != coordinator)
            else {
                return false;
            };
            let mut stream = connect(at(leader));
            let described = describe(&mut stream, id);
            let done = described.0 == 0
                && (described.1 == "PrepareCommit" || described.1 == "CompleteCommit");
            last = Some(described);
            done
        },
    );
    let (_, _, producer, epoch) = last.unwrap();
    assert_eq!((producer, epoch), (pid, 1));
}

/// Goal (issue #13): when the coordinator cannot write CompleteCommit after the markers
/// (`__transaction_state` below its min.isr), it retries that write alone until it is
/// accepted: the transaction completes once the ISR heals, and the markers are not sent again
/// by the same coordinator epoch. Method: 5 nodes, `transaction.state.log.min.isr=3`, a
/// one-replica data partition on a node M outside the replicas of the id's
/// `__transaction_state` partition (neither M nor the replica A killed below is the active
/// controller); M is paused so the COMMIT marker waits; EndTxn writes PrepareCommit; A is
/// killed and the ISR drops to 2; M resumes and the marker is written, yet the transaction
/// stays PrepareCommit; A restarts, the ISR heals, the transaction is CompleteCommit, and no
/// marker was added to the partition since the first was written.
#[test]
fn the_completion_is_retried_until_the_transaction_log_accepts_it() {
    let _alone = one_cluster_at_a_time();
    let root = tempfile::tempdir().unwrap();
    let rig = CommitRig::start(
        root.path(),
        "broker.heartbeat.interval.ms=500\nbroker.session.timeout.ms=30000\n\
         replica.lag.time.max.ms=1000\ntransaction.state.log.min.isr=3",
    );
    let CommitRig {
        mut cluster,
        id,
        coordinator,
        replica,
        data_partition,
        data_leader,
        producer,
        mut stream,
    } = rig;
    let addresses: Vec<SocketAddr> = cluster.nodes.iter().map(|n| n.address).collect();
    let at = |node: i32| addresses[(node - 1) as usize];

    cluster.nodes[(data_leader - 1) as usize].pause();
    let ended = end(&mut stream, &id, producer.0, producer.1, true);
    assert_eq!(ended.error_code, 0, "PrepareCommit written: {ended:?}");
    // A clean stop, not a kill: the controller takes a broker in controlled shutdown out of
    // every ISR at once. A killed replica of this idle partition would stay in its ISR (its
    // log end equals the leader's, which Kafka counts as caught up however long it is silent)
    // until its broker session expires, 30 s here: as long as the wait below.
    cluster.nodes[(replica - 1) as usize].terminate();
    let index = partition_for(&id) as usize;
    wait_until(
        "the transaction log's ISR below its min.isr",
        Duration::from_secs(30),
        || layout(at(coordinator), TXN_TOPIC)[index].2.len() == 2,
    );
    cluster.nodes[(data_leader - 1) as usize].resume();
    wait_until("the COMMIT marker", Duration::from_secs(30), || {
        markers(at(data_leader), DATA, data_partition).is_ok_and(|n| n >= 1)
    });
    // The sends that timed out against the paused node were retried, and the node serves
    // every request its socket buffered once it resumes: one marker per send (duplicates
    // are harmless, as Kafka's are when its marker channel retries a timed-out request).
    // Wait until they are all in.
    let mut sent = 0;
    wait_until(
        "the buffered marker sends served",
        Duration::from_secs(30),
        || {
            let before = markers(at(data_leader), DATA, data_partition);
            std::thread::sleep(Duration::from_secs(1));
            let after = markers(at(data_leader), DATA, data_partition);
            sent = after.unwrap_or(0);
            before.is_ok() && before == after
        },
    );
    // The completion cannot be written yet: give the coordinator time to try.
    std::thread::sleep(Duration::from_secs(2));
    assert_eq!(
        describe(&mut stream, &id).1,
        "PrepareCommit",
        "not completed while the log is below its min.isr"
    );

    cluster.nodes[(replica - 1) as usize].restart();
    wait_until("CompleteCommit", Duration::from_secs(60), || {
        describe(&mut stream, &id).1 == "CompleteCommit"
    });
    let mut now = Err(-1);
    wait_until(
        "the data partition readable",
        Duration::from_secs(30),
        || {
            now = markers(at(data_leader), DATA, data_partition);
            now.is_ok()
        },
    );
    assert_eq!(
        now,
        Ok(sent),
        "the completion's retries send no marker again"
    );
}
