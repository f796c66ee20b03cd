//! [`Quorum`]: the tokio shell around one [`RaftNode`] of the metadata quorum, plus the
//! controller and broker-lifecycle duties that ride on it. It runs on **its own OS thread with
//! a current-thread runtime**, so a node's metadata keeps flowing whatever its client-facing
//! runtime is doing, and so synchronous callers (tests, `Broker::open`) can use it.
//!
//! ```text
//!  controller listener ──► conn tasks ──┐            ┌──► peer tasks ──► other voters
//!  (Vote, Fetch, ..., BrokerRegistration│  Command   │    (Vote, BeginQuorumEpoch, Fetch, ...)
//!   BrokerHeartbeat, CreateTopics,      ├──────────► Driver: RaftNode + MetadataLogStore
//!   AlterPartition, DescribeQuorum)     │            │      + MetadataImage (committed)
//!  Broker (handlers) ── Forward ────────┘            │      + QuorumController (when active)
//!  broker lifecycle task (register, heartbeat) ──────┘
//! ```
//!
//! Ready handling follows the raft crate's contract: quorum state fsynced, then log ops applied
//! and fsynced, then messages sent, then the snapshot and committed entries replayed into the
//! image. A controller request is answered only when the entry holding its records is
//! committed (replayed); if leadership is lost first it fails with `NOT_CONTROLLER`.
//!
//! Layout: this file holds the handle ([`Quorum`]), its settings and the commands;
//! `quorum/driver.rs` the loop around the Raft node; `quorum/net.rs` the sockets and framing;
//! `quorum/forward.rs` routing to the active controller; `quorum/lifecycle.rs` the broker's
//! registration, heartbeats and controlled shutdown.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use kafka_protocol::ResponseError;
use kafka_protocol::messages::broker_registration_request::Listener as RegistrationListener;
use kafka_protocol::messages::describe_quorum_response::{
    PartitionData as QuorumPartition, ReplicaState, TopicData as QuorumTopic,
};
use kafka_protocol::messages::{
    AlterPartitionResponse, ApiKey, ApiVersionsResponse, BrokerHeartbeatRequest,
    BrokerHeartbeatResponse, BrokerId as WireBrokerId, BrokerRegistrationRequest,
    BrokerRegistrationResponse, CreateTopicsResponse, DescribeQuorumResponse, RequestKind,
    ResponseKind, TopicName,
};
use kafka_protocol::protocol::StrBytes;
use logjam_raft::rpc::describe_quorum::QuorumDescription;
use logjam_raft::{
    CorrelationId, EntryKind, Envelope, LogOp, Moment, NodeId, Offset, QuorumConfig, RaftNode,
    Role, SnapshotId,
};
use tokio::io::AsyncWriteExt;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, oneshot, watch};
use uuid::Uuid;

use crate::controller::control::{ControllerConfig, Decision, QuorumController};
use crate::controller::metadata_log::MetadataLogStore;
use crate::controller::wire::{
    METADATA_TOPIC, request_from_wire, request_to_wire, response_from_wire, response_to_wire,
    version_of,
};
use crate::metadata::{MetadataImage, MetadataRecord, decode_records, encode_records};

mod driver;
mod forward;
mod lifecycle;
mod net;

use driver::Driver;
use forward::{api_key_of, controller_api_version, forward, not_controller};
use lifecycle::{LifecycleHooks, broker_lifecycle};
pub use net::describe_quorum_response;
use net::{ControllerClients, accept_loop, peer_task};

use crate::network::codec::encode_response;

/// How often the active controller looks for expired broker sessions.
const SESSION_CHECK_MS: u64 = 100;
/// Connect timeout towards another node.
const CONNECT_TIMEOUT: Duration = Duration::from_millis(500);
/// Largest frame accepted on the controller listener and from peers.
const MAX_FRAME_BYTES: usize = 100 << 20;

/// Everything the quorum thread needs, resolved from `server.properties`.
#[derive(Clone, Debug)]
pub struct QuorumSettings {
    /// `node.id`.
    pub node_id: NodeId,
    /// `controller.quorum.*`.
    pub raft: QuorumConfig,
    /// Voter addresses from `controller.quorum.voters` (empty for an implicit one-voter quorum).
    pub voter_addresses: BTreeMap<NodeId, SocketAddr>,
    /// The controller listener to bind, if this node is a controller with one.
    pub controller_listen: Option<SocketAddr>,
    /// `<metadata.log.dir or first log.dirs>/__cluster_metadata-0`.
    pub metadata_dir: PathBuf,
    /// From `meta.properties`.
    pub cluster_id: String,
    /// Controller-role settings (used only while this node is the active controller).
    pub controller: ControllerConfig,
    /// Broker-role settings; `None` for a controller-only node.
    pub broker: Option<BrokerLifecycleSettings>,
    /// `metadata.max.idle.interval.ms`: the active controller appends a `NoOpRecord` when it
    /// has proposed nothing for this long (0 disables), so the high watermark keeps moving.
    pub max_idle_interval_ms: u64,
}

/// What the broker registers with and how often it heartbeats.
#[derive(Clone, Debug)]
pub struct BrokerLifecycleSettings {
    /// Advertised client host.
    pub host: String,
    /// Advertised client port.
    pub port: u16,
    /// `broker.heartbeat.interval.ms`.
    pub heartbeat_interval_ms: u64,
    /// `PreviousBrokerEpoch` for every registration of this process: the broker epoch the
    /// clean-shutdown marker held, -1 when the last shutdown was not clean (KIP-966).
    pub previous_broker_epoch: i64,
}

/// Why the quorum could not start.
#[derive(Debug, thiserror::Error)]
pub enum QuorumStartError {
    /// The metadata log could not be opened.
    #[error(transparent)]
    Log(#[from] crate::controller::metadata_log::MetadataLogError),
    /// The controller listener could not be bound.
    #[error("cannot listen on controller address {address}: {source}")]
    Bind {
        /// The address.
        address: SocketAddr,
        /// The socket error.
        source: std::io::Error,
    },
    /// The quorum thread could not be started.
    #[error("cannot start the quorum thread: {0}")]
    Thread(std::io::Error),
}

/// The broker's registration as the lifecycle task last learned it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct BrokerStatus {
    /// The broker epoch, once registered.
    pub broker_epoch: Option<i64>,
    /// Whether the controller has this broker fenced.
    pub fenced: bool,
    /// The controller completed this broker's controlled shutdown (`ShouldShutDown`).
    pub shut_down: bool,
}

/// Result of a local controller call: the response, or "not the active controller" with the
/// leader hint.
type ControllerResult = Result<ResponseKind, Option<NodeId>>;
type Callback = Box<dyn FnOnce(ControllerResult) + Send>;

enum Command {
    /// A Raft message from a peer (request on an inbound connection, or a response on an
    /// outbound one). Requests carry where to write the answer.
    Step {
        envelope: Envelope,
        reply_to: Option<(mpsc::UnboundedSender<Bytes>, ApiKey, i16)>,
    },
    /// A controller API call, executed here if this node is the active controller.
    Controller {
        request: RequestKind,
        reply: Callback,
    },
    /// A controller API call to route to the active controller wherever it is.
    Forward {
        request: RequestKind,
        reply: Callback,
    },
    /// DescribeQuorum.
    Describe(oneshot::Sender<Option<QuorumDescription>>),
    /// Stop the driver.
    Stop,
}

/// Handle to the quorum thread.
#[derive(Debug)]
pub struct Quorum {
    commands: mpsc::UnboundedSender<CommandBox>,
    image: watch::Receiver<Arc<MetadataImage>>,
    status: watch::Receiver<BrokerStatus>,
    leader: watch::Receiver<Option<NodeId>>,
    controller_address: Option<SocketAddr>,
    shutting_down: Arc<ShutdownSignal>,
    thread: Mutex<Option<std::thread::JoinHandle<()>>>,
}

/// Asks the broker lifecycle task to start a controlled shutdown.
#[derive(Debug, Default)]
struct ShutdownSignal {
    requested: std::sync::atomic::AtomicBool,
    wake: tokio::sync::Notify,
}

/// `Command` is not `Debug` (callbacks); this wrapper keeps the handle printable.
struct CommandBox(Command);

impl std::fmt::Debug for CommandBox {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Command")
    }
}

impl Quorum {
    /// Opens the metadata log, binds the controller listener and starts the quorum thread.
    /// `on_unfenced` is called once, the first time this broker is unfenced.
    ///
    /// # Errors
    /// [`QuorumStartError`].
    pub fn start(
        settings: QuorumSettings,
        on_unfenced: Box<dyn FnOnce() + Send>,
    ) -> Result<Quorum, QuorumStartError> {
        let (store, quorum_state, log) = MetadataLogStore::open(&settings.metadata_dir)?;
        let (commands, command_rx) = mpsc::unbounded_channel();
        let (image_tx, image) = watch::channel(Arc::new(MetadataImage::new()));
        let (status_tx, status) = watch::channel(BrokerStatus::default());
        let (leader_tx, leader) = watch::channel(None);
        let (bound_tx, bound_rx) = std::sync::mpsc::channel();
        let thread_commands = commands.clone();
        let shutting_down = Arc::new(ShutdownSignal::default());
        let lifecycle_shutdown = Arc::clone(&shutting_down);
        let clients = ControllerClients::default();
        let thread = std::thread::Builder::new()
            .name(format!("quorum-{}", settings.node_id.0))
            .spawn(move || {
                let runtime = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .expect("a current-thread runtime builds");
                runtime.block_on(async move {
                    let listener = match settings.controller_listen {
                        Some(address) => match TcpListener::bind(address).await {
                            Ok(listener) => {
                                let local = listener.local_addr().ok();
                                let _ = bound_tx.send(Ok(local));
                                Some(listener)
                            }
                            Err(source) => {
                                let _ =
                                    bound_tx.send(Err(QuorumStartError::Bind { address, source }));
                                return;
                            }
                        },
                        None => {
                            let _ = bound_tx.send(Ok(None));
                            None
                        }
                    };
                    let now = Instant::now();
                    let seed = u64::from(settings.node_id.0)
                        ^ std::time::SystemTime::now()
                            .duration_since(std::time::UNIX_EPOCH)
                            .map_or(0, |d| d.as_nanos() as u64);
                    let mut driver = Driver {
                        node: RaftNode::restart(
                            settings.node_id,
                            settings.raft.clone(),
                            quorum_state,
                            log,
                            Moment::new(0, seed),
                        ),
                        settings: settings.clone(),
                        store,
                        started: now,
                        rng: seed | 1,
                        image: Arc::new(MetadataImage::new()),
                        image_tx,
                        leader_tx,
                        controller: None,
                        pending: VecDeque::new(),
                        last_proposed_end: Offset::ZERO,
                        created_snapshot: None,
                        last_propose_ms: 0,
                        peers: HashMap::new(),
                        inbound: HashMap::new(),
                        commands: thread_commands.clone(),
                        clients: clients.clone(),
                    };
                    if let Some(listener) = listener {
                        tokio::spawn(accept_loop(
                            listener,
                            thread_commands.clone(),
                            settings.node_id,
                        ));
                    }
                    if let Some(broker) = settings.broker.clone() {
                        tokio::spawn(broker_lifecycle(
                            settings.clone(),
                            clients.clone(),
                            broker,
                            thread_commands.clone(),
                            driver.image_tx.subscribe(),
                            driver.leader_tx.subscribe(),
                            LifecycleHooks {
                                status: status_tx,
                                on_unfenced,
                                shutting_down: lifecycle_shutdown,
                            },
                        ));
                    }
                    driver.run(command_rx).await;
                });
            })
            .map_err(QuorumStartError::Thread)?;
        let controller_address = match bound_rx.recv() {
            Ok(Ok(address)) => address,
            Ok(Err(error)) => {
                let _ = thread.join();
                return Err(error);
            }
            Err(_) => None,
        };
        Ok(Quorum {
            commands,
            image,
            status,
            leader,
            controller_address,
            shutting_down,
            thread: Mutex::new(Some(thread)),
        })
    }

    /// The bound controller listener, if any.
    pub fn controller_address(&self) -> Option<SocketAddr> {
        self.controller_address
    }

    /// The latest committed image.
    pub fn image(&self) -> Arc<MetadataImage> {
        Arc::clone(&self.image.borrow())
    }

    /// A receiver that changes whenever the committed image does.
    pub fn subscribe_image(&self) -> watch::Receiver<Arc<MetadataImage>> {
        self.image.clone()
    }

    /// The broker registration status.
    pub fn status(&self) -> BrokerStatus {
        *self.status.borrow()
    }

    /// The Raft leader this node knows of.
    pub fn leader(&self) -> Option<NodeId> {
        *self.leader.borrow()
    }

    fn send(&self, command: Command) {
        let _ = self.commands.send(CommandBox(command));
    }

    /// Sends a controller request to the active controller (local or remote) and waits for
    /// its committed answer; `None` when no controller answered within `timeout`.
    pub async fn forward(&self, request: RequestKind, timeout: Duration) -> Option<ResponseKind> {
        let (tx, rx) = oneshot::channel();
        self.send(Command::Forward {
            request,
            reply: Box::new(move |result| {
                let _ = tx.send(result);
            }),
        });
        tokio::time::timeout(timeout, rx).await.ok()?.ok()?.ok()
    }

    /// [`Quorum::forward`] for synchronous callers (must not be called on a tokio worker).
    pub fn forward_blocking(
        &self,
        request: RequestKind,
        timeout: Duration,
    ) -> Option<ResponseKind> {
        let (tx, rx) = std::sync::mpsc::channel();
        self.send(Command::Forward {
            request,
            reply: Box::new(move |result| {
                let _ = tx.send(result);
            }),
        });
        rx.recv_timeout(timeout).ok()?.ok()
    }

    /// DescribeQuorum as this node can answer it (`None` unless it is the leader).
    pub async fn describe(&self) -> Option<QuorumDescription> {
        let (tx, rx) = oneshot::channel();
        self.send(Command::Describe(tx));
        rx.await.ok().flatten()
    }

    /// Kafka's controlled shutdown: heartbeats ask `WantShutDown`, the controller moves this
    /// broker's leaderships away and removes it from ISRs, and answers `ShouldShutDown`. Waits
    /// up to `timeout`; returns whether the controller confirmed. A broker that shut down this
    /// way can register its next incarnation at once.
    pub fn controlled_shutdown(&self, timeout: Duration) -> bool {
        self.shutting_down
            .requested
            .store(true, std::sync::atomic::Ordering::SeqCst);
        self.shutting_down.wake.notify_one();
        let deadline = Instant::now() + timeout;
        while Instant::now() < deadline {
            if self.status.borrow().shut_down {
                return true;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        false
    }

    /// Stops the quorum thread and waits for it.
    pub fn stop(&self) {
        self.send(Command::Stop);
        let thread = self
            .thread
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .take();
        if let Some(thread) = thread {
            let _ = thread.join();
        }
    }
}

impl Drop for Quorum {
    fn drop(&mut self) {
        self.stop();
    }
}
