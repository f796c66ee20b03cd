//! The lab's nf_tables table, built as raw netlink messages in the bridge family: one chain
//! on the forward hook for cuts between nodes (`iifname A oifname B drop`), one on the output
//! hook for cuts of the harness's own frames to a node (`oifname N drop`, or only new TCP
//! connections: `oifname N meta l4proto tcp tcp flags & (syn|ack) == syn drop`).

use super::netlink::{F_APPEND, F_CREATE, Message};

const TABLE: &str = "logjam";
/// Frames forwarded between nodes' ports.
const CHAIN: &str = "partition";
/// Frames the harness itself sends out of a port.
const CLIENT_CHAIN: &str = "clients";

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
const NF_BR_LOCAL_OUT: u32 = 3;
const NFT_META_L4PROTO: u32 = 16;
const NFTA_PAYLOAD_DREG: u16 = 1;
const NFTA_PAYLOAD_BASE: u16 = 2;
const NFTA_PAYLOAD_OFFSET: u16 = 3;
const NFTA_PAYLOAD_LEN: u16 = 4;
const NFT_PAYLOAD_TRANSPORT_HEADER: u32 = 2;
const NFTA_BITWISE_SREG: u16 = 1;
const NFTA_BITWISE_DREG: u16 = 2;
const NFTA_BITWISE_LEN: u16 = 3;
const NFTA_BITWISE_MASK: u16 = 4;
const NFTA_BITWISE_XOR: u16 = 5;
const IPPROTO_TCP: u8 = 6;
/// The TCP header's flags byte, and its SYN and ACK bits.
const TCP_FLAGS_OFFSET: u32 = 13;
const TCP_SYN: u8 = 0x02;
const TCP_ACK: u8 = 0x10;

/// What a client cut drops of the harness's frames to one node.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClientCut {
    /// Everything: requests on open connections wait in the kernel's retransmissions.
    All,
    /// Only connection attempts (SYN without ACK): open connections, and a connection the
    /// client closed that still owes bytes, get through; the client cannot reconnect.
    NewConnections,
}

/// An nfnetlink message with its `nfgenmsg` header.
fn message(kind: u16, flags: u16, what: &str) -> Message {
    let (family, resource) = if kind == NFNL_MSG_BATCH_BEGIN || kind == NFNL_MSG_BATCH_END {
        (0, NFNL_SUBSYS_NFTABLES)
    } else {
        (NFPROTO_BRIDGE, 0)
    };
    let resource = resource.to_be_bytes();
    Message::new(kind, flags, what).header(&[family, 0, resource[0], resource[1]])
}

/// An nf_tables object message (table, chain, rule) in the bridge family.
fn object(kind: u16, flags: u16, what: &str) -> Message {
    message((NFNL_SUBSYS_NFTABLES << 8) | kind, flags, what)
}

fn table(kind: u16, flags: u16, what: &str) -> Message {
    object(kind, flags, what).attr_str(NFTA_TABLE_NAME, TABLE)
}

/// The start of a batch that replaces the table with its two empty chains.
pub fn table_batch_start() -> Vec<Message> {
    let chain = |name: &'static str, hook: u32, what: &'static str| {
        object(NFT_MSG_NEWCHAIN, F_CREATE, what)
            .attr_str(NFTA_CHAIN_TABLE, TABLE)
            .attr_str(NFTA_CHAIN_NAME, name)
            .nest(NFTA_CHAIN_HOOK)
            .attr_be32(NFTA_HOOK_HOOKNUM, hook)
            .attr_be32(NFTA_HOOK_PRIORITY, 0)
            .end()
            .attr_be32(NFTA_CHAIN_POLICY, NF_ACCEPT)
            .attr_str(NFTA_CHAIN_TYPE, "filter")
    };
    vec![
        message(NFNL_MSG_BATCH_BEGIN, 0, "begin an nftables batch").without_ack(),
        table(NFT_MSG_NEWTABLE, F_CREATE, "create the partition table"),
        table(NFT_MSG_DELTABLE, 0, "clear the partition table"),
        table(NFT_MSG_NEWTABLE, F_CREATE, "create the partition table"),
        chain(CHAIN, NF_BR_FORWARD, "create the partition chain"),
        chain(CLIENT_CHAIN, NF_BR_LOCAL_OUT, "create the client-cut chain"),
    ]
}

/// The end of a batch.
pub fn batch_end() -> Message {
    message(NFNL_MSG_BATCH_END, 0, "end an nftables batch").without_ack()
}

/// `iifname "<from>" oifname "<to>" drop` in the forward chain.
pub fn drop_between(from_port: &str, to_port: &str) -> Message {
    let rule = rule(
        CHAIN,
        &format!("add a rule dropping {from_port} -> {to_port}"),
    );
    let rule = match_name(rule, NFT_META_IIFNAME, from_port);
    drop(match_name(rule, NFT_META_OIFNAME, to_port))
}

/// The harness's frames out of `port` dropped, all or only connection attempts.
pub fn drop_to(port: &str, cut: ClientCut) -> Message {
    let rule = rule(
        CLIENT_CHAIN,
        &format!("add a rule dropping the harness's frames to {port} ({cut:?})"),
    );
    let rule = match_name(rule, NFT_META_OIFNAME, port);
    let rule = match cut {
        ClientCut::All => rule,
        ClientCut::NewConnections => {
            let rule = compare(meta(rule, NFT_META_L4PROTO), &[IPPROTO_TCP]);
            let rule = rule
                .nest(NFTA_LIST_ELEM)
                .attr_str(NFTA_EXPR_NAME, "payload")
                .nest(NFTA_EXPR_DATA)
                .attr_be32(NFTA_PAYLOAD_DREG, NFT_REG_1)
                .attr_be32(NFTA_PAYLOAD_BASE, NFT_PAYLOAD_TRANSPORT_HEADER)
                .attr_be32(NFTA_PAYLOAD_OFFSET, TCP_FLAGS_OFFSET)
                .attr_be32(NFTA_PAYLOAD_LEN, 1)
                .end()
                .end()
                .nest(NFTA_LIST_ELEM)
                .attr_str(NFTA_EXPR_NAME, "bitwise")
                .nest(NFTA_EXPR_DATA)
                .attr_be32(NFTA_BITWISE_SREG, NFT_REG_1)
                .attr_be32(NFTA_BITWISE_DREG, NFT_REG_1)
                .attr_be32(NFTA_BITWISE_LEN, 1)
                .nest(NFTA_BITWISE_MASK)
                .attr(NFTA_DATA_VALUE, &[TCP_SYN | TCP_ACK])
                .end()
                .nest(NFTA_BITWISE_XOR)
                .attr(NFTA_DATA_VALUE, &[0])
                .end()
                .end()
                .end();
            compare(rule, &[TCP_SYN])
        }
    };
    drop(rule)
}

/// A new rule appended to `chain`, its expression list open.
fn rule(chain: &str, what: &str) -> Message {
    object(NFT_MSG_NEWRULE, F_CREATE | F_APPEND, what)
        .attr_str(NFTA_RULE_TABLE, TABLE)
        .attr_str(NFTA_RULE_CHAIN, chain)
        .nest(NFTA_RULE_EXPRESSIONS)
}

/// `meta <key>` into register 1.
fn meta(rule: Message, key: u32) -> Message {
    rule.nest(NFTA_LIST_ELEM)
        .attr_str(NFTA_EXPR_NAME, "meta")
        .nest(NFTA_EXPR_DATA)
        .attr_be32(NFTA_META_DREG, NFT_REG_1)
        .attr_be32(NFTA_META_KEY, key)
        .end()
        .end()
}

/// Register 1 == `value`, else the rule stops here.
fn compare(rule: Message, value: &[u8]) -> Message {
    rule.nest(NFTA_LIST_ELEM)
        .attr_str(NFTA_EXPR_NAME, "cmp")
        .nest(NFTA_EXPR_DATA)
        .attr_be32(NFTA_CMP_SREG, NFT_REG_1)
        .attr_be32(NFTA_CMP_OP, NFT_CMP_EQ)
        .nest(NFTA_CMP_DATA)
        .attr(NFTA_DATA_VALUE, value)
        .end()
        .end()
        .end()
}

/// `iifname`/`oifname` (`key`) equal to `port`, NUL-padded as the kernel compares it.
fn match_name(rule: Message, key: u32, port: &str) -> Message {
    let mut name = [0u8; IFNAMSIZ];
    name[..port.len()].copy_from_slice(port.as_bytes());
    compare(meta(rule, key), &name)
}

/// The `drop` verdict, closing the expression list.
fn drop(rule: Message) -> Message {
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
