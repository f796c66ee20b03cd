//! Shared helpers of the node's integration tests: an in-process node on a free port, a node
//! process of the real binary, and a minimal request/response exchange over TCP built with
//! `kafka-protocol` (the tests must not depend on the node's own code to talk to it).

#![allow(dead_code)]

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

/// A minimal config for a single node listening on `port` with data in `dir`.
pub fn config_text(dir: &Path, port: u16, extra: &str) -> String {
    format!(
        "node.id=1\nprocess.roles=broker,controller\nlisteners=PLAINTEXT://127.0.0.1:{port}\n\
         log.dirs={}\n{extra}\n",
        dir.display()
    )
}

/// Parses [`config_text`].
pub fn config(dir: &Path, port: u16, extra: &str) -> Config {
    Config::parse(&config_text(dir, port, extra), &[]).expect("test config is valid")
}

/// A port that was free a moment ago.
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
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
    let frame = request_frame(key, version, 42, body);
    stream.write_all(&frame).unwrap();
    let mut response = read_frame(stream).expect("the node answered");
    let header =
        ResponseHeader::decode(&mut response, key.response_header_version(version)).unwrap();
    assert_eq!(header.correlation_id, 42);
    let body = Resp::decode(&mut response, version).unwrap();
    assert_eq!(response.remaining(), 0, "response has trailing bytes");
    body
}

/// Connects with a timeout so a hung node fails the test instead of hanging it.
pub fn connect(address: SocketAddr) -> TcpStream {
    let stream = TcpStream::connect_timeout(&address, Duration::from_secs(5)).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    stream
}

/// A v2 record batch holding `values`, as a producer would send it.
pub fn batch(values: &[&[u8]]) -> Bytes {
    let records: Vec<Record> = values
        .iter()
        .enumerate()
        .map(|(i, value)| Record {
            transactional: false,
            control: false,
            delete_horizon: false,
            partition_leader_epoch: -1,
            producer_id: -1,
            producer_epoch: -1,
            timestamp_type: TimestampType::Creation,
            offset: i as i64,
            sequence: i as i32,
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

    fn wait_ready(&self) {
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
        self.kill();
        self.child = spawn(&self.config_path, &self.dir);
        self.wait_ready();
    }
}

fn spawn(config_path: &Path, dir: &Path) -> Child {
    let log = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(dir.join("node.log"))
        .unwrap();
    Command::new(env!("CARGO_BIN_EXE_logjam-node"))
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
