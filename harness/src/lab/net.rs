//! The lab's network: one network namespace per node, joined by a bridge that lives in the
//! harness's own namespace, and partitions as nftables drop rules on that bridge.
//!
//! Layout: the harness namespace (made by [`super::sandbox`]) holds the bridge `lj0` with
//! address 10.77.0.254/24, which is how clients reach the nodes; node `i` (1-based) lives in a
//! namespace of its own with `eth0` = 10.77.0.i/24, cabled to the bridge port `lj-n<i>` by a
//! veth pair. No namespace has a route anywhere else, so no packet can leave the machine.
//!
//! Node namespaces are anonymous: a thread unshares its network namespace and the harness
//! keeps a file descriptor of it. Nodes enter it with `setns` before they exec; when the
//! harness exits the descriptors close, the nodes die (parent-death signal) and the
//! namespaces, links and nftables rules vanish with them. Nothing is named in `/run/netns`,
//! so a killed harness leaves nothing behind.
//!
//! Partitions: a set of directed cuts `(from, to)`, each a rule in the bridge family's forward
//! chain dropping frames that enter at `from`'s port and leave at `to`'s port. A symmetric cut
//! is two rules; a one-way cut is one (as with Jepsen, a one-way cut breaks TCP both ways,
//! while UDP and half-open connections see the difference). Traffic between the harness and a
//! node is delivered locally by the bridge, not forwarded, so those cuts never touch it; a
//! client cut ([`ClientCut`]) drops the harness's own frames to a node in the bridge's output
//! chain instead: all of them, or only new connections (a SYN without ACK), so a request a
//! closed connection still owes is delivered late while the client cannot reconnect. Every
//! change replaces the whole table (`nft.rs` builds it) in one atomic nf_tables batch.

use std::collections::{BTreeMap, BTreeSet};
use std::fs::File;
use std::net::Ipv4Addr;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd};

use anyhow::Context;
use nix::sched::{CloneFlags, setns, unshare};

use super::netlink::{F_CREATE, F_EXCL, Message, Socket};
use super::nft::{self, ClientCut};

/// The lab's subnet, /24.
const SUBNET: [u8; 3] = [10, 77, 0];
/// The harness's own address on the bridge.
const HARNESS_HOST: u8 = 254;
const BRIDGE: &str = "lj0";

// rtnetlink
const RTM_NEWLINK: u16 = 16;
const RTM_NEWADDR: u16 = 20;
const IFLA_IFNAME: u16 = 3;
const IFLA_MASTER: u16 = 10;
const IFLA_LINKINFO: u16 = 18;
const IFLA_NET_NS_FD: u16 = 28;
const IFLA_INFO_KIND: u16 = 1;
const IFLA_INFO_DATA: u16 = 2;
const VETH_INFO_PEER: u16 = 1;
const IFA_ADDRESS: u16 = 1;
const IFA_LOCAL: u16 = 2;
const IFF_UP: u32 = 1;
const AF_INET: u8 = 2;

/// The lab network of one run.
#[derive(Debug)]
pub struct Network {
    nodes: Vec<NodeNet>,
    filter: Socket,
    cuts: BTreeSet<(usize, usize)>,
    client_cuts: BTreeMap<usize, ClientCut>,
}

#[derive(Debug)]
struct NodeNet {
    namespace: File,
    address: Ipv4Addr,
    port: String,
}

/// `ifinfomsg` for a link by index, raising `IFF_UP` when `up`.
fn ifinfo(index: u32, up: bool) -> [u8; 16] {
    let mut bytes = [0u8; 16];
    bytes[4..8].copy_from_slice(&index.to_ne_bytes());
    if up {
        bytes[8..12].copy_from_slice(&IFF_UP.to_ne_bytes());
        bytes[12..16].copy_from_slice(&IFF_UP.to_ne_bytes());
    }
    bytes
}

fn index_of(name: &str) -> anyhow::Result<u32> {
    nix::net::if_::if_nametoindex(name).with_context(|| format!("no network interface {name}"))
}

fn link_up(name: &str) -> anyhow::Result<Message> {
    Ok(Message::new(RTM_NEWLINK, 0, format!("bring {name} up"))
        .header(&ifinfo(index_of(name)?, true)))
}

fn add_address(name: &str, address: Ipv4Addr) -> anyhow::Result<Message> {
    let mut header = [0u8; 8];
    header[0] = AF_INET;
    header[1] = 24;
    header[4..8].copy_from_slice(&index_of(name)?.to_ne_bytes());
    Ok(Message::new(
        RTM_NEWADDR,
        F_CREATE | F_EXCL,
        format!("give {name} {address}/24"),
    )
    .header(&header)
    .attr(IFA_LOCAL, &address.octets())
    .attr(IFA_ADDRESS, &address.octets()))
}

/// Runs `work` on a thread whose network namespace is `namespace`.
fn in_namespace<T: Send>(
    namespace: BorrowedFd<'_>,
    work: impl FnOnce() -> anyhow::Result<T> + Send,
) -> anyhow::Result<T> {
    std::thread::scope(|scope| {
        scope
            .spawn(|| {
                setns(namespace, CloneFlags::CLONE_NEWNET)
                    .context("cannot enter a node's network namespace")?;
                work()
            })
            .join()
            .map_err(|_| anyhow::anyhow!("a network setup thread panicked"))?
    })
}

/// A new, empty network namespace, held by the returned descriptor.
fn new_namespace() -> anyhow::Result<File> {
    std::thread::scope(|scope| {
        scope
            .spawn(|| {
                unshare(CloneFlags::CLONE_NEWNET)
                    .context("cannot create a network namespace for a node")?;
                File::open("/proc/thread-self/ns/net")
                    .context("cannot open the new network namespace")
            })
            .join()
            .map_err(|_| anyhow::anyhow!("a network setup thread panicked"))?
    })
}

impl Network {
    /// Builds the bridge and `nodes` node namespaces. Must run inside the sandbox.
    ///
    /// # Errors
    /// The kernel refuses a link, an address or the nftables table; the message names it.
    pub fn create(nodes: usize) -> anyhow::Result<Network> {
        let mut route = Socket::route()?;
        route.transact(&[
            link_up("lo")?,
            Message::new(
                RTM_NEWLINK,
                F_CREATE | F_EXCL,
                format!("create bridge {BRIDGE}"),
            )
            .header(&ifinfo(0, false))
            .attr_str(IFLA_IFNAME, BRIDGE)
            .nest(IFLA_LINKINFO)
            .attr_str(IFLA_INFO_KIND, "bridge")
            .end(),
        ])?;
        route.transact(&[link_up(BRIDGE)?, add_address(BRIDGE, host(HARNESS_HOST))?])?;
        let bridge = index_of(BRIDGE)?;
        let mut network = Network {
            nodes: Vec::new(),
            filter: Socket::netfilter()?,
            cuts: BTreeSet::new(),
            client_cuts: BTreeMap::new(),
        };
        for index in 0..nodes {
            let id = u8::try_from(index + 1).context("at most 253 nodes")?;
            let namespace = new_namespace()?;
            let port = format!("lj-n{id}");
            route.transact(&[Message::new(
                RTM_NEWLINK,
                F_CREATE | F_EXCL,
                format!("create the veth pair of n{id}"),
            )
            .header(&ifinfo(0, false))
            .attr_str(IFLA_IFNAME, &port)
            .nest(IFLA_LINKINFO)
            .attr_str(IFLA_INFO_KIND, "veth")
            .nest(IFLA_INFO_DATA)
            .nest(VETH_INFO_PEER)
            .header(&ifinfo(0, false))
            .attr_str(IFLA_IFNAME, "eth0")
            .attr_u32(IFLA_NET_NS_FD, namespace.as_raw_fd() as u32)
            .end()
            .end()
            .end()])?;
            route.transact(&[Message::new(
                RTM_NEWLINK,
                0,
                format!("attach {port} to {BRIDGE}"),
            )
            .header(&ifinfo(index_of(&port)?, true))
            .attr_u32(IFLA_MASTER, bridge)])?;
            let address = host(id);
            in_namespace(namespace.as_fd(), || {
                Socket::route()?.transact(&[
                    link_up("lo")?,
                    link_up("eth0")?,
                    add_address("eth0", address)?,
                ])
            })?;
            network.nodes.push(NodeNet {
                namespace,
                address,
                port,
            });
        }
        network.apply()?;
        Ok(network)
    }

    /// Node `index`'s address (0-based index).
    pub fn address(&self, index: usize) -> Ipv4Addr {
        self.nodes[index].address
    }

    /// Node `index`'s network namespace, for `setns` before exec.
    pub fn namespace(&self, index: usize) -> BorrowedFd<'_> {
        self.nodes[index].namespace.as_fd()
    }

    /// Replaces the cuts in force with `cuts`, atomically.
    ///
    /// # Errors
    /// The kernel refuses the new rules; the old ones stay.
    pub fn set_cuts(&mut self, cuts: BTreeSet<(usize, usize)>) -> anyhow::Result<()> {
        let old = std::mem::replace(&mut self.cuts, cuts);
        if let Err(error) = self.apply() {
            self.cuts = old;
            return Err(error);
        }
        Ok(())
    }

    /// Removes every cut, the harness's own traffic included.
    ///
    /// # Errors
    /// The kernel refuses to replace the table.
    pub fn heal(&mut self) -> anyhow::Result<()> {
        let old = std::mem::take(&mut self.client_cuts);
        if let Err(error) = self.set_cuts(BTreeSet::new()) {
            self.client_cuts = old;
            return Err(error);
        }
        Ok(())
    }

    /// The client cuts in force.
    pub fn client_cuts(&self) -> &BTreeMap<usize, ClientCut> {
        &self.client_cuts
    }

    /// Replaces the cuts of the harness's own traffic to nodes with `cuts` (node index →
    /// what is dropped), atomically.
    ///
    /// # Errors
    /// The kernel refuses the new rules; the old ones stay.
    pub fn set_client_cuts(&mut self, cuts: BTreeMap<usize, ClientCut>) -> anyhow::Result<()> {
        let old = std::mem::replace(&mut self.client_cuts, cuts);
        if let Err(error) = self.apply() {
            self.client_cuts = old;
            return Err(error);
        }
        Ok(())
    }

    /// Replaces the table with one holding the current cuts: add (so the delete cannot fail),
    /// delete, and build again, in one batch the kernel applies atomically.
    fn apply(&mut self) -> anyhow::Result<()> {
        let mut batch = nft::table_batch_start();
        for &(from, to) in &self.cuts {
            let (from_port, to_port) = (&self.nodes[from].port, &self.nodes[to].port);
            batch.push(nft::drop_between(from_port, to_port));
        }
        for (&node, &cut) in &self.client_cuts {
            batch.push(nft::drop_to(&self.nodes[node].port, cut));
        }
        batch.push(nft::batch_end());
        self.filter.transact(&batch).context(
            "cannot install the partition rules (nf_tables with bridge support is needed in the kernel)",
        )
    }
}

fn host(id: u8) -> Ipv4Addr {
    Ipv4Addr::new(SUBNET[0], SUBNET[1], SUBNET[2], id)
}
