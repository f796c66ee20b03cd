//! The network shell: accept connections, read length-prefixed frames, hand each to
//! [`handle_frame`], write responses in request order; plus the periodic flush and checkpoint
//! tasks and the clean shutdown.
//!
//! Requests on one connection are processed one at a time, in order, as Kafka's socket server
//! does (it mutes a channel until its response is sent); clients pipeline by sending ahead.
//! A frame whose declared size is negative or above `socket.request.max.bytes` closes the
//! connection before anything is allocated for it.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use bytes::BytesMut;
use tokio::io::{AsyncReadExt, AsyncWriteExt, BufWriter};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio::task::JoinSet;

use crate::broker::{Broker, StartError};
use crate::config::Config;
use crate::network::framing::{FrameOutcome, handle_frame};

/// A node serving on a socket, until [`RunningNode::shutdown`].
#[derive(Debug)]
pub struct RunningNode {
    address: SocketAddr,
    broker: Arc<Broker>,
    stop: watch::Sender<bool>,
    task: tokio::task::JoinHandle<()>,
}

impl RunningNode {
    /// The address the node listens on (useful with port 0).
    pub fn address(&self) -> SocketAddr {
        self.address
    }

    /// The broker state, for in-process tests.
    pub fn broker(&self) -> &Arc<Broker> {
        &self.broker
    }

    /// Stops accepting, drops every connection, then flushes, checkpoints and writes the
    /// clean-shutdown marker.
    ///
    /// # Errors
    /// A storage error message from the final flush.
    pub async fn shutdown(self) -> Result<(), String> {
        let _ = self.stop.send(true);
        let _ = self.task.await;
        let broker = Arc::clone(&self.broker);
        tokio::task::spawn_blocking(move || broker.shutdown())
            .await
            .map_err(|error| error.to_string())?
    }
}

/// Why a node could not start serving.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    /// Opening storage failed.
    #[error(transparent)]
    Start(#[from] StartError),
    /// The listener could not be bound.
    #[error("cannot listen on {address}: {source}")]
    Bind {
        /// The configured address.
        address: SocketAddr,
        /// The socket error.
        source: std::io::Error,
    },
}

/// Raises the soft limit on open files to the hard limit. Every partition keeps its segment
/// and index files open, as Kafka does, and Kafka's own deployment guides raise this limit for
/// the same reason; a node that runs out of descriptors can neither accept nor create topics.
/// Returns the limit now in force.
pub fn raise_open_files_limit() -> u64 {
    use nix::sys::resource::{Resource, getrlimit, setrlimit};
    match getrlimit(Resource::RLIMIT_NOFILE) {
        Ok((soft, hard)) if soft < hard => match setrlimit(Resource::RLIMIT_NOFILE, hard, hard) {
            Ok(()) => hard,
            Err(_) => soft,
        },
        Ok((soft, _)) => soft,
        Err(_) => 0,
    }
}

/// Opens storage, starts the metadata quorum, waits until the broker is registered and
/// unfenced, then binds the client listener and starts serving in the background (a
/// controller-only node binds only its controller listener).
///
/// # Errors
/// [`ServeError`] when storage cannot be opened or the address cannot be bound.
pub async fn start(config: Config) -> Result<RunningNode, ServeError> {
    let listen = config.listen_address;
    let is_broker = config.is_broker();
    crate::canary::announce(config.canaries);
    let broker = tokio::task::spawn_blocking(move || Broker::open(config))
        .await
        .expect("opening the broker does not panic")?;
    let broker = Arc::new(broker);
    let (stop, stopped) = watch::channel(false);
    if !is_broker {
        // A controller-only node serves no client APIs: its only listener is the controller
        // listener, owned by the quorum thread.
        let address = broker.quorum().controller_address().unwrap_or(listen);
        let task = tokio::spawn(async move {
            let mut stopped = stopped;
            let _ = stopped.changed().await;
        });
        tracing::info!(%address, node_id = broker.config().node_id, "serving as controller only");
        return Ok(RunningNode {
            address,
            broker,
            stop,
            task,
        });
    }
    let listener = TcpListener::bind(listen)
        .await
        .map_err(|source| ServeError::Bind {
            address: listen,
            source,
        })?;
    let address = listener.local_addr().map_err(|source| ServeError::Bind {
        address: listen,
        source,
    })?;
    let task = tokio::spawn(serve(Arc::clone(&broker), listener, stopped));
    tracing::info!(%address, node_id = broker.config().node_id, "serving");
    Ok(RunningNode {
        address,
        broker,
        stop,
        task,
    })
}

async fn serve(broker: Arc<Broker>, listener: TcpListener, mut stopped: watch::Receiver<bool>) {
    let mut tasks = JoinSet::new();
    tasks.spawn(background(Arc::clone(&broker)));
    tasks.spawn(crate::replica::fetcher::run(
        Arc::clone(broker.replicas()),
        broker.shared_quorum(),
    ));
    tasks.spawn(Arc::clone(broker.txn()).run());
    tasks.spawn(Arc::clone(broker.groups()).run());
    loop {
        tokio::select! {
            _ = stopped.changed() => break,
            accepted = listener.accept() => match accepted {
                Ok((stream, peer)) => {
                    let broker = Arc::clone(&broker);
                    tasks.spawn(async move {
                        if let Err(error) = connection(&broker, stream, peer).await {
                            tracing::debug!(%peer, %error, "connection ended with an error");
                        }
                    });
                }
                Err(error) => {
                    // Out of file descriptors and the like: back off instead of spinning.
                    tracing::warn!(%error, "accept failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
            },
            // Reap finished connection tasks so the set does not grow without bound.
            Some(_) = tasks.join_next(), if !tasks.is_empty() => {}
        }
    }
    tasks.shutdown().await;
}

/// Serves one client connection from `peer` until it closes or sends something unacceptable.
async fn connection(broker: &Broker, stream: TcpStream, peer: SocketAddr) -> std::io::Result<()> {
    stream.set_nodelay(true)?;
    // The client's host as Kafka shows it (Java's `InetAddress.toString`: "/" and the IP).
    let client_host = format!("/{}", peer.ip());
    let (mut reader, writer) = stream.into_split();
    let mut writer = BufWriter::new(writer);
    let max_bytes = broker.config().socket_request_max_bytes;
    loop {
        let size = match reader.read_i32().await {
            Ok(size) => size,
            Err(error) if error.kind() == std::io::ErrorKind::UnexpectedEof => return Ok(()),
            Err(error) => return Err(error),
        };
        let Ok(size) = usize::try_from(size) else {
            tracing::warn!(size, "negative request size; closing the connection");
            return Ok(());
        };
        if size > max_bytes {
            tracing::warn!(
                size,
                max_bytes,
                "request larger than socket.request.max.bytes; closing"
            );
            return Ok(());
        }
        let mut frame = BytesMut::zeroed(size);
        reader.read_exact(&mut frame).await?;
        match handle_frame(broker, &client_host, frame.freeze()).await {
            FrameOutcome::Respond(response) => {
                writer.write_all(&response).await?;
                writer.flush().await?;
            }
            FrameOutcome::NoResponse => {}
            FrameOutcome::Close(reason) => {
                tracing::debug!(reason, "closing the connection");
                return Ok(());
            }
        }
    }
}

/// The periodic work of a broker: the flusher (`log.flush.scheduler.interval.ms`, which
/// applies `log.flush.interval.ms`) and the checkpointer
/// (`log.flush.offset.checkpoint.interval.ms`).
async fn background(broker: Arc<Broker>) {
    let config = broker.config();
    let flush_every = interval(config.log_flush_scheduler_interval_ms);
    let checkpoint_every = interval(config.log_flush_offset_checkpoint_interval_ms);
    if config.log_flush_interval_ms.is_some() && flush_every.is_none() {
        tracing::warn!(
            "log.flush.interval.ms is set but log.flush.scheduler.interval.ms is not: as in Kafka, \
             the flusher never runs, so time-based flushing is off"
        );
    }
    let mut flush_tick = flush_every.map(tokio::time::interval);
    let mut checkpoint_tick = checkpoint_every.map(tokio::time::interval);
    loop {
        tokio::select! {
            _ = tick(&mut flush_tick) => {
                let broker = Arc::clone(&broker);
                if let Ok(Err(error)) = tokio::task::spawn_blocking(move || broker.replicas().flush_due_logs()).await {
                    tracing::error!(%error, "flush failed");
                }
            }
            _ = tick(&mut checkpoint_tick) => {
                let broker = Arc::clone(&broker);
                if let Ok(Err(error)) = tokio::task::spawn_blocking(move || broker.replicas().checkpoint()).await {
                    tracing::error!(%error, "checkpoint failed");
                }
            }
        }
    }
}

/// A period from a millisecond setting; `None` for Kafka's `Long.MAX_VALUE` ("never") and 0.
fn interval(ms: u64) -> Option<Duration> {
    (ms > 0 && ms < i64::MAX as u64 / 2).then(|| Duration::from_millis(ms))
}

async fn tick(interval: &mut Option<tokio::time::Interval>) {
    match interval {
        Some(interval) => {
            interval.tick().await;
        }
        None => std::future::pending().await,
    }
}
