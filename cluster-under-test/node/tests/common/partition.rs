//! A client's view of one topic's partitions, as the multi-broker tests use it: create a
//! replicated topic, read its leader and ISR from metadata, wait for an ISR, produce to and
//! fetch from partition 0 as a consumer would (replica id -1).

use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

use bytes::Bytes;
use kafka_protocol::messages::create_topics_request::{CreatableTopic, CreatableTopicConfig};
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::{
    ApiKey, BrokerId, CreateTopicsRequest, CreateTopicsResponse, FetchRequest, FetchResponse,
    ListOffsetsRequest, ListOffsetsResponse, ProduceRequest, ProduceResponse, TopicName,
    TransactionalId,
};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::records::RecordBatchDecoder;

use super::{batch, connect, exchange, metadata, wait_until};

pub fn topic_name(name: &str) -> TopicName {
    TopicName(StrBytes::from_string(name.to_owned()))
}

/// A consumer's ListOffsets (replica id -1, read_uncommitted) of `topic`'s partition `index`
/// at `timestamp` (-1 latest, -2 earliest, -3 max timestamp, or a time).
pub fn list_offsets_request(topic: &str, index: i32, timestamp: i64) -> ListOffsetsRequest {
    ListOffsetsRequest::default()
        .with_replica_id(BrokerId(-1))
        .with_topics(vec![
            ListOffsetsTopic::default()
                .with_name(topic_name(topic))
                .with_partitions(vec![
                    ListOffsetsPartition::default()
                        .with_partition_index(index)
                        .with_timestamp(timestamp),
                ]),
        ])
}

/// The offset ListOffsets v7 "latest" (read_uncommitted) gives for `topic`'s partition `index`,
/// asked over `stream` of its leader: the high watermark. A new leader whose high watermark
/// still lags its epoch's start answers `OFFSET_NOT_AVAILABLE` (78), which is asked again for up
/// to 10 s, as clients retry it; any other error fails.
pub fn latest_offset(stream: &mut TcpStream, topic: &str, index: i32) -> i64 {
    let request = list_offsets_request(topic, index, -1);
    let mut offset = None;
    wait_until(
        "the leader's high watermark reaches its epoch's start",
        Duration::from_secs(10),
        || {
            let response: ListOffsetsResponse = exchange(stream, ApiKey::ListOffsets, 7, &request);
            let partition = &response.topics[0].partitions[0];
            if partition.error_code == 78 {
                return false;
            }
            assert_eq!(partition.error_code, 0, "{response:?}");
            offset = Some(partition.offset);
            true
        },
    );
    offset.expect("answered")
}

/// Creates `name` with `partitions` partitions of `replication_factor` replicas and the given
/// topic configs (`(key, value)`); asserts that the creation succeeded.
pub fn create_topic(
    address: SocketAddr,
    name: &str,
    partitions: i32,
    replication_factor: i16,
    configs: &[(&str, &str)],
) {
    let mut stream = connect(address);
    let request = CreateTopicsRequest::default()
        .with_timeout_ms(20_000)
        .with_topics(vec![
            CreatableTopic::default()
                .with_name(topic_name(name))
                .with_num_partitions(partitions)
                .with_replication_factor(replication_factor)
                .with_configs(
                    configs
                        .iter()
                        .map(|(key, value)| {
                            CreatableTopicConfig::default()
                                .with_name(StrBytes::from_string((*key).to_owned()))
                                .with_value(Some(StrBytes::from_string((*value).to_owned())))
                        })
                        .collect(),
                ),
        ]);
    let response: CreateTopicsResponse = exchange(&mut stream, ApiKey::CreateTopics, 7, &request);
    assert_eq!(response.topics[0].error_code, 0, "topic {name} created");
}

/// `(leader, sorted isr)` of every partition of `topic`, in partition order, as `address`
/// sees it; `None` when the broker does not answer or does not know the topic.
pub fn partitions(address: SocketAddr, topic: &str) -> Option<Vec<(i32, Vec<i32>)>> {
    let metadata = metadata(address)?;
    let topic = metadata
        .topics
        .iter()
        .find(|t| t.name.as_ref().is_some_and(|n| n.as_str() == topic))?;
    let mut out: Vec<(i32, i32, Vec<i32>)> = topic
        .partitions
        .iter()
        .map(|p| {
            let mut isr: Vec<i32> = p.isr_nodes.iter().map(|b| b.0).collect();
            isr.sort_unstable();
            (p.partition_index, p.leader_id.0, isr)
        })
        .collect();
    out.sort_unstable();
    (!out.is_empty()).then(|| out.into_iter().map(|(_, l, isr)| (l, isr)).collect())
}

/// `(leader, sorted isr)` of partition 0 of `topic` as `address` sees it.
pub fn partition_state(address: SocketAddr, topic: &str) -> Option<(i32, Vec<i32>)> {
    partitions(address, topic)?.into_iter().next()
}

/// Waits until partition 0 of `topic` has a leader and exactly `isr` (sorted), as `address`
/// sees it; returns the leader's id.
pub fn wait_for_isr(address: SocketAddr, topic: &str, isr: &[i32], within: Duration) -> i32 {
    let mut leader = -1;
    wait_until(&format!("ISR of {topic}-0 is {isr:?}"), within, || {
        partition_state(address, topic).is_some_and(|(l, current)| {
            leader = l;
            current == isr && l >= 0
        })
    });
    leader
}

/// Produces `records` (a record batch) to partition 0 of `topic`: the base offset, or the
/// partition's error code.
pub fn produce_records(
    address: SocketAddr,
    topic: &str,
    records: Bytes,
    acks: i16,
    timeout_ms: i32,
) -> Result<i64, i16> {
    produce_records_as(address, None, topic, records, acks, timeout_ms)
}

/// [`produce_records`] from the producer of `transactional_id` (`None`: a plain or
/// idempotent producer), as Produce v9 names it.
pub fn produce_records_as(
    address: SocketAddr,
    transactional_id: Option<&str>,
    topic: &str,
    records: Bytes,
    acks: i16,
    timeout_ms: i32,
) -> Result<i64, i16> {
    let mut stream = connect(address);
    let request = ProduceRequest::default()
        .with_transactional_id(
            transactional_id.map(|id| TransactionalId(StrBytes::from_string(id.to_owned()))),
        )
        .with_acks(acks)
        .with_timeout_ms(timeout_ms)
        .with_topic_data(vec![
            TopicProduceData::default()
                .with_name(topic_name(topic))
                .with_partition_data(vec![
                    PartitionProduceData::default()
                        .with_index(0)
                        .with_records(Some(records)),
                ]),
        ]);
    let response: ProduceResponse = exchange(&mut stream, ApiKey::Produce, 9, &request);
    let partition = &response.responses[0].partition_responses[0];
    if partition.error_code == 0 {
        Ok(partition.base_offset)
    } else {
        Err(partition.error_code)
    }
}

/// Produces `values` as one batch to partition 0 of `topic`: the base offset, or the error
/// code.
pub fn produce_batch(
    address: SocketAddr,
    topic: &str,
    values: &[&[u8]],
    acks: i16,
    timeout_ms: i32,
) -> Result<i64, i16> {
    produce_records(address, topic, batch(values), acks, timeout_ms)
}

/// Produces one record to partition 0 of `topic` (timeout 5 s): its offset, or the error code,
/// `-1` when the node did not answer (a broker being killed or restarted).
pub fn produce(address: SocketAddr, topic: &str, value: &[u8], acks: i16) -> Result<i64, i16> {
    std::panic::catch_unwind(|| produce_batch(address, topic, &[value], acks, 5000))
        .unwrap_or(Err(-1))
}

/// One consumer fetch (replica id -1, no waiting) of at most `max_bytes` of partition 0 of
/// `topic` from `offset`, over `stream`: the high watermark and the record batches (empty
/// when there is nothing to read). Asserts that the partition answered without error.
pub fn fetch(stream: &mut TcpStream, topic: &str, offset: i64, max_bytes: i32) -> (i64, Bytes) {
    let request = FetchRequest::default()
        .with_replica_id(BrokerId(-1))
        .with_max_wait_ms(0)
        .with_min_bytes(0)
        .with_max_bytes(1 << 20)
        .with_topics(vec![
            FetchTopic::default()
                .with_topic(topic_name(topic))
                .with_partitions(vec![
                    FetchPartition::default()
                        .with_partition(0)
                        .with_fetch_offset(offset)
                        .with_partition_max_bytes(max_bytes),
                ]),
        ]);
    let response: FetchResponse = exchange(stream, ApiKey::Fetch, 12, &request);
    let data = &response.responses[0].partitions[0];
    assert_eq!(
        data.error_code,
        0,
        "fetch from {:?}",
        stream.peer_addr().ok()
    );
    (
        data.high_watermark,
        data.records.clone().unwrap_or_default(),
    )
}

/// Every record of partition 0 of `topic` below the high watermark, as a consumer reads it
/// from `address`: `(offset, value)`.
pub fn read_all(address: SocketAddr, topic: &str) -> Vec<(i64, Vec<u8>)> {
    let mut stream = connect(address);
    let mut out = Vec::new();
    let mut next = 0;
    loop {
        let (_, mut records) = fetch(&mut stream, topic, next, 1 << 16);
        if records.is_empty() {
            return out;
        }
        for set in RecordBatchDecoder::decode_all(&mut records).unwrap() {
            for record in set.records {
                if record.offset >= next {
                    next = record.offset + 1;
                    out.push((record.offset, record.value.unwrap_or_default().to_vec()));
                }
            }
        }
    }
}

/// The leader epoch of `topic`'s partition 0 in `address`'s metadata.
pub fn leader_epoch(address: SocketAddr, topic: &str) -> Option<i32> {
    metadata(address)?
        .topics
        .iter()
        .find(|t| t.name.as_ref().is_some_and(|n| n.0.as_str() == topic))?
        .partitions
        .iter()
        .find(|p| p.partition_index == 0)
        .map(|p| p.leader_epoch)
}

/// OffsetForLeaderEpoch v4 as a consumer asks it (no fencing) of `address`: where `epoch`
/// ends in `topic`'s partition 0. (error code, epoch, end offset).
pub fn epoch_end(address: SocketAddr, topic: &str, epoch: i32) -> (i16, i32, i64) {
    use kafka_protocol::messages::offset_for_leader_epoch_request::{
        OffsetForLeaderPartition, OffsetForLeaderTopic,
    };
    use kafka_protocol::messages::{OffsetForLeaderEpochRequest, OffsetForLeaderEpochResponse};
    let request = OffsetForLeaderEpochRequest::default()
        .with_replica_id(BrokerId(-1))
        .with_topics(vec![
            OffsetForLeaderTopic::default()
                .with_topic(topic_name(topic))
                .with_partitions(vec![
                    OffsetForLeaderPartition::default()
                        .with_partition(0)
                        .with_current_leader_epoch(-1)
                        .with_leader_epoch(epoch),
                ]),
        ]);
    let response: OffsetForLeaderEpochResponse = exchange(
        &mut connect(address),
        ApiKey::OffsetForLeaderEpoch,
        4,
        &request,
    );
    let answer = &response.topics[0].partitions[0];
    (answer.error_code, answer.leader_epoch, answer.end_offset)
}
