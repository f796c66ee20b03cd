//! Shared helpers of the node's integration tests: an in-process node on a free port, a node
//! process of the real binary, and a minimal request/response exchange over TCP built with
//! `kafka-protocol` (the tests must not depend on the node's own code to talk to it).

#![allow(dead_code)]

pub mod controller_and_brokers;
pub mod partition;
pub mod ports;
pub mod stopped;
pub mod txn;

pub use ports::free_port;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use bytes::{Buf, BufMut, Bytes, BytesMut};
use indexmap::IndexMap;
use kafka_protocol::messages::{ApiKey, RequestHeader, ResponseHeader};
use kafka_protocol::protocol::{Decodable, Encodable, StrBytes};
use kafka_protocol::records::{
    Compression, Record, RecordBatchEncoder, RecordEncodeOptions, TimestampType,
};
use logjam_node::config::Config;

/// A minimal config for a single node listening on `port` with data in `dir`: a one-voter
/// quorum by itself (no `controller.quorum.voters`). The broker session is shortened from
/// Kafka's 9 s so that a node restarted after SIGKILL, which must wait out its previous
/// incarnation's session (`DUPLICATE_BROKER_REGISTRATION`), is back within a couple of seconds.
/// The internal topics' replication factors are 1 (Kafka's 3 needs three brokers).
pub fn config_text(dir: &Path, port: u16, extra: &str) -> String {
    format!(
        "node.id=1\nprocess.roles=broker,controller\nlisteners=PLAINTEXT://127.0.0.1:{port}\n\
         log.dirs={}\nbroker.heartbeat.interval.ms=500\nbroker.session.timeout.ms=2000\n{}{extra}\n",
        dir.display(),
        internal_topic_factors(1)
    )
}

/// The internal topics' replication factors for a cluster of `brokers` brokers: none below
/// Kafka's default of 3 (`offsets.topic.replication.factor`,
/// `transaction.state.log.replication.factor`) can serve a coordinator otherwise. Config
/// lines after these override them.
pub fn internal_topic_factors(brokers: usize) -> String {
    if brokers >= 3 {
        return String::new();
    }
    format!(
        "offsets.topic.replication.factor={brokers}\n\
         transaction.state.log.replication.factor={brokers}\n"
    )
}

/// Parses [`config_text`].
pub fn config(dir: &Path, port: u16, extra: &str) -> Config {
    Config::parse(&config_text(dir, port, extra), &[]).expect("test config is valid")
}

/// Encodes a request frame (length prefix included).
pub fn request_frame<T: Encodable>(
    key: ApiKey,
    version: i16,
    correlation_id: i32,
    body: &T,
) -> BytesMut {
    let mut buf = BytesMut::new();
    buf.put_i32(0);
    RequestHeader::default()
        .with_request_api_key(key as i16)
        .with_request_api_version(version)
        .with_correlation_id(correlation_id)
        .with_client_id(Some(StrBytes::from_static_str("logjam-test")))
        .encode(&mut buf, key.request_header_version(version))
        .unwrap();
    body.encode(&mut buf, version).unwrap();
    let length = (buf.len() - 4) as i32;
    buf[..4].copy_from_slice(&length.to_be_bytes());
    buf
}

/// Reads one response frame; `None` when the server closed the connection.
pub fn read_frame(stream: &mut TcpStream) -> Option<Bytes> {
    let mut size = [0u8; 4];
    stream.read_exact(&mut size).ok()?;
    let mut frame = vec![0u8; i32::from_be_bytes(size) as usize];
    stream.read_exact(&mut frame).ok()?;
    Some(Bytes::from(frame))
}

/// Sends a request and decodes its response.
pub fn exchange<Req: Encodable, Resp: Decodable>(
    stream: &mut TcpStream,
    key: ApiKey,
    version: i16,
    body: &Req,
) -> Resp {
    try_exchange(stream, key, version, body).expect("the node answered")
}

/// As [`exchange`], `None` when the connection closed (or timed out) before an answer: a
/// node that lost its registration under load closes its client connections.
pub fn try_exchange<Req: Encodable, Resp: Decodable>(
    stream: &mut TcpStream,
    key: ApiKey,
    version: i16,
    body: &Req,
) -> Option<Resp> {
    let frame = request_frame(key, version, 42, body);
    stream.write_all(&frame).ok()?;
    let mut response = read_frame(stream)?;
    let header =
        ResponseHeader::decode(&mut response, key.response_header_version(version)).unwrap();
    assert_eq!(header.correlation_id, 42);
    let body = Resp::decode(&mut response, version).unwrap();
    assert_eq!(response.remaining(), 0, "response has trailing bytes");
    Some(body)
}

/// Connects with a timeout so a hung node fails the test instead of hanging it.
pub fn connect(address: SocketAddr) -> TcpStream {
    // A node under load (2 cores, several clusters of a test binary at once) may be between
    // losing and regaining its registration, when its client listener refuses connections:
    // retry for a while before calling it a failure.
    let deadline = Instant::now() + Duration::from_secs(15);
    let stream = loop {
        match TcpStream::connect_timeout(&address, Duration::from_secs(5)) {
            Ok(stream) => break stream,
            Err(error) if Instant::now() >= deadline => {
                panic!("cannot connect to {address}: {error}")
            }
            Err(_) => std::thread::sleep(Duration::from_millis(50)),
        }
    };
    stream
        .set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    stream
}

/// A v2 record batch holding `values`, as a producer would send it.
pub fn batch(values: &[&[u8]]) -> Bytes {
    producer_batch(values, -1, -1, -1)
}

/// One v2 record batch, compressed with `compression`, of records carrying these timestamps and
/// `value` each, from no producer. (The encoder starts a new batch whenever offset minus
/// sequence changes, so the sequences follow the offsets.)
pub fn timed_batch(timestamps: &[i64], value: &[u8], compression: Compression) -> Bytes {
    let records: Vec<Record> = timestamps
        .iter()
        .enumerate()
        .map(|(i, timestamp)| Record {
            transactional: false,
            control: false,
            delete_horizon: false,
            partition_leader_epoch: -1,
            producer_id: -1,
            producer_epoch: -1,
            timestamp_type: TimestampType::Creation,
            offset: i as i64,
            sequence: i as i32,
            timestamp: *timestamp,
            key: None,
            value: Some(Bytes::copy_from_slice(value)),
            headers: IndexMap::new(),
        })
        .collect();
    let mut buf = BytesMut::new();
    let options = RecordEncodeOptions {
        version: 2,
        compression,
    };
    RecordBatchEncoder::encode(&mut buf, &records, &options).unwrap();
    buf.freeze()
}

/// A v2 record batch holding `values` from an idempotent producer (`producer_id`,
/// `producer_epoch`), its records numbered from `base_sequence`; `-1`s for no producer.
pub fn producer_batch(
    values: &[&[u8]],
    producer_id: i64,
    producer_epoch: i16,
    base_sequence: i32,
) -> Bytes {
    let records: Vec<Record> = values
        .iter()
        .enumerate()
        .map(|(i, value)| Record {
            transactional: false,
            control: false,
            delete_horizon: false,
            partition_leader_epoch: -1,
            producer_id,
            producer_epoch,
            timestamp_type: TimestampType::Creation,
            offset: i as i64,
            sequence: if base_sequence < 0 {
                i as i32
            } else {
                base_sequence + i as i32
            },
            timestamp: 1_700_000_000_000,
            key: None,
            value: Some(Bytes::copy_from_slice(value)),
            headers: IndexMap::new(),
        })
        .collect();
    let mut buf = BytesMut::new();
    RecordBatchEncoder::encode(
        &mut buf,
        &records,
        &RecordEncodeOptions {
            version: 2,
            compression: Compression::None,
        },
    )
    .unwrap();
    buf.freeze()
}

/// The `logjam-node` binary as a child process, killed (SIGKILL) on drop.
pub struct NodeProcess {
    pub child: Child,
    pub address: SocketAddr,
    pub dir: PathBuf,
    pub config_path: PathBuf,
}

impl NodeProcess {
    /// Starts the binary with a config in `dir` and waits until it accepts connections.
    pub fn start(dir: &Path, extra: &str) -> NodeProcess {
        let port = free_port();
        let config_path = dir.join("server.properties");
        std::fs::write(&config_path, config_text(&dir.join("data"), port, extra)).unwrap();
        let address: SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
        let child = spawn(&config_path, dir);
        let node = NodeProcess {
            child,
            address,
            dir: dir.to_owned(),
            config_path,
        };
        node.wait_ready();
        node
    }

    /// Starts the binary with the given config text in `dir`, reachable at `address` (the
    /// client listener, or the controller listener of a controller-only node), and waits
    /// until it accepts connections.
    pub fn start_with_config(dir: &Path, text: &str, address: SocketAddr) -> NodeProcess {
        std::fs::create_dir_all(dir).unwrap();
        let config_path = dir.join("server.properties");
        std::fs::write(&config_path, text).unwrap();
        let child = spawn(&config_path, dir);
        let node = NodeProcess {
            child,
            address,
            dir: dir.to_owned(),
            config_path,
        };
        node.wait_ready();
        node
    }

    pub fn wait_ready(&self) {
        let deadline = Instant::now() + Duration::from_secs(30);
        while TcpStream::connect_timeout(&self.address, Duration::from_millis(200)).is_err() {
            assert!(
                Instant::now() < deadline,
                "node did not start; see {}",
                self.dir.join("node.log").display()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// SIGKILL, as a crash.
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// Kills and starts again on the same port and data.
    pub fn restart(&mut self) {
        self.respawn();
        self.wait_ready();
    }

    /// Kills (if still running) and starts again on the same port and data, without waiting
    /// for it to serve: a broker opens its client listener only once registered and unfenced.
    pub fn respawn(&mut self) {
        self.kill();
        self.child = spawn(&self.config_path, &self.dir);
    }

    /// Clean stop: SIGTERM, then waits for the process to exit and asserts it exited with
    /// success.
    pub fn terminate(&mut self) {
        nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(self.child.id() as i32),
            nix::sys::signal::Signal::SIGTERM,
        )
        .unwrap();
        let status = self.child.wait().unwrap();
        assert!(status.success(), "clean shutdown exits 0, got {status}");
    }

    /// Pauses the process (SIGSTOP), returning once every thread has stopped: it keeps its
    /// connections and sessions but answers nothing.
    pub fn pause(&self) {
        stopped::stop(self.child.id());
    }

    /// Resumes a paused process (SIGCONT).
    pub fn resume(&self) {
        stopped::resume(self.child.id());
    }
}

fn spawn(config_path: &Path, dir: &Path) -> Child {
    let log = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(dir.join("node.log"))
        .unwrap();
    // LOGJAM_NODE_BINARY runs another build of the node (a benchmark's A/B comparison).
    let binary = std::env::var_os("LOGJAM_NODE_BINARY").map_or_else(
        || env!("CARGO_BIN_EXE_logjam-node").into(),
        std::path::PathBuf::from,
    );
    Command::new(binary)
        .arg("--config")
        .arg(config_path)
        .stdin(Stdio::null())
        .stdout(log.try_clone().unwrap())
        .stderr(log)
        .spawn()
        .expect("logjam-node starts")
}

impl Drop for NodeProcess {
    fn drop(&mut self) {
        self.kill();
    }
}

/// The config of node `id` of a multi-node cluster: combined roles, a PLAINTEXT client
/// listener and a CONTROLLER listener, every node a voter.
pub fn cluster_config_text(
    id: i32,
    data_dir: &Path,
    client_port: u16,
    controller_port: u16,
    voters: &str,
    extra: &str,
) -> String {
    format!(
        "node.id={id}\nprocess.roles=broker,controller\n\
         listeners=PLAINTEXT://127.0.0.1:{client_port},CONTROLLER://127.0.0.1:{controller_port}\n\
         controller.listener.names=CONTROLLER\ncontroller.quorum.voters={voters}\n\
         log.dirs={}\n{extra}\n",
        data_dir.display()
    )
}

/// A cluster of `logjam-node` processes on 127.0.0.1.
pub struct Cluster {
    /// The nodes, node id `i + 1` at index `i`.
    pub nodes: Vec<NodeProcess>,
    /// Controller listener of each node, same order.
    pub controllers: Vec<SocketAddr>,
}

impl Cluster {
    /// Starts `size` combined nodes (ids 1..=size) under `root` and waits until each serves
    /// clients (registered and unfenced).
    pub fn start(root: &Path, size: usize, extra: &str) -> Cluster {
        let ports: Vec<(u16, u16)> = (0..size).map(|_| (free_port(), free_port())).collect();
        let voters = ports
            .iter()
            .enumerate()
            .map(|(i, (_, controller))| format!("{}@127.0.0.1:{controller}", i + 1))
            .collect::<Vec<_>>()
            .join(",");
        let mut nodes = Vec::new();
        let mut controllers = Vec::new();
        // Format every node with one cluster id, as `kafka-storage format --cluster-id` does:
        // a controller refuses registrations from another cluster.
        let cluster_id = format!("logjam-test-{}", free_port());
        for (i, (client, controller)) in ports.iter().enumerate() {
            let dir = root.join(format!("node{}", i + 1));
            std::fs::create_dir_all(dir.join("data")).unwrap();
            std::fs::write(
                dir.join("data/meta.properties"),
                format!("version=1\ncluster.id={cluster_id}\nnode.id={}\n", i + 1),
            )
            .unwrap();
            let config_path = dir.join("server.properties");
            let text = cluster_config_text(
                i as i32 + 1,
                &dir.join("data"),
                *client,
                *controller,
                &voters,
                &format!("{}{extra}", internal_topic_factors(size)),
            );
            std::fs::write(&config_path, text).unwrap();
            let child = spawn(&config_path, &dir);
            nodes.push(NodeProcess {
                child,
                address: format!("127.0.0.1:{client}").parse().unwrap(),
                dir,
                config_path,
            });
            controllers.push(format!("127.0.0.1:{controller}").parse().unwrap());
        }
        for node in &nodes {
            node.wait_ready();
        }
        Cluster { nodes, controllers }
    }

    /// The node (index) whose controller answers DescribeQuorum as leader, with its epoch,
    /// asking only the nodes in `among`.
    pub fn leader_among(&self, among: &[usize]) -> Option<(usize, i32)> {
        among.iter().find_map(|&i| {
            let (leader, epoch) = describe_quorum(self.controllers[i])?;
            (leader == i as i32 + 1).then_some((i, epoch))
        })
    }

    /// Waits until one of `among` reports itself leader with an epoch above `above`.
    pub fn wait_for_leader(&self, among: &[usize], above: i32, within: Duration) -> (usize, i32) {
        let deadline = Instant::now() + within;
        loop {
            if let Some((i, epoch)) = self.leader_among(among)
                && epoch > above
            {
                return (i, epoch);
            }
            assert!(
                Instant::now() < deadline,
                "no controller leader elected in {within:?}"
            );
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}

/// DescribeQuorum on a controller listener: `(leader id, leader epoch)` when it answers as
/// leader; `None` when it is not the leader or is unreachable.
pub fn describe_quorum(controller: SocketAddr) -> Option<(i32, i32)> {
    use kafka_protocol::messages::describe_quorum_request::{PartitionData, TopicData};
    use kafka_protocol::messages::{DescribeQuorumRequest, DescribeQuorumResponse, TopicName};
    let mut stream = TcpStream::connect_timeout(&controller, Duration::from_millis(200)).ok()?;
    stream.set_read_timeout(Some(Duration::from_secs(2))).ok()?;
    let request = DescribeQuorumRequest::default().with_topics(vec![
        TopicData::default()
            .with_topic_name(TopicName(StrBytes::from_static_str("__cluster_metadata")))
            .with_partitions(vec![PartitionData::default()]),
    ]);
    let frame = request_frame(ApiKey::DescribeQuorum, 1, 7, &request);
    stream.write_all(&frame).ok()?;
    let mut response = read_frame(&mut stream)?;
    ResponseHeader::decode(
        &mut response,
        ApiKey::DescribeQuorum.response_header_version(1),
    )
    .ok()?;
    let body = DescribeQuorumResponse::decode(&mut response, 1).ok()?;
    let partition = body.topics.first()?.partitions.first()?;
    (partition.error_code == 0).then_some((partition.leader_id.0, partition.leader_epoch))
}

/// Metadata for all topics from a broker.
pub fn metadata(address: SocketAddr) -> Option<kafka_protocol::messages::MetadataResponse> {
    use kafka_protocol::messages::{MetadataRequest, MetadataResponse};
    let mut stream = TcpStream::connect_timeout(&address, Duration::from_millis(500)).ok()?;
    stream.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    let frame = request_frame(
        ApiKey::Metadata,
        12,
        9,
        &MetadataRequest::default().with_topics(None),
    );
    stream.write_all(&frame).ok()?;
    let mut response = read_frame(&mut stream)?;
    ResponseHeader::decode(&mut response, ApiKey::Metadata.response_header_version(12)).ok()?;
    MetadataResponse::decode(&mut response, 12).ok()
}

/// Creates topics through a broker; returns the error code of each.
pub fn create_topics(address: SocketAddr, topics: &[(&str, i32, i16)]) -> Vec<i16> {
    use kafka_protocol::messages::create_topics_request::CreatableTopic;
    use kafka_protocol::messages::{CreateTopicsRequest, CreateTopicsResponse, TopicName};
    let mut stream = connect(address);
    let request = CreateTopicsRequest::default()
        .with_timeout_ms(20_000)
        .with_topics(
            topics
                .iter()
                .map(|(name, partitions, factor)| {
                    CreatableTopic::default()
                        .with_name(TopicName(StrBytes::from_string((*name).to_owned())))
                        .with_num_partitions(*partitions)
                        .with_replication_factor(*factor)
                })
                .collect(),
        );
    let response: CreateTopicsResponse = exchange(&mut stream, ApiKey::CreateTopics, 7, &request);
    response.topics.iter().map(|t| t.error_code).collect()
}

/// The last `bytes` (about) of `text`, cut at a character boundary, for failure messages
/// that show a log's tail.
pub fn tail(text: &str, bytes: usize) -> &str {
    let mut start = text.len().saturating_sub(bytes);
    while !text.is_char_boundary(start) {
        start += 1;
    }
    &text[start..]
}

/// Waits until `check` holds, polling every 20 ms; panics with `what` after `within`.
pub fn wait_until(what: &str, within: Duration, mut check: impl FnMut() -> bool) {
    let deadline = Instant::now() + within;
    while !check() {
        assert!(
            Instant::now() < deadline,
            "timed out after {within:?} waiting until {what}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

impl Drop for Cluster {
    /// On a failing test, print the tail of every node's log.
    fn drop(&mut self) {
        if std::thread::panicking() {
            for node in &self.nodes {
                eprint_log_tail(&node.dir, 40);
            }
        }
    }
}

/// Prints the last `lines` lines of the log of the node in `dir` to stderr, under its name.
pub fn eprint_log_tail(dir: &Path, lines: usize) {
    let log = std::fs::read_to_string(dir.join("node.log")).unwrap_or_default();
    let all: Vec<&str> = log.lines().collect();
    let tail = all[all.len().saturating_sub(lines)..].join("\n");
    eprintln!("==== {} ====\n{tail}", dir.display());
}
