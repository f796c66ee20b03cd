//! Shared helpers of the client's integration tests: a real `logjam-node` process (the binary
//! from `LOGJAM_NODE_BIN`, else `<target>/debug/logjam-node`, built once with
//! `cargo build -p logjam-node`), and the Python interpreter with `confluent-kafka`.

#![allow(dead_code)]

pub mod members;
// The node's tests' port picker: below the ephemeral range, a block per running nextest test.
#[path = "../../../node/tests/common/ports.rs"]
mod ports;
// SIGSTOP that returns once every thread of the node has stopped.
#[path = "../../../node/tests/common/stopped.rs"]
mod stopped;

pub use ports::free_port;

use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Once;
use std::time::{Duration, Instant};

static BUILD: Once = Once::new();

/// The node binary, built on first use unless `LOGJAM_NODE_BIN` names one.
pub fn node_binary() -> PathBuf {
    if let Some(bin) = std::env::var_os("LOGJAM_NODE_BIN") {
        return PathBuf::from(bin);
    }
    let workspace = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..");
    BUILD.call_once(|| {
        let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned());
        let status = Command::new(cargo)
            .args(["build", "-p", "logjam-node", "--quiet"])
            .current_dir(&workspace)
            .status()
            .expect("cargo runs");
        assert!(status.success(), "cargo build -p logjam-node failed");
    });
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| workspace.join("target"));
    target.join("debug/logjam-node")
}

/// Python with confluent-kafka: `LOGJAM_PYTHON` or the repository's `.venv`.
pub fn python() -> PathBuf {
    if let Some(python) = std::env::var_os("LOGJAM_PYTHON") {
        return PathBuf::from(python);
    }
    let venv = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../.venv/bin/python");
    assert!(
        venv.exists(),
        "no Python with confluent-kafka: create .venv or set LOGJAM_PYTHON"
    );
    venv
}

/// The internal topics' replication factors for a cluster of `brokers` brokers: below Kafka's
/// default of 3 no coordinator could serve otherwise. Config lines after these override them.
pub fn internal_topic_factors(brokers: usize) -> String {
    if brokers >= 3 {
        return String::new();
    }
    format!(
        "offsets.topic.replication.factor={brokers}\n\
         transaction.state.log.replication.factor={brokers}\n"
    )
}

/// One `logjam-node` process, killed (SIGKILL) on drop.
pub struct NodeProcess {
    pub child: Option<Child>,
    pub address: SocketAddr,
    pub dir: PathBuf,
    pub config_path: PathBuf,
}

impl NodeProcess {
    /// Pauses the process (SIGSTOP), returning once every thread has stopped: it keeps its
    /// connections but answers nothing.
    pub fn pause(&self) {
        stopped::stop(self.child.as_ref().expect("node runs").id());
    }

    /// Resumes a paused process (SIGCONT).
    pub fn resume(&self) {
        stopped::resume(self.child.as_ref().expect("node runs").id());
    }

    /// A single node (broker and controller) with data in `dir`.
    pub fn start(dir: &Path, extra: &str) -> NodeProcess {
        let port = free_port();
        let config = format!(
            "node.id=1\nprocess.roles=broker,controller\nlisteners=PLAINTEXT://127.0.0.1:{port}\n\
             log.dirs={}\n{}{extra}\n",
            dir.join("data").display(),
            internal_topic_factors(1)
        );
        NodeProcess::start_with(dir, port, &config)
    }

    /// A node with a complete config text listening on `port`; waits until it serves.
    pub fn start_with(dir: &Path, port: u16, config: &str) -> NodeProcess {
        let node = NodeProcess::launch_with(dir, port, config);
        node.wait_ready();
        node
    }

    /// Like [`NodeProcess::start_with`] without waiting: a node of a multi-node cluster only
    /// opens its client listener once a controller quorum has registered it.
    pub fn launch_with(dir: &Path, port: u16, config: &str) -> NodeProcess {
        std::fs::create_dir_all(dir).unwrap();
        let config_path = dir.join("server.properties");
        std::fs::write(&config_path, config).unwrap();
        let mut node = NodeProcess {
            child: None,
            address: format!("127.0.0.1:{port}").parse().unwrap(),
            dir: dir.to_owned(),
            config_path,
        };
        node.launch();
        node
    }

    fn launch(&mut self) {
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.dir.join("node.log"))
            .unwrap();
        self.child = Some(
            Command::new(node_binary())
                .arg("--config")
                .arg(&self.config_path)
                .stdin(Stdio::null())
                .stdout(log.try_clone().unwrap())
                .stderr(log)
                .spawn()
                .expect("logjam-node starts"),
        );
    }

    /// Waits until the client listener accepts connections.
    pub fn wait_ready(&self) {
        let deadline = Instant::now() + Duration::from_secs(60);
        while TcpStream::connect_timeout(&self.address, Duration::from_millis(200)).is_err() {
            assert!(
                Instant::now() < deadline,
                "node did not start; see {}",
                self.dir.join("node.log").display()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// `host:port` for `bootstrap.servers`.
    pub fn bootstrap(&self) -> String {
        self.address.to_string()
    }

    /// SIGKILL, as a crash.
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Starts the killed node again on the same port and data.
    pub fn restart(&mut self) {
        self.kill();
        self.launch();
        self.wait_ready();
    }
}

impl Drop for NodeProcess {
    fn drop(&mut self) {
        self.kill();
    }
}

/// A multi-node cluster of combined broker+controller nodes, as the replication issue will
/// configure it (`controller.quorum.voters`, `default.replication.factor`).
pub struct MultiNode {
    pub nodes: Vec<NodeProcess>,
}

impl MultiNode {
    /// Starts `count` nodes under `dir`.
    pub fn start(dir: &Path, count: usize, extra: &str) -> MultiNode {
        let ports: Vec<(u16, u16)> = (0..count).map(|_| (free_port(), free_port())).collect();
        let voters: Vec<String> = ports
            .iter()
            .enumerate()
            .map(|(i, (_, controller))| format!("{}@127.0.0.1:{controller}", i + 1))
            .collect();
        let nodes = ports
            .iter()
            .enumerate()
            .map(|(i, (broker, controller))| {
                let node_dir = dir.join(format!("n{}", i + 1));
                let config = format!(
                    "node.id={}\nprocess.roles=broker,controller\n\
                     listeners=PLAINTEXT://127.0.0.1:{broker},CONTROLLER://127.0.0.1:{controller}\n\
                     controller.listener.names=CONTROLLER\ncontroller.quorum.voters={}\n\
                     log.dirs={}\n{}{extra}\n",
                    i + 1,
                    voters.join(","),
                    node_dir.join("data").display(),
                    internal_topic_factors(count)
                );
                // One cluster id for all, as `kafka-storage format --cluster-id` does.
                std::fs::create_dir_all(node_dir.join("data")).unwrap();
                std::fs::write(
                    node_dir.join("data").join("meta.properties"),
                    format!(
                        "version=1\ncluster.id=logjam-client-test\nnode.id={}\n",
                        i + 1
                    ),
                )
                .unwrap();
                NodeProcess::launch_with(&node_dir, *broker, &config)
            })
            .collect::<Vec<_>>();
        for node in &nodes {
            node.wait_ready();
        }
        MultiNode { nodes }
    }

    /// All broker listeners, for `bootstrap.servers`.
    pub fn bootstrap(&self) -> String {
        self.nodes
            .iter()
            .map(NodeProcess::bootstrap)
            .collect::<Vec<_>>()
            .join(",")
    }

    /// The node whose listener is `address`.
    pub fn node_at(&mut self, address: &str) -> &mut NodeProcess {
        self.nodes
            .iter_mut()
            .find(|n| n.bootstrap() == address)
            .expect("a node has that address")
    }
}
