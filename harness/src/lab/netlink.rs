//! Netlink spoken directly to the kernel: a small message builder and a socket that sends a
//! batch of requests and waits for every acknowledgement. The lab uses it for links and
//! addresses (rtnetlink) and for nftables partitions (nf_tables), so a fresh machine needs
//! neither `ip` nor `nft`.
//!
//! Only what the lab needs is here: requests with the ACK flag, attributes (nested ones with
//! `NLA_F_NESTED`), and error replies turned into errors that name the request that failed.

use std::os::fd::{AsRawFd, OwnedFd};
use std::time::Duration;

use anyhow::{Context, bail};
use nix::sys::socket::{
    AddressFamily, MsgFlags, NetlinkAddr, SockFlag, SockProtocol, SockType, recv, sendto,
    setsockopt, socket, sockopt,
};
use nix::sys::time::TimeVal;

/// `NLM_F_REQUEST`.
pub const F_REQUEST: u16 = 0x1;
/// `NLM_F_ACK`.
pub const F_ACK: u16 = 0x4;
/// `NLM_F_EXCL`.
pub const F_EXCL: u16 = 0x200;
/// `NLM_F_CREATE`.
pub const F_CREATE: u16 = 0x400;
/// `NLM_F_APPEND`.
pub const F_APPEND: u16 = 0x800;
const NLMSG_ERROR: u16 = 2;
const NLA_F_NESTED: u16 = 0x8000;
const HEADER_LEN: usize = 16;

/// One netlink message under construction: header, a fixed family header, attributes.
#[derive(Debug, Clone)]
pub struct Message {
    kind: u16,
    flags: u16,
    /// What the request does, for error messages ("create bridge lj0").
    what: String,
    body: Vec<u8>,
    nests: Vec<usize>,
    ack: bool,
}

fn align(len: usize) -> usize {
    (len + 3) & !3
}

impl Message {
    /// A request of type `kind` with `flags` (REQUEST and ACK are added when sent).
    pub fn new(kind: u16, flags: u16, what: impl Into<String>) -> Message {
        Message {
            kind,
            flags,
            what: what.into(),
            body: Vec::new(),
            nests: Vec::new(),
            ack: true,
        }
    }

    /// Asks for no acknowledgement (nf_tables batch delimiters are never acknowledged).
    pub fn without_ack(mut self) -> Message {
        self.ack = false;
        self
    }

    /// Raw bytes of the family header (ifinfomsg, ifaddrmsg, nfgenmsg, ...).
    pub fn header(mut self, bytes: &[u8]) -> Message {
        self.body.extend_from_slice(bytes);
        self.pad();
        self
    }

    fn pad(&mut self) {
        self.body.resize(align(self.body.len()), 0);
    }

    /// An attribute with raw bytes.
    pub fn attr(mut self, kind: u16, value: &[u8]) -> Message {
        let len = 4 + value.len();
        self.body
            .extend_from_slice(&u16::try_from(len).unwrap_or(u16::MAX).to_ne_bytes());
        self.body.extend_from_slice(&kind.to_ne_bytes());
        self.body.extend_from_slice(value);
        self.pad();
        self
    }

    /// A NUL-terminated string attribute.
    pub fn attr_str(self, kind: u16, value: &str) -> Message {
        let mut bytes = value.as_bytes().to_vec();
        bytes.push(0);
        self.attr(kind, &bytes)
    }

    /// A native-endian u32 attribute (rtnetlink).
    pub fn attr_u32(self, kind: u16, value: u32) -> Message {
        self.attr(kind, &value.to_ne_bytes())
    }

    /// A big-endian u32 attribute (nf_tables).
    pub fn attr_be32(self, kind: u16, value: u32) -> Message {
        self.attr(kind, &value.to_be_bytes())
    }

    /// Opens a nested attribute; close it with [`Message::end`].
    pub fn nest(mut self, kind: u16) -> Message {
        self.nests.push(self.body.len());
        self.body.extend_from_slice(&[0, 0]);
        self.body
            .extend_from_slice(&(kind | NLA_F_NESTED).to_ne_bytes());
        self
    }

    /// Closes the innermost nested attribute.
    pub fn end(mut self) -> Message {
        if let Some(start) = self.nests.pop() {
            let len = u16::try_from(self.body.len() - start).unwrap_or(u16::MAX);
            self.body[start..start + 2].copy_from_slice(&len.to_ne_bytes());
        }
        self
    }

    fn encode(&self, seq: u32, out: &mut Vec<u8>) {
        debug_assert!(self.nests.is_empty(), "unclosed nest in {}", self.what);
        let len = u32::try_from(HEADER_LEN + self.body.len()).unwrap_or(u32::MAX);
        out.extend_from_slice(&len.to_ne_bytes());
        out.extend_from_slice(&self.kind.to_ne_bytes());
        let ack = if self.ack { F_ACK } else { 0 };
        out.extend_from_slice(&(self.flags | F_REQUEST | ack).to_ne_bytes());
        out.extend_from_slice(&seq.to_ne_bytes());
        out.extend_from_slice(&0u32.to_ne_bytes());
        out.extend_from_slice(&self.body);
    }
}

/// A netlink socket of one protocol, in the network namespace of the thread that opened it.
#[derive(Debug)]
pub struct Socket {
    fd: OwnedFd,
    seq: u32,
}

impl Socket {
    /// Opens a route (`NETLINK_ROUTE`) socket.
    ///
    /// # Errors
    /// The kernel refuses the socket.
    pub fn route() -> anyhow::Result<Socket> {
        Socket::open(SockProtocol::NetlinkRoute)
    }

    /// Opens a netfilter (`NETLINK_NETFILTER`) socket.
    ///
    /// # Errors
    /// The kernel refuses the socket (no nf_tables support).
    pub fn netfilter() -> anyhow::Result<Socket> {
        Socket::open(SockProtocol::NetlinkNetFilter)
    }

    fn open(protocol: SockProtocol) -> anyhow::Result<Socket> {
        let fd = socket(
            AddressFamily::Netlink,
            SockType::Raw,
            SockFlag::SOCK_CLOEXEC,
            protocol,
        )
        .with_context(|| format!("cannot open a netlink socket ({protocol:?})"))?;
        // A kernel that never answers must not hang the harness.
        setsockopt(
            &fd,
            sockopt::ReceiveTimeout,
            &timeval(Duration::from_secs(5)),
        )?;
        Ok(Socket { fd, seq: 1 })
    }

    /// Sends `messages` in one datagram and waits for an acknowledgement of each that asked
    /// for one. The first
    /// error reply fails the call, naming the request it answers.
    ///
    /// # Errors
    /// A request is refused, or no answer comes within 5 s.
    pub fn transact(&mut self, messages: &[Message]) -> anyhow::Result<()> {
        let first = self.seq;
        let mut datagram = Vec::new();
        let mut pending = Vec::new();
        for message in messages {
            message.encode(self.seq, &mut datagram);
            if message.ack {
                pending.push(self.seq);
            }
            self.seq = self.seq.wrapping_add(1);
        }
        sendto(
            self.fd.as_raw_fd(),
            &datagram,
            &NetlinkAddr::new(0, 0),
            MsgFlags::empty(),
        )
        .context("netlink send")?;
        let mut buffer = vec![0u8; 64 * 1024];
        while !pending.is_empty() {
            let len = recv(self.fd.as_raw_fd(), &mut buffer, MsgFlags::empty())
                .context("no netlink answer from the kernel")?;
            let mut at = 0;
            while at + HEADER_LEN <= len {
                let field = |offset: usize, size: usize| &buffer[at + offset..at + offset + size];
                let msg_len = u32::from_ne_bytes(field(0, 4).try_into()?) as usize;
                let kind = u16::from_ne_bytes(field(4, 2).try_into()?);
                let seq = u32::from_ne_bytes(field(8, 4).try_into()?);
                if msg_len < HEADER_LEN || at + msg_len > len {
                    bail!("malformed netlink answer");
                }
                if kind == NLMSG_ERROR {
                    let code = i32::from_ne_bytes(field(HEADER_LEN, 4).try_into()?);
                    pending.retain(|waiting| *waiting != seq);
                    if code != 0 {
                        let index = seq.wrapping_sub(first) as usize;
                        let what = messages
                            .get(index)
                            .map_or("a netlink request", |message| message.what.as_str());
                        bail!(
                            "the kernel refused to {what}: {}",
                            nix::errno::Errno::from_raw(-code).desc()
                        );
                    }
                }
                at += align(msg_len);
            }
        }
        Ok(())
    }
}

fn timeval(duration: Duration) -> TimeVal {
    TimeVal::new(duration.as_secs() as _, duration.subsec_micros() as _)
}
