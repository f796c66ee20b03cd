//! The lab: a cluster of `logjam-node` processes the harness starts, supervises and injects
//! faults into: kill/restart with SIGKILL, clean stop, pause/resume with SIGSTOP/SIGCONT of the
//! node's process group, partitions (nftables on the bridge, see `net`), and disk faults
//! (power loss and disk full through a `logjam-lazyfs` mount under each node's data
//! directory; corrupt or truncate a stopped node's segment files).
//!
//! Two networks: `namespaces` (the default: each node in its own network namespace on a
//! bridge, inside the harness's sandbox, see `sandbox`) and `loopback` (every node on
//! 127.0.0.1 with its own ports; no partitions; for `cluster up` users who want to reach the
//! nodes from their own shell).
//!
//! Nothing outlives the harness: each node runs in its own process group with a parent-death
//! signal of SIGKILL, [`Lab`] kills every group when dropped (normal exit, error, panic or
//! Ctrl-C unwinding through it), and namespaces, links, rules and mounts live in the sandbox,
//! which the kernel removes with the last process in it.

pub mod net;
mod netlink;
mod nft;

pub use nft::ClientCut;
mod disk;
pub mod sandbox;
pub mod stopped;

use std::collections::BTreeSet;
use std::fmt::Write as _;
use std::fs::File;
use std::net::TcpListener;
use std::os::fd::{AsRawFd, BorrowedFd};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use anyhow::{Context, bail};
use logjam_lazyfs::LazyFs;
use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;

use net::Network;

/// Where the nodes live on the network.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum NetworkMode {
    /// One network namespace per node on a bridge; partitions possible.
    Namespaces,
    /// Every node on 127.0.0.1; no partitions.
    Loopback,
}

/// What the lab needs to build.
#[derive(Debug, Clone)]
pub struct LabSpec {
    /// Number of nodes.
    pub nodes: usize,
    /// Extra Kafka properties for every node.
    pub settings: Vec<(String, String)>,
    /// The network.
    pub network: NetworkMode,
    /// Mount a `logjam-lazyfs` under each node's data directory (power loss, disk full).
    pub lazy_disks: bool,
    /// Dedicated controllers: the first `controllers` nodes are controller-only KRaft voters
    /// and the rest broker-only (Kafka's production layout). 0: every node is both.
    pub controllers: usize,
}

/// One node of the lab.
#[derive(Debug)]
pub struct Node {
    /// The node id (`n1` is id 1).
    pub id: i32,
    /// Client (PLAINTEXT) address; empty for a controller-only node.
    pub client_address: String,
    /// Whether the node is a broker (it serves clients and holds partitions).
    pub broker: bool,
    /// Where its config, data and log live.
    pub dir: PathBuf,
    child: Option<Child>,
    paused: bool,
    disk: Option<Disk>,
}

/// A node's power-loss filesystem.
struct Disk(LazyFs);

impl std::fmt::Debug for Disk {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "LazyFs({} unsynced bytes)", self.0.unsynced_bytes())
    }
}

impl Node {
    /// The node's name in histories and reports.
    pub fn name(&self) -> String {
        format!("n{}", self.id)
    }

    /// The data directory the node writes (`log.dirs`).
    pub fn data_dir(&self) -> PathBuf {
        self.dir.join("data")
    }

    /// Whether the node's process is alive (paused counts as alive); a process that died on
    /// its own is reaped here.
    pub fn is_running(&mut self) -> bool {
        match &mut self.child {
            Some(child) => matches!(child.try_wait(), Ok(None)),
            None => false,
        }
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
    network: Option<Network>,
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

/// Kills what a harness that was itself killed left behind under `root`: `logjam-node`
/// processes whose config lies under `root`, and member processes (`logjam member`), whose
/// parent is no longer a `logjam` harness.
/// (Namespaces, links, rules and mounts need no sweep: they live in the dead harness's
/// sandbox and went with it.) Returns the process ids killed.
pub fn sweep_leftovers(root: &Path) -> Vec<i32> {
    let Ok(root) = root.canonicalize() else {
        return Vec::new();
    };
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    let mut killed = Vec::new();
    for entry in entries.flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|p| p.parse::<i32>().ok())
        else {
            continue;
        };
        let Ok(cmdline) = std::fs::read(entry.path().join("cmdline")) else {
            continue;
        };
        let args: Vec<String> = cmdline
            .split(|byte| *byte == 0)
            .map(|arg| String::from_utf8_lossy(arg).into_owned())
            .collect();
        let is_node = args
            .first()
            .is_some_and(|program| program.ends_with("logjam-node"));
        let config = args
            .iter()
            .position(|arg| arg == "--config")
            .and_then(|at| args.get(at + 1))
            .and_then(|config| Path::new(config).canonicalize().ok());
        // A pool member (`logjam member`) of any run: it only lives under its harness.
        let is_member = args
            .first()
            .is_some_and(|program| program.ends_with("logjam"))
            && args.get(1).is_some_and(|command| command == "member");
        if !is_member && (!is_node || !config.is_some_and(|config| config.starts_with(&root))) {
            continue;
        }
        let parent = std::fs::read_to_string(entry.path().join("stat"))
            .ok()
            .and_then(|stat| {
                // The fields after the command name, which is in parentheses.
                let rest = stat.rsplit_once(')')?.1.to_owned();
                rest.split_whitespace().nth(1)?.parse::<i32>().ok()
            });
        let parent_is_harness = parent.is_some_and(|parent| {
            std::fs::read_to_string(format!("/proc/{parent}/comm"))
                .is_ok_and(|comm| comm.trim() == "logjam")
        });
        if !parent_is_harness {
            let _ = killpg(Pid::from_raw(pid), Signal::SIGKILL);
            let _ = nix::sys::signal::kill(Pid::from_raw(pid), Signal::SIGKILL);
            killed.push(pid);
        }
    }
    killed
}

fn free_port() -> anyhow::Result<u16> {
    Ok(TcpListener::bind("127.0.0.1:0")?.local_addr()?.port())
}

impl Lab {
    /// Builds the network, writes each node's `server.properties` under `dir/n<i>/`, mounts
    /// the disks and starts the nodes. With [`NetworkMode::Namespaces`] the harness must
    /// already be in its sandbox ([`sandbox::enter`]).
    ///
    /// # Errors
    /// The binary is missing, a directory cannot be written, the network or a disk cannot be
    /// built, or a node fails to start.
    pub fn start(binary: &Path, dir: &Path, spec: &LabSpec) -> anyhow::Result<Lab> {
        if !binary.is_file() {
            bail!(
                "the node binary {} does not exist: build it with `cargo build --release --workspace` \
                 or point --node-binary at it",
                binary.display()
            );
        }
        let network = match spec.network {
            NetworkMode::Namespaces => Some(Network::create(spec.nodes)?),
            NetworkMode::Loopback => None,
        };
        // (client, controller) listener per node.
        let mut listeners = Vec::new();
        for index in 0..spec.nodes {
            listeners.push(match &network {
                Some(network) => {
                    let host = network.address(index);
                    (format!("{host}:9092"), format!("{host}:9093"))
                }
                None => (
                    format!("127.0.0.1:{}", free_port()?),
                    format!("127.0.0.1:{}", free_port()?),
                ),
            });
        }
        if spec.controllers >= spec.nodes {
            bail!(
                "{} dedicated controllers leave no broker among {} nodes",
                spec.controllers,
                spec.nodes
            );
        }
        let is_voter = |index: usize| spec.controllers == 0 || index < spec.controllers;
        let is_broker = |index: usize| spec.controllers == 0 || index >= spec.controllers;
        let voters: Vec<String> = listeners
            .iter()
            .enumerate()
            .filter(|(i, _)| is_voter(*i))
            .map(|(i, (_, controller))| format!("{}@{controller}", i + 1))
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
            network,
        };
        for (index, (client, controller)) in listeners.iter().enumerate() {
            let id = index as i32 + 1;
            let node_dir = dir.join(format!("n{id}"));
            let data = node_dir.join("data");
            // With a lazy disk the node writes through the mount at data/ and the bytes land
            // in disk/; meta.properties is written to disk/ first so it is durable.
            let backing = if spec.lazy_disks {
                node_dir.join("disk")
            } else {
                data.clone()
            };
            std::fs::create_dir_all(&backing)
                .with_context(|| format!("cannot create {}", backing.display()))?;
            std::fs::create_dir_all(&data)?;
            let (roles, listen) = match (is_broker(index), is_voter(index)) {
                (true, true) => (
                    "broker,controller",
                    format!("PLAINTEXT://{client},CONTROLLER://{controller}"),
                ),
                (true, false) => ("broker", format!("PLAINTEXT://{client}")),
                _ => ("controller", format!("CONTROLLER://{controller}")),
            };
            let mut text = format!(
                "node.id={id}\nprocess.roles={roles}\nlisteners={listen}\n\
                 controller.listener.names=CONTROLLER\ncontroller.quorum.voters={}\nlog.dirs={}\n",
                voters.join(","),
                data.display()
            );
            // The internal topics' replication factors default to 3, as Kafka's: with fewer
            // brokers no coordinator could serve, so a small lab sets them to its broker
            // count (a `--set` of its own, written after, wins).
            let brokers = (0..spec.nodes).filter(|i| is_broker(*i)).count();
            if brokers < 3 {
                let _ = writeln!(text, "offsets.topic.replication.factor={brokers}");
                let _ = writeln!(text, "transaction.state.log.replication.factor={brokers}");
            }
            for (key, value) in &spec.settings {
                let _ = writeln!(text, "{key}={value}");
            }
            std::fs::write(node_dir.join("server.properties"), text)?;
            std::fs::write(
                backing.join("meta.properties"),
                format!("version=1\ncluster.id={cluster_id}\nnode.id={id}\n"),
            )?;
            let disk = if spec.lazy_disks {
                Some(Disk(LazyFs::mount(&backing, &data).with_context(|| {
                    format!(
                        "cannot mount the power-loss filesystem at {} (FUSE: needs /dev/fuse \
                         and root or a user namespace allowed to mount it)",
                        data.display()
                    )
                })?))
            } else {
                None
            };
            lab.nodes.push(Node {
                id,
                client_address: if is_broker(index) {
                    client.clone()
                } else {
                    String::new()
                },
                broker: is_broker(index),
                dir: node_dir,
                child: None,
                paused: false,
                disk,
            });
        }
        for index in 0..lab.nodes.len() {
            lab.start_node(index)?;
        }
        Ok(lab)
    }

    /// `host:port,...` of every broker's client listener.
    pub fn bootstrap(&self) -> String {
        self.nodes
            .iter()
            .filter(|node| node.broker)
            .map(|node| node.client_address.as_str())
            .collect::<Vec<_>>()
            .join(",")
    }

    /// Starts (or restarts) node `index`, appending to its log.
    ///
    /// # Errors
    /// The process cannot be spawned.
    pub fn start_node(&mut self, index: usize) -> anyhow::Result<()> {
        let namespace = self
            .network
            .as_ref()
            .map(|network| network.namespace(index).as_raw_fd());
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
        prepare_child(&mut command, namespace);
        node.child = Some(
            command
                .spawn()
                .with_context(|| format!("cannot start {}", node.name()))?,
        );
        node.paused = false;
        Ok(())
    }

    /// SIGKILL to node `index`'s process group: a crash. The page cache survives.
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

    /// Clean stop of node `index`: SIGCONT, SIGTERM, wait up to 10 s, then SIGKILL.
    pub fn stop(&mut self, index: usize) {
        let node = &mut self.nodes[index];
        node.paused = false;
        stop_children(node.child.take().into_iter().collect());
    }

    /// SIGSTOP to node `index`'s process group; returns once every thread has stopped
    /// ([`stopped`]), so nothing the node does is later than the pause's record.
    ///
    /// # Errors
    /// The node is not running, or did not stop.
    pub fn pause(&mut self, index: usize) -> anyhow::Result<()> {
        self.nodes[index].signal(Signal::SIGSTOP)?;
        self.nodes[index].paused = true;
        if let Some(child) = &self.nodes[index].child {
            stopped::wait_group_stopped(child.id() as i32)?;
        }
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

    /// Replaces the partition in force with the directed cuts given (node indexes).
    ///
    /// # Errors
    /// The lab runs on loopback, or the kernel refuses the rules.
    pub fn set_cuts(&mut self, cuts: BTreeSet<(usize, usize)>) -> anyhow::Result<()> {
        self.network
            .as_mut()
            .context("partitions need --network namespaces")?
            .set_cuts(cuts)
    }

    /// Replaces the cuts of the harness's own traffic to nodes (node index → what is
    /// dropped); `heal` removes them with every other cut.
    ///
    /// # Errors
    /// No network namespaces, or the kernel refused the rules (the old ones stay).
    pub fn set_client_cuts(
        &mut self,
        cuts: std::collections::BTreeMap<usize, ClientCut>,
    ) -> anyhow::Result<()> {
        self.network
            .as_mut()
            .context("client cuts need --network namespaces")?
            .set_client_cuts(cuts)
    }

    /// The client cuts in force.
    pub fn client_cuts(&self) -> std::collections::BTreeMap<usize, ClientCut> {
        self.network
            .as_ref()
            .map(|n| n.client_cuts().clone())
            .unwrap_or_default()
    }

    /// Whether the nodes sit in network namespaces, so links between them can be cut.
    pub fn has_network(&self) -> bool {
        self.network.is_some()
    }

    /// Removes every partition.
    ///
    /// # Errors
    /// The kernel refuses to remove the rules.
    pub fn heal(&mut self) -> anyhow::Result<()> {
        match self.network.as_mut() {
            Some(network) => network.heal(),
            None => Ok(()),
        }
    }

    /// Clean stop of every node at once: SIGCONT and SIGTERM to all, then up to 10 s for all
    /// of them together, then SIGKILL for any still running.
    pub fn stop_all(&mut self) {
        let children = self
            .nodes
            .iter_mut()
            .filter_map(|node| {
                node.paused = false;
                node.child.take()
            })
            .collect();
        stop_children(children);
    }

    /// Stops every node and unmounts the lazy disks, writing their cached bytes through (the
    /// machine shuts down cleanly), so the run directory holds what the nodes wrote.
    ///
    /// # Errors
    /// A disk cannot be unmounted.
    pub fn shutdown(&mut self) -> anyhow::Result<()> {
        self.stop_all();
        for node in &mut self.nodes {
            if let Some(disk) = node.disk.take() {
                disk.0
                    .unmount()
                    .with_context(|| format!("cannot unmount the disk of {}", node.name()))?;
            }
        }
        Ok(())
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
        // The disks unmount when dropped, after their nodes are gone.
    }
}

/// Clean stop of `children` at once: SIGCONT and SIGTERM to every process group, up to 10 s
/// for all of them together, then SIGKILL for any still running.
fn stop_children(mut children: Vec<Child>) {
    for child in &children {
        let group = Pid::from_raw(child.id() as i32);
        let _ = killpg(group, Signal::SIGCONT);
        let _ = killpg(group, Signal::SIGTERM);
    }
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while std::time::Instant::now() < deadline
        && children
            .iter_mut()
            .any(|child| matches!(child.try_wait(), Ok(None)))
    {
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    for child in &mut children {
        let _ = killpg(Pid::from_raw(child.id() as i32), Signal::SIGKILL);
        let _ = child.wait();
    }
}

/// In the child, between fork and exec: enter the node's network namespace, and ask the
/// kernel to SIGKILL the node if the harness dies, so even a SIGKILLed harness leaves no node
/// behind. A harness that died between the fork and that request is caught by comparing the
/// parent's process id with the harness's: the child then fails instead of running orphaned.
#[allow(unsafe_code)]
fn prepare_child(command: &mut Command, namespace: Option<i32>) {
    let harness = nix::unistd::getpid();
    // SAFETY: the closure runs in the child between fork and exec and only makes
    // async-signal-safe system calls (setns, prctl), allocating nothing. The namespace
    // descriptor belongs to the lab, which outlives the spawn call.
    unsafe {
        command.pre_exec(move || {
            if let Some(fd) = namespace {
                nix::sched::setns(
                    BorrowedFd::borrow_raw(fd),
                    nix::sched::CloneFlags::CLONE_NEWNET,
                )
                .map_err(std::io::Error::from)?;
            }
            nix::sys::prctl::set_pdeathsig(Signal::SIGKILL).map_err(std::io::Error::from)?;
            if nix::unistd::getppid() != harness {
                return Err(std::io::Error::from(nix::errno::Errno::ESRCH));
            }
            Ok(())
        });
    }
}
