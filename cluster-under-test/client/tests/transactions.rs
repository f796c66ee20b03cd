//! The transactional producer and the read_committed consumer against a real 3-node cluster
//! (the node's transaction coordinator, markers, LSO and read_committed Fetch): committed
//! records are read once, aborted ones never by read_committed and always by
//! read_uncommitted; a zombie with the same transactional id is fenced with a fatal error; a
//! commit whose EndTxn goes unanswered is indefinite and completes when called again; a commit
//! across the coordinator's death completes on the next coordinator.

mod common;

use std::collections::BTreeMap;
use std::time::Duration;

use bytes::Bytes;
use common::MultiNode;

/// Runs each scenario under transactions V1 and V2 (the node's `transaction.version`, which
/// the client reads from ApiVersions' finalized features).
macro_rules! both_versions {
    ($($scenario:ident),* $(,)?) => {
        mod tv1 {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $scenario() {
                    super::$scenario(1).await;
                }
            )*
        }
        mod tv2 {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $scenario() {
                    super::$scenario(2).await;
                }
            )*
        }
    };
}
use bytes::BytesMut;
use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use kafka_protocol::messages::offset_fetch_request::OffsetFetchRequestTopic;
use kafka_protocol::messages::{
    ApiKey, FindCoordinatorRequest, FindCoordinatorResponse, GroupId, MetadataRequest,
    MetadataResponse, OffsetFetchRequest, OffsetFetchResponse, RequestHeader, ResponseHeader,
    TopicName,
};
use kafka_protocol::protocol::{Decodable, Encodable, HeaderVersion, StrBytes};
use logjam_client::{
    Admin, Certainty, Consumer, ConsumerGroupMetadata, NewTopic, Offset, Producer, ProducerRecord,
    SeekTo, TopicPartition, TxnState,
};

const TOPIC: &str = "txn";

/// A 3-node cluster at `transaction.version` `tv` with an RF-3 topic of `partitions`
/// partitions.
async fn cluster(dir: &std::path::Path, tv: i16, partitions: i32) -> (MultiNode, Admin) {
    cluster_with(dir, tv, partitions, &[]).await
}

/// Like [`cluster`], with topic configs.
async fn cluster_with(
    dir: &std::path::Path,
    tv: i16,
    partitions: i32,
    configs: &[(&str, &str)],
) -> (MultiNode, Admin) {
    let cluster = MultiNode::start(
        dir,
        3,
        &format!("default.replication.factor=3\nmin.insync.replicas=2\ntransaction.version={tv}"),
    );
    let bootstrap = cluster.bootstrap();
    let admin = Admin::from_properties([("bootstrap.servers", bootstrap.as_str())]).unwrap();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    loop {
        let topic = configs
            .iter()
            .fold(NewTopic::new(TOPIC, partitions, 3), |t, (k, v)| {
                t.with_config(*k, *v)
            });
        match admin.create_topics(&[topic]).await {
            Ok(results)
                if matches!(
                    &results[0].1,
                    Ok(()) | Err(logjam_client::Error::Broker { code: 36, .. })
                ) =>
            {
                break;
            }
            outcome => {
                assert!(
                    tokio::time::Instant::now() < deadline,
                    "cannot create the topic: {outcome:?}"
                );
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
        }
    }
    (cluster, admin)
}

fn producer(bootstrap: &str, id: &str, max_block_ms: &str) -> Producer {
    Producer::from_properties([
        ("bootstrap.servers", bootstrap),
        ("transactional.id", id),
        ("max.block.ms", max_block_ms),
        ("request.timeout.ms", "5000"),
    ])
    .unwrap()
}

/// Sends `values` to `partition` and returns each record's offset once acknowledged.
async fn send_all(producer: &Producer, partition: i32, values: &[String]) -> Vec<i64> {
    let mut futures = Vec::new();
    for value in values {
        let record =
            ProducerRecord::new(TOPIC, Bytes::from(value.clone())).with_partition(partition);
        futures.push(producer.send(record).await.unwrap());
    }
    let mut offsets = Vec::new();
    for future in futures {
        offsets.push(future.await.unwrap().offset.unwrap().0);
    }
    offsets
}

fn values(prefix: &str, range: std::ops::Range<u32>) -> Vec<String> {
    range.map(|i| format!("{prefix}{i}")).collect()
}

/// Reads `partition` from the start at `level` until `expected` values were read and the
/// position passed `past` (so everything up to there was covered), or 60 s.
async fn read(
    bootstrap: &str,
    level: &str,
    partition: i32,
    expected: usize,
    past: i64,
) -> (Vec<String>, i64) {
    let mut consumer =
        Consumer::from_properties([("bootstrap.servers", bootstrap), ("isolation.level", level)])
            .unwrap();
    let tp = TopicPartition::new(TOPIC, partition);
    consumer.assign([tp.clone()]);
    consumer.seek(&tp, SeekTo::Earliest).unwrap();
    let mut read = Vec::new();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    loop {
        let position = consumer.position(&tp).map_or(-1, |o| o.0);
        if (read.len() >= expected && position > past) || tokio::time::Instant::now() > deadline {
            return (read, position);
        }
        for record in consumer.poll(Duration::from_millis(500)).await.unwrap() {
            read.push(String::from_utf8(record.value.unwrap().to_vec()).unwrap());
        }
    }
}

/// Java's `String.hashCode`, for the coordinator's partition of a transactional id.
fn coordinator_partition(id: &str) -> i32 {
    let mut hash: i32 = 0;
    for unit in id.encode_utf16() {
        hash = hash.wrapping_mul(31).wrapping_add(i32::from(unit));
    }
    (if hash == i32::MIN { 0 } else { hash.abs() }) % 50
}

/// The leader and leader epoch of `id`'s `__transaction_state` partition (its coordinator)
/// as every running node of `cluster` sees it, once they all agree: a node whose metadata
/// lags the controller could name a coordinator that has since moved.
fn coordinator_of(cluster: &MultiNode, id: &str) -> (i32, i32) {
    let partition = coordinator_partition(id);
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    loop {
        let views: Vec<Option<(i32, i32)>> = cluster
            .nodes
            .iter()
            .filter(|n| n.child.is_some())
            .map(|n| leader_at(&n.bootstrap(), partition))
            .collect();
        if let Some(Some(first)) = views.first()
            && views.iter().all(|v| *v == Some(*first))
        {
            return *first;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the nodes never agreed on the coordinator of {id}: {views:?}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// (leader, leader epoch) of `__transaction_state` partition `partition` in the Metadata
/// answer of the node at `address`, if it names a leader.
fn leader_at(address: &str, partition: i32) -> Option<(i32, i32)> {
    let answer: MetadataResponse = exchange(
        address,
        ApiKey::Metadata,
        12,
        &MetadataRequest::default().with_topics(Some(vec![
            MetadataRequestTopic::default().with_name(Some(TopicName(StrBytes::from_static_str(
                "__transaction_state",
            )))),
        ])),
    );
    let found = answer
        .topics
        .first()?
        .partitions
        .iter()
        .find(|p| p.partition_index == partition)?;
    (found.error_code == 0 && found.leader_id.0 >= 0)
        .then_some((found.leader_id.0, found.leader_epoch))
}

/// The last lines of each node's log, for a failure's message.
fn log_tails(cluster: &MultiNode) -> String {
    cluster
        .nodes
        .iter()
        .map(|n| {
            let log = std::fs::read_to_string(n.dir.join("node.log")).unwrap_or_default();
            let lines: Vec<&str> = log.lines().collect();
            let tail = lines[lines.len().saturating_sub(40)..].join("\n");
            format!("--- {} ---\n{tail}", n.dir.display())
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// A partition of the data topic whose leader is not `node`.
async fn partition_not_led_by(admin: &Admin, node: i32) -> i32 {
    let topics = admin.describe_topics(&[TOPIC]).await.unwrap();
    topics[0]
        .partitions
        .iter()
        .find(|p| p.leader.is_some_and(|l| l.0 != node))
        .expect("some partition is led elsewhere")
        .partition
        .0
}

/// Committed records are read once by read_committed, aborted ones never (it read past
/// them), and read_uncommitted reads both.
async fn read_committed_sees_committed_once_and_aborted_never(tv: i16) {
    let dir = tempfile::tempdir().unwrap();
    let (cluster, _admin) = cluster(dir.path(), tv, 1).await;
    let bootstrap = cluster.bootstrap();
    let producer = producer(&bootstrap, "tx-read", "60000");
    producer.init_transactions().await.unwrap();
    let epoch = |p: &Producer| p.producer_id().expect("initialised").1.0;
    let epoch_before = epoch(&producer);
    let (first, aborted, last) = (values("c", 0..5), values("a", 0..5), values("c", 5..10));
    producer.begin_transaction().unwrap();
    send_all(&producer, 0, &first).await;
    producer.commit_transaction().await.unwrap();
    producer.begin_transaction().unwrap();
    let aborted_offsets = send_all(&producer, 0, &aborted).await;
    producer.abort_transaction().await.unwrap();
    producer.begin_transaction().unwrap();
    let last_offsets = send_all(&producer, 0, &last).await;
    producer.commit_transaction().await.unwrap();
    // TV2 bumps the epoch at every EndTxn (EndTxn v5 answers with it); TV1 keeps it.
    let bumps = if tv >= 2 { 3 } else { 0 };
    assert_eq!(
        epoch(&producer),
        epoch_before + bumps,
        "transaction.version {tv}"
    );
    let last_aborted = *aborted_offsets.iter().max().unwrap();
    let last_committed = *last_offsets.iter().max().unwrap();
    assert!(last_committed > last_aborted);

    let (committed, position) = read(&bootstrap, "read_committed", 0, 10, last_committed).await;
    let expected: Vec<String> = first.iter().chain(&last).cloned().collect();
    assert!(
        position > last_committed,
        "read_committed read past everything: position {position}"
    );
    assert_eq!(
        committed, expected,
        "committed once, in order, aborted never"
    );

    let (everything, _) = read(&bootstrap, "read_uncommitted", 0, 15, last_committed).await;
    let expected: Vec<String> = first.iter().chain(&aborted).chain(&last).cloned().collect();
    assert_eq!(
        everything, expected,
        "read_uncommitted sees aborted records too"
    );
    producer.close().await;
}

/// Two producers with one transactional id: the second's InitProducerId bumps the epoch, and
/// the first (the zombie) is fenced with a fatal error (under TV2 after the abortable produce
/// error Kafka's client sees first); its record never becomes readable.
async fn a_zombie_producer_is_fenced_with_a_fatal_error(tv: i16) {
    let dir = tempfile::tempdir().unwrap();
    let (cluster, _admin) = cluster(dir.path(), tv, 1).await;
    let bootstrap = cluster.bootstrap();
    let zombie = producer(&bootstrap, "tx-zombie", "30000");
    zombie.init_transactions().await.unwrap();
    let successor = producer(&bootstrap, "tx-zombie", "30000");
    successor.init_transactions().await.unwrap();

    zombie.begin_transaction().unwrap();
    let future = zombie
        .send(ProducerRecord::new(TOPIC, Bytes::from_static(b"zombie")).with_partition(0))
        .await
        .unwrap();
    let mut error = zombie.commit_transaction().await.unwrap_err();
    if tv >= 2 {
        // TV2 has no AddPartitionsToTxn: the old epoch is met first on the produce path, where
        // the leader answers INVALID_PRODUCER_EPOCH, abortable for Kafka's client (KIP-588);
        // the abort that follows is fenced by the coordinator.
        assert!(error.is_abortable(), "{error}");
        assert!(
            matches!(error.error, logjam_client::Error::Broker { code: 47, .. }),
            "{error}"
        );
        error = zombie.abort_transaction().await.unwrap_err();
    }
    assert!(error.is_fatal(), "fenced is fatal: {error}");
    assert_eq!(error.state, TxnState::FatalError);
    assert_eq!(
        error.certainty,
        Certainty::Definite,
        "no EndTxn was sent: certainly not committed"
    );
    // TV1: AddPartitionsToTxn is answered PRODUCER_FENCED (or INVALID_PRODUCER_EPOCH from an
    // older coordinator). TV2: the zombie's EndTxn(abort) v5 with the old epoch; this node's
    // coordinator answers INVALID_TXN_STATE there (Kafka checks the epoch first and says
    // PRODUCER_FENCED); fatal for the client either way.
    let expected: &[i16] = if tv >= 2 { &[90, 47, 48] } else { &[90, 47] };
    assert!(
        matches!(
            error.error,
            logjam_client::Error::Broker { code, .. } if expected.contains(&code)
        ),
        "fenced: {error}"
    );
    let delivery = future.await.unwrap_err();
    assert_eq!(delivery.certainty, Certainty::Definite, "{delivery}");
    assert!(zombie.begin_transaction().unwrap_err().is_fatal());

    successor.begin_transaction().unwrap();
    let offsets = send_all(&successor, 0, &["successor".to_owned()]).await;
    successor.commit_transaction().await.unwrap();
    let (read, _) = read(&bootstrap, "read_committed", 0, 1, offsets[0]).await;
    assert_eq!(read, ["successor"]);
    zombie.close().await;
    successor.close().await;
}

/// A commit whose EndTxn gets no answer (the coordinator is paused) fails as indefinite and
/// leaves the transaction committing; called again after the coordinator resumes, it
/// completes, and the records are read once.
///
/// A loaded machine may fence the paused node (or move leadership for other reasons) while
/// the commit waits; then the commit rightly completes at the next coordinator and proves
/// nothing, so the attempt is repeated. A commit that completes while the paused node kept
/// the coordinator's leadership (same leader epoch) fails the test.
async fn a_commit_that_times_out_is_indefinite_and_resumes(tv: i16) {
    let dir = tempfile::tempdir().unwrap();
    let (cluster, admin) = cluster(dir.path(), tv, 3).await;
    let bootstrap = cluster.bootstrap();
    let producer = producer(&bootstrap, "tx-pause", "3000");
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    while let Err(error) = producer.init_transactions().await {
        // The first InitProducerId creates __transaction_state; within 3 s it may not be done.
        assert!(
            !error.is_fatal() && tokio::time::Instant::now() < deadline,
            "{error}"
        );
    }
    for attempt in 0.. {
        let (coordinator, epoch) = coordinator_of(&cluster, "tx-pause");
        let partition = partition_not_led_by(&admin, coordinator).await;
        producer.begin_transaction().unwrap();
        let prefix = format!("p{attempt}-");
        let offsets = send_all(&producer, partition, &values(&prefix, 0..3)).await;

        let paused = &cluster.nodes[(coordinator - 1) as usize];
        paused.pause();
        let outcome = producer.commit_transaction().await;
        paused.resume();
        let error = match outcome {
            Err(error) => error,
            Ok(()) => {
                let now = coordinator_of(&cluster, "tx-pause");
                assert!(
                    now != (coordinator, epoch) && attempt < 3,
                    "the commit completed while its coordinator {coordinator} (leader epoch \
                     {epoch}) was paused; it is now {now:?}\n{}",
                    log_tails(&cluster)
                );
                eprintln!(
                    "the coordinator moved from {:?} to {now:?} during the pause; again",
                    (coordinator, epoch)
                );
                continue;
            }
        };
        assert_eq!(
            error.certainty,
            Certainty::Indefinite,
            "an unanswered EndTxn may have committed: {error}"
        );
        assert_eq!(error.state, TxnState::CommittingTransaction);

        let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
        loop {
            match producer.commit_transaction().await {
                Ok(()) => break,
                Err(error) => assert!(
                    !error.is_fatal() && tokio::time::Instant::now() < deadline,
                    "the resumed commit failed: {error}"
                ),
            }
        }
        let (read, _) = read(&bootstrap, "read_committed", partition, 3, offsets[2]).await;
        assert_eq!(read, values(&prefix, 0..3));
        break;
    }
    producer.close().await;
}

/// The coordinator dies after the records were written and before EndTxn: the commit finds
/// the next coordinator (which loaded the transaction from `__transaction_state`) and
/// completes; answered, it is definite, and the records are read once.
async fn a_commit_across_a_coordinator_kill_completes_on_the_next_coordinator(tv: i16) {
    let dir = tempfile::tempdir().unwrap();
    let (mut cluster, admin) = cluster(dir.path(), tv, 3).await;
    let bootstrap = cluster.bootstrap();
    let producer = producer(&bootstrap, "tx-kill", "60000");
    producer.init_transactions().await.unwrap();
    let (coordinator, _) = coordinator_of(&cluster, "tx-kill");
    let partition = partition_not_led_by(&admin, coordinator).await;
    producer.begin_transaction().unwrap();
    let offsets = send_all(&producer, partition, &values("k", 0..3)).await;
    cluster.nodes[(coordinator - 1) as usize].kill();
    producer.commit_transaction().await.unwrap();
    let remaining: Vec<String> = cluster
        .nodes
        .iter()
        .filter(|n| n.child.is_some())
        .map(|n| n.bootstrap())
        .collect();
    let (read, _) = read(
        &remaining.join(","),
        "read_committed",
        partition,
        3,
        offsets[2],
    )
    .await;
    let mut counts = BTreeMap::new();
    for value in &read {
        *counts.entry(value.clone()).or_insert(0) += 1;
    }
    assert_eq!(read, values("k", 0..3), "committed once: {counts:?}");
    producer.close().await;
}

/// A record the leader refuses (`MESSAGE_TOO_LARGE`, definite) makes the transaction
/// abortable: its delivery fails definitely, commit is refused with an abortable error that
/// certainly did not commit, abort succeeds and bumps the epoch (TV1, Kafka's client-side
/// bump after an abortable error), and the next transaction commits; read_committed sees it
/// alone.
async fn a_refused_record_makes_the_transaction_abortable_and_abort_recovers(tv: i16) {
    let dir = tempfile::tempdir().unwrap();
    let (cluster, _admin) = cluster_with(dir.path(), tv, 1, &[("max.message.bytes", "2000")]).await;
    let bootstrap = cluster.bootstrap();
    let producer = producer(&bootstrap, "tx-abortable", "60000");
    producer.init_transactions().await.unwrap();
    let (_, epoch_before) = producer.producer_id().map_or((0, -1), |(i, e)| (i.0, e.0));

    producer.begin_transaction().unwrap();
    let small = producer
        .send(ProducerRecord::new(TOPIC, Bytes::from_static(b"small")).with_partition(0))
        .await
        .unwrap();
    let large = producer
        .send(ProducerRecord::new(TOPIC, Bytes::from(vec![b'x'; 8000])).with_partition(0))
        .await
        .unwrap();
    let refused = large.await.unwrap_err();
    assert_eq!(refused.certainty, Certainty::Definite, "{refused}");
    let _ = small.await;
    let error = producer.commit_transaction().await.unwrap_err();
    assert!(error.is_abortable(), "{error}");
    assert_eq!(
        error.certainty,
        Certainty::Definite,
        "no EndTxn(commit) was sent"
    );
    producer.abort_transaction().await.unwrap();
    let (_, epoch_after) = producer.producer_id().map_or((0, -1), |(i, e)| (i.0, e.0));
    assert!(
        epoch_after > epoch_before,
        "the abort bumped the epoch: {epoch_before} -> {epoch_after}"
    );

    producer.begin_transaction().unwrap();
    let offsets = send_all(&producer, 0, &["after".to_owned()]).await;
    producer.commit_transaction().await.unwrap();
    let (read, _) = read(&bootstrap, "read_committed", 0, 1, offsets[0]).await;
    assert_eq!(
        read,
        ["after"],
        "the aborted transaction's records stay invisible"
    );
    producer.close().await;
}

/// One request/response with `kafka-protocol` over a plain socket (the client has no
/// OffsetFetch of its own).
fn exchange<Req, Resp>(address: &str, key: ApiKey, version: i16, request: &Req) -> Resp
where
    Req: Encodable + HeaderVersion,
    Resp: Decodable + HeaderVersion,
{
    use std::io::{Read, Write};
    let mut body = BytesMut::new();
    RequestHeader::default()
        .with_request_api_key(key as i16)
        .with_request_api_version(version)
        .with_correlation_id(1)
        .with_client_id(Some(StrBytes::from_static_str("send-offsets-test")))
        .encode(&mut body, Req::header_version(version))
        .unwrap();
    request.encode(&mut body, version).unwrap();
    let mut stream = std::net::TcpStream::connect(address).unwrap();
    stream
        .write_all(&(body.len() as i32).to_be_bytes())
        .unwrap();
    stream.write_all(&body).unwrap();
    let mut size = [0u8; 4];
    stream.read_exact(&mut size).unwrap();
    let mut frame = vec![0u8; i32::from_be_bytes(size) as usize];
    stream.read_exact(&mut frame).unwrap();
    let mut frame = Bytes::from(frame);
    ResponseHeader::decode(&mut frame, Resp::header_version(version)).unwrap();
    Resp::decode(&mut frame, version).unwrap()
}

/// The committed offset of `group` for TOPIC-0 (OffsetFetch v7 with `require_stable`, at
/// the group's coordinator), once no transaction holds one.
fn committed_offset(bootstrap: &str, group: &str) -> i64 {
    let any = bootstrap.split(',').next().unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    loop {
        let found: FindCoordinatorResponse = exchange(
            any,
            ApiKey::FindCoordinator,
            3,
            &FindCoordinatorRequest::default().with_key(StrBytes::from_string(group.to_owned())),
        );
        if found.error_code == 0 {
            let at = format!("{}:{}", found.host.as_str(), found.port);
            let fetched: OffsetFetchResponse = exchange(
                &at,
                ApiKey::OffsetFetch,
                7,
                &OffsetFetchRequest::default()
                    .with_group_id(GroupId(StrBytes::from_string(group.to_owned())))
                    .with_require_stable(true)
                    .with_topics(Some(vec![
                        OffsetFetchRequestTopic::default()
                            .with_name(TopicName(StrBytes::from_static_str(TOPIC)))
                            .with_partition_indexes(vec![0]),
                    ])),
            );
            if fetched.error_code == 0 {
                let partition = &fetched.topics[0].partitions[0];
                if partition.error_code == 0 {
                    return partition.committed_offset;
                }
            }
        }
        assert!(std::time::Instant::now() < deadline, "no stable offset");
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// `send_offsets_to_transaction` against the node: the offsets become the group's committed
/// offsets with the transaction's commit (TV1: AddOffsetsToTxn + TxnOffsetCommit v3; TV2:
/// TxnOffsetCommit v5 adding the partition implicitly), and an aborted transaction's never.
async fn send_offsets_commit_with_the_transaction_only(tv: i16) {
    let dir = tempfile::tempdir().unwrap();
    let (cluster, _admin) = cluster(dir.path(), tv, 1).await;
    let bootstrap = cluster.bootstrap();
    let producer = producer(&bootstrap, "tx-offsets", "60000");
    producer.init_transactions().await.unwrap();
    let group = ConsumerGroupMetadata::new("tx-offsets-group");
    let partition = TopicPartition::new(TOPIC, 0);
    for (offset, commit) in [(5, true), (9, false)] {
        producer.begin_transaction().unwrap();
        send_all(&producer, 0, &values("o", 0..2)).await;
        let offsets = BTreeMap::from([(partition.clone(), Offset(offset))]);
        producer
            .send_offsets_to_transaction(&offsets, &group)
            .await
            .unwrap();
        if commit {
            producer.commit_transaction().await.unwrap();
        } else {
            producer.abort_transaction().await.unwrap();
        }
        assert_eq!(
            committed_offset(&bootstrap, &group.group_id),
            5,
            "after the transaction that sent {offset} (commit: {commit}), tv {tv}"
        );
    }
    producer.close().await;
}

both_versions!(
    send_offsets_commit_with_the_transaction_only,
    read_committed_sees_committed_once_and_aborted_never,
    a_zombie_producer_is_fenced_with_a_fatal_error,
    a_commit_that_times_out_is_indefinite_and_resumes,
    a_commit_across_a_coordinator_kill_completes_on_the_next_coordinator,
    a_refused_record_makes_the_transaction_abortable_and_abort_recovers,
);
