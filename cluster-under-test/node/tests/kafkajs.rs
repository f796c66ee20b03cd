//! Compatibility with KafkaJS, an independent JavaScript implementation of the protocol with
//! its own version choices (Produce v7, Fetch v11, JoinGroup v5, ...): idempotent produce, a
//! consumer group with commits, offsets by timestamp, DescribeConfigs, a committed and an
//! aborted transaction with the group's offsets, and read_committed, checked by
//! `tests/js/kafkajs_roundtrip.js` against a `logjam-node` process.
//!
//! KafkaJS comes from `tests/js/node_modules` (`.ci/run` runs `npm ci` there) and Node.js from
//! `LOGJAM_NODEJS` or `node` on the PATH. A missing client fails the test: a compatibility test
//! that skips itself proves nothing.

mod common;

use std::path::PathBuf;
use std::process::Command;

use common::NodeProcess;

#[test]
fn kafkajs_round_trip_groups_transactions_and_admin() {
    let js = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/js");
    assert!(
        js.join("node_modules/kafkajs").exists(),
        "KafkaJS is not installed: run `npm ci --prefix cluster-under-test/node/tests/js` at the \
         repository root"
    );
    let nodejs = std::env::var_os("LOGJAM_NODEJS").unwrap_or_else(|| "node".into());
    let dir = tempfile::tempdir().unwrap();
    let node = NodeProcess::start(dir.path(), "");
    let output = Command::new(&nodejs)
        .arg(js.join("kafkajs_roundtrip.js"))
        .arg(node.address.to_string())
        .arg("kafkajs")
        .output()
        .unwrap_or_else(|error| panic!("cannot run Node.js ({nodejs:?}): {error}"));
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    let log = std::fs::read_to_string(dir.path().join("node.log")).unwrap_or_default();
    assert!(
        output.status.success(),
        "KafkaJS round trip failed\nstdout: {stdout}\nstderr: {stderr}\nnode log tail: {}",
        common::tail(&log, 4000)
    );
    assert!(
        stdout.contains("\"read\":300") && stdout.contains("\"problems\":[]"),
        "{stdout}"
    );
}
