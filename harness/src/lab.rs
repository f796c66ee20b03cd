//! The lab: a cluster of `logjam-node` processes the harness starts, supervises and injects
//! process faults into (kill/restart with SIGKILL, pause/resume with SIGSTOP/SIGCONT of the
//! node's process group, clean stop).
//!
//! Today every node listens on 127.0.0.1 with its own ports; the network-namespace lab
//! (one namespace per node on a bridge, partitions with nftables) is the next step and will
//! replace only how a node is started and addressed.
//!
//! Nothing outlives the harness: each node runs in its own process group with a parent-death
//! signal of SIGKILL, and [`Lab`] kills every group when dropped (normal exit, error, panic or
//! Ctrl-C unwinding through it).

use std::fmt::Write as _;
use std::fs::File;
use std::net::TcpListener;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use anyhow::{Context, bail};
use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;

/// One node of the lab.
#[derive(Debug)]
pub struct Node {
    /// The node id (`n1` is id 1).
    pub id: i32,
    /// Client (PLAINTEXT) address.
    pub client_address: String,
    /// Where its config, data and log live.
    pub dir: PathBuf,
    child: Option<Child>,
    paused: bool,
}

impl Node {
    /// The node's name in histories and reports.
    pub fn name(&self) -> String {
        format!("n{}", self.id)
    }

    fn signal(&self, signal: Signal) -> anyhow::Result<()> {
        let child = self.child.as_ref().context("node is not running")?;
        killpg(Pid::from_raw(child.id() as i32), signal)
            .with_context(|| format!("cannot send {signal} to {}", self.name()))
    }
}

/// A running cluster.
#[derive(Debug)]
pub struct Lab {
    binary: PathBuf,
    /// The nodes, `n1` first.
    pub nodes: Vec<Node>,
}

/// The `logjam-node` binary: the one given, else the one beside this executable (where
/// `cargo build --workspace` puts it).
///
/// # Errors
/// The current executable's path cannot be read.
pub fn node_binary(given: Option<&Path>) -> anyhow::Result<PathBuf> {
    Ok(match given {
        Some(path) => path.to_owned(),
        None => std::env::current_exe()?.with_file_name("logjam-node"),
    })
}

/// One `--set key=value` argument as a trimmed pair.
///
/// # Errors
/// The argument has no `=`.
pub fn parse_setting(setting: &str) -> anyhow::Result<(String, String)> {
    let (key, value) = setting
        .split_once('=')
        .with_context(|| format!("--set {setting}: expected key=value"))?;
    Ok((key.trim().to_owned(), value.trim().to_owned()))
}

fn free_port() -> anyhow::Result<u16> {
    Ok(TcpListener::bind("127.0.0.1:0")?.local_addr()?.port())
}

impl Lab {
    /// Writes each node's `server.properties` under `dir/n<i>/` and starts the nodes.
    /// `settings` are extra Kafka properties given to every node.
    ///
    /// # Errors
    /// The binary is missing, a directory cannot be written, or a node fails to start.
    pub fn start(
        binary: &Path,
        dir: &Path,
        nodes: usize,
        settings: &[(String, String)],
    ) -> anyhow::Result<Lab> {
        if !binary.is_file() {
            bail!(
                "the node binary {} does not exist: build it with `cargo build --release --workspace` \
                 or point --node-binary at it",
                binary.display()
            );
        }
        let mut ports = Vec::new();
        for _ in 0..nodes {
            ports.push((free_port()?, free_port()?));
        }
        let voters: Vec<String> = ports
            .iter()
            .enumerate()
            .map(|(i, (_, controller))| format!("{}@127.0.0.1:{controller}", i + 1))
            .collect();
        // Format every node's data directory with one cluster id, as `kafka-storage format
        // --cluster-id` does: a node whose meta.properties names another cluster is refused.
        let cluster_id = format!(
            "logjam-{}",
            dir.file_name()
                .map_or_else(|| "lab".into(), |name| name.to_string_lossy())
        );
        let mut lab = Lab {
            binary: binary.to_owned(),
            nodes: Vec::new(),
        };
        for (index, (client, controller)) in ports.iter().enumerate() {
            let id = index as i32 + 1;
            let node_dir = dir.join(format!("n{id}"));
            std::fs::create_dir_all(node_dir.join("data"))
                .with_context(|| format!("cannot create {}", node_dir.display()))?;
            let mut text = format!(
                "node.id={id}\nprocess.roles=broker,controller\n\
                 listeners=PLAINTEXT://127.0.0.1:{client},CONTROLLER://127.0.0.1:{controller}\n\
                 controller.listener.names=CONTROLLER\ncontroller.quorum.voters={}\nlog.dirs={}\n",
                voters.join(","),
                node_dir.join("data").display()
            );
            for (key, value) in settings {
                let _ = writeln!(text, "{key}={value}");
            }
            std::fs::write(node_dir.join("server.properties"), text)?;
            std::fs::write(
                node_dir.join("data").join("meta.properties"),
                format!("version=1\ncluster.id={cluster_id}\nnode.id={id}\n"),
            )?;
            lab.nodes.push(Node {
                id,
                client_address: format!("127.0.0.1:{client}"),
                dir: node_dir,
                child: None,
                paused: false,
            });
        }
        for index in 0..lab.nodes.len() {
            lab.start_node(index)?;
        }
        Ok(lab)
    }

    /// `host:port,...` of every node's client listener.
    pub fn bootstrap(&self) -> String {
        self.nodes
            .iter()
            .map(|node| node.client_address.as_str())
            .collect::<Vec<_>>()
            .join(",")
    }

    /// Starts (or restarts) node `index`, appending to its log.
    ///
    /// # Errors
    /// The process cannot be spawned.
    pub fn start_node(&mut self, index: usize) -> anyhow::Result<()> {
        let node = &mut self.nodes[index];
        let log = File::options()
            .create(true)
            .append(true)
            .open(node.dir.join("node.log"))?;
        let mut command = Command::new(&self.binary);
        command
            .arg("--config")
            .arg(node.dir.join("server.properties"))
            .stdin(Stdio::null())
            .stdout(log.try_clone()?)
            .stderr(log)
            .process_group(0);
        set_parent_death_signal(&mut command);
        node.child = Some(
            command
                .spawn()
                .with_context(|| format!("cannot start {}", node.name()))?,
        );
        node.paused = false;
        Ok(())
    }

    /// SIGKILL to node `index`'s process group: a crash.
    ///
    /// # Errors
    /// The node is not running.
    pub fn kill(&mut self, index: usize) -> anyhow::Result<()> {
        let node = &mut self.nodes[index];
        node.signal(Signal::SIGKILL)?;
        if let Some(mut child) = node.child.take() {
            let _ = child.wait();
        }
        node.paused = false;
        Ok(())
    }

    /// SIGSTOP to node `index`'s process group.
    ///
    /// # Errors
    /// The node is not running.
    pub fn pause(&mut self, index: usize) -> anyhow::Result<()> {
        self.nodes[index].signal(Signal::SIGSTOP)?;
        self.nodes[index].paused = true;
        Ok(())
    }

    /// SIGCONT to node `index`'s process group.
    ///
    /// # Errors
    /// The node is not running.
    pub fn resume(&mut self, index: usize) -> anyhow::Result<()> {
        self.nodes[index].signal(Signal::SIGCONT)?;
        self.nodes[index].paused = false;
        Ok(())
    }

    /// Clean stop of every node (SIGCONT, SIGTERM, wait).
    pub fn stop_all(&mut self) {
        for node in &mut self.nodes {
            if let Some(mut child) = node.child.take() {
                let group = Pid::from_raw(child.id() as i32);
                let _ = killpg(group, Signal::SIGCONT);
                let _ = killpg(group, Signal::SIGTERM);
                let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
                while std::time::Instant::now() < deadline {
                    if let Ok(Some(_)) = child.try_wait() {
                        break;
                    }
                    std::thread::sleep(std::time::Duration::from_millis(20));
                }
                let _ = killpg(group, Signal::SIGKILL);
                let _ = child.wait();
            }
        }
    }
}

impl Drop for Lab {
    fn drop(&mut self) {
        for node in &mut self.nodes {
            if let Some(mut child) = node.child.take() {
                let _ = killpg(Pid::from_raw(child.id() as i32), Signal::SIGKILL);
                let _ = child.wait();
            }
        }
    }
}

/// Asks the kernel to SIGKILL the node if the harness dies, so even a SIGKILLed harness leaves
/// no node behind.
#[allow(unsafe_code)]
fn set_parent_death_signal(command: &mut Command) {
    // SAFETY: the closure runs in the child between fork and exec and only makes one
    // async-signal-safe system call (prctl), allocating nothing.
    unsafe {
        command.pre_exec(|| {
            nix::sys::prctl::set_pdeathsig(Signal::SIGKILL).map_err(std::io::Error::from)
        });
    }
}
