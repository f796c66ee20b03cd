//! Old clients end to end against a `logjam-node` process: clients that speak older protocol
//! versions than the newest the node serves produce and consume, and the records read back are
//! the ones acknowledged, byte for byte, at their acknowledged offsets.
//!
//! - kafka-python pinned to `api_version` (1, 0) and (2, 0): it sends the versions of that
//!   release (Produce v5/v6, Fetch v6/v8, ListOffsets v2/v3, Metadata v5/v6) without asking.
//!   Pinned to (0, 10) it produces with Produce v2 (message format v1), which Kafka 4 removed
//!   (KIP-896) and the node does not serve either: the client must be refused, nothing written.
//! - librdkafka 2.0 as Debian 12 packages it (through `kcat`), the client of the original report:
//!   its consumer lists offsets with ListOffsets v2, which has no `leader_epoch`. It is run as is
//!   and with `api.version.request=false` and `broker.version.fallback` set to older releases
//!   (librdkafka still asks ApiVersions for fallbacks from 0.10 on, as its documentation says).
//!
//! The clients come from `.venv` at the repository root (or `LOGJAM_PYTHON`) and `kcat` on the
//! PATH (`.ci/run` installs both). A missing client fails the test.

mod common;

use std::collections::BTreeMap;
use std::io::Write;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::{Command, Stdio};

use common::NodeProcess;
use kafka_protocol::messages::create_topics_request::CreatableTopic;
use kafka_protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
use kafka_protocol::messages::{
    ApiKey, BrokerId, CreateTopicsRequest, CreateTopicsResponse, ListOffsetsRequest,
    ListOffsetsResponse, TopicName,
};
use kafka_protocol::protocol::StrBytes;

const PARTITIONS: i32 = 3;

fn python() -> PathBuf {
    if let Some(python) = std::env::var_os("LOGJAM_PYTHON") {
        return PathBuf::from(python);
    }
    let venv = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../.venv/bin/python");
    assert!(
        venv.exists(),
        "no Python with the Kafka clients: run `python3 -m venv .venv && .venv/bin/pip install -r \
         cluster-under-test/node/tests/python/requirements.txt` at the repository root, or set LOGJAM_PYTHON"
    );
    venv
}

fn create_topic(address: SocketAddr, topic: &str) {
    let request = CreateTopicsRequest::default()
        .with_timeout_ms(10_000)
        .with_topics(vec![
            CreatableTopic::default()
                .with_name(TopicName(StrBytes::from_string(topic.to_owned())))
                .with_num_partitions(PARTITIONS)
                .with_replication_factor(1),
        ]);
    // Three clusters of this binary share two cores: a node may lose its registration for a
    // moment and close the connection unanswered. Ask again (the first ask may have created
    // the topic: TOPIC_ALREADY_EXISTS, 36, is then the answer).
    let mut asked = 0;
    let response: CreateTopicsResponse = loop {
        let mut stream = common::connect(address);
        asked += 1;
        match common::try_exchange(&mut stream, ApiKey::CreateTopics, 7, &request) {
            Some(response) => break response,
            None if asked < 5 => std::thread::sleep(std::time::Duration::from_millis(500)),
            None => panic!("the node never answered CreateTopics for {topic}"),
        }
    };
    let code = response.topics[0].error_code;
    assert!(
        code == 0 || (asked > 1 && code == 36),
        "creating {topic}: error {code}"
    );
}

/// The latest offset of each partition of `topic`.
fn log_ends(address: SocketAddr, topic: &str) -> Vec<i64> {
    let mut stream = common::connect(address);
    let response: ListOffsetsResponse = common::exchange(
        &mut stream,
        ApiKey::ListOffsets,
        7,
        &ListOffsetsRequest::default()
            .with_replica_id(BrokerId(-1))
            .with_topics(vec![
                ListOffsetsTopic::default()
                    .with_name(TopicName(StrBytes::from_string(topic.to_owned())))
                    .with_partitions(
                        (0..PARTITIONS)
                            .map(|p| {
                                ListOffsetsPartition::default()
                                    .with_partition_index(p)
                                    .with_timestamp(-1)
                            })
                            .collect(),
                    ),
            ]),
    );
    response.topics[0]
        .partitions
        .iter()
        .map(|p| {
            assert_eq!(p.error_code, 0);
            p.offset
        })
        .collect()
}

fn node_log(node: &NodeProcess) -> String {
    let log = std::fs::read_to_string(node.dir.join("node.log")).unwrap_or_default();
    common::tail(&log, 3000).to_owned()
}

/// Runs `old_clients.py` for `client` pinned to `version`; returns its JSON line.
fn python_client(
    node: &NodeProcess,
    client: &str,
    version: &str,
    topic: &str,
    count: usize,
) -> String {
    create_topic(node.address, topic);
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/python/old_clients.py");
    let output = Command::new(python())
        .arg(script)
        .args([client, version, &node.address.to_string(), topic])
        .arg(PARTITIONS.to_string())
        .arg(count.to_string())
        .output()
        .expect("python runs");
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    assert!(
        output.status.success(),
        "{client} {version} failed\nstdout: {stdout}\nstderr: {}\nnode log tail: {}",
        String::from_utf8_lossy(&output.stderr),
        node_log(node)
    );
    stdout
}

#[test]
fn kafka_python_pinned_to_1_0_and_2_0_round_trips_byte_for_byte() {
    let dir = tempfile::tempdir().unwrap();
    let node = NodeProcess::start(dir.path(), "");
    for version in ["1.0", "2.0"] {
        let topic = format!("old-kafka-python-{version}");
        let out = python_client(&node, "kafka-python", version, &topic, 3000);
        assert!(
            out.contains("\"acked\": 3000") && out.contains("\"read\": 3000"),
            "{out}"
        );
        assert_eq!(log_ends(node.address, &topic).iter().sum::<i64>(), 3000);
    }
}

#[test]
fn kafka_python_pinned_to_0_10_is_refused_and_writes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let node = NodeProcess::start(dir.path(), "");
    let topic = "old-kafka-python-0.10";
    let out = python_client(&node, "kafka-python", "0.10", topic, 30);
    assert!(
        out.contains("\"refused\": true") && out.contains("\"acked\": 0"),
        "{out}"
    );
    assert_eq!(log_ends(node.address, topic), vec![0; PARTITIONS as usize]);
    // The node goes on serving clients that speak its versions.
    let out = python_client(&node, "kafka-python", "2.0", "after-refusal", 100);
    assert!(out.contains("\"read\": 100"), "{out}");
}

/// `count` lines for partition `p`: printable, of varied lengths, unique.
fn kcat_lines(p: i32, count: usize) -> Vec<String> {
    (0..count)
        .map(|i| {
            let filler: String = (0..(i * 7 + p as usize) % 300)
                .map(|j| char::from(b'!' + ((i * 31 + j * 17) % 90) as u8))
                .collect();
            format!("p{p}-{i}:{filler}")
        })
        .collect()
}

fn kcat(args: &[&str], stdin: Option<&str>) -> (String, String) {
    let mut child = Command::new("kcat")
        .args(args)
        .stdin(if stdin.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("kcat is installed (apt-get install kcat; .ci/run does it)");
    if let Some(input) = stdin {
        child
            .stdin
            .take()
            .unwrap()
            .write_all(input.as_bytes())
            .unwrap();
    }
    let output = child.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    assert!(output.status.success(), "kcat {args:?} failed: {stderr}");
    (stdout, stderr)
}

/// The highest version of `request` kcat's protocol debug output shows it sent.
fn sent_version(debug: &str, request: &str) -> Option<i16> {
    let needle = format!("Sent {request} (v");
    debug
        .match_indices(&needle)
        .filter_map(|(at, _)| {
            let rest = &debug[at + needle.len()..];
            rest[..rest.find(',')?].parse().ok()
        })
        .max()
}

#[test]
fn distribution_librdkafka_2_0_round_trips_byte_for_byte_with_and_without_fallbacks() {
    let (version, _) = kcat(&["-V"], None);
    let librdkafka = version
        .split_whitespace()
        .skip_while(|w| *w != "librdkafka")
        .nth(1)
        .unwrap_or("?")
        .to_owned();
    assert!(
        librdkafka.starts_with("2.0."),
        "this test is about the distribution's librdkafka 2.0 (the client of the original report); \
         kcat uses {librdkafka}"
    );
    let dir = tempfile::tempdir().unwrap();
    let node = NodeProcess::start(dir.path(), "");
    let bootstrap = node.address.to_string();
    for fallback in [
        None,
        Some("0.10.0"),
        Some("0.11.0"),
        Some("1.0.0"),
        Some("2.0.0"),
    ] {
        let topic = format!("old-librdkafka-{}", fallback.unwrap_or("negotiated"));
        create_topic(node.address, &topic);
        let mut pinned = Vec::new();
        if let Some(fallback) = fallback {
            pinned.extend([
                "-X".to_owned(),
                "api.version.request=false".to_owned(),
                "-X".to_owned(),
                format!("broker.version.fallback={fallback}"),
            ]);
        }
        let pinned: Vec<&str> = pinned.iter().map(String::as_str).collect();
        let mut sent = BTreeMap::new();
        for p in 0..PARTITIONS {
            let input = kcat_lines(p, 500).join("\n") + "\n";
            let partition = p.to_string();
            let mut args = vec!["-b", &bootstrap, "-P", "-t", &topic, "-p", &partition];
            args.extend(["-X", "acks=all", "-d", "protocol"]);
            args.extend(&pinned);
            let (_, debug) = kcat(&args, Some(&input));
            sent.insert("Produce", sent_version(&debug, "ProduceRequest"));
        }
        let mut args = vec![
            "-b",
            &bootstrap,
            "-C",
            "-t",
            &topic,
            "-o",
            "beginning",
            "-e",
        ];
        args.extend(["-f", "%p %o %s\n", "-d", "protocol"]);
        args.extend(&pinned);
        let (consumed, debug) = kcat(&args, None);
        sent.insert("ListOffsets", sent_version(&debug, "ListOffsetsRequest"));
        sent.insert("Fetch", sent_version(&debug, "FetchRequest"));
        // The consumer took the path of the report: a ListOffsets without leader_epoch (v4+).
        assert!(
            sent["ListOffsets"].is_some_and(|v| v < 4),
            "{fallback:?}: versions sent {sent:?}"
        );
        for p in 0..PARTITIONS {
            let expected: Vec<String> = kcat_lines(p, 500)
                .into_iter()
                .enumerate()
                .map(|(offset, line)| format!("{p} {offset} {line}"))
                .collect();
            let read: Vec<&str> = consumed
                .lines()
                .filter(|line| line.starts_with(&format!("{p} ")))
                .collect();
            assert_eq!(
                read,
                expected,
                "{fallback:?}: partition {p} read back differs (versions {sent:?})\nnode log: {}",
                node_log(&node)
            );
        }
        assert_eq!(
            log_ends(node.address, &topic),
            vec![500; PARTITIONS as usize]
        );
    }
}
