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
//! node is never cut: it is delivered locally by the bridge, not forwarded. Every change
//! replaces the whole table in one atomic nf_tables batch.

use std::collections::BTreeSet;
use std::fs::File;
use std::net::Ipv4Addr;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd};

use anyhow::Context;
use nix::sched::{CloneFlags, setns, unshare};

use super::netlink::{F_APPEND, F_CREATE, F_EXCL, Message, Socket};

/// The lab's subnet, /24.
const SUBNET: [u8; 3] = [10, 77, 0];
/// The harness's own address on the bridge.
const HARNESS_HOST: u8 = 254;
const BRIDGE: &str = "lj0";
const TABLE: &str = "logjam";
const CHAIN: &str = "partition";

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

// nf_tables
const NFNL_SUBSYS_NFTABLES: u16 = 10;
const NFNL_MSG_BATCH_BEGIN: u16 = 16;
const NFNL_MSG_BATCH_END: u16 = 17;
const NFT_MSG_NEWTABLE: u16 = 0;
const NFT_MSG_DELTABLE: u16 = 2;
const NFT_MSG_NEWCHAIN: u16 = 3;
const NFT_MSG_NEWRULE: u16 = 6;
const NFPROTO_BRIDGE: u8 = 7;
const NF_BR_FORWARD: u32 = 2;
const NF_DROP: u32 = 0;
const NF_ACCEPT: u32 = 1;
const NFT_META_IIFNAME: u32 = 6;
const NFT_META_OIFNAME: u32 = 7;
const NFT_REG_VERDICT: u32 = 0;
const NFT_REG_1: u32 = 1;
const NFT_CMP_EQ: u32 = 0;
const IFNAMSIZ: usize = 16;

/// The lab network of one run.
#[derive(Debug)]
pub struct Network {
    nodes: Vec<NodeNet>,
    filter: Socket,
    cuts: BTreeSet<(usize, usize)>,
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

    /// Removes every cut.
    ///
    /// # Errors
    /// The kernel refuses to replace the table.
    pub fn heal(&mut self) -> anyhow::Result<()> {
        self.set_cuts(BTreeSet::new())
    }

    /// Replaces the table with one holding the current cuts: add (so the delete cannot fail),
    /// delete, and build again, in one batch the kernel applies atomically.
    fn apply(&mut self) -> anyhow::Result<()> {
        let mut batch = vec![
            nft(NFNL_MSG_BATCH_BEGIN, 0, "begin an nftables batch").without_ack(),
            nft_table(NFT_MSG_NEWTABLE, F_CREATE, "create the partition table"),
            nft_table(NFT_MSG_DELTABLE, 0, "clear the partition table"),
            nft_table(NFT_MSG_NEWTABLE, F_CREATE, "create the partition table"),
            nft_object(NFT_MSG_NEWCHAIN, F_CREATE, "create the partition chain")
                .attr_str(NFTA_CHAIN_TABLE, TABLE)
                .attr_str(NFTA_CHAIN_NAME, CHAIN)
                .nest(NFTA_CHAIN_HOOK)
                .attr_be32(NFTA_HOOK_HOOKNUM, NF_BR_FORWARD)
                .attr_be32(NFTA_HOOK_PRIORITY, 0)
                .end()
                .attr_be32(NFTA_CHAIN_POLICY, NF_ACCEPT)
                .attr_str(NFTA_CHAIN_TYPE, "filter"),
        ];
        for &(from, to) in &self.cuts {
            let (from_port, to_port) = (&self.nodes[from].port, &self.nodes[to].port);
            batch.push(drop_rule(from_port, to_port));
        }
        batch.push(nft(NFNL_MSG_BATCH_END, 0, "end an nftables batch").without_ack());
        self.filter.transact(&batch).context(
            "cannot install the partition rules (nf_tables with bridge support is needed in the kernel)",
        )
    }
}

fn host(id: u8) -> Ipv4Addr {
    Ipv4Addr::new(SUBNET[0], SUBNET[1], SUBNET[2], id)
}

const NFTA_TABLE_NAME: u16 = 1;
const NFTA_CHAIN_TABLE: u16 = 1;
const NFTA_CHAIN_NAME: u16 = 3;
const NFTA_CHAIN_HOOK: u16 = 4;
const NFTA_CHAIN_POLICY: u16 = 5;
const NFTA_CHAIN_TYPE: u16 = 7;
const NFTA_HOOK_HOOKNUM: u16 = 1;
const NFTA_HOOK_PRIORITY: u16 = 2;
const NFTA_RULE_TABLE: u16 = 1;
const NFTA_RULE_CHAIN: u16 = 2;
const NFTA_RULE_EXPRESSIONS: u16 = 4;
const NFTA_LIST_ELEM: u16 = 1;
const NFTA_EXPR_NAME: u16 = 1;
const NFTA_EXPR_DATA: u16 = 2;
const NFTA_META_DREG: u16 = 1;
const NFTA_META_KEY: u16 = 2;
const NFTA_CMP_SREG: u16 = 1;
const NFTA_CMP_OP: u16 = 2;
const NFTA_CMP_DATA: u16 = 3;
const NFTA_DATA_VALUE: u16 = 1;
const NFTA_DATA_VERDICT: u16 = 2;
const NFTA_VERDICT_CODE: u16 = 1;
const NFTA_IMMEDIATE_DREG: u16 = 1;
const NFTA_IMMEDIATE_DATA: u16 = 2;

/// An nfnetlink message with its `nfgenmsg` header.
fn nft(kind: u16, flags: u16, what: &str) -> Message {
    let (family, resource) = if kind == NFNL_MSG_BATCH_BEGIN || kind == NFNL_MSG_BATCH_END {
        (0, NFNL_SUBSYS_NFTABLES)
    } else {
        (NFPROTO_BRIDGE, 0)
    };
    let resource = resource.to_be_bytes();
    Message::new(kind, flags, what).header(&[family, 0, resource[0], resource[1]])
}

/// An nf_tables object message (table, chain, rule) in the bridge family.
fn nft_object(kind: u16, flags: u16, what: &str) -> Message {
    nft((NFNL_SUBSYS_NFTABLES << 8) | kind, flags, what)
}

fn nft_table(kind: u16, flags: u16, what: &str) -> Message {
    nft_object(kind, flags, what).attr_str(NFTA_TABLE_NAME, TABLE)
}

/// `iifname "<from>" oifname "<to>" drop`.
fn drop_rule(from_port: &str, to_port: &str) -> Message {
    let mut rule = nft_object(
        NFT_MSG_NEWRULE,
        F_CREATE | F_APPEND,
        &format!("add a rule dropping {from_port} -> {to_port}"),
    )
    .attr_str(NFTA_RULE_TABLE, TABLE)
    .attr_str(NFTA_RULE_CHAIN, CHAIN)
    .nest(NFTA_RULE_EXPRESSIONS);
    for (key, port) in [(NFT_META_IIFNAME, from_port), (NFT_META_OIFNAME, to_port)] {
        let mut name = [0u8; IFNAMSIZ];
        name[..port.len()].copy_from_slice(port.as_bytes());
        rule = rule
            .nest(NFTA_LIST_ELEM)
            .attr_str(NFTA_EXPR_NAME, "meta")
            .nest(NFTA_EXPR_DATA)
            .attr_be32(NFTA_META_DREG, NFT_REG_1)
            .attr_be32(NFTA_META_KEY, key)
            .end()
            .end()
            .nest(NFTA_LIST_ELEM)
            .attr_str(NFTA_EXPR_NAME, "cmp")
            .nest(NFTA_EXPR_DATA)
            .attr_be32(NFTA_CMP_SREG, NFT_REG_1)
            .attr_be32(NFTA_CMP_OP, NFT_CMP_EQ)
            .nest(NFTA_CMP_DATA)
            .attr(NFTA_DATA_VALUE, &name)
            .end()
            .end()
            .end();
    }
    rule.nest(NFTA_LIST_ELEM)
        .attr_str(NFTA_EXPR_NAME, "immediate")
        .nest(NFTA_EXPR_DATA)
        .attr_be32(NFTA_IMMEDIATE_DREG, NFT_REG_VERDICT)
        .nest(NFTA_IMMEDIATE_DATA)
        .nest(NFTA_DATA_VERDICT)
        .attr_be32(NFTA_VERDICT_CODE, NF_DROP)
        .end()
        .end()
        .end()
        .end()
        .end()
}
